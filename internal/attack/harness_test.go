package attack

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"github.com/golang-jwt/jwt/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/extauthz/extauthz/internal/app"
	"github.com/extauthz/extauthz/internal/testing/envoytest"
	"github.com/extauthz/extauthz/internal/testing/testpeers"
)

// Two issuers share one HMAC secret on purpose: what tells their users apart
// must be the issuer, never the secret.
const (
	secret      = "attack-suite-secret-0123456789abcdef"
	issuerHS    = "https://hs.example.test"
	issuerOther = "https://other.example.test"
	audience    = "https://mcp.example.test"
	host        = "mcp.example.test"
)

// issuersYAML declares the issuers every suite config starts with.
const issuersYAML = `issuers:
  - {name: hs, issuer: ` + issuerHS + `, algorithms: [HS256], secret_env: ATTACK_SECRET}
  - {name: other, issuer: ` + issuerOther + `, algorithms: [HS256], secret_env: ATTACK_SECRET}
`

// options shape a suite beyond its routes.
type options struct {
	// Stateful gives the MCP server sessions (Mcp-Session-Id on initialize);
	// otherwise it is stateless and answers any call on its own.
	Stateful bool
	// Build is the Envoy-like proxy's ext_authz filter settings; the zero
	// value forwards the body (with_request_body, 1 MiB, no partial).
	Build *envoytest.BuildOptions
	// Vars are extra environment variables for the service.
	Vars map[string]string
	// HTTPConvention is the forward-auth front end's --http-convention
	// ("auto" when empty).
	HTTPConvention string
	// Serve adjusts the service's options (admin authentication, log
	// level) before it starts.
	Serve func(*app.ServeOptions)
	// Upstream, when set, wraps the MCP server (e.g. to answer DELETE 405,
	// as MCP allows).
	Upstream func(http.Handler) http.Handler
	// OwnIssuers: the routes document declares its own issuers (issuersYAML
	// is not prepended).
	OwnIssuers bool
	// Summarize offers the MCP server's summarize tool, which samples
	// through the client (testpeers.ToolSummarize).
	Summarize bool
	// BuiltIn runs the built-in default configuration (no file, JWT_SECRET
	// set to the suite's secret); routes is ignored.
	BuiltIn bool
}

// suite is the real service with an MCP server behind an Envoy-like proxy.
type suite struct {
	t         *testing.T
	grpc      authv3.AuthorizationClient
	httpURL   string // the forward-auth front end
	adminAddr string
	opsAddr   string      // probes and metrics
	logs      *syncBuffer // everything the service logged
	proxy     *envoytest.Proxy

	mu         sync.Mutex
	executed   []testpeers.ToolCall
	subscribed []string // the resources the MCP server took subscriptions to
	upstream   string   // the MCP server's URL, behind no proxy
}

// start runs the service with issuersYAML followed by routes.
func start(t *testing.T, routes string, o options) *suite {
	t.Helper()
	s := &suite{t: t, logs: new(syncBuffer)}
	var mcpServer http.Handler = testpeers.NewMCPServer(testpeers.MCPOptions{
		Stateless: !o.Stateful, JSONResponse: true, Summarize: o.Summarize,
		OnToolCall: func(c testpeers.ToolCall) {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.executed = append(s.executed, c)
		},
		OnSubscribe: func(uri string) {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.subscribed = append(s.subscribed, uri)
		},
	})
	if o.Upstream != nil {
		mcpServer = o.Upstream(mcpServer)
	}
	upstream := httptest.NewServer(mcpServer)
	t.Cleanup(upstream.Close)
	s.upstream = upstream.URL

	cfg := filepath.Join(t.TempDir(), "config.yaml")
	doc := issuersYAML + routes
	if o.OwnIssuers {
		doc = routes
	}
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"ATTACK_SECRET": secret}
	if o.BuiltIn {
		cfg, vars["JWT_SECRET"] = "", secret
	}
	for k, v := range o.Vars {
		vars[k] = v
	}
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan app.Addrs, 1)
	done := make(chan error, 1)
	opts := app.ServeOptions{
		ConfigFile: cfg, GRPCAddr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0", OpsAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		HTTPConvention: o.HTTPConvention, HTTPTrusted: "127.0.0.0/8,::1/128",
		LogLevel: "error", LogFormat: "json", ShutdownTimeout: 5 * time.Second,
		Started: func(a app.Addrs) { started <- a },
	}
	if opts.HTTPConvention == "" {
		opts.HTTPConvention = "auto"
	}
	if o.Serve != nil {
		o.Serve(&opts)
	}
	env := app.Env{Stdout: io.Discard, Stderr: s.logs, Getenv: func(k string) string { return vars[k] }}
	go func() { done <- app.Serve(ctx, opts, env) }()
	var addrs app.Addrs
	select {
	case addrs = <-started:
	case err := <-done:
		cancel()
		t.Fatalf("serve: %v", err)
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatal("the service did not start")
	}
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("the service did not stop")
		}
	})
	conn, err := grpc.NewClient(addrs.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	s.grpc = authv3.NewAuthorizationClient(conn)
	s.httpURL = "http://" + addrs.HTTP
	s.adminAddr, s.opsAddr = addrs.Admin, addrs.Ops

	build := envoytest.BuildOptions{WithBody: true, MaxRequestBytes: 1 << 20}
	if o.Build != nil {
		build = *o.Build
	}
	u, _ := url.Parse(upstream.URL)
	s.proxy = envoytest.NewProxyToURL(t, addrs.GRPC, u, envoytest.ProxyOptions{Build: build, Timeout: 2 * time.Second})
	return s
}

// token mints an HS256 token of issuer iss for sub with the given scopes.
func token(t *testing.T, iss, sub string, scopes ...string) string {
	t.Helper()
	return tokenWith(t, jwt.MapClaims{"iss": iss, "sub": sub, "scope": strings.Join(scopes, " ")})
}

// tokenWith mints an HS256 token from claims, adding aud, iat and exp when
// absent.
func tokenWith(t *testing.T, claims jwt.MapClaims) string {
	t.Helper()
	now := time.Now()
	for k, v := range map[string]any{"aud": audience, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()} {
		if _, ok := claims[k]; !ok {
			claims[k] = v
		}
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// raw is a request exactly as it reaches ext_authz: a CheckRequest built by
// hand, so that paths, hosts and joined headers need not survive an HTTP
// client first.
type raw struct {
	Method  string            // :method, "POST" when empty
	Path    string            // :path, "/mcp" when empty
	Host    string            // :authority, host when empty
	Headers map[string]string // lower-case names, joined values as Envoy joins them
	Body    string            // sent as the buffered body when not empty
	Partial bool              // adds x-envoy-auth-partial-body: true
}

// verdict is the service's answer, read as Envoy would apply it.
type verdict struct {
	Allowed  bool
	Status   int               // the denial's HTTP status; 200 for an allow
	Headers  map[string]string // response headers of a denial
	Body     string            // the denial's body
	Upstream map[string]string // headers set upstream on an allow
	Removed  []string          // headers removed upstream on an allow
}

// check sends r over ext_authz gRPC.
func (s *suite) check(t *testing.T, r raw) verdict {
	t.Helper()
	if r.Method == "" {
		r.Method = "POST"
	}
	if r.Path == "" {
		r.Path = "/mcp"
	}
	if r.Host == "" {
		r.Host = host
	}
	h := map[string]string{":method": r.Method, ":path": r.Path, ":authority": r.Host, ":scheme": "http", "x-request-id": "attack-1"}
	for k, v := range r.Headers {
		h[k] = v
	}
	if r.Body != "" && h["content-type"] == "" {
		h["content-type"] = "application/json"
	}
	if r.Partial {
		h["x-envoy-auth-partial-body"] = "true"
	} else if r.Body != "" {
		h["x-envoy-auth-partial-body"] = "false"
	}
	req := &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Source: &authv3.AttributeContext_Peer{Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{Address: "127.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 40000}}}}},
		Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
			Id: "1", Method: r.Method, Path: r.Path, Host: r.Host, Scheme: "http", Protocol: "HTTP/1.1",
			Headers: h, Body: r.Body, Size: int64(len(r.Body)),
		}},
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := s.grpc.Check(ctx, req)
	if err != nil {
		t.Fatalf("Check returned a gRPC error (Envoy may fail open on it): %v", err)
	}
	return readVerdict(resp)
}

func readVerdict(resp *authv3.CheckResponse) verdict {
	v := verdict{Headers: map[string]string{}, Upstream: map[string]string{}}
	if resp.GetStatus().GetCode() == 0 {
		v.Allowed, v.Status = true, 200
		for _, h := range resp.GetOkResponse().GetHeaders() {
			v.Upstream[strings.ToLower(h.GetHeader().GetKey())] = h.GetHeader().GetValue()
		}
		v.Removed = resp.GetOkResponse().GetHeadersToRemove()
		return v
	}
	d := resp.GetDeniedResponse()
	v.Status = int(d.GetStatus().GetCode())
	if v.Status == 0 {
		v.Status = 403
	}
	for _, h := range d.GetHeaders() {
		v.Headers[strings.ToLower(h.GetHeader().GetKey())] = h.GetHeader().GetValue()
	}
	v.Body = d.GetBody()
	return v
}

// rpcError is the JSON-RPC error in a denial body, if there is one.
type rpcError struct {
	ID    json.RawMessage `json:"id"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// rpc decodes the denial body as a JSON-RPC error response.
func (v verdict) rpc(t *testing.T) rpcError {
	t.Helper()
	var e rpcError
	if err := json.Unmarshal([]byte(v.Body), &e); err != nil || e.Error == nil {
		t.Fatalf("denial body is not a JSON-RPC error: %q", v.Body)
	}
	return e
}

// wantDenied fails unless v is a denial with the given status.
func (v verdict) wantDenied(t *testing.T, status int) {
	t.Helper()
	if v.Allowed {
		t.Fatalf("allowed (upstream headers %v), want %d", v.Upstream, status)
	}
	if v.Status != status {
		t.Fatalf("status %d, want %d (body %s)", v.Status, status, v.Body)
	}
}

// wantStatus fails unless v is an allow (status 0) or a denial with the
// given status, and reports whether it is a denial, whose body the caller
// may check further.
func (v verdict) wantStatus(t *testing.T, status int) bool {
	t.Helper()
	if status == 0 {
		if !v.Allowed {
			t.Fatalf("refused: %d %s", v.Status, v.Body)
		}
		return false
	}
	v.wantDenied(t, status)
	return true
}

// viaEnvoy sends a request through the Envoy-like proxy to the MCP server.
func (s *suite) viaEnvoy(t *testing.T, method, path string, header http.Header, body string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, s.proxy.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	for k, vs := range header {
		req.Header[k] = vs
	}
	if body != "" && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if req.Header.Get("Accept") == "" {
		req.Header.Set("Accept", "application/json, text/event-stream")
	}
	resp, err := s.proxy.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// toolCall is a tools/call body.
func toolCall(id int, tool string, args string) string {
	if args == "" {
		args = "{}"
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, tool, args)
}

// ran counts the executions of tool on the MCP server so far.
func (s *suite) ran(tool string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.executed {
		if c.Tool == tool {
			n++
		}
	}
	return n
}

// bearer is an Authorization header for tok.
func bearer(tok string) http.Header { return http.Header{"Authorization": {"Bearer " + tok}} }

// syncBuffer collects the service's log lines.
type syncBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// fwd is a request as a forward-auth proxy describes it to the front end,
// in the forwarded convention of Traefik and Caddy.
type fwd struct {
	Method string      // X-Forwarded-Method, POST when empty
	URI    string      // X-Forwarded-Uri, /mcp when empty
	Host   string      // X-Forwarded-Host, host when empty
	Header http.Header // the client's own headers
	Body   string      // the body, as Traefik's forwardBody sends it
}

// forwardAuth asks the forward-auth front end about r.
func (s *suite) forwardAuth(t *testing.T, r fwd) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.httpURL+"/", strings.NewReader(r.Body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Forwarded-Method", cmp.Or(r.Method, http.MethodPost))
	req.Header.Set("X-Forwarded-Uri", cmp.Or(r.URI, "/mcp"))
	req.Header.Set("X-Forwarded-Host", cmp.Or(r.Host, host))
	req.Header.Set("X-Forwarded-Proto", "https")
	if r.Body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, vs := range r.Header {
		req.Header[k] = vs
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}
