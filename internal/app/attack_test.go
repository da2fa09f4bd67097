package app

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

// TestAttackMatrix sends each classic JWT attack to the real server over
// gRPC. Every one must be a clear denial, never a gRPC error, never an allow.
func TestAttackMatrix(t *testing.T) {
	key := testtoken.RSA(t, "good")
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(testtoken.JWKS(t, key)) }))
	defer jwks.Close()
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`issuers:
  - {name: idp, issuer: https://idp.example.com, algorithms: [RS256], jwks_url: %s, unknown_kid_interval: 1h}
routes:
  - {name: mcp, default: true, issuers: [idp], audiences: [https://mcp.example.com]}
`, jwks.URL)), 0o600)
	s := startServer(t, nil, cfg)
	for deadline := time.Now().Add(10 * time.Second); ; {
		if code, _ := httpGet(t, "http://"+s.opsAddr+"/readyz"); code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("keys never loaded")
		}
		time.Sleep(20 * time.Millisecond)
	}

	now := time.Now()
	claims := func(edit func(jwt.MapClaims)) jwt.MapClaims {
		c := jwt.MapClaims{"sub": "alice", "iss": "https://idp.example.com", "aud": "https://mcp.example.com", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
		if edit != nil {
			edit(c)
		}
		return c
	}
	good := key.Sign(t, claims(nil))
	pubDER, _ := x509.MarshalPKIXPublicKey(key.Private.Public())
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	b64 := base64.RawURLEncoding.EncodeToString
	parts := strings.Split(good, ".")

	tests := []struct {
		name    string
		header  map[string]string
		token   string
		status  int
		errCode string // expected WWW-Authenticate error param ("" = none)
	}{
		{name: "valid token (control)", token: good, status: 200},
		{name: "alg none", token: b64([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + parts[1] + ".", status: 401, errCode: "invalid_token"},
		{name: "HS256 signed with the RSA public key", token: testtoken.HMAC(t, "HS256", string(pubPEM), claims(nil)), status: 401, errCode: "invalid_token"},
		{name: "unknown kid", token: testtoken.RSA(t, "stranger").Sign(t, claims(nil)), status: 401, errCode: "invalid_token"},
		{name: "expired", token: key.Sign(t, claims(func(c jwt.MapClaims) { c["exp"] = now.Add(-time.Hour).Unix() })), status: 401, errCode: "invalid_token"},
		{name: "nbf in the future", token: key.Sign(t, claims(func(c jwt.MapClaims) { c["nbf"] = now.Add(time.Hour).Unix() })), status: 401, errCode: "invalid_token"},
		{name: "wrong iss", token: key.Sign(t, claims(func(c jwt.MapClaims) { c["iss"] = "https://evil.example.com" })), status: 401, errCode: "invalid_token"},
		{name: "wrong aud", token: key.Sign(t, claims(func(c jwt.MapClaims) { c["aud"] = "https://other.example.com" })), status: 401, errCode: "invalid_token"},
		{name: "bad signature", token: parts[0] + "." + parts[1] + "." + b64([]byte("not the signature")), status: 401, errCode: "invalid_token"},
		{name: "payload swapped under a valid signature", token: parts[0] + "." + b64([]byte(`{"sub":"root","iss":"https://idp.example.com","aud":"https://mcp.example.com","exp":9999999999}`)) + "." + parts[2], status: 401, errCode: "invalid_token"},
		{name: "truncated token", token: good[:len(good)/2], status: 401, errCode: "invalid_token"},
		{name: "100 KB token", token: strings.Repeat("A", 100<<10), status: 401, errCode: "invalid_token"},
		{name: "non-JSON payload", token: parts[0] + "." + b64([]byte("hello world")) + "." + parts[2], status: 401, errCode: "invalid_token"},
		{name: "CR LF in sub", token: key.Sign(t, claims(func(c jwt.MapClaims) { c["sub"] = "alice\r\nx-user-id: root" })), status: 401, errCode: "invalid_token"},
		{name: "forged x-user-id without a token", header: map[string]string{"x-user-id": "root"}, status: 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := map[string]string{}
			for k, v := range tt.header {
				h[k] = v
			}
			if tt.token != "" {
				h["authorization"] = "Bearer " + tt.token
			}
			resp, err := s.client.Check(context.Background(), envoyRequest(h))
			if err != nil {
				t.Fatalf("a gRPC error would let failure_mode_allow through: %v", err)
			}
			if tt.status == 200 {
				if resp.GetStatus().GetCode() != 0 {
					t.Fatalf("control denied: %s", resp.GetDeniedResponse().GetBody())
				}
				return
			}
			d := resp.GetDeniedResponse()
			if resp.GetStatus().GetCode() == 0 || int(d.GetStatus().GetCode()) != tt.status {
				t.Fatalf("got status %v / HTTP %d, want a %d denial", resp.GetStatus(), d.GetStatus().GetCode(), tt.status)
			}
			var www string
			for _, hv := range d.GetHeaders() {
				if hv.GetHeader().GetKey() == "www-authenticate" {
					www = hv.GetHeader().GetValue()
				}
			}
			if tt.errCode != "" && !strings.Contains(www, `error="`+tt.errCode+`"`) {
				t.Fatalf("challenge %q lacks error=%q", www, tt.errCode)
			}
			if tt.errCode == "" && strings.Contains(www, "error=") {
				t.Fatalf("challenge for a missing token must not carry an error: %q", www)
			}
			if !strings.Contains(d.GetBody(), `"status":401`) {
				t.Fatalf("body %q does not say why", d.GetBody())
			}
		})
	}
	if strings.Contains(s.logs.String(), good) {
		t.Fatal("a token reached the logs")
	}
}
