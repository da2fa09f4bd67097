package e2e

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/extauthz/extauthz/internal/peer"
	"github.com/extauthz/extauthz/internal/testing/testcert"
)

// TestClientCertHeader: behind each documented front end serving mutual
// TLS, the check carries the client's certificate in the one header the
// service reads for certificate-bound tokens (X-Forwarded-Client-Cert), as
// the proxy saw it, and never a copy the client sent: a client with a
// stolen bound token and the victim's certificate hash (which the token
// itself holds) cannot name the victim's certificate.
//
// The check goes to a recorder on 127.0.0.1 that allows everything and
// keeps the header; the service reads it from a trusted proxy with
// peer.ThumbprintXFCC (internal/httpauthz), as the recorder does.
func TestClientCertHeader(t *testing.T) {
	for _, fe := range frontEnds {
		t.Run(fe.name, func(t *testing.T) {
			rec := &checkRecorder{}
			checks := httptest.NewServer(rec)
			t.Cleanup(checks.Close)
			upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "upstream") }))
			t.Cleanup(upstream.Close)
			server := testcert.New(t, "proxy")
			port := startTLSFrontEnd(t, fe, server, checks.Listener.Addr().String(), upstream.Listener.Addr().String())

			alice, victim := testcert.New(t, "alice"), testcert.New(t, "victim")
			forgeries := []string{"Hash=" + victim.HexSHA256(), `Cert="` + testcert.URLEncodedPEM(victim.DER) + `"`}
			victimPEM := testcert.URLEncodedPEM(victim.DER)[60:120] // past the BEGIN line every certificate shares
			for _, tc := range []struct {
				name   string
				cert   *testcert.Cert
				forged bool
				want   string
			}{
				{"the client's certificate", &alice, false, alice.X5t()},
				{"the client's certificate, forged headers naming another", &alice, true, alice.X5t()},
				{"no certificate", nil, false, ""},
				{"no certificate, forged headers naming one", nil, true, ""},
			} {
				t.Run(tc.name, func(t *testing.T) {
					cfg := &tls.Config{RootCAs: server.Pool(), ServerName: "localhost"}
					if tc.cert != nil {
						cfg.Certificates = []tls.Certificate{tc.cert.TLS}
					}
					tr := &http.Transport{TLSClientConfig: cfg}
					defer tr.CloseIdleConnections()
					req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "https://127.0.0.1:"+port+"/mcp", strings.NewReader(initializeBody))
					if err != nil {
						t.Fatal(err)
					}
					req.Host = "localhost:" + port // the name the server certificate and Caddy's site have
					req.Header.Set("Content-Type", "application/json")
					if tc.forged {
						req.Header["X-Forwarded-Client-Cert"] = forgeries
					}
					before := rec.count()
					res, err := (&http.Client{Transport: tr}).Do(req)
					if err != nil {
						t.Fatal(err)
					}
					body, _ := io.ReadAll(res.Body)
					res.Body.Close()
					if res.StatusCode != http.StatusOK || string(body) != "upstream" {
						t.Fatalf("%d %s, want the upstream's answer", res.StatusCode, body)
					}
					if rec.count() != before+1 {
						t.Fatalf("%d checks for one request", rec.count()-before)
					}
					lines := rec.last()
					joined := strings.Join(lines, ",")
					if got := peer.ThumbprintXFCC(joined); got != tc.want {
						t.Errorf("the check's X-Forwarded-Client-Cert %q names %q, want %q", lines, got, tc.want)
					}
					if strings.Contains(joined, victim.HexSHA256()) || strings.Contains(joined, victimPEM) {
						t.Errorf("a client's copy reached the check: %q", lines)
					}
				})
			}
		})
	}
}

// checkRecorder answers every check with an allow and keeps each check's
// X-Forwarded-Client-Cert lines.
type checkRecorder struct {
	mu   sync.Mutex
	seen [][]string
}

func (c *checkRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	c.mu.Lock()
	c.seen = append(c.seen, r.Header.Values("X-Forwarded-Client-Cert"))
	c.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

func (c *checkRecorder) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen)
}

func (c *checkRecorder) last() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seen[len(c.seen)-1]
}

// startTLSFrontEnd runs fe's documented files in a server block serving
// TLS with server's certificate and asking clients for theirs (any,
// verified by the proof of possession only: RFC 8705's self-signed
// certificates), checking with service, and returns its TLS port on
// 127.0.0.1.
func startTLSFrontEnd(t *testing.T, fe frontEnd, server testcert.Cert, service, upstream string) string {
	t.Helper()
	certFile, keyFile := server.Files(t, t.TempDir(), "proxy")
	var tlsPort string
	switch fe.name {
	case "caddy":
		tlsPort = startTLSCaddy(t, certFile, keyFile, service, upstream)
	default:
		bin := nginxBinary(t)
		var module string
		if fe.body {
			module = njsModule(t)
		}
		startNginx(t, bin, func(dir, port string) string {
			var err error
			if tlsPort, err = freePort(); err != nil {
				t.Fatal(err)
			}
			return tlsNginxConfig(dir, port, tlsPort, service, upstream, module, certFile, keyFile)
		})
	}
	return tlsPort
}

// tlsNginxConfig is feNginxConfig's set-up on a TLS server block (the
// plain one on port only answers the readiness probe).
func tlsNginxConfig(dir, port, tlsPort, service, upstream, module, certFile, keyFile string) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	nginxPreamble(p, dir, module, service)
	if module != "" {
		p("  js_import extauthz from %s;", snippet("extauthz.js"))
	}
	p("  server {")
	p("    listen 127.0.0.1:%s default_server;", port)
	p("    %s", nginxReady(dir))
	p("  }")
	p("  server {")
	p("    listen 127.0.0.1:%s ssl;", tlsPort)
	p("    ssl_certificate %s;", certFile)
	p("    ssl_certificate_key %s;", keyFile)
	p("    ssl_verify_client optional_no_ca;")
	if module == "" {
		p("    include %s;", snippet("nginx-server.conf"))
		p("    location / {")
		p("      include %s;", snippet("nginx-location.conf"))
		p("      proxy_pass http://%s;", upstream)
		p("    }")
	} else {
		p("    include %s;", snippet("nginx-njs-server.conf"))
		p("    location / { js_content extauthz.authorize; }")
		p("    location @extauthz_upstream {")
		p("      include %s;", snippet("nginx-njs-upstream.conf"))
		p("      proxy_pass http://%s;", upstream)
		p("    }")
	}
	p("  }")
	p("}")
	return b.String()
}

// startTLSCaddy runs the documented Caddyfile on a TLS listener that asks
// for client certificates, and returns that listener's port. The Caddyfile
// has no place for a site's TLS settings, so it is adapted to JSON as it
// is and the TLS connection policy, the certificate and a plain readiness
// server are added to that.
func startTLSCaddy(t *testing.T, certFile, keyFile, service, upstream string) string {
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
		tlsPort, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		env := []string{
			"HOME=" + dir, "XDG_CONFIG_HOME=" + dir, "XDG_DATA_HOME=" + dir, "PATH=" + os.Getenv("PATH"),
			"SITE_ADDRESS=https://localhost:" + tlsPort, "EXTAUTHZ_ADDR=" + service, "UPSTREAM_ADDR=" + upstream,
		}
		adapt := exec.Command(bin, "adapt", "--adapter", "caddyfile", "--config", conf)
		adapt.Env = env
		out, err := adapt.Output()
		if err != nil {
			t.Fatalf("caddy adapt: %v", err)
		}
		var cfg map[string]any
		if err := json.Unmarshal(out, &cfg); err != nil {
			t.Fatal(err)
		}
		apps := cfg["apps"].(map[string]any)
		servers := apps["http"].(map[string]any)["servers"].(map[string]any)
		if len(servers) != 1 {
			t.Fatalf("the Caddyfile adapts to %d servers, want 1", len(servers))
		}
		for _, s := range servers {
			srv := s.(map[string]any)
			srv["tls_connection_policies"] = []any{map[string]any{"client_authentication": map[string]any{"mode": "request"}}}
		}
		servers["e2e_ready"] = map[string]any{
			"listen":          []any{"127.0.0.1:" + port},
			"routes":          []any{map[string]any{"handle": []any{map[string]any{"handler": "static_response", "status_code": 204}}}},
			"automatic_https": map[string]any{"disable": true},
		}
		apps["tls"] = map[string]any{"certificates": map[string]any{"load_files": []any{map[string]any{"certificate": certFile, "key": keyFile}}}}
		b, err := json.Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		jsonConf := filepath.Join(dir, "caddy.json")
		if err := os.WriteFile(jsonConf, b, 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "run", "--config", jsonConf)
		cmd.Env = env
		lastErr = runProxy(t, cmd, "http://127.0.0.1:"+port+"/_e2e_ready",
			func(res *http.Response) bool { return res.Header.Get("Server") == "Caddy" },
			func() string { return "" })
		if lastErr == nil {
			return tlsPort
		}
	}
	t.Fatalf("caddy did not start: %v", lastErr)
	return ""
}
