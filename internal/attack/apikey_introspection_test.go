package attack

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/extauthz/extauthz/internal/apikey"
	"github.com/extauthz/extauthz/internal/testing/introspecttest"
)

// TestMistypedKeysNeverIntrospected: on a route that takes both human-chosen
// API keys ("<id>.<secret>") and opaque tokens, a key's secret must not
// reach the authorization server. The holder of a low-privilege token, or
// a user who mistypes, sends a known id with the wrong secret, an id with
// an empty secret, or anything at all in the API-key header; none of it
// may be introspected, since the secret (a password) would go to another
// party and into its logs.
func TestMistypedKeysNeverIntrospected(t *testing.T) {
	as := introspecttest.New(t, introspecttest.Options{})
	as.Set("opaque-alice", map[string]any{"sub": "alice"})
	const secret = "correct-horse-battery-staple"
	hash, err := apikey.Argon2idHash(secret)
	if err != nil {
		t.Fatal(err)
	}
	keys := filepath.Join(t.TempDir(), "keys.yaml")
	doc := fmt.Sprintf("keys:\n  - id: human\n    hash: %q\n    subject: bob\n", hash)
	if err := os.WriteFile(keys, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	yaml := fmt.Sprintf(`issuers:
  - name: keys
    api_keys: {file: %s, header: x-api-key}
  - name: opaque
    issuer: %s
    introspection:
      endpoint: %s
      client_auth: {method: client_secret_post, client_id: %s, client_secret_env: AS_SECRET}
routes:
  - {name: mixed, default: true, issuers: [keys, opaque]}
`, keys, as.URL, as.IntrospectURL, introspecttest.ClientID)
	s := start(t, yaml, options{OwnIssuers: true, Vars: map[string]string{"AS_SECRET": introspecttest.ClientSecret}})

	bearer := func(tok string) map[string]string { return map[string]string{"authorization": "Bearer " + tok} }
	steps := []struct {
		name    string
		headers map[string]string
		allowed bool
		user    string
	}{
		{"the key", bearer("human." + secret), true, "keys:bob"},
		{"the key in its header", map[string]string{"x-api-key": "human." + secret}, true, "keys:bob"},
		{"its id, a wrong secret", bearer("human.correct-horse-battery-stapl"), false, ""},
		{"its id, a wrong secret, again", bearer("human.correct-horse-battery-stapl"), false, ""},
		{"its id, an empty secret", bearer("human."), false, ""},
		{"its id, the secret with a dot added", bearer("human." + secret + "."), false, ""},
		{"a mistyped id in the key header", map[string]string{"x-api-key": "humna." + secret}, false, ""},
		{"a wrong secret in the key header", map[string]string{"x-api-key": "human.hunter2"}, false, ""},
		{"an opaque token in the key header", map[string]string{"x-api-key": "opaque-alice"}, false, ""},
		{"an opaque token in the key header, as a bearer", map[string]string{"x-api-key": "Bearer opaque-alice"}, false, ""},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			v := s.check(t, raw{Headers: st.headers, Body: toolCall(1, "whoami", "")})
			if v.Allowed != st.allowed || (st.allowed && v.Upstream["x-user-id"] != st.user) {
				t.Fatalf("allowed %v (status %d, %s) x-user-id %q; want allowed %v as %q", v.Allowed, v.Status, v.Body, v.Upstream["x-user-id"], st.allowed, st.user)
			}
			if !st.allowed && v.Status != http.StatusUnauthorized {
				t.Errorf("status %d, want 401", v.Status)
			}
			if strings.Contains(v.Body, secret) || strings.Contains(v.Body, "hunter2") {
				t.Errorf("the denial shows a secret: %s", v.Body)
			}
		})
	}
	if n := as.Total(); n != 0 {
		t.Errorf("the authorization server was asked %d times; no step belonged there", n)
	}
	// The controls: the opaque token where tokens are read is introspected
	// and allowed, and so is its verdict, not the refusal of the same
	// token in the key header.
	if v := s.check(t, raw{Headers: bearer("opaque-alice"), Body: toolCall(1, "whoami", "")}); !v.Allowed || as.Total() != 1 {
		t.Errorf("the opaque token in Authorization: allowed %v (status %d, %s), calls %d; want allowed after 1", v.Allowed, v.Status, v.Body, as.Total())
	}
	if v := s.check(t, raw{Headers: map[string]string{"x-api-key": "opaque-alice"}, Body: toolCall(1, "whoami", "")}); as.Total() != 1 {
		t.Errorf("the opaque token in the key header after it was verified: allowed %v, calls %d; want no new call", v.Allowed, as.Total())
	}
	if logs := s.logs.String(); strings.Contains(logs, secret) || strings.Contains(logs, "hunter2") || strings.Contains(logs, "opaque-alice") {
		t.Error("the service logged a credential")
	}
}
