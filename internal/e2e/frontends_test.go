package e2e

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/testing/ststest"
	"github.com/extauthz/extauthz/internal/testing/testpeers"
	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

// frontEnd is one proxy set-up of docs/forward-auth.md, run from the
// documented files.
type frontEnd struct {
	name       string
	convention string // the service's --http-convention
	body       bool   // the service sees the request body
	// responsePath: the service also sees the answer (ext_proc), so a
	// route sets response_path.
	responsePath bool
	// bodyBuffer, for nginx with njs, is the protected location's own
	// client_body_buffer_size ("": the documented files' alone), as an
	// operator who lowered it would have it.
	bodyBuffer string
}

var frontEnds = []frontEnd{
	{name: "nginx", convention: "nginx"},
	{name: "nginx-njs", convention: "nginx", body: true},
	{name: "caddy", convention: "forwarded"},
}

// feConfig: an open MCP route, one needing a scope tokens lack, one with a
// rule, one exchanging for tool calls, one needing consent for a tool, one
// allowing only an address the clients do not have, one with the signed
// tools header, one reading the token from a cookie.
// Routes go by path, so that every client can dial 127.0.0.1.
const feConfig = `
issuers:
  - {name: e2e, issuer: %[1]s, algorithms: [HS256], secret: %[2]s}
exchanges:
  - name: sts
    token_endpoint: %[3]s
    client_auth: {method: client_secret_basic, client_id: extauthz, client_secret_file: %[4]s}
lineage:
  preset: kagent
  signing: {key_file: %[6]s, issuer: https://extauthz.e2e.test}
routes:
  - name: open
    path_prefix: /mcp
    protocol: mcp
    issuers: [e2e]
    request_body: %[5]s
  - name: scoped
    path_prefix: /scoped
    protocol: mcp
    issuers: [e2e]
    scopes: [files:write]
  - name: rules
    path_prefix: /rules
    protocol: mcp
    issuers: [e2e]
    rules:
      - {name: no-delete, methods: [tools/call], names: [delete_*], action: deny}
  - name: exchange
    path_prefix: /exchange
    protocol: mcp
    issuers: [e2e]
    exchange: {sts: sts, audience: [https://backend.e2e.test], methods: [tools/call]}
  - name: consent
    path_prefix: /consent
    protocol: mcp
    issuers: [e2e]
    exchange:
      sts: sts
      audience: [https://backend.e2e.test]
      authorize_url: https://idp.e2e.test/authorize?client_id=e2e
      tools:
        - {names: [whoami], audience: [https://tools.e2e.test], consent: true}
  - name: addressed
    path_prefix: /addressed
    protocol: mcp
    issuers: [e2e]
    upstream_validates_mcp_headers: true
    rules:
      - {name: office-only, methods: [initialize], when: 'request.source.address == "192.0.2.1"'}
  - name: tools
    path_prefix: /tools
    protocol: mcp
    issuers: [e2e]
    request_body: %[5]s
    tools_header: {tools: [whoami, echo, delete_file]}
  - name: dryrun
    path_prefix: /dryrun
    protocol: mcp
    issuers: [e2e]
    scopes: [files:write]
    dry_run: true
  - name: cookie
    path_prefix: /cookie
    protocol: mcp
    issuers: [e2e]
    credentials: {cookie: at}
`

// feEnv is the service, an MCP server, a token service and an
// authorization server's metadata behind one front end.
type feEnv struct {
	fe     frontEnd
	base   string // http://127.0.0.1:port of the proxy
	admin  string // the service's admin listener
	issuer string // the authorization server named in the metadata
	sts    *ststest.Server

	mu     sync.Mutex
	calls  []testpeers.ToolCall
	issued []string // access tokens the STS issued
	// lineageKey verifies what the service signs with its lineage key.
	lineageKey ed25519.PublicKey
}

func startFrontEnd(t *testing.T, fe frontEnd) *feEnv {
	t.Helper()
	e := &feEnv{fe: fe}
	as := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/.well-known/") {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"issuer": e.issuer, "authorization_endpoint": e.issuer + "/authorize", "token_endpoint": e.issuer + "/token",
			"response_types_supported": []string{"code"}, "code_challenge_methods_supported": []string{"S256"},
		})
	}))
	t.Cleanup(as.Close)
	e.issuer = as.URL
	e.sts = ststest.New(t, ststest.Options{Respond: func(resp map[string]any) {
		e.mu.Lock()
		defer e.mu.Unlock()
		if tok, ok := resp["access_token"].(string); ok {
			e.issued = append(e.issued, tok)
		}
	}})
	secretFile := filepath.Join(t.TempDir(), "sts-secret")
	if err := os.WriteFile(secretFile, []byte(ststest.DefaultClient.Secret), 0o600); err != nil {
		t.Fatal(err)
	}
	requestBody := "none"
	if fe.body {
		requestBody = "sent"
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	e.lineageKey = pub
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "lineage.pem")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	addrs := startService(t, fmt.Sprintf(feConfig, e.issuer, secret, e.sts.TokenURL, secretFile, requestBody, keyFile), fe.convention)
	e.admin = addrs.Admin

	mcpSrv := httptest.NewServer(refuseDelete(testpeers.NewMCPServer(testpeers.MCPOptions{OnToolCall: func(c testpeers.ToolCall) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.calls = append(e.calls, c)
	}})))
	t.Cleanup(mcpSrv.Close)
	upstream := mcpSrv.Listener.Addr().String()

	var port string
	switch fe.name {
	case "caddy":
		port = startCaddy(t, addrs.HTTP, upstream)
	default:
		bin := nginxBinary(t)
		var module string
		if fe.body {
			module = njsModule(t)
		}
		port = startNginx(t, bin, func(dir, port string) string {
			return feNginxConfig(dir, port, addrs.HTTP, upstream, module, fe.bodyBuffer)
		})
	}
	e.base = "http://127.0.0.1:" + port
	return e
}

// toolCalls returns the tools the MCP server ran.
func (e *feEnv) toolCalls() []testpeers.ToolCall {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]testpeers.ToolCall(nil), e.calls...)
}

// issuedFingerprints are testpeers.Fingerprint of each token the STS
// issued, as the upstream would see it.
func (e *feEnv) issuedFingerprints() map[string]bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := map[string]bool{}
	for _, tok := range e.issued {
		m[testpeers.Fingerprint("Bearer "+tok)] = true
	}
	return m
}

// token mints a token of the e2e issuer; claims override (nil deletes).
func (e *feEnv) token(t *testing.T, claims jwt.MapClaims) string {
	now := time.Now()
	base := jwt.MapClaims{"iss": e.issuer, "sub": "alice", "scope": "files:read", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
	for k, v := range claims {
		if v == nil {
			delete(base, k)
		} else {
			base[k] = v
		}
	}
	return testtoken.HMAC(t, "HS256", secret, base)
}

// completeElicitation tells the service that the user finished the
// authorization the elicitation's URL started: the authorization flow's
// callback presents the state that URL carried. The one place the tests do it.
func (e *feEnv) completeElicitation(t *testing.T, id, authorizeURL string) {
	t.Helper()
	u, err := url.Parse(authorizeURL)
	if err != nil {
		t.Fatal(err)
	}
	form := url.Values{"state": {u.Query().Get("state")}}
	res, err := http.PostForm("http://"+e.admin+"/elicitations/"+id+"/complete", form)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusNoContent {
		t.Fatalf("completing elicitation %s: status %d", id, res.StatusCode)
	}
}

// feNginxConfig is nginx in front of the MCP server with the documented
// files: auth_request, or njs when module is the js module's path (with
// the protected location's client_body_buffer_size bodyBuffer, unless "").
func feNginxConfig(dir, port, service, upstream, module, bodyBuffer string) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	nginxPreamble(p, dir, module, service)
	if module != "" {
		p("  js_import extauthz from %s;", snippet("extauthz.js"))
	}
	p("  server {")
	p("    listen 127.0.0.1:%s default_server;", port)
	p("    %s", nginxReady(dir))
	if module == "" {
		p("    include %s;", snippet("nginx-server.conf"))
		p("    location / {")
		p("      include %s;", snippet("nginx-location.conf"))
		p("      proxy_pass http://%s;", upstream)
		p("    }")
	} else {
		p("    include %s;", snippet("nginx-njs-server.conf"))
		if bodyBuffer != "" {
			p("    location / { client_body_buffer_size %s; js_content extauthz.authorize; }", bodyBuffer)
		} else {
			p("    location / { js_content extauthz.authorize; }")
		}
		p("    location @extauthz_upstream {")
		p("      include %s;", snippet("nginx-njs-upstream.conf"))
		p("      proxy_pass http://%s;", upstream)
		p("    }")
	}
	p("  }")
	p("}")
	return b.String()
}

// njsModule finds nginx's js module (Debian's libnginx-mod-http-js).
func njsModule(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/lib/nginx/modules/ngx_http_js_module.so", "/usr/share/nginx/modules/ngx_http_js_module.so"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	missing(t, "the nginx js module", "libnginx-mod-http-js")
	return ""
}

// missing skips a test whose dependency is not installed, or fails it under
// CI=true, where make test's deps step must have installed it.
func missing(t *testing.T, what, pkg string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is not installed, and CI=true requires the end-to-end tests to run (%s)", what, pkg)
	}
	t.Skipf("%s is not installed (%s)", what, pkg)
}

// startCaddy runs Caddy with the documented Caddyfile in front of upstream
// and returns its port; a failed start (the port taken meanwhile) is
// retried with another port.
func startCaddy(t *testing.T, service, upstream string) string {
	t.Helper()
	bin, err := exec.LookPath("caddy")
	if err != nil {
		missing(t, "caddy", "apt-get install caddy")
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "Caddyfile")
	global := "{\n\tadmin off\n\tauto_https off\n}\nimport " + snippet("Caddyfile") + "\n"
	if err := os.WriteFile(conf, []byte(global), 0o644); err != nil {
		t.Fatal(err)
	}
	var lastErr error
	for range 3 {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		if lastErr = runCaddy(t, bin, dir, conf, port, service, upstream); lastErr == nil {
			return port
		}
	}
	t.Fatalf("caddy did not start: %v", lastErr)
	return ""
}

func runCaddy(t *testing.T, bin, dir, conf, port, service, upstream string) error {
	cmd := exec.Command(bin, "run", "--adapter", "caddyfile", "--config", conf)
	cmd.Env = []string{
		"HOME=" + dir, "XDG_CONFIG_HOME=" + dir, "XDG_DATA_HOME=" + dir, "PATH=" + os.Getenv("PATH"),
		"SITE_ADDRESS=http://127.0.0.1:" + port, "EXTAUTHZ_ADDR=" + service, "UPSTREAM_ADDR=" + upstream,
	}
	return runProxy(t, cmd, "http://127.0.0.1:"+port+"/_e2e_ready",
		func(res *http.Response) bool { return res.Header.Get("Server") == "Caddy" },
		func() string { return "" })
}

// nodeResult is one JSON line of testdata/ts/client.mjs.
type nodeResult struct {
	OK               bool            `json:"ok"`
	Connected        bool            `json:"connected"`
	IsError          bool            `json:"isError"`
	Text             string          `json:"text"`
	Event            string          `json:"event"`
	Error            string          `json:"error"`
	Code             any             `json:"code"`
	Message          string          `json:"message"`
	Data             json.RawMessage `json:"data"` // a JSON-RPC error's (a2a.mjs)
	AuthorizationURL string          `json:"authorizationURL"`
	ElicitationID    string          `json:"elicitationId"`
	TaskID           string          `json:"taskId"` // an A2A task's (a2a.mjs)
	Pages            []nodePage      `json:"pages"`
	All              []string        `json:"all"`         // v2's own paging of tools/list; the tasks an A2A list returned (a2a.mjs)
	Op               string          `json:"op"`          // a skills operation (client.mjs)
	Description      string          `json:"description"` // the skill skills/get answered
	URIs             []string        `json:"uris"`        // the skills listed, the directory's resources
	Elicitations     []struct {
		Mode          string `json:"mode"`
		ElicitationID string `json:"elicitationId"`
		URL           string `json:"url"`
	} `json:"elicitations"`
}

// nodePage is one page of a tools/list run: the tools' names and the
// cursor to the next page.
type nodePage struct {
	Tools      []string `json:"tools"`
	NextCursor string   `json:"nextCursor"`
}

// nodeClient runs the TypeScript MCP SDK client script with args; between
// events it calls next (which may be nil) with each result, and returns
// all of them.
func nodeClient(t *testing.T, args map[string]any, next func(nodeResult)) []nodeResult {
	t.Helper()
	return runNode(t, "client.mjs", "@modelcontextprotocol/sdk", args, next)
}

// nodeScript finds Node.js and the script directory testdata/ts, with the
// package pkg installed there.
func nodeScript(t *testing.T, pkg string) (node, dir string) {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("testdata", "ts"))
	if err != nil {
		t.Fatal(err)
	}
	node, err = exec.LookPath("node")
	if err != nil {
		missing(t, "node", "Node.js 20")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", filepath.FromSlash(pkg))); err != nil {
		missing(t, pkg, "npm ci in internal/e2e/testdata/ts, which make deps runs")
	}
	return node, dir
}

// startNode starts script (of testdata/ts, which needs pkg) with args as
// its one argument, until ctx ends: its stdin and stdout are the caller's
// to use, stderr is collected.
func startNode(t *testing.T, ctx context.Context, script, pkg string, args map[string]any) (*exec.Cmd, io.WriteCloser, io.Reader, *syncBuffer) {
	t.Helper()
	node, dir := nodeScript(t, pkg)
	arg, _ := json.Marshal(args)
	cmd := exec.CommandContext(ctx, node, script, string(arg))
	cmd.Dir = dir
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, stdin, stdout, stderr
}

// runNode runs script (of testdata/ts, which needs pkg) with args, as
// nodeClient does.
func runNode(t *testing.T, script, pkg string, args map[string]any, next func(nodeResult)) []nodeResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd, stdin, stdout, stderr := startNode(t, ctx, script, pkg, args)
	var out []nodeResult
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var r nodeResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s printed %q: %v", script, sc.Text(), err)
		}
		out = append(out, r)
		if r.Event != "" {
			if next != nil {
				next(r)
			}
			io.WriteString(stdin, "go\n")
		}
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil && len(out) == 0 {
		t.Fatalf("%s: %v\n%s", script, err, stderr.String())
	}
	if len(out) == 0 {
		t.Fatalf("%s printed nothing\n%s", script, stderr.String())
	}
	return out
}

// rawMCP posts one JSON-RPC message as an MCP client would, with extra
// headers, and returns the response status, headers and body.
func rawMCP(t *testing.T, url, token, body string, extra http.Header) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, vs := range extra {
		req.Header[k] = vs
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	return res.StatusCode, res.Header, string(b)
}

// rpcError decodes a JSON-RPC error response.
type rpcError struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Data    struct {
			Error string `json:"error"`
		} `json:"data"`
	} `json:"error"`
}

func decodeRPCError(t *testing.T, body string) rpcError {
	t.Helper()
	var e rpcError
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.JSONRPC != "2.0" || e.Error.Code == 0 {
		t.Fatalf("not a JSON-RPC error: %s", body)
	}
	return e
}

// Token service faults the tests program.
var (
	failure503 = ststest.Fault{Status: http.StatusServiceUnavailable, Header: http.Header{"Retry-After": {"7"}}, Body: `{"error":"temporarily_unavailable"}`}
	noFault    = ststest.Fault{}
)

// refuseDelete answers DELETE with 405, as MCP lets a server that keeps its
// sessions do: the session stays alive upstream after its owner's DELETE.
func refuseDelete(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			w.Header().Set("Allow", "GET, POST")
			http.Error(w, "sessions end when they expire", http.StatusMethodNotAllowed)
			return
		}
		next.ServeHTTP(w, r)
	})
}
