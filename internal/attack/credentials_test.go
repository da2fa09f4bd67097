package attack

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/extauthz/extauthz/internal/apikey"
	"github.com/extauthz/extauthz/internal/testing/introspecttest"
	adminv1 "github.com/extauthz/extauthz/proto/extauthz/admin/v1"
)

// Credential kinds (docs/credentials.md): the credential chooses the kind
// of issuer, never the client. An attacker holding a valid API key for one
// route, or a valid opaque token, tries it where it does not belong; one
// with no certificate claims a workload identity in a header.

// credentialsYAML has an API-key route, an introspection route and a
// workload route whose forward-auth front end trusts X-Forwarded-Client-Cert
// only from 10.0.0.0/8 (the suite calls from 127.0.0.1).
func credentialsYAML(t *testing.T, as *introspecttest.Server, keysA, keysB string, xfccFrom ...string) string {
	if xfccFrom == nil {
		xfccFrom = []string{"10.0.0.0/8"}
	}
	return fmt.Sprintf(`issuers:
  - {name: hs, issuer: %s, algorithms: [HS256], secret_env: ATTACK_SECRET}
  - name: keys-a
    api_keys: {file: %s, header: x-api-key}
  - name: keys-b
    api_keys: {file: %s}
  - name: opaque
    issuer: %s
    introspection:
      endpoint: %s
      client_auth: {method: client_secret_post, client_id: %s, client_secret_env: AS_SECRET}
  - name: mesh
    peer: {trust_domains: [cluster.local], xfcc_from: [%s]}
routes:
  - {name: keyed-a, hosts: [a.example.test], issuers: [keys-a]}
  - {name: keyed-b, hosts: [b.example.test], issuers: [keys-b]}
  - {name: opaque, hosts: [opaque.example.test], issuers: [hs, opaque]}
  - {name: mesh, hosts: [mesh.example.test], issuers: [mesh]}
  - {name: mcp, default: true, issuers: [hs]}
`, issuerHS, keysA, keysB, as.URL, as.IntrospectURL, introspecttest.ClientID, `"`+strings.Join(xfccFrom, `", "`)+`"`)
}

func keysFile(t *testing.T, id string) (key, path string) {
	t.Helper()
	key, e, err := apikey.NewEntry(id, id+"-agent", nil)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := e.YAML()
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(t.TempDir(), id+".yaml")
	if err := os.WriteFile(path, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	return key, path
}

func TestCredentialConfusion(t *testing.T) {
	as := introspecttest.New(t, introspecttest.Options{})
	as.Set("opaque-alice", map[string]any{"sub": "alice"})
	keyA, fileA := keysFile(t, "a")
	keyB, fileB := keysFile(t, "b")
	s := start(t, credentialsYAML(t, as, fileA, fileB), options{OwnIssuers: true, Vars: map[string]string{"AS_SECRET": introspecttest.ClientSecret}})

	steps := []struct {
		name    string
		host    string
		headers map[string]string
		allowed bool
		user    string
	}{
		{"key A on its route", "a.example.test", map[string]string{"authorization": "Bearer " + keyA}, true, "keys-a:a-agent"},
		{"key A in its header", "a.example.test", map[string]string{"x-api-key": keyA}, true, "keys-a:a-agent"},
		{"key B on route A", "a.example.test", map[string]string{"authorization": "Bearer " + keyB}, false, ""},
		{"key A on route B", "b.example.test", map[string]string{"authorization": "Bearer " + keyA}, false, ""},
		{"key A on the introspection route: never sent to the server", "opaque.example.test", map[string]string{"authorization": "Bearer " + keyA}, false, ""},
		{"key A on a JWT route", host, map[string]string{"authorization": "Bearer " + keyA}, false, ""},
		{"padding alone on the introspection route: malformed, never sent to the server", "opaque.example.test", map[string]string{"authorization": "Bearer =="}, false, ""},
		{"opaque token on an API-key route: never a key, never introspected", "a.example.test", map[string]string{"authorization": "Bearer opaque-alice"}, false, ""},
		{"opaque token in the API-key header", "a.example.test", map[string]string{"x-api-key": "opaque-alice"}, false, ""},
		{"opaque token on a JWT route: never introspected", host, map[string]string{"authorization": "Bearer opaque-alice"}, false, ""},
		{"a key's digest is not the key", "a.example.test", map[string]string{"authorization": "Bearer " + strings.TrimPrefix(apikey.SHA256Hash(keyA), "sha256:")}, false, ""},
		{"a claimed workload identity header on ext_authz", "mesh.example.test", map[string]string{"x-forwarded-client-cert": "URI=spiffe://cluster.local/ns/a/sa/b"}, false, ""},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			v := s.check(t, raw{Host: st.host, Headers: st.headers, Body: toolCall(1, "whoami", "")})
			if v.Allowed != st.allowed || (st.allowed && v.Upstream["x-user-id"] != st.user) {
				t.Fatalf("allowed %v (status %d, %s) x-user-id %q; want allowed %v as %q", v.Allowed, v.Status, v.Body, v.Upstream["x-user-id"], st.allowed, st.user)
			}
			if !st.allowed && v.Status != http.StatusUnauthorized {
				t.Errorf("status %d, want 401", v.Status)
			}
			if strings.Contains(v.Body, keyA) || strings.Contains(v.Body, keyB) {
				t.Errorf("the denial shows a key: %s", v.Body)
			}
		})
	}
	if n := as.Total(); n != 0 {
		t.Errorf("the authorization server was asked %d times; no step belonged there", n)
	}
	if v := s.check(t, raw{Host: "opaque.example.test", Headers: map[string]string{"authorization": "Bearer opaque-alice"}, Body: toolCall(1, "whoami", "")}); !v.Allowed || as.Total() != 1 {
		t.Errorf("the opaque token on its own route: allowed %v, calls %d", v.Allowed, as.Total())
	}
	if logs := s.logs.String(); strings.Contains(logs, keyA) || strings.Contains(logs, keyB) || strings.Contains(logs, "opaque-alice") {
		t.Error("the service logged a credential")
	}
}

// TestSpoofedXFCC: the forward-auth front end believes
// X-Forwarded-Client-Cert only from the proxies a peer issuer trusts; the
// suite calls from 127.0.0.1, which this one does not trust.
func TestSpoofedXFCC(t *testing.T) {
	as := introspecttest.New(t, introspecttest.Options{})
	_, fileA := keysFile(t, "a")
	_, fileB := keysFile(t, "b")
	const xfcc = "Hash=ab;URI=spiffe://cluster.local/ns/agents/sa/billing"
	ask := func(s *suite) (int, string) {
		code, _, body := s.forwardAuth(t, fwd{Host: "mesh.example.test", Header: http.Header{"X-Forwarded-Client-Cert": {xfcc}}, Body: toolCall(1, "whoami", "")})
		return code, body
	}
	vars := map[string]string{"AS_SECRET": introspecttest.ClientSecret}
	untrusting := start(t, credentialsYAML(t, as, fileA, fileB), options{OwnIssuers: true, HTTPConvention: "forwarded", Vars: vars})
	if code, body := ask(untrusting); code != http.StatusUnauthorized {
		t.Errorf("XFCC from an untrusted peer: status %d %s, want 401", code, body)
	}
	// The control: the same request from a trusted proxy is believed.
	trusting := start(t, credentialsYAML(t, as, fileA, fileB, "127.0.0.0/8", "::1"), options{OwnIssuers: true, HTTPConvention: "forwarded", Vars: vars})
	if code, body := ask(trusting); code != http.StatusOK {
		t.Errorf("XFCC from a trusted proxy: status %d %s, want 200", code, body)
	}
}

// TestRevokedAPIKey: the holder of a key revoked through the admin API tries
// it again in every spelling the service might normalise to the same key;
// the operator's revocation of a look-alike id revokes nothing else.
func TestRevokedAPIKey(t *testing.T) {
	as := introspecttest.New(t, introspecttest.Options{})
	keyA, fileA := keysFile(t, "a")
	keyB, fileB := keysFile(t, "b")
	s := start(t, credentialsYAML(t, as, fileA, fileB), options{OwnIssuers: true, Vars: map[string]string{"AS_SECRET": introspecttest.ClientSecret}})
	call := func(host string, h map[string]string) verdict {
		return s.check(t, raw{Host: host, Headers: h, Body: toolCall(1, "whoami", "")})
	}
	bearerA := map[string]string{"authorization": "Bearer " + keyA}
	if v := call("a.example.test", bearerA); !v.Allowed {
		t.Fatalf("key A before: %d %s", v.Status, v.Body)
	}
	ac := s.admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	for _, bad := range []struct{ name, issuer, id string }{
		{"an id with spaces", "keys-a", " a "},
		{"an id with a newline", "keys-a", "a\n"},
		{"a JWT issuer", "hs", "a"},
	} {
		t.Run("RevokeAPIKey refuses "+bad.name, func(t *testing.T) {
			_, err := ac.RevokeAPIKey(ctx, &adminv1.RevokeAPIKeyRequest{Issuer: bad.issuer, KeyId: bad.id})
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("err %v, want InvalidArgument", err)
			}
		})
	}
	resp, err := ac.RevokeAPIKey(ctx, &adminv1.RevokeAPIKeyRequest{Issuer: "keys-a", KeyId: "A"})
	if err != nil || resp.GetKnown() {
		t.Fatalf("revoking the look-alike id A: %v, known %v; want revoked, not known", err, resp.GetKnown())
	}
	if v := call("a.example.test", bearerA); !v.Allowed {
		t.Fatalf("revoking id A revoked key a: %d %s", v.Status, v.Body)
	}
	if resp, err := ac.RevokeAPIKey(ctx, &adminv1.RevokeAPIKeyRequest{Issuer: "keys-a", KeyId: "a"}); err != nil || !resp.GetKnown() || resp.GetDropped().GetVerdicts() != 1 {
		t.Fatalf("revoking a: %v %v", resp, err)
	}

	secret := keyA[len(apikey.Prefix):]
	steps := []struct {
		name    string
		host    string
		headers map[string]string
		allowed bool
	}{
		{"the revoked key", "a.example.test", bearerA, false},
		{"the revoked key in its header", "a.example.test", map[string]string{"x-api-key": keyA}, false},
		{"the revoked key in its header, padded", "a.example.test", map[string]string{"x-api-key": " \t" + keyA + "  "}, false},
		{"the revoked key after extra spaces", "a.example.test", map[string]string{"authorization": "Bearer    " + keyA}, false},
		{"the revoked key with trailing spaces", "a.example.test", map[string]string{"authorization": "Bearer " + keyA + "   "}, false},
		{"the revoked key under a lower-case scheme", "a.example.test", map[string]string{"authorization": "bearer " + keyA}, false},
		{"the revoked key upper-cased", "a.example.test", map[string]string{"authorization": "Bearer " + apikey.Prefix + strings.ToUpper(secret)}, false},
		{"the revoked key lower-cased", "a.example.test", map[string]string{"authorization": "Bearer " + apikey.Prefix + strings.ToLower(secret)}, false},
		{"the revoked key with an upper-case prefix", "a.example.test", map[string]string{"authorization": "Bearer " + strings.ToUpper(apikey.Prefix) + secret}, false},
		{"the revoked key twice", "a.example.test", map[string]string{"authorization": "Bearer " + keyA, "x-api-key": keyA}, false},
		{"another issuer's key", "b.example.test", map[string]string{"authorization": "Bearer " + keyB}, true},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			v := call(st.host, st.headers)
			if v.Allowed != st.allowed {
				t.Fatalf("allowed %v (status %d, %s), want %v", v.Allowed, v.Status, v.Body, st.allowed)
			}
			if strings.Contains(v.Body, secret) {
				t.Errorf("the denial shows the key: %s", v.Body)
			}
		})
	}
	if logs := s.logs.String(); strings.Contains(logs, secret) || strings.Contains(logs, keyB) {
		t.Error("the service logged a key")
	}
}
