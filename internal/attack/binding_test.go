package attack

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/dpop"
	"github.com/extauthz/extauthz/internal/testing/introspecttest"
	"github.com/extauthz/extauthz/internal/testing/testcert"
	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

// Sender-constrained tokens (docs/credentials.md): the attacker has stolen
// a token bound to its owner's DPoP key or TLS certificate (from a log, a
// proxy, a compromised agent), and sees the owner's requests on the wire.
// Whatever it sends, the token must be worthless without the owner's key
// or certificate, and no tool may run.
func TestStolenBoundTokens(t *testing.T) {
	owner, thief := testtoken.EC(t, ""), testtoken.EC(t, "")
	ownerCert := testcert.New(t, "owner")
	as := introspecttest.New(t, introspecttest.Options{})
	as.Set("opaque-bound", map[string]any{"sub": "carol", "cnf": map[string]any{"jkt": owner.Thumbprint(t)}})
	s := start(t, fmt.Sprintf(`issuers:
  - {name: hs, issuer: %s, algorithms: [HS256], secret_env: ATTACK_SECRET}
  - name: opaque
    issuer: %s
    introspection:
      endpoint: %s
      client_auth: {method: client_secret_post, client_id: %s, client_secret_env: AS_SECRET}
routes:
  - {name: opaque, hosts: [opaque.example.test], issuers: [opaque]}
  - {name: mcp, default: true, issuers: [hs]}
`, issuerHS, as.URL, as.IntrospectURL, introspecttest.ClientID), options{OwnIssuers: true, Vars: map[string]string{"AS_SECRET": introspecttest.ClientSecret}})

	bound := tokenWith(t, jwt.MapClaims{"iss": issuerHS, "sub": "alice", "cnf": map[string]any{"jkt": owner.Thumbprint(t)}})
	certBound := tokenWith(t, jwt.MapClaims{"iss": issuerHS, "sub": "alice", "cnf": map[string]any{"x5t#S256": ownerCert.X5t()}})
	jti := 0
	proof := func(key testtoken.Key, tok, htm, htu string) string {
		jti++
		return key.Proof(t, nil, jwt.MapClaims{"jti": fmt.Sprint("p", jti), "htm": htm, "htu": htu, "iat": time.Now().Unix(), "ath": dpop.AccessTokenHash(tok)})
	}
	const htu = "http://" + host + "/mcp"
	// The owner's request, seen on the wire: it passes, once.
	seen := proof(owner, bound, "POST", htu)
	if v := s.check(t, raw{Headers: map[string]string{"authorization": "DPoP " + bound, "dpop": seen}, Body: toolCall(1, "whoami", "")}); !v.Allowed {
		t.Fatalf("the owner's request: %d %s", v.Status, v.Body)
	}

	steps := []struct {
		name    string
		host    string
		path    string
		headers map[string]string
	}{
		{"the bound token as a bearer token", "", "", map[string]string{"authorization": "Bearer " + bound}},
		{"the bound token, DPoP scheme, no proof", "", "", map[string]string{"authorization": "DPoP " + bound}},
		{"the bound token with a proof of the thief's key", "", "", map[string]string{"authorization": "DPoP " + bound, "dpop": proof(thief, bound, "POST", htu)}},
		{"the bound token with the thief's key named as the owner's", "", "", map[string]string{"authorization": "DPoP " + bound,
			"dpop": thief.Proof(t, map[string]any{"jwk": owner.PublicJWK(t)}, jwt.MapClaims{"jti": "forged", "htm": "POST", "htu": htu, "iat": time.Now().Unix(), "ath": dpop.AccessTokenHash(bound)})}},
		{"the owner's proof replayed", "", "", map[string]string{"authorization": "DPoP " + bound, "dpop": seen}},
		{"the owner's proof replayed with a second, forged one", "", "", map[string]string{"authorization": "DPoP " + bound, "dpop": seen + "," + proof(thief, bound, "POST", htu)}},
		{"the owner's proof of another path", "", "/mcp/admin", map[string]string{"authorization": "DPoP " + bound, "dpop": proof(owner, bound, "POST", htu)}},
		{"a certificate-bound token without the certificate", "", "", map[string]string{"authorization": "Bearer " + certBound}},
		{"a certificate-bound token, the certificate named in a header", "", "", map[string]string{"authorization": "Bearer " + certBound,
			"x-forwarded-client-cert": `Cert="` + testcert.URLEncodedPEM(ownerCert.DER) + `"`}},
		{"an introspected bound token as a bearer token", "opaque.example.test", "", map[string]string{"authorization": "Bearer opaque-bound"}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			v := s.check(t, raw{Host: st.host, Path: st.path, Headers: st.headers, Body: toolCall(1, "whoami", "")})
			if v.Allowed || v.Status != http.StatusUnauthorized {
				t.Fatalf("allowed %v, status %d %s; want 401", v.Allowed, v.Status, v.Body)
			}
			if ch := v.Headers["www-authenticate"]; !strings.Contains(ch, "invalid_") {
				t.Errorf("challenge %q names no error", ch)
			}
		})
	}

	// End to end through the Envoy-like proxy: the thief's requests never
	// run a tool.
	before := s.ran("whoami")
	for _, h := range []http.Header{
		bearer(bound),
		{"Authorization": {"DPoP " + bound}, "Dpop": {seen}},
		bearer(certBound),
	} {
		if code, _, body := s.viaEnvoy(t, "POST", "/mcp", h, toolCall(1, "whoami", "")); code != http.StatusUnauthorized {
			t.Errorf("through the proxy: %d %s, want 401", code, body)
		}
	}
	if n := s.ran("whoami") - before; n != 0 {
		t.Errorf("a stolen bound token ran whoami %d times", n)
	}
	if logs := s.logs.String(); strings.Contains(logs, bound) || strings.Contains(logs, seen) {
		t.Error("the service logged a token or a proof")
	}
}
