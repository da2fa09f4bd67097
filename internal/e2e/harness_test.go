package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/app"
	"github.com/extauthz/extauthz/internal/testing/envoytest"
	"github.com/extauthz/extauthz/internal/testing/testpeers"
	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

const secret = "e2e-test-secret-of-sufficient-length-0123456789"

// The virtual hosts nginx serves; every client dials nginx whatever the
// host, so no name needs to resolve.
const (
	mcpHost    = "mcp.e2e.test"
	agentAHost = "agent-a.e2e.test"
	agentBHost = "agent-b.e2e.test"
)

// serviceConfig routes each virtual host; every authenticated caller may
// continue a conversation's lineage. nginx sends no body to the check, so
// the routes say so, and tasks are not bound (an A2A task is named in the
// body alone).
const serviceConfig = `
issuers:
  - {name: e2e, algorithms: [HS256], secret: ` + secret + `}
lineage:
  trust: {all: true}
sessions: {task_ownership: false}
routes:
  - name: mcp
    hosts: [` + mcpHost + `]
    protocol: mcp
    issuers: [e2e]
    request_body: none
  - name: agents
    hosts: [` + agentAHost + `, ` + agentBHost + `]
    protocol: a2a
    issuers: [e2e]
    request_body: none
`

// nginxBinary finds nginx, or skips the test when it is absent outside CI.
func nginxBinary(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/sbin/nginx", "nginx"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("nginx is not installed, and CI=true requires the end-to-end tests to run (apt-get install nginx)")
	}
	t.Skip("nginx is not installed: install it (apt-get install nginx) to run the end-to-end tests")
	return ""
}

// testContext bounds a test's protocol calls so that a broken hop fails
// the test instead of hanging it.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// env is one end-to-end setup: nginx in front of the MCP server and two A2A
// agents, asking the service's HTTP front end about every request.
type env struct {
	nginxAddr string // 127.0.0.1:port
	port      string

	mu        sync.Mutex
	toolCalls []testpeers.ToolCall
}

// envOptions shape the agents.
type envOptions struct {
	// hopToken is the token agent A sends to agent B; none when empty.
	hopToken string
	// forward builds agent A's headers to agent B; testpeers.KagentForward
	// when nil.
	forward func(inbound http.Header, contextID string) http.Header
}

// start brings up the service, the peers and nginx, all on loopback.
func start(t *testing.T, o envOptions) *env {
	t.Helper()
	bin := nginxBinary(t)
	e := &env{}

	serviceAddr := startService(t, serviceConfig, "nginx").HTTP

	// The upstreams listen before nginx starts; agent A learns nginx's port
	// (its next hop) only once nginx runs.
	mcpSrv := httptest.NewUnstartedServer(testpeers.NewMCPServer(testpeers.MCPOptions{
		OnToolCall: func(c testpeers.ToolCall) {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.toolCalls = append(e.toolCalls, c)
		},
	}))
	agentB := httptest.NewUnstartedServer(testpeers.NewA2AAgent(testpeers.A2AOptions{Name: "agent-b"}))
	agentA := httptest.NewUnstartedServer(nil)
	for _, s := range []*httptest.Server{mcpSrv, agentB, agentA} {
		t.Cleanup(s.Close)
	}

	upstreams := map[string]string{
		mcpHost:    mcpSrv.Listener.Addr().String(),
		agentAHost: agentA.Listener.Addr().String(),
		agentBHost: agentB.Listener.Addr().String(),
	}
	e.port = startNginx(t, bin, func(dir, port string) string { return nginxConfig(dir, port, upstreams, serviceAddr) })
	e.nginxAddr = "127.0.0.1:" + e.port

	agentA.Config.Handler = testpeers.NewA2AAgent(testpeers.A2AOptions{
		Name: "agent-a",
		Next: &testpeers.NextHop{
			URL:        e.url(agentBHost, "/"),
			HTTPClient: e.client(t, o.hopToken, nil, nil),
			Forward:    o.forward,
		},
	})
	for _, s := range []*httptest.Server{mcpSrv, agentB, agentA} {
		s.Start()
	}
	return e
}

// startService runs the real service (app.Serve) with config and its HTTP
// front end on 127.0.0.1 in the named convention, and returns its
// addresses.
func startService(t *testing.T, config, convention string) app.Addrs {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "extauthz.yaml")
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan app.Addrs, 1)
	done := make(chan error, 1)
	go func() {
		done <- app.Serve(ctx, app.ServeOptions{
			ConfigFile: cfg, GRPCAddr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
			HTTPConvention: convention, HTTPTrusted: "127.0.0.1/32", LogLevel: "warn", LogFormat: "text",
			ShutdownTimeout: 5 * time.Second, Started: func(a app.Addrs) { started <- a },
		}, app.Env{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }})
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
		done <- err // for the cleanup, which waits for it too
		t.Fatalf("service: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("service did not start")
	}
	return app.Addrs{}
}

// url is an address on nginx under a virtual host.
func (e *env) url(host, path string) string {
	return "http://" + host + ":" + e.port + path
}

// calls returns the tool calls the MCP server received.
func (e *env) calls() []testpeers.ToolCall {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]testpeers.ToolCall(nil), e.toolCalls...)
}

// client returns an HTTP client that reaches every virtual host through
// nginx, sends token (when not empty) and the extra headers, and records
// the answers in log (when not nil).
func (e *env) client(t *testing.T, token string, extra http.Header, log *responseLog) *http.Client {
	dial := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", e.nginxAddr)
		},
		MaxIdleConnsPerHost: 4,
	}
	t.Cleanup(dial.CloseIdleConnections)
	var base http.RoundTripper = dial
	if log != nil {
		base = &recordingTransport{base: dial, log: log}
	}
	return &http.Client{Transport: &testpeers.BearerTransport{Token: testpeers.StaticToken(token), Header: extra, Base: base}}
}

// startNginx writes the configuration conf builds and runs nginx in the
// foreground until the test ends; it returns nginx's port. The
// configuration must serve /_e2e_ready (see nginxReady). The port is picked
// free and handed to nginx, so another process may take it in between: a
// failed start is retried with another port.
func startNginx(t *testing.T, bin string, conf func(dir, port string) string) string {
	t.Helper()
	dir := t.TempDir()
	for _, sub := range []string{"tmp", "logs"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	const attempts = 3
	var lastErr error
	for range attempts {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "nginx.conf")
		if err := os.WriteFile(path, []byte(conf(dir, port)), 0o644); err != nil {
			t.Fatal(err)
		}
		if lastErr = runNginx(t, bin, dir, path, "127.0.0.1:"+port); lastErr == nil {
			return port
		}
	}
	t.Fatalf("nginx did not start after %d attempts: %v\nconfig:\n%s", attempts, lastErr, readFile(filepath.Join(dir, "nginx.conf")))
	return ""
}

// runNginx starts nginx and waits until it answers its readiness location.
func runNginx(t *testing.T, bin, dir, conf, addr string) error {
	errorLog := func() string { return readFile(filepath.Join(dir, "logs", "error.log")) }
	return runProxy(t, exec.Command(bin, "-p", dir, "-c", conf, "-g", "daemon off;"), "http://"+addr+"/_e2e_ready",
		func(res *http.Response) bool {
			return res.StatusCode == http.StatusNoContent && res.Header.Get("X-E2e-Ready") == dir
		}, errorLog)
}

// runProxy starts a proxy and waits until a GET of readyURL gets an answer
// ready accepts; the proxy is stopped when the test ends, and its log
// (what it printed, then extraLog) is shown if the test failed.
func runProxy(t *testing.T, cmd *exec.Cmd, readyURL string, ready func(*http.Response) bool, extraLog func() string) error {
	name := filepath.Base(cmd.Path)
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		// Only the process we started: it takes its workers down with it.
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	logs := func() string { return out.String() + extraLog() }

	probe := &http.Client{Timeout: time.Second}
	for range 200 { // 25 ms apart: five seconds to come up
		select {
		case err := <-exited:
			return fmt.Errorf("%s exited (%v): %s", name, err, logs())
		default:
		}
		res, err := probe.Get(readyURL)
		if err == nil {
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if ready(res) {
				t.Cleanup(func() {
					stop()
					if t.Failed() {
						t.Logf("%s log:\n%s", name, logs())
					}
				})
				return nil
			}
		}
		time.Sleep(25 * time.Millisecond)
	}
	stop()
	return fmt.Errorf("%s did not answer %s: %s", name, readyURL, logs())
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	_, port, err := net.SplitHostPort(l.Addr().String())
	return port, err
}

// nginxPreamble writes what every test nginx starts with: the main context
// (with the njs module when module is its path) and, opening the http
// block, its files under dir and the service as upstream "extauthz".
func nginxPreamble(p func(format string, args ...any), dir, module, service string) {
	if module != "" {
		p("load_module %s;", module)
	}
	if os.Geteuid() == 0 {
		// Workers would run as nobody, who cannot use the test's directory.
		p("user root;")
	}
	p("worker_processes 1;")
	p("pid %s;", filepath.Join(dir, "nginx.pid"))
	p("error_log %s info;", filepath.Join(dir, "logs", "error.log"))
	p("events { worker_connections 256; }")
	p("http {")
	p("  access_log %s;", filepath.Join(dir, "logs", "access.log"))
	for _, kind := range []string{"client_body", "proxy", "fastcgi", "uwsgi", "scgi"} {
		p("  %s_temp_path %s;", kind, filepath.Join(dir, "tmp", kind))
	}
	p("  upstream extauthz { server %s; }", service)
	if module == "" {
		p("  include %s;", snippet("nginx-http.conf"))
	}
}

// nginxConfig is nginx in front of each upstream by virtual host, asking the
// service (auth_request) about every request except protected resource
// metadata, which the service answers itself.
func nginxConfig(dir, port string, upstreams map[string]string, service string) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	nginxPreamble(p, dir, "", service)
	p("  server {")
	p("    listen 127.0.0.1:%s default_server;", port)
	p("    %s", nginxReady(dir))
	p("    location / { return 404; }")
	p("  }")
	for _, host := range []string{mcpHost, agentAHost, agentBHost} {
		p("  server {")
		p("    listen 127.0.0.1:%s;", port)
		p("    server_name %s;", host)
		// The documented snippets, as they are.
		p("    include %s;", snippet("nginx-server.conf"))
		p("    location / {")
		p("      include %s;", snippet("nginx-location.conf"))
		p("      proxy_pass http://%s;", upstreams[host])
		p("    }")
		p("  }")
	}
	p("}")
	return b.String()
}

// nginxReady is the location runNginx probes: it names the test's
// directory, so that another nginx on the port is not taken for ours.
func nginxReady(dir string) string {
	return fmt.Sprintf("location = /_e2e_ready { add_header X-E2E-Ready %q; return 204; }", dir)
}

// snippet is the absolute path of a documented proxy configuration file
// (docs/forward-auth): the tests run them verbatim.
func snippet(name string) string {
	p, err := filepath.Abs(filepath.Join("..", "..", "docs", "forward-auth", name))
	if err != nil {
		panic(err)
	}
	return p
}

func readFile(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return string(b)
}

// syncBuffer collects nginx's output from its own goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// responseLog records what nginx answered a client, which the SDKs do not
// expose on errors.
type responseLog struct {
	mu    sync.Mutex
	seen  []seenResponse
	total int
}

type seenResponse struct {
	method, path string
	status       int
	challenge    string // WWW-Authenticate
}

type recordingTransport struct {
	base http.RoundTripper
	log  *responseLog
}

func (rt *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := rt.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	rt.log.mu.Lock()
	defer rt.log.mu.Unlock()
	rt.log.total++
	if len(rt.log.seen) < 100 {
		rt.log.seen = append(rt.log.seen, seenResponse{req.Method, req.URL.Path, res.StatusCode, res.Header.Get("WWW-Authenticate")})
	}
	return res, nil
}

func (l *responseLog) responses() []seenResponse {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]seenResponse(nil), l.seen...)
}

// token mints an HS256 token valid for an hour; claims override (nil
// deletes).
func token(t *testing.T, claims jwt.MapClaims) string {
	now := time.Now()
	base := jwt.MapClaims{"sub": "alice", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
	for k, v := range claims {
		if v == nil {
			delete(base, k)
		} else {
			base[k] = v
		}
	}
	return testtoken.HMAC(t, "HS256", secret, base)
}

// header returns the values of name an observation holds.
func header(o testpeers.Observation, name string) []string {
	return o.Headers.Values(name)
}

// wantHeaders checks an observation: each name has exactly the one value
// given, or is absent when the value is "".
func wantHeaders(t *testing.T, who string, o testpeers.Observation, want map[string]string) {
	t.Helper()
	for name, w := range want {
		got := header(o, name)
		switch {
		case w == "" && len(got) > 0:
			t.Errorf("%s saw %s = %q, want it absent", who, name, got)
		case w != "" && (len(got) != 1 || got[0] != w):
			t.Errorf("%s saw %s = %q, want %q", who, name, got, w)
		}
	}
	if o.Authorization {
		t.Errorf("%s received an Authorization header: the token passed through", who)
	}
}

// envoyWithBody is Envoy's ext_authz as envoytest's proxy speaks it, asking
// the service at grpcAddr with the body (up to 1 MiB), in front of the
// upstream at hostPort.
func envoyWithBody(t *testing.T, grpcAddr, hostPort string) *envoytest.Proxy {
	t.Helper()
	return envoytest.NewProxyToURL(t, grpcAddr, &url.URL{Scheme: "http", Host: hostPort}, envoytest.ProxyOptions{
		Build: envoytest.BuildOptions{WithBody: true, MaxRequestBytes: 1 << 20}, Timeout: 5 * time.Second})
}
