package attack

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/extauthz/extauthz/internal/app"
	"github.com/extauthz/extauthz/internal/config"
	"github.com/extauthz/extauthz/internal/segment"
	adminv1 "github.com/extauthz/extauthz/proto/extauthz/admin/v1"
)

// Threat model class 3, identity: a user is (issuer, subject), not sub. The
// suite's two issuers share one secret and both can say "alice"; what
// tells their users apart must be the issuer. And the values set upstream
// as x-user-id and x-session-id are used by workloads as path segments, so
// "../../etc" must never arrive as such.

// identityYAML is a route both issuers may use.
const identityYAML = `routes:
  - name: mcp
    default: true
    issuers: [hs, other]
    audiences: [` + audience + `]
`

// pathSafeYAML adds identity.safe_values: path-segment, refusing.
const pathSafeYAML = identityYAML + "identity: {safe_values: path-segment}\n"

// encodeYAML adds identity.safe_values: path-segment, encoding.
const encodeYAML = identityYAML + "identity: {safe_values: path-segment, unsafe_values: encode}\n"

func TestIdentityTwoIssuers(t *testing.T) {
	s := start(t, identityYAML, options{})
	hsAlice, otherAlice := token(t, issuerHS, "alice"), token(t, issuerOther, "alice")

	t.Run("each issuer's alice gets her own x-user-id", func(t *testing.T) {
		for tok, want := range map[string]string{hsAlice: "hs:alice", otherAlice: "other:alice"} {
			v := s.check(t, raw{Headers: map[string]string{"authorization": "Bearer " + tok}, Body: toolCall(1, "whoami", "")})
			if !v.Allowed || v.Upstream["x-user-id"] != want {
				t.Fatalf("x-user-id %q (allowed %v), want %q", v.Upstream["x-user-id"], v.Allowed, want)
			}
		}
	})

	t.Run("a forged x-user-id naming the other issuer's alice is overwritten", func(t *testing.T) {
		v := s.check(t, raw{Headers: map[string]string{"authorization": "Bearer " + otherAlice, "x-user-id": "hs:alice"}, Body: toolCall(1, "whoami", "")})
		if !v.Allowed || v.Upstream["x-user-id"] != "other:alice" {
			t.Fatalf("x-user-id %q", v.Upstream["x-user-id"])
		}
	})

	steps := []struct {
		name    string
		method  string
		tok     string
		allowed bool
	}{
		{"hs alice binds the session", "POST", hsAlice, true},
		{"other's alice is refused in it", "POST", otherAlice, false},
		{"other's alice cannot DELETE it", "DELETE", otherAlice, false},
		{"other's alice cannot open its stream", "GET", otherAlice, false},
		{"hs alice still owns it", "POST", hsAlice, true},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			body := ""
			if st.method == "POST" {
				body = toolCall(2, "whoami", "")
			}
			v := s.check(t, raw{Method: st.method, Headers: inSessionRaw(st.tok, "alice-session"), Body: body})
			if v.Allowed != st.allowed {
				t.Fatalf("allowed %v (%d %s), want %v", v.Allowed, v.Status, v.Body, st.allowed)
			}
			if !st.allowed {
				wantConflict(t, v)
			}
		})
	}
}

// TestIdentityTwoIssuersEndToEnd: issuer other's alice calls a tool inside
// the real session issuer hs's alice opened; the tool does not run.
func TestIdentityTwoIssuersEndToEnd(t *testing.T) {
	s := start(t, identityYAML, options{Stateful: true})
	hsAlice, otherAlice := token(t, issuerHS, "alice"), token(t, issuerOther, "alice")
	sid := s.initialize(t, hsAlice)

	status, _, body := s.viaEnvoy(t, http.MethodPost, "/mcp", inSession(otherAlice, sid), toolCall(3, "delete_file", `{"path":"/home/alice"}`))
	if status != 403 || s.ran("delete_file") != 0 {
		t.Fatalf("other's alice in hs alice's session: status %d, body %s, delete_file ran %d times", status, body, s.ran("delete_file"))
	}
	status, _, body = s.viaEnvoy(t, http.MethodPost, "/mcp", inSession(hsAlice, sid), toolCall(4, "whoami", ""))
	if status != 200 || s.ran("whoami") != 1 {
		t.Fatalf("hs alice: status %d, body %s", status, body)
	}
	s.mu.Lock()
	got := s.executed[len(s.executed)-1].Seen.Headers.Get("X-User-Id")
	s.mu.Unlock()
	if got != "hs:alice" {
		t.Fatalf("the server saw x-user-id %q, want hs:alice", got)
	}
}

// admin is the admin API client of s.
func (s *suite) admin(t *testing.T) adminv1.AdminServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(s.adminAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return adminv1.NewAdminServiceClient(conn)
}

// TestIdentityRevocation: revoking one issuer's alice leaves the other's
// alone, and the admin API refuses a subject without its issuer.
func TestIdentityRevocation(t *testing.T) {
	s := start(t, identityYAML, options{})
	issued := time.Now().Add(-time.Minute).Unix()
	hsAlice := tokenWith(t, jwt.MapClaims{"iss": issuerHS, "sub": "alice", "iat": issued})
	otherAlice := tokenWith(t, jwt.MapClaims{"iss": issuerOther, "sub": "alice", "iat": issued})
	allowed := func(tok string) bool {
		return s.check(t, raw{Headers: map[string]string{"authorization": "Bearer " + tok}, Body: toolCall(1, "whoami", "")}).Allowed
	}
	if !allowed(hsAlice) || !allowed(otherAlice) {
		t.Fatal("tokens refused before any revocation")
	}
	ac := s.admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	bad := []struct {
		name            string
		issuer, subject string
	}{
		{"no issuer", "", "alice"},
		{"an issuer that is not configured", "https://evil.example.test", "alice"},
		{"no subject", "hs", ""},
	}
	for _, b := range bad {
		t.Run("RevokeSubject refuses "+b.name, func(t *testing.T) {
			_, err := ac.RevokeSubject(ctx, &adminv1.RevokeSubjectRequest{Issuer: b.issuer, Subject: b.subject})
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("err %v, want InvalidArgument", err)
			}
			if !allowed(hsAlice) || !allowed(otherAlice) {
				t.Fatal("a refused revocation revoked somebody")
			}
		})
	}

	t.Run("revoking hs alice by the issuer's iss spares other's alice", func(t *testing.T) {
		if _, err := ac.RevokeSubject(ctx, &adminv1.RevokeSubjectRequest{Issuer: issuerHS, Subject: "alice"}); err != nil {
			t.Fatal(err)
		}
		if allowed(hsAlice) {
			t.Fatal("hs alice's old token still accepted")
		}
		if !allowed(otherAlice) {
			t.Fatal("revoking hs alice revoked other's alice")
		}
	})
	t.Run("revoking by the configured name", func(t *testing.T) {
		if _, err := ac.RevokeSubject(ctx, &adminv1.RevokeSubjectRequest{Issuer: "other", Subject: "alice"}); err != nil {
			t.Fatal(err)
		}
		if allowed(otherAlice) {
			t.Fatal("other's alice's old token still accepted")
		}
	})
}

// TestIdentityReloadCannotRenameUsers: a reload that removes the other
// issuer would take hs's namespace away, turning the revoked "hs:alice"
// into a user nobody revoked and letting a token whose sub reads
// "hs:alice" be her. The reload is refused and counted; the running
// configuration keeps both the revocation and the names.
func TestIdentityReloadCannotRenameUsers(t *testing.T) {
	var cfg string
	s := start(t, identityYAML, options{Serve: func(o *app.ServeOptions) {
		cfg, o.WatchInterval = o.ConfigFile, 20*time.Millisecond
	}})
	issued := time.Now().Add(-time.Minute).Unix()
	alice := tokenWith(t, jwt.MapClaims{"iss": issuerHS, "sub": "alice", "iat": issued})
	spelled := tokenWith(t, jwt.MapClaims{"iss": issuerHS, "sub": "hs:alice"})
	user := func(tok string) (bool, string) {
		v := s.check(t, raw{Headers: map[string]string{"authorization": "Bearer " + tok}, Body: toolCall(1, "whoami", "")})
		return v.Allowed, v.Upstream["x-user-id"]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := s.admin(t).RevokeSubject(ctx, &adminv1.RevokeSubjectRequest{Issuer: "hs", Subject: "alice"}); err != nil {
		t.Fatal(err)
	}
	one := `issuers:
  - {name: hs, issuer: ` + issuerHS + `, algorithms: [HS256], secret_env: ATTACK_SECRET}
` + identityYAML
	one = strings.Replace(one, "issuers: [hs, other]", "issuers: [hs]", 1)
	if err := os.WriteFile(cfg+".new", []byte(one), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(cfg+".new", cfg); err != nil { // atomic, as a ConfigMap swap
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, metrics := httpGet(t, "http://"+s.opsAddr+"/metrics")
		if strings.Contains(metrics, `extauthz_config_reloads_total{result="error"} 1`) && strings.Contains(s.logs.String(), "subject namespace would change") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the reload was neither refused nor counted")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if ok, _ := user(alice); ok {
		t.Error("revoked hs alice accepted after the refused reload")
	}
	if ok, id := user(spelled); !ok || id != "hs:hs:alice" {
		t.Errorf("sub hs:alice: allowed %v as %q, want allowed as hs:hs:alice (not alice)", ok, id)
	}
}

// TestIdentitySharedSubjects: issuers that declare one subject space are
// one user; a subject of a shared issuer that reads as another issuer's
// user is refused.
func TestIdentitySharedSubjects(t *testing.T) {
	const yaml = `issuers:
  - {name: hs, issuer: ` + issuerHS + `, algorithms: [HS256], secret_env: ATTACK_SECRET, shared_subjects: true}
  - {name: other, issuer: ` + issuerOther + `, algorithms: [HS256], secret_env: ATTACK_SECRET, shared_subjects: true}
  - {name: third, issuer: https://third.example.test, algorithms: [HS256], secret_env: ATTACK_SECRET}
routes:
  - name: mcp
    default: true
    issuers: [hs, other, third]
    audiences: [` + audience + `]
`
	s := start(t, yaml, options{OwnIssuers: true})
	hsAlice, otherAlice := token(t, issuerHS, "alice"), token(t, issuerOther, "alice")

	t.Run("declared shared: one user across the two issuers", func(t *testing.T) {
		if v := s.check(t, raw{Headers: inSessionRaw(hsAlice, "shared-1"), Body: toolCall(1, "whoami", "")}); !v.Allowed || v.Upstream["x-user-id"] != "alice" {
			t.Fatalf("hs alice: %v %q", v.Allowed, v.Upstream["x-user-id"])
		}
		if v := s.check(t, raw{Headers: inSessionRaw(otherAlice, "shared-1"), Body: toolCall(2, "whoami", "")}); !v.Allowed {
			t.Fatalf("other's alice, declared the same user: %d %s", v.Status, v.Body)
		}
	})
	t.Run("the namespaced issuer's alice is another user", func(t *testing.T) {
		wantConflict(t, s.check(t, raw{Headers: inSessionRaw(token(t, "https://third.example.test", "alice"), "shared-1"), Body: toolCall(3, "whoami", "")}))
	})
	t.Run("a shared subject that reads as a namespaced user is refused", func(t *testing.T) {
		v := s.check(t, raw{Headers: map[string]string{"authorization": "Bearer " + token(t, issuerHS, "third:alice")}, Body: toolCall(4, "whoami", "")})
		v.wantDenied(t, 401)
		if !strings.Contains(v.Headers["www-authenticate"], "another issuer") {
			t.Fatalf("challenge %q", v.Headers["www-authenticate"])
		}
	})
}

// TestIdentityUnsafeValues: identity values that are
// not a safe single path segment are refused (401 invalid_token with a
// clear description) under identity.safe_values: path-segment.
func TestIdentityUnsafeValues(t *testing.T) {
	s := start(t, pathSafeYAML, options{})
	cases := []struct {
		name   string
		claims jwt.MapClaims
		what   string
	}{
		{"sub ../../etc", jwt.MapClaims{"sub": "../../etc"}, "user"},
		{"sub ..", jwt.MapClaims{"sub": ".."}, "user"},
		{"sub with a slash", jwt.MapClaims{"sub": "alice/../bob"}, "user"},
		{"sub with a backslash", jwt.MapClaims{"sub": `..\..\windows`}, "user"},
		{"sub percent-encoded dots", jwt.MapClaims{"sub": "%2e%2e"}, "user"},
		{"sub percent-encoded slash", jwt.MapClaims{"sub": "a%2Fb"}, "user"},
		{"sub double percent-encoding", jwt.MapClaims{"sub": "%252e%252e"}, "user"},
		{"sub fullwidth dots", jwt.MapClaims{"sub": "\uff0e\uff0e"}, "user"},
		{"sub fullwidth solidus", jwt.MapClaims{"sub": "a\uff0fb"}, "user"},
		{"sub C1 control", jwt.MapClaims{"sub": "a\u0085b"}, "user"},
		{"session ../x", jwt.MapClaims{"sub": "alice", "session_id": "../x"}, "session"},
		{"session .", jwt.MapClaims{"sub": "alice", "session_id": "."}, "session"},
		{"session with a slash", jwt.MapClaims{"sub": "alice", "session_id": "s/1"}, "session"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.claims["iss"] = issuerHS
			v := s.check(t, raw{Headers: map[string]string{"authorization": "Bearer " + tokenWith(t, tc.claims)}, Body: toolCall(9, "whoami", "")})
			v.wantDenied(t, 401)
			www := v.Headers["www-authenticate"]
			if !strings.Contains(www, `error="invalid_token"`) || !strings.Contains(www, "the "+tc.what+" is not a safe path segment") {
				t.Fatalf("challenge %q", www)
			}
			if e := v.rpc(t); string(e.ID) != "9" {
				t.Fatalf("JSON-RPC id %s", e.ID)
			}
		})
	}
	t.Run("control: a plain subject passes", func(t *testing.T) {
		v := s.check(t, raw{Headers: map[string]string{"authorization": "Bearer " + token(t, issuerHS, "alice@example.com")}, Body: toolCall(1, "whoami", "")})
		if !v.Allowed || v.Upstream["x-user-id"] != "hs:alice@example.com" {
			t.Fatalf("allowed %v, x-user-id %q", v.Allowed, v.Upstream["x-user-id"])
		}
	})
}

// TestIdentityUnsafeValuesEndToEnd: sub ../../etc never reaches the MCP
// server, and no tool runs.
func TestIdentityUnsafeValuesEndToEnd(t *testing.T) {
	s := start(t, pathSafeYAML, options{})
	status, _, body := s.viaEnvoy(t, http.MethodPost, "/mcp", bearer(token(t, issuerHS, "../../etc")), toolCall(1, "whoami", ""))
	if status != 401 || s.ran("whoami") != 0 {
		t.Fatalf("status %d, body %s, whoami ran %d times", status, body, s.ran("whoami"))
	}
}

// TestIdentityEncodedValues: with unsafe_values: encode, an unsafe subject
// arrives encoded after the issuer's namespace (one segment, decodable back
// to exactly the subject), and encoding never makes two users one.
func TestIdentityEncodedValues(t *testing.T) {
	s := start(t, encodeYAML, options{})
	seen := map[string]string{}
	for _, sub := range []string{"../../etc", "~alice", "alice", "a/b", "%2e%2e", "\uff0e\uff0e"} {
		t.Run("sub "+sub, func(t *testing.T) {
			v := s.check(t, raw{Headers: map[string]string{"authorization": "Bearer " + token(t, issuerHS, sub)}, Body: toolCall(1, "whoami", "")})
			if !v.Allowed {
				t.Fatalf("%d %s", v.Status, v.Body)
			}
			got := v.Upstream["x-user-id"]
			if !segment.Safe(got) {
				t.Fatalf("x-user-id %q is not a safe segment", got)
			}
			rest, namespaced := strings.CutPrefix(got, "hs:")
			back := rest
			if enc, ok := strings.CutPrefix(rest, segment.Marker); ok {
				b, err := base64.RawURLEncoding.DecodeString(enc)
				if err != nil {
					t.Fatalf("x-user-id %q: %v", got, err)
				}
				back = string(b)
			}
			if !namespaced || back != sub {
				t.Fatalf("x-user-id %q: the subject decodes to %q", got, back)
			}
			if prev, dup := seen[got]; dup {
				t.Fatalf("%q and %q share x-user-id %q", prev, sub, got)
			}
			seen[got] = sub
		})
	}
}

// TestIdentityBuiltInDefault: the built-in mode (no configuration file)
// keeps plain subjects and refuses unsafe ones.
func TestIdentityBuiltInDefault(t *testing.T) {
	s := start(t, "", options{BuiltIn: true})
	v := s.check(t, raw{Headers: map[string]string{"authorization": "Bearer " + tokenWith(t, jwt.MapClaims{"sub": "alice"})}, Body: toolCall(1, "whoami", "")})
	if !v.Allowed || v.Upstream["x-user-id"] != "alice" {
		t.Fatalf("allowed %v, x-user-id %q", v.Allowed, v.Upstream["x-user-id"])
	}
	s.check(t, raw{Headers: map[string]string{"authorization": "Bearer " + tokenWith(t, jwt.MapClaims{"sub": "../../etc"})}, Body: toolCall(2, "whoami", "")}).wantDenied(t, 401)
}

// signedPayload signs a payload spelled exactly as given (escapes
// included, which jwt.MapClaims would re-spell) with the suite's secret.
func signedPayload(t *testing.T, payload string) string {
	t.Helper()
	enc := base64.RawURLEncoding
	input := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + enc.EncodeToString([]byte(payload))
	sig, err := jwt.SigningMethodHS256.Sign(input, []byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return input + "." + enc.EncodeToString(sig)
}

// TestIdentityLoneSurrogate: a subject escaping an unpaired surrogate is
// "alice\ufffd" to Go and a string ending in a lone surrogate to
// JavaScript, so an upstream that reads the forwarded token would not see
// the user the service saw. Signed by a configured issuer or not, it is
// refused: 401 invalid_token, the JSON-RPC id echoed, and no tool runs.
func TestIdentityLoneSurrogate(t *testing.T) {
	s := start(t, identityYAML, options{})
	now := time.Now()
	claims := func(sub string) string {
		return fmt.Sprintf(`{"iss":%q,"sub":"%s","aud":%q,"iat":%d,"exp":%d}`, issuerHS, sub, audience, now.Unix(), now.Add(time.Hour).Unix())
	}
	for _, tc := range []struct{ name, sub string }{
		{"lone high half", `alice\ud800`},
		{"lone low half", `\udc00alice`},
		{"reversed pair", `alice\ude00\ud83d`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := s.check(t, raw{Headers: map[string]string{"authorization": "Bearer " + signedPayload(t, claims(tc.sub))}, Body: toolCall(5, "whoami", "")})
			v.wantDenied(t, 401)
			if www := v.Headers["www-authenticate"]; !strings.Contains(www, `error="invalid_token"`) {
				t.Fatalf("challenge %q", www)
			}
			if e := v.rpc(t); string(e.ID) != "5" {
				t.Fatalf("JSON-RPC id %s", e.ID)
			}
		})
	}
	t.Run("control: a surrogate pair is a character", func(t *testing.T) {
		v := s.check(t, raw{Headers: map[string]string{"authorization": "Bearer " + signedPayload(t, claims(`alice\ud83d\ude00`))}, Body: toolCall(1, "whoami", "")})
		if !v.Allowed || v.Upstream["x-user-id"] != "hs:alice\U0001F600" {
			t.Fatalf("allowed %v, x-user-id %q (%d %s)", v.Allowed, v.Upstream["x-user-id"], v.Status, v.Body)
		}
	})
	t.Run("end to end: the tool does not run", func(t *testing.T) {
		status, _, body := s.viaEnvoy(t, http.MethodPost, "/mcp", bearer(signedPayload(t, claims(`alice\ud800`))), toolCall(2, "whoami", ""))
		if status != 401 || s.ran("whoami") != 0 {
			t.Fatalf("status %d, body %s, whoami ran %d times", status, body, s.ran("whoami"))
		}
	})
}

// TestIdentityPaddedValues: a subject padded with white space, ASCII or
// Unicode, would reach a workload that trims it (HTTP trims the spaces of
// a header, Python's strip and JavaScript's trim the rest) as the user
// without it: refused, 401 invalid_token, and no tool runs.
func TestIdentityPaddedValues(t *testing.T) {
	s := start(t, identityYAML, options{})
	for _, sub := range []string{"alice ", " alice", "alice\u00a0", "\u3000alice", "alice\u2005", "alice\ufeff"} {
		t.Run(fmt.Sprintf("sub %q", sub), func(t *testing.T) {
			v := s.check(t, raw{Headers: map[string]string{"authorization": "Bearer " + token(t, issuerHS, sub)}, Body: toolCall(6, "whoami", "")})
			v.wantDenied(t, 401)
			if www := v.Headers["www-authenticate"]; !strings.Contains(www, `error="invalid_token"`) || !strings.Contains(www, "white space") {
				t.Fatalf("challenge %q", www)
			}
			if e := v.rpc(t); string(e.ID) != "6" {
				t.Fatalf("JSON-RPC id %s", e.ID)
			}
		})
	}
	t.Run("end to end: the tool does not run", func(t *testing.T) {
		status, _, body := s.viaEnvoy(t, http.MethodPost, "/mcp", bearer(token(t, issuerHS, "alice\u00a0")), toolCall(2, "whoami", ""))
		if status != 401 || s.ran("whoami") != 0 {
			t.Fatalf("status %d, body %s, whoami ran %d times", status, body, s.ran("whoami"))
		}
	})
	t.Run("control: an inner no-break space is part of the name", func(t *testing.T) {
		v := s.check(t, raw{Headers: map[string]string{"authorization": "Bearer " + token(t, issuerHS, "alice\u00a0b")}, Body: toolCall(1, "whoami", "")})
		if !v.Allowed || v.Upstream["x-user-id"] != "hs:alice\u00a0b" {
			t.Fatalf("allowed %v, x-user-id %q (%d %s)", v.Allowed, v.Upstream["x-user-id"], v.Status, v.Body)
		}
	})
}

// TestIdentityClientIDOfAnotherIssuer: a client id is its issuer's name
// for a client. The route trusts hs's client planner with lineage; issuer
// other registers a client planner too and sends a forged conversation
// root: it is not kept. Written bare, the entry is refused at load.
func TestIdentityClientIDOfAnotherIssuer(t *testing.T) {
	s := start(t, identityYAML+`lineage: {trust: {client_ids: ["hs:planner"]}}`+"\n", options{})
	forged := map[string]string{"x-root-context-id": "victim-root", "x-parent-context-id": "victim-parent"}
	for _, tc := range []struct {
		name, iss string
		kept      bool
	}{
		{"hs's planner keeps its lineage", issuerHS, true},
		{"other's planner starts a new chain", issuerOther, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := map[string]string{"authorization": "Bearer " + tokenWith(t, jwt.MapClaims{"iss": tc.iss, "sub": "svc", "azp": "planner"})}
			for k, v := range forged {
				h[k] = v
			}
			v := s.check(t, raw{Headers: h, Body: toolCall(1, "whoami", "")})
			if !v.Allowed {
				t.Fatalf("refused: %d %s", v.Status, v.Body)
			}
			if kept := v.Upstream["x-root-context-id"] == "victim-root"; kept != tc.kept {
				t.Fatalf("x-root-context-id %q upstream, kept %v, want %v", v.Upstream["x-root-context-id"], kept, tc.kept)
			}
		})
	}
	t.Run("a bare client id is refused at load", func(t *testing.T) {
		if _, err := config.Parse([]byte(issuersYAML + identityYAML + "lineage: {trust: {client_ids: [planner]}}\n")); err == nil || !strings.Contains(err.Error(), `"planner" names no issuer's client`) {
			t.Fatalf("load: %v", err)
		}
	})
}
