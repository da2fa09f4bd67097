package compose

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/extauthz/extauthz/internal/app"
	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

// TestPrivatePortsOnLoopback: Keycloak's port (it serves the admin console)
// and extauthz's admin port are published on 127.0.0.1 only; Envoy is the
// one way in from elsewhere.
func TestPrivatePortsOnLoopback(t *testing.T) {
	c := loadCompose(t)
	for name, s := range c.Services {
		for _, p := range s.Ports {
			parts := strings.Split(p, ":")
			loopback := len(parts) == 3 && parts[0] == "127.0.0.1"
			if name != "envoy" && !loopback {
				t.Errorf("%s publishes %q on every interface: bind it to 127.0.0.1", name, p)
			}
		}
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(readme, []byte("bound to\n127.0.0.1")) && !bytes.Contains(readme, []byte("bound to 127.0.0.1")) {
		t.Error("README.md does not say why the ports are bound to 127.0.0.1")
	}
}

// TestREADMEWrongAudience replays the README's wrong-audience step: a token
// of another client, signed by the realm's key, sent as the README's mcp
// helper sends it, through the compose configuration. The body extauthz
// answers must be the one the README shows.
func TestREADMEWrongAudience(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^mcp "\$OTHER" tools/list '\{\}'; echo\n# (.*)$`).FindSubmatch(readme)
	if m == nil {
		t.Fatal("the README's wrong-audience step is not found")
	}
	var documented any
	if err := json.Unmarshal(m[1], &documented); err != nil {
		t.Fatalf("the README's wrong-audience output is not JSON: %v", err)
	}

	// The compose configuration with the realm's key set in a file.
	dir := t.TempDir()
	key := testtoken.RSA(t, "realm")
	jwks := filepath.Join(dir, "jwks.json")
	os.WriteFile(jwks, testtoken.JWKS(t, key), 0o600)
	b, err := os.ReadFile("extauthz.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.Replace(b, []byte("jwks_url: http://keycloak:8080/realms/demo/protocol/openid-connect/certs"), []byte("jwks_file: "+jwks), 1)
	cfgPath := filepath.Join(dir, "extauthz.yaml")
	os.WriteFile(cfgPath, b, 0o600)

	tok := key.Sign(t, map[string]any{"iss": "http://localhost:8180/realms/demo", "sub": "bob", "aud": "other-app", "azp": "other-app", "exp": time.Now().Add(time.Hour).Unix()})
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`
	req := fmt.Sprintf(`{"attributes":{"contextExtensions":{"route":"mcp"},"request":{"http":{"method":"POST","host":"localhost:8080","path":"/mcp","headers":{":authority":"localhost:8080",":path":"/mcp",":method":"POST","content-type":"application/json","accept":"application/json, text/event-stream","mcp-protocol-version":"2025-06-18","authorization":"Bearer %s"},"rawBody":"%s"}}}}`,
		tok, base64.StdEncoding.EncodeToString([]byte(body)))
	reqPath := filepath.Join(dir, "req.json")
	os.WriteFile(reqPath, []byte(req), 0o600)

	var out, errOut bytes.Buffer
	code := app.Main(context.Background(), []string{"check", "--json", "--config", cfgPath, reqPath}, app.Env{Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" }})
	if code != 1 {
		t.Fatalf("exit %d, want 1 (denied):\n%s%s", code, out.String(), errOut.String())
	}
	var e struct {
		HTTPStatus    int `json:"httpStatus"`
		CheckResponse struct {
			DeniedResponse struct {
				Body string `json:"body"`
			} `json:"deniedResponse"`
		} `json:"checkResponse"`
	}
	if err := json.Unmarshal(out.Bytes(), &e); err != nil {
		t.Fatalf("%v:\n%s", err, out.String())
	}
	var got any
	if err := json.Unmarshal([]byte(e.CheckResponse.DeniedResponse.Body), &got); err != nil {
		t.Fatalf("denial body %q: %v", e.CheckResponse.DeniedResponse.Body, err)
	}
	if e.HTTPStatus != 401 || fmt.Sprint(got) != fmt.Sprint(documented) {
		t.Errorf("extauthz answers %d %s\nthe README shows %s", e.HTTPStatus, e.CheckResponse.DeniedResponse.Body, m[1])
	}
}
