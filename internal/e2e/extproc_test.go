package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/extauthz/extauthz/internal/app"
	"github.com/extauthz/extauthz/internal/extprocauthz"
	"github.com/extauthz/extauthz/internal/testing/envoytest"
	"github.com/extauthz/extauthz/internal/testing/redistest"
	"github.com/extauthz/extauthz/internal/testing/ststest"
	"github.com/extauthz/extauthz/internal/testing/testpeers"
	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

// The response path end to end with the TypeScript SDK clients: Envoy with
// envoy/extproc.yaml's two filters (ext_authz, then ext_proc) in front of
// the official MCP Go SDK server, both filters asking replica A of the
// service; replica B shares A's Redis.

// Upstream paths, each its own route of xpConfig: the same MCP server
// answering in event streams or JSON, whole or one tool a page, and the
// server behind a token exchange.
var xpListPaths = map[string]testpeers.MCPOptions{
	"/sse":        {},
	"/json":       {JSONResponse: true},
	"/paged-sse":  {PageSize: 1},
	"/paged-json": {JSONResponse: true, PageSize: 1},
}

const xpAuthorizeURL = "https://idp.e2e.test/authorize"

// xpConfig: one route per list path, whose rule hides delete_* from
// callers without files:write; an exchanging route that answers an upstream
// 401 with the re-authorization.
func xpConfig(redisAddr, stsURL string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `
issuers:
  - {name: e2e, algorithms: [HS256], secret: %s}
redis: {addrs: [%s], encryption_key_env: TOKEN_KEY, op_timeout: 2s}
elicitations: {state_key_env: STATE_KEY}
exchanges:
  - {name: sts, token_endpoint: %s, client_auth: {method: client_secret_basic, client_id: %s, client_secret_env: STS_SECRET}}
routes:
  - name: backend
    path_prefix: /backend
    protocol: mcp
    issuers: [e2e]
    response_path: true
    exchange: {sts: sts, audience: [https://backend.e2e.test], methods: [tools/call], authorize_url: %q}
`, secret, redisAddr, stsURL, ststest.DefaultClient.ID, xpAuthorizeURL)
	paths := make([]string, 0, len(xpListPaths))
	for p := range xpListPaths {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		fmt.Fprintf(&b, `  - name: %s
    path_prefix: %s
    protocol: mcp
    issuers: [e2e]
    response_path: true
    rules:
      - {name: writes, methods: [tools/call], names: ["delete_*"], scopes: [files:write]}
`, strings.TrimPrefix(p, "/"), p)
	}
	return b.String()
}

// xpEnv is two replicas, one Redis, the token service, the MCP servers and
// the proxy in front of them talking to replica A.
type xpEnv struct {
	base string // the proxy, http://127.0.0.1:port
	a, b app.Addrs
	sts  *ststest.Server

	mu      sync.Mutex
	issued  map[string]bool // fingerprints of the tokens the STS issued
	refused *refuseFirstToken
}

func startExtProc(t *testing.T) *xpEnv {
	t.Helper()
	rd := redistest.Start(t)
	e := &xpEnv{issued: map[string]bool{}}
	e.sts = ststest.New(t, ststest.Options{Respond: func(resp map[string]any) {
		e.mu.Lock()
		defer e.mu.Unlock()
		if tok, ok := resp["access_token"].(string); ok {
			e.issued[testpeers.Fingerprint("Bearer "+tok)] = true
		}
	}})
	cfg := filepath.Join(t.TempDir(), "extauthz.yaml")
	if err := os.WriteFile(cfg, []byte(xpConfig(rd.Addr, e.sts.TokenURL)), 0o600); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{
		"TOKEN_KEY":  base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef")),
		"STATE_KEY":  "replicas-share-this-state-key-0123456789",
		"STS_SECRET": ststest.DefaultClient.Secret,
	}
	e.a = startReplica(t, cfg, vars)
	e.b = startReplica(t, cfg, vars)

	upstreams := map[string]string{}
	for p, o := range xpListPaths {
		srv := httptest.NewServer(testpeers.NewMCPServer(o))
		t.Cleanup(srv.Close)
		upstreams[p] = srv.URL
	}
	e.refused = &refuseFirstToken{next: testpeers.NewMCPServer(testpeers.MCPOptions{}), first: map[string]string{}}
	backend := httptest.NewServer(e.refused)
	t.Cleanup(backend.Close)
	upstreams["/backend"] = backend.URL

	e.base = startExtProcProxy(t, e.a.GRPC, upstreams)
	return e
}

// startExtProcProxy starts an extprocProxy asking the service at grpcAddr,
// in front of upstreams (path prefix -> base URL; "" takes every path),
// and returns its base URL.
func startExtProcProxy(t *testing.T, grpcAddr string, upstreams map[string]string) string {
	t.Helper()
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	front := httptest.NewServer(&extprocProxy{t: t, authz: authv3.NewAuthorizationClient(conn), conn: conn, upstreams: upstreams})
	t.Cleanup(front.Close)
	return front.URL
}

// startReplica runs the service with config and the environment vars, its
// gRPC, admin and ops listeners on 127.0.0.1.
func startReplica(t *testing.T, config string, vars map[string]string) app.Addrs {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan app.Addrs, 1)
	done := make(chan error, 1)
	go func() {
		done <- app.Serve(ctx, app.ServeOptions{
			ConfigFile: config, GRPCAddr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0", OpsAddr: "127.0.0.1:0",
			LogLevel: "warn", LogFormat: "text", ShutdownTimeout: 5 * time.Second, Started: func(a app.Addrs) { started <- a },
		}, app.Env{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(k string) string { return vars[k] }})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("service did not stop")
		}
	})
	select {
	case a := <-started:
		return a
	case err := <-done:
		t.Fatalf("service: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("service did not start")
	}
	return app.Addrs{}
}

func (e *xpEnv) token(t *testing.T, sub, scope string) string {
	now := time.Now()
	return testtoken.HMAC(t, "HS256", secret, jwt.MapClaims{"sub": sub, "scope": scope, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()})
}

// completeOn tells replica s that the user finished the authorization the
// elicitation's URL started (the authorization flow's callback presents
// the state that URL carried).
func completeOn(t *testing.T, s app.Addrs, id, authorizeURL string) {
	t.Helper()
	u, err := url.Parse(authorizeURL)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.PostForm("http://"+s.Admin+"/elicitations/"+url.PathEscape(id)+"/complete", url.Values{"state": {u.Query().Get("state")}})
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusNoContent {
		t.Fatalf("completing elicitation %s: status %d", id, res.StatusCode)
	}
}

// metric returns the value of the metrics line that starts with series on
// replica s (0 when absent).
func metric(t *testing.T, s app.Addrs, series string) float64 {
	t.Helper()
	res, err := http.Get("http://" + s.Ops + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, _ := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v
		}
	}
	return 0
}

// waitMetric waits (at most 10s) until series reaches want on replica s.
func waitMetric(t *testing.T, s app.Addrs, series string, want float64) {
	t.Helper()
	for range 200 {
		if metric(t, s, series) >= want {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s never reached %v", series, want)
}

// refuseFirstToken is an MCP server whose first token on each session's
// tool calls dies: every tool call with it is answered 401, as by a server
// whose downstream token expired; a call with another token is served.
type refuseFirstToken struct {
	next http.Handler

	mu    sync.Mutex
	first map[string]string // session -> the refused Authorization value
}

func (s *refuseFirstToken) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		r.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`"tools/call"`)) && s.refuses(r.Header.Get("Mcp-Session-Id"), r.Header.Get("Authorization")) {
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			http.Error(w, "token expired", http.StatusUnauthorized)
			return
		}
	}
	s.next.ServeHTTP(w, r)
}

func (s *refuseFirstToken) refuses(session, auth string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.first[session]; !ok {
		s.first[session] = auth
	}
	return s.first[session] == auth
}

// refusedFingerprints are testpeers.Fingerprint of the refused tokens,
// one a session.
func (s *refuseFirstToken) refusedFingerprints() map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]bool{}
	for _, auth := range s.first {
		out[testpeers.Fingerprint(auth)] = true
	}
	return out
}

// extprocProxy is Envoy configured as envoy/extproc.yaml: for every request
// the ext_authz check (with the body), then the ext_proc stream with
// ext_authz's metadata forwarded, in the filter's recommended modes
// (request body BUFFERED, response NONE with mode_override), run by
// envoytest.ExtProc on the whole upstream answer; a GET event stream takes
// the mcp-stream route's FULL_DUPLEX_STREAMED instead and is processed
// live (duplex), so that the processor can add events to it.
type extprocProxy struct {
	t         *testing.T
	authz     authv3.AuthorizationClient
	conn      *grpc.ClientConn
	upstreams map[string]string // path prefix -> upstream base URL
}

const xpMaxBody = 1 << 20

func (p *extprocProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, xpMaxBody+1))
	if err != nil {
		http.Error(w, "read", http.StatusBadRequest)
		return
	}
	if len(body) > xpMaxBody {
		http.Error(w, "Payload Too Large", http.StatusRequestEntityTooLarge)
		return
	}
	upstream := ""
	for prefix, u := range p.upstreams {
		if r.URL.Path == prefix || strings.HasPrefix(r.URL.Path, prefix+"/") {
			upstream = u
		}
	}
	if upstream == "" {
		http.NotFound(w, r)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	resp, err := p.authz.Check(ctx, envoytest.BuildCheckRequest(r, body, envoytest.BuildOptions{WithBody: true, MaxRequestBytes: xpMaxBody, PackAsBytes: true}))
	cancel()
	if err != nil {
		http.Error(w, "authz", http.StatusServiceUnavailable)
		return
	}
	if resp.GetStatus().GetCode() != 0 {
		status, h, b := envoytest.DeniedResponse(resp.GetDeniedResponse())
		copyHeader(w.Header(), h)
		w.WriteHeader(status)
		w.Write(b)
		return
	}
	downstreamHeaders, err := envoytest.ApplyOK(r, resp.GetOkResponse())
	if err != nil {
		p.t.Errorf("ApplyOK: %v", err)
		http.Error(w, "mutation", http.StatusInternalServerError)
		return
	}
	md := &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{extprocauthz.MetadataNamespace: resp.GetDynamicMetadata()}}
	if r.Method == http.MethodGet && strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		p.duplex(w, r, upstream, md, downstreamHeaders)
		return
	}
	p.whole(w, r, body, upstream, md, downstreamHeaders)
}

func copyHeader(dst, src http.Header) {
	for k, v := range src {
		dst[k] = v
	}
}

func (p *extprocProxy) upstreamRequest(ctx context.Context, r *http.Request, body []byte, upstream string) (*http.Response, error) {
	up, err := http.NewRequestWithContext(ctx, r.Method, upstream+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	up.Header = r.Header.Clone()
	up.Host = r.Host
	return http.DefaultTransport.RoundTrip(up)
}

// whole runs one request and its whole answer through ext_proc.
func (p *extprocProxy) whole(w http.ResponseWriter, r *http.Request, body []byte, upstream string, md *corev3.Metadata, extra http.Header) {
	uresp, err := p.upstreamRequest(r.Context(), r, body, upstream)
	if err != nil {
		http.Error(w, "upstream connect error", http.StatusServiceUnavailable)
		return
	}
	ubody, _ := io.ReadAll(uresp.Body)
	uresp.Body.Close()
	// The body in data frames of arbitrary size: the processor gathers or
	// reassembles them.
	var chunks []string
	for len(ubody) > 0 {
		n := min(len(ubody), 113)
		chunks = append(chunks, string(ubody[:n]))
		ubody = ubody[n:]
	}
	var reqChunks []string
	if len(body) > 0 {
		reqChunks = []string{string(body)}
	}
	res := envoytest.ExtProc(p.t, p.conn, envoytest.ExtProcConfig{
		Mode: &filterv3.ProcessingMode{RequestBodyMode: filterv3.ProcessingMode_BUFFERED, ResponseBodyMode: filterv3.ProcessingMode_NONE,
			RequestTrailerMode: filterv3.ProcessingMode_SKIP, ResponseTrailerMode: filterv3.ProcessingMode_SKIP},
		AllowModeOverride: true,
		MessageTimeout:    2 * time.Second,
		Metadata:          md,
	}, envoytest.ExtProcExchange{
		Request:  envoytest.ExtProcRequest(r.Method, r.Host, r.URL.RequestURI(), r.Header, reqChunks...),
		Response: envoytest.ExtProcResponse(uresp.StatusCode, uresp.Header, chunks...),
	})
	if res.Err != nil || res.Reset {
		p.t.Errorf("ext_proc %s %s: %v (reset %v)", r.Method, r.URL.Path, res.Err, res.Reset)
		http.Error(w, "ext_proc", http.StatusInternalServerError)
		return
	}
	for _, h := range res.Downstream.Headers {
		if !strings.HasPrefix(h.Key, ":") && h.Key != "content-length" {
			w.Header().Add(h.Key, h.Value)
		}
	}
	copyHeader(w.Header(), extra)
	w.WriteHeader(res.Downstream.Status())
	w.Write(res.Downstream.Body())
}

// duplex serves a GET event stream as Envoy's ext_proc filter does in
// FULL_DUPLEX_STREAMED for the response (request body NONE): the request
// headers (end of stream) and their reply first, then the upstream's
// headers and each chunk as it arrives; the client gets the headers when
// their reply comes and exactly what the processor's streamed_response
// messages carry, when they come. A message Envoy would refuse as spurious
// (a body before the headers reply or before the first upstream chunk,
// anything after end of stream) fails the test.
func (p *extprocProxy) duplex(w http.ResponseWriter, r *http.Request, upstream string, md *corev3.Metadata, extra http.Header) {
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second) // no test stream lives longer
	defer cancel()
	stream, err := extprocv3.NewExternalProcessorClient(p.conn).Process(ctx)
	if err != nil {
		http.Error(w, "ext_proc", http.StatusInternalServerError)
		return
	}
	replies := make(chan *extprocv3.ProcessingResponse)
	go func() {
		defer close(replies)
		for {
			m, err := stream.Recv()
			if err != nil {
				return
			}
			select {
			case replies <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	send := func(m *extprocv3.ProcessingRequest) bool {
		m.MetadataContext = md
		return stream.Send(m) == nil
	}
	headerMap := func(h []envoytest.ExtProcHeader) *corev3.HeaderMap {
		hm := &corev3.HeaderMap{}
		for _, e := range h {
			hm.Headers = append(hm.Headers, &corev3.HeaderValue{Key: e.Key, RawValue: []byte(e.Value)})
		}
		return hm
	}
	req := envoytest.ExtProcRequest(r.Method, r.Host, r.URL.RequestURI(), r.Header)
	if !send(&extprocv3.ProcessingRequest{
		Request:        &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{Headers: headerMap(req.Headers), EndOfStream: true}},
		ProtocolConfig: &extprocv3.ProtocolConfiguration{RequestBodyMode: filterv3.ProcessingMode_NONE, ResponseBodyMode: filterv3.ProcessingMode_FULL_DUPLEX_STREAMED},
	}) {
		http.Error(w, "ext_proc", http.StatusInternalServerError)
		return
	}
	timer := time.NewTimer(2 * time.Second) // message_timeout
	select {
	case m, ok := <-replies:
		timer.Stop()
		switch {
		case !ok:
			http.Error(w, "ext_proc", http.StatusInternalServerError)
			return
		case m.GetImmediateResponse() != nil:
			writeImmediate(w, m.GetImmediateResponse())
			return
		case m.GetRequestHeaders() == nil:
			p.t.Errorf("ext_proc GET: spurious %T awaiting request_headers", m.GetResponse())
			http.Error(w, "ext_proc", http.StatusInternalServerError)
			return
		}
	case <-timer.C:
		http.Error(w, "ext_proc timeout", http.StatusGatewayTimeout)
		return
	}

	uresp, err := p.upstreamRequest(ctx, r, nil, upstream)
	if err != nil {
		http.Error(w, "upstream connect error", http.StatusServiceUnavailable)
		return
	}
	defer uresp.Body.Close()
	resp := envoytest.ExtProcResponse(uresp.StatusCode, uresp.Header)
	if !send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{Headers: headerMap(resp.Headers)}}}) {
		return
	}
	chunks := make(chan []byte)
	go func() {
		defer close(chunks)
		buf := make([]byte, 4096)
		for {
			n, err := uresp.Body.Read(buf)
			if n > 0 {
				select {
				case chunks <- bytes.Clone(buf[:n]):
				case <-ctx.Done():
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	headersDone, chunkSent, eosSent := false, false, false
	flush := func() { http.NewResponseController(w).Flush() }
	for {
		select {
		case <-ctx.Done():
			return
		case c, ok := <-chunks:
			if !ok {
				chunks = nil // the upstream ended: end of stream
				eosSent = true
				if !send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: &extprocv3.HttpBody{EndOfStream: true}}}) {
					return
				}
				continue
			}
			chunkSent = true
			if !send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: &extprocv3.HttpBody{Body: c}}}) {
				return
			}
		case m, ok := <-replies:
			if !ok {
				return
			}
			switch v := m.GetResponse().(type) {
			case *extprocv3.ProcessingResponse_ImmediateResponse:
				if headersDone {
					panic(http.ErrAbortHandler) // Envoy resets a stream already answered
				}
				writeImmediate(w, v.ImmediateResponse)
				return
			case *extprocv3.ProcessingResponse_ResponseHeaders:
				if headersDone {
					p.t.Errorf("ext_proc GET: a second response_headers reply")
					panic(http.ErrAbortHandler)
				}
				headersDone = true
				h := slices.Clone(resp.Headers)
				mutateHeaders(&h, v.ResponseHeaders.GetResponse().GetHeaderMutation())
				status := http.StatusOK
				for _, e := range h {
					switch {
					case e.Key == ":status":
						status, _ = strconv.Atoi(e.Value)
					case strings.HasPrefix(e.Key, ":"), e.Key == "content-length":
					default:
						w.Header().Add(e.Key, e.Value)
					}
				}
				copyHeader(w.Header(), extra)
				w.WriteHeader(status)
				flush()
			case *extprocv3.ProcessingResponse_ResponseBody:
				sr := v.ResponseBody.GetResponse().GetBodyMutation().GetStreamedResponse()
				switch {
				case sr == nil, !headersDone, !chunkSent && !eosSent:
					p.t.Errorf("ext_proc GET: spurious body reply (streamed %v, headers answered %v, chunk sent %v)", sr != nil, headersDone, chunkSent)
					panic(http.ErrAbortHandler)
				}
				w.Write(sr.GetBody())
				flush()
				if sr.GetEndOfStream() {
					return
				}
			default:
				p.t.Errorf("ext_proc GET: spurious %T in FULL_DUPLEX_STREAMED", m.GetResponse())
				panic(http.ErrAbortHandler)
			}
		}
	}
}

func writeImmediate(w http.ResponseWriter, ir *extprocv3.ImmediateResponse) {
	var h []envoytest.ExtProcHeader
	mutateHeaders(&h, ir.GetHeaders())
	for _, e := range h {
		w.Header().Add(e.Key, e.Value)
	}
	status := int(ir.GetStatus().GetCode())
	if status < 200 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	w.Write(ir.GetBody())
}

// mutateHeaders applies a header mutation's sets (overwriting) and removals.
func mutateHeaders(h *[]envoytest.ExtProcHeader, m *extprocv3.HeaderMutation) {
	for _, o := range m.GetSetHeaders() {
		key := strings.ToLower(o.GetHeader().GetKey())
		value := string(o.GetHeader().GetRawValue())
		if value == "" {
			value = o.GetHeader().GetValue()
		}
		*h = slices.DeleteFunc(*h, func(e envoytest.ExtProcHeader) bool { return e.Key == key })
		*h = append(*h, envoytest.ExtProcHeader{Key: key, Value: value})
	}
	for _, k := range m.GetRemoveHeaders() {
		key := strings.ToLower(k)
		*h = slices.DeleteFunc(*h, func(e envoytest.ExtProcHeader) bool { return e.Key == key })
	}
}

// xpTools is every tool of the MCP server, and what a reader may call.
var (
	xpAllTools    = []string{testpeers.ToolDeleteFile, testpeers.ToolEcho, testpeers.ToolWhoAmI}
	xpReaderTools = []string{testpeers.ToolEcho, testpeers.ToolWhoAmI}
)

// listed is every tool of a list run's pages, sorted.
func listed(t *testing.T, out []nodeResult) ([]string, []nodePage) {
	t.Helper()
	last := out[len(out)-1]
	if !last.OK || len(last.Pages) == 0 {
		t.Fatalf("list: %+v", out)
	}
	var names []string
	for _, p := range last.Pages {
		names = append(names, p.Tools...)
	}
	slices.Sort(names)
	if last.All != nil {
		// The SDK's own paging found the same.
		all := slices.Sorted(slices.Values(last.All))
		if !slices.Equal(all, names) {
			t.Errorf("the SDK's paging collected %v, the pages hold %v", all, names)
		}
	}
	return names, last.Pages
}

// TestExtProcTSListFiltered: through the proxy, the TypeScript SDK clients
// (and the Go SDK client) of a user with the read-only scope list only the
// tools it may call, with the server answering in an event stream and in
// JSON; an admin lists them all.
func TestExtProcTSListFiltered(t *testing.T) {
	e := startExtProc(t)
	reader := e.token(t, "reader", "files:read")
	admin := e.token(t, "admin", "files:read files:write")
	for _, sdk := range sdks {
		for _, path := range []string{"/sse", "/json"} {
			for _, tc := range []struct {
				name, token string
				want        []string
			}{
				{"read-only user", reader, xpReaderTools},
				{"admin", admin, xpAllTools},
			} {
				t.Run(sdk+path+"/"+tc.name, func(t *testing.T) {
					got, pages := listed(t, nodeClient(t, map[string]any{"sdk": sdk, "url": e.base + path, "token": tc.token, "scenario": "list"}, nil))
					if !slices.Equal(got, tc.want) || len(pages) != 1 {
						t.Fatalf("listed %v in %d pages, want %v in one", got, len(pages), tc.want)
					}
				})
			}
		}
	}
	// The official Go SDK client, on the session flow with its GET stream.
	for _, path := range []string{"/sse", "/json"} {
		for _, tc := range []struct {
			name, token string
			want        []string
		}{
			{"read-only user", reader, xpReaderTools},
			{"admin", admin, xpAllTools},
		} {
			t.Run("go"+path+"/"+tc.name, func(t *testing.T) {
				ctx := testContext(t)
				cs, err := testpeers.NewMCPClient(ctx, e.base+path, testpeers.NewHTTPClient(tc.token, nil, nil),
					&testpeers.MCPClientOptions{ProtocolVersion: testpeers.MCPVersion20251125})
				if err != nil {
					t.Fatal(err)
				}
				defer cs.Close()
				var got []string
				for tool, err := range cs.Tools(ctx, nil) {
					if err != nil {
						t.Fatal(err)
					}
					got = append(got, tool.Name)
				}
				slices.Sort(got)
				if !slices.Equal(got, tc.want) {
					t.Fatalf("listed %v, want %v", got, tc.want)
				}
			})
		}
	}
	if n := metric(t, e.a, `extauthz_response_path_total{action="filtered",route="sse"}`); n == 0 {
		t.Error("the event stream lists were not filtered by the response path")
	}
	if n := metric(t, e.a, `extauthz_response_path_total{action="filtered",route="json"}`); n == 0 {
		t.Error("the JSON lists were not filtered by the response path")
	}
}

// TestExtProcTSPagination: a list the server pages one tool at a time
// stays consistent through the filter: the read-only user follows the same
// cursors through the same number of pages as the admin, each page holding
// the admin's page without the tools it may not call (a page left empty
// keeps its cursor), and together the pages are the unpaged list.
func TestExtProcTSPagination(t *testing.T) {
	e := startExtProc(t)
	reader := e.token(t, "reader", "files:read")
	admin := e.token(t, "admin", "files:read files:write")
	for _, sdk := range sdks {
		for _, path := range []string{"/paged-sse", "/paged-json"} {
			t.Run(sdk+path, func(t *testing.T) {
				all, adminPages := listed(t, nodeClient(t, map[string]any{"sdk": sdk, "url": e.base + path, "token": admin, "scenario": "list"}, nil))
				got, readerPages := listed(t, nodeClient(t, map[string]any{"sdk": sdk, "url": e.base + path, "token": reader, "scenario": "list"}, nil))
				if !slices.Equal(all, xpAllTools) || len(adminPages) != len(xpAllTools) {
					t.Fatalf("admin listed %v in pages %+v, want %v one a page", all, adminPages, xpAllTools)
				}
				if !slices.Equal(got, xpReaderTools) {
					t.Fatalf("reader listed %v, want %v", got, xpReaderTools)
				}
				if len(readerPages) != len(adminPages) {
					t.Fatalf("reader pages %+v, admin pages %+v", readerPages, adminPages)
				}
				for i, ap := range adminPages {
					rp := readerPages[i]
					want := slices.DeleteFunc(slices.Clone(ap.Tools), func(n string) bool { return strings.HasPrefix(n, "delete_") })
					if rp.NextCursor != ap.NextCursor || !slices.Equal(rp.Tools, want) {
						t.Errorf("page %d: reader %+v, admin %+v", i, rp, ap)
					}
				}
			})
		}
	}
}

// TestExtProcTSReauthorizationAcrossReplicas: the MCP server behind an
// exchanging route refuses the exchanged token (401). The TypeScript SDK
// client, which declared URL elicitation, gets UrlElicitationRequiredError
// (-32042) for its tool call, not a dead 401; the user completes the
// authorization on replica B; replica A, which serves the client's open
// GET stream, delivers notifications/elicitation/complete on it; the
// client's retry, moved on by that notification alone, succeeds with a
// freshly exchanged token.
func TestExtProcTSReauthorizationAcrossReplicas(t *testing.T) {
	e := startExtProc(t)
	for i, sdk := range sdks {
		t.Run(sdk, func(t *testing.T) {
			tok := e.token(t, "carol-"+sdk, "files:read")
			var elicited, completed string
			out := nodeClient(t, map[string]any{"sdk": sdk, "url": e.base + "/backend", "token": tok, "scenario": "complete", "tool": testpeers.ToolWhoAmI}, func(r nodeResult) {
				switch r.Event {
				case "elicitation":
					if r.Error != "UrlElicitationRequiredError" || fmt.Sprint(r.Code) != "-32042" || len(r.Elicitations) != 1 ||
						r.Elicitations[0].Mode != "url" || !strings.HasPrefix(r.Elicitations[0].URL, xpAuthorizeURL+"?") {
						t.Errorf("elicitation %+v", r)
						return
					}
					elicited = r.Elicitations[0].ElicitationID
					// The client opens its GET stream without waiting for
					// it: complete once A serves it, as a user's
					// authorization takes longer than that.
					waitMetric(t, e.a, `extauthz_response_path_total{action="stream_opened",route="backend"}`, float64(i+1))
					completeOn(t, e.b, elicited, r.Elicitations[0].URL)
				case "completed":
					completed = r.ElicitationID
				}
			})
			last := out[len(out)-1]
			if elicited == "" || completed != elicited || !last.OK {
				t.Fatalf("elicited %q, completion delivered for %q, results %+v", elicited, completed, out)
			}
			o, err := testpeers.ParseObservation(last.Text)
			if err != nil {
				t.Fatal(err)
			}
			refused := e.refused.refusedFingerprints()
			if len(refused) != i+1 {
				t.Fatalf("the server refused %d tokens, want one a session", len(refused))
			}
			e.mu.Lock()
			fresh := e.issued[o.AuthorizationSHA256]
			e.mu.Unlock()
			if !o.Authorization || !fresh || refused[o.AuthorizationSHA256] || o.AuthorizationSHA256 == testpeers.Fingerprint("Bearer "+tok) {
				t.Errorf("the retry carried %q (issued by the STS: %v), the refused tokens were %v", o.AuthorizationSHA256, fresh, refused)
			}
			// The notification came from A's stream, the completion from B.
			if n := metric(t, e.a, `extauthz_response_path_total{action="injected",route="backend"}`); n != float64(i+1) {
				t.Errorf("replica A injected %v completions, want %d", n, i+1)
			}
			if n := metric(t, e.b, `extauthz_response_path_total{action="injected",route="backend"}`); n != 0 {
				t.Errorf("replica B injected %v completions, and serves no stream", n)
			}
		})
	}
}

// TestExtProcGoSDKReauthorizationAcrossReplicas is the same with the
// official MCP Go SDK client, which declares URL elicitation: its tool
// call fails with the -32042 error naming the elicitation, the completion
// made on replica B arrives through its GET stream on A, and the retried
// call runs with a freshly exchanged token.
func TestExtProcGoSDKReauthorizationAcrossReplicas(t *testing.T) {
	e := startExtProc(t)
	ctx := testContext(t)
	completions := make(chan string, 4)
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-go", Version: "v1.0.0"}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "decline"}, nil
		},
		ElicitationCompleteHandler: func(_ context.Context, r *mcp.ElicitationCompleteNotificationRequest) {
			select {
			case completions <- r.Params.ElicitationID:
			default:
			}
		},
	})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: e.base + "/backend", HTTPClient: testpeers.NewHTTPClient(e.token(t, "dave", "files:read"), nil, nil), MaxRetries: -1,
	}, &mcp.ClientSessionOptions{ProtocolVersion: testpeers.MCPVersion20251125})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: testpeers.ToolWhoAmI})
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != mcp.CodeURLElicitationRequired {
		t.Fatalf("the refused call: %v, want the URL elicitation error", err)
	}
	var data struct {
		Elicitations []mcp.ElicitParams `json:"elicitations"`
	}
	if err := json.Unmarshal(rpcErr.Data, &data); err != nil || len(data.Elicitations) != 1 || data.Elicitations[0].Mode != "url" {
		t.Fatalf("elicitations %s: %v", rpcErr.Data, err)
	}
	el := data.Elicitations[0]
	waitMetric(t, e.a, `extauthz_response_path_total{action="stream_opened",route="backend"}`, 1)
	completeOn(t, e.b, el.ElicitationID, el.URL)
	select {
	case id := <-completions:
		if id != el.ElicitationID {
			t.Fatalf("completion for %q, want %q", id, el.ElicitationID)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no notifications/elicitation/complete on the stream")
	}
	o, err := testpeers.WhoAmI(ctx, cs)
	if err != nil {
		t.Fatalf("the retry: %v", err)
	}
	e.mu.Lock()
	fresh := e.issued[o.AuthorizationSHA256]
	e.mu.Unlock()
	if refused := e.refused.refusedFingerprints(); !fresh || refused[o.AuthorizationSHA256] || len(refused) != 1 {
		t.Errorf("the retry carried %q (issued by the STS: %v), the refused tokens were %v", o.AuthorizationSHA256, fresh, refused)
	}
}
