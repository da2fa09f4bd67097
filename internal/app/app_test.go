package app

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

func env(vars map[string]string, stdout, stderr io.Writer) Env {
	return Env{Stdout: stdout, Stderr: stderr, Getenv: func(k string) string { return vars[k] }}
}

// runCmd runs the command line in-process and returns exit code and output.
func runCmd(t *testing.T, vars map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(context.Background(), args, env(vars, &out, &errb))
	return code, out.String(), errb.String()
}

// server is a running service for a test.
type server struct {
	grpcAddr, adminAddr string
	opsAddr             string // probes and metrics
	conn                *grpc.ClientConn
	client              authv3.AuthorizationClient
	stop                func() error
	logs                *syncBuffer
}

type syncBuffer struct {
	mu  chan struct{}
	buf bytes.Buffer
}

func newSyncBuffer() *syncBuffer { return &syncBuffer{mu: make(chan struct{}, 1)} }
func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu <- struct{}{}
	defer func() { <-b.mu }()
	return b.buf.Write(p)
}
func (b *syncBuffer) String() string {
	b.mu <- struct{}{}
	defer func() { <-b.mu }()
	return b.buf.String()
}

func startServer(t *testing.T, vars map[string]string, configFile string) *server {
	t.Helper()
	return startServerWith(t, vars, ServeOptions{ConfigFile: configFile})
}

func startServerWith(t *testing.T, vars map[string]string, o ServeOptions) *server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan Addrs, 1)
	done := make(chan error, 1)
	logs := newSyncBuffer()
	o.GRPCAddr, o.AdminAddr, o.OpsAddr, o.LogLevel, o.LogFormat = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0", "debug", "json"
	o.ShutdownTimeout = 5 * time.Second
	o.Started = func(a Addrs) { started <- a }
	go func() { done <- Serve(ctx, o, env(vars, io.Discard, logs)) }()
	var addrs Addrs
	select {
	case addrs = <-started:
	case err := <-done:
		cancel()
		t.Fatalf("serve: %v", err)
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatal("server did not start")
	}
	conn, err := grpc.NewClient(addrs.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	s := &server{grpcAddr: addrs.GRPC, adminAddr: addrs.Admin, opsAddr: addrs.Ops, conn: conn, client: authv3.NewAuthorizationClient(conn), logs: logs}
	var stopped atomic.Bool
	s.stop = func() error {
		if !stopped.CompareAndSwap(false, true) {
			return nil
		}
		cancel()
		conn.Close()
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			return fmt.Errorf("server did not stop")
		}
	}
	t.Cleanup(func() {
		if err := s.stop(); err != nil {
			t.Error(err)
		}
	})
	return s
}

func envoyRequest(headers map[string]string) *authv3.CheckRequest {
	h := map[string]string{":authority": "mcp.example.com", ":method": "POST", ":path": "/mcp", ":scheme": "http", "x-request-id": "r-1"}
	for k, v := range headers {
		h[k] = v
	}
	return &authv3.CheckRequest{Attributes: &authv3.AttributeContext{Request: &authv3.AttributeContext_Request{
		Http: &authv3.AttributeContext_HttpRequest{Id: "7", Method: "POST", Host: "mcp.example.com", Path: "/mcp", Scheme: "http", Protocol: "HTTP/1.1", Headers: h},
	}}}
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestDefaultModeEndToEnd follows the README: mint a token with the token
// command, serve on the built-in default, check over real gRPC.
func TestDefaultModeEndToEnd(t *testing.T) {
	vars := map[string]string{"JWT_SECRET": "readme-secret-readme-secret-readme-secret"}
	code, tok, stderr := runCmd(t, vars, "token", "--sub", "alice", "--session", "sess-42")
	if code != 0 {
		t.Fatalf("token: %d %s", code, stderr)
	}
	tok = strings.TrimSpace(tok)
	s := startServer(t, vars, "")
	ctx := context.Background()

	hc, err := healthpb.NewHealthClient(s.conn).Check(ctx, &healthpb.HealthCheckRequest{Service: authv3.Authorization_ServiceDesc.ServiceName})
	if err != nil || hc.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v %v", hc, err)
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		if code, body := httpGet(t, "http://"+s.opsAddr+p); code != 200 {
			t.Fatalf("%s: %d %s", p, code, body)
		}
	}

	tests := []struct {
		name      string
		headers   map[string]string
		wantHTTP  int
		wantUser  string
		challenge string
	}{
		{name: "valid token", headers: map[string]string{"authorization": "Bearer " + tok}, wantHTTP: 200, wantUser: "alice"},
		{name: "forged x-user-id", headers: map[string]string{"authorization": "Bearer " + tok, "x-user-id": "mallory"}, wantHTTP: 200, wantUser: "alice"},
		{name: "no token", headers: nil, wantHTTP: 401, challenge: `Bearer resource_metadata="http://mcp.example.com/.well-known/oauth-protected-resource"`},
		{name: "token signed with another secret", headers: map[string]string{"authorization": "Bearer " + testtoken.HMAC(t, "HS256", "another-secret-another-secret-another", map[string]any{"sub": "x", "exp": time.Now().Add(time.Hour).Unix()})}, wantHTTP: 401, challenge: `error="invalid_token"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := s.client.Check(ctx, envoyRequest(tt.headers))
			if err != nil {
				t.Fatalf("a decision must never be a gRPC error: %v", err)
			}
			if tt.wantHTTP == 200 {
				if resp.GetStatus().GetCode() != 0 {
					t.Fatalf("denied: %v", resp)
				}
				var user string
				for _, h := range resp.GetOkResponse().GetHeaders() {
					if h.GetHeader().GetKey() == "x-user-id" {
						user = h.GetHeader().GetValue()
					}
				}
				if user != tt.wantUser {
					t.Fatalf("x-user-id = %q, want %q", user, tt.wantUser)
				}
				return
			}
			d := resp.GetDeniedResponse()
			if int(d.GetStatus().GetCode()) != tt.wantHTTP || resp.GetStatus().GetCode() == 0 {
				t.Fatalf("status %v / %v", d.GetStatus(), resp.GetStatus())
			}
			var www string
			for _, h := range d.GetHeaders() {
				if h.GetHeader().GetKey() == "www-authenticate" {
					www = h.GetHeader().GetValue()
				}
			}
			if !strings.Contains(www, tt.challenge) {
				t.Fatalf("www-authenticate %q lacks %q", www, tt.challenge)
			}
		})
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(s.logs.String(), tok) || strings.Contains(s.logs.String(), vars["JWT_SECRET"]) {
		t.Fatal("a token or the secret reached the logs")
	}
	if !strings.Contains(s.logs.String(), `"msg":"denied"`) {
		t.Fatal("denials are not logged")
	}
}

func TestDevSecretWarns(t *testing.T) {
	s := startServer(t, nil, "")
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(s.logs.String(), "INSECURE DEFAULT") {
		t.Fatalf("no loud warning without JWT_SECRET:\n%s", s.logs.String())
	}
}

// TestReadiness: not ready while the only key set cannot load, ready once it does.
func TestReadiness(t *testing.T) {
	var up atomic.Bool
	key := testtoken.RSA(t, "k1")
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		w.Write(testtoken.JWKS(t, key))
	}))
	defer jwks.Close()
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`issuers:
  - {name: idp, issuer: https://idp.example.com, algorithms: [RS256], jwks_url: %s, refresh_interval: 100ms}
routes: [{name: all, default: true, issuers: [idp]}]
`, jwks.URL)), 0o600)
	s := startServer(t, nil, cfg)
	if code, _ := httpGet(t, "http://"+s.opsAddr+"/readyz"); code != 503 {
		t.Fatalf("/readyz = %d before keys loaded", code)
	}
	tok := key.Sign(t, map[string]any{"sub": "a", "iss": "https://idp.example.com", "exp": time.Now().Add(time.Hour).Unix()})
	resp, err := s.client.Check(context.Background(), envoyRequest(map[string]string{"authorization": "Bearer " + tok}))
	if err != nil || resp.GetDeniedResponse().GetStatus().GetCode() != 503 {
		t.Fatalf("check before keys: %v %v", resp, err)
	}
	up.Store(true)
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, _ := httpGet(t, "http://"+s.opsAddr+"/readyz")
		if code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("never became ready")
		}
		time.Sleep(50 * time.Millisecond)
	}
	resp, err = s.client.Check(context.Background(), envoyRequest(map[string]string{"authorization": "Bearer " + tok}))
	if err != nil || resp.GetStatus().GetCode() != 0 {
		t.Fatalf("check after keys: %v %v", resp, err)
	}
}

func TestValidateCommand(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(good, []byte("issuers: [{name: a, secret_env: S}]\nroutes: [{name: r, default: true, issuers: [a]}]\n"), 0o600)
	os.WriteFile(bad, []byte("issuers: [{name: a, secret_env: S}]\nroutes:\n  - name: r\n    isuers: [a]\n    issuers: [b]\n"), 0o600)
	tests := []struct {
		name     string
		vars     map[string]string
		file     string
		wantCode int
		want     []string
	}{
		{"good file", map[string]string{"S": strings.Repeat("x", 32)}, good, 0, []string{"ok (1 issuer, 1 route)"}},
		{"secret env unset", nil, good, 1, []string{"line 1: issuers[0] (a).secret_env: environment variable S is not set"}},
		{"every problem at once", map[string]string{"S": strings.Repeat("x", 32)}, bad, 1, []string{"line 4", "isuers"}},
		{"missing file", nil, filepath.Join(dir, "nope.yaml"), 1, []string{"no such file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runCmd(t, tt.vars, "validate", "--config", tt.file)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d: %s%s", code, tt.wantCode, out, errOut)
			}
			for _, w := range tt.want {
				if !strings.Contains(out+errOut, w) {
					t.Errorf("output lacks %q: %s%s", w, out, errOut)
				}
			}
		})
	}
	if code, _, _ := runCmd(t, nil, "validate"); code != 2 {
		t.Fatalf("validate without --config: exit %d, want 2", code)
	}
	if code, _, _ := runCmd(t, nil, "frobnicate"); code != 2 {
		t.Fatalf("unknown command: exit %d, want 2", code)
	}
}

func TestTokenCommand(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
	}{
		{"minimal", []string{"token", "--sub", "alice"}, 0},
		{"everything", []string{"token", "--sub", "alice", "--session", "s", "--aud", "a", "--aud", "b", "--scope", "x y", "--ttl", "5m", "--claim", "email=a@example.com"}, 0},
		{"no sub", []string{"token"}, 2},
		{"bad claim", []string{"token", "--sub", "a", "--claim", "novalue"}, 2},
		{"bad ttl", []string{"token", "--sub", "a", "--ttl", "-1s"}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runCmd(t, nil, tt.args...)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d: %s", code, tt.wantCode, errOut)
			}
			if code == 0 && strings.Count(strings.TrimSpace(out), ".") != 2 {
				t.Fatalf("not a JWT: %q", out)
			}
		})
	}
}

// TestBinaryDrainsOnSIGTERM builds the real binary, serves, and checks that
// SIGTERM ends it with exit status 0.
func TestBinaryDrainsOnSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "extauthz")
	build := exec.Command("go", "build", "-o", bin, "../../cmd/extauthz")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	if out, err := exec.Command(bin, "--version").Output(); err != nil || strings.TrimSpace(string(out)) == "" {
		t.Fatalf("--version: %q %v", out, err)
	}
	cmd := exec.Command(bin, "serve", "--grpc-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--ops-addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "JWT_SECRET=sigterm-test-secret-sigterm-test-secret")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	var grpcAddr string
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) == nil && line["msg"] == "serving" {
			grpcAddr, _ = line["grpc_addr"].(string)
			break
		}
	}
	if grpcAddr == "" {
		cmd.Process.Kill()
		t.Fatal("no serving line")
	}
	go io.Copy(io.Discard, stderr)
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := authv3.NewAuthorizationClient(conn).Check(context.Background(), envoyRequest(nil)); err != nil {
		t.Fatalf("check: %v", err)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("did not exit after SIGTERM")
	}
}
