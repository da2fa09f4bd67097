package attack

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Where a request goes upstream with its credentials, every place a
// credential can be in reaches the upstream: the tool call's params on a
// token_in_meta route (the body is never rewritten), the alternative
// header and cookie on a route forwarding Authorization. An attacker with
// a valid low-privilege token puts it where the service reads, and a
// forged admin token where the upstream may read instead.

// forgedAdmin is a token naming admin, signed with a secret no issuer
// has.
func forgedAdmin(t *testing.T) string {
	t.Helper()
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"iss": issuerHS, "sub": "admin", "aud": audience, "scope": "admin",
		"exp": time.Now().Add(time.Hour).Unix(),
	}).SignedString([]byte("not-the-issuer-secret-0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestMetaTokenIsTheVerifiedOne: on a token_in_meta route the upstream
// reads the token in params._meta.authorization (or
// params.arguments._metadata.authorization): a token there must be the
// one the service verified, whichever place it verified.
func TestMetaTokenIsTheVerifiedOne(t *testing.T) {
	s := start(t, `routes:
  - name: mcp
    default: true
    issuers: [hs]
    mcp: {token_in_meta: true}
`, options{})
	alice := token(t, issuerHS, "alice", "tools.call")
	forged := forgedAdmin(t)
	call := func(meta, metadata string) string {
		args := "{}"
		if metadata != "" {
			args = fmt.Sprintf(`{"_metadata":{"authorization":%q}}`, metadata)
		}
		params := fmt.Sprintf(`"name":"whoami","arguments":%s`, args)
		if meta != "" {
			params += fmt.Sprintf(`,"_meta":{"authorization":%q}`, meta)
		}
		return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + params + `}}`
	}
	aliceHeader := map[string]string{"authorization": "Bearer " + alice}
	refused := []struct {
		name    string
		headers map[string]string
		body    string
	}{
		{"Authorization alice's, _meta a forged admin token", aliceHeader, call("Bearer "+forged, "")},
		{"Authorization alice's, arguments._metadata a forged admin token", aliceHeader, call("", "Bearer "+forged)},
		{"_meta alice's, arguments._metadata a forged admin token", nil, call("Bearer "+alice, "Bearer "+forged)},
		{"_meta a forged admin token, arguments._metadata alice's", nil, call("Bearer "+forged, "Bearer "+alice)},
		{"Authorization alice's, _meta without the scheme and another token", aliceHeader, call(forged, "")},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			s.check(t, raw{Headers: tc.headers, Body: tc.body}).wantInvalidRequest(t, "1")
		})
	}
	allowed := []struct {
		name    string
		headers map[string]string
		body    string
	}{
		{"alice's token in _meta alone", nil, call("Bearer "+alice, "")},
		{"alice's token in Authorization and _meta", aliceHeader, call("Bearer "+alice, "")},
		{"alice's token in both body places", nil, call("Bearer "+alice, "Bearer "+alice)},
	}
	for _, tc := range allowed {
		t.Run(tc.name, func(t *testing.T) {
			if v := s.check(t, raw{Headers: tc.headers, Body: tc.body}); !v.Allowed || v.Upstream["x-user-id"] != "hs:alice" && v.Upstream["x-user-id"] != "alice" {
				t.Fatalf("%d %s (user %q)", v.Status, v.Body, v.Upstream["x-user-id"])
			}
		})
	}
	t.Run("through the proxy the server never runs the call", func(t *testing.T) {
		before := s.ran("whoami")
		code, _, body := s.viaEnvoy(t, "POST", "/mcp", bearer(alice), call("Bearer "+forged, ""))
		if n := s.ran("whoami") - before; n > 0 || code != 400 {
			t.Fatalf("status %d, the server ran whoami %d times: %s", code, n, body)
		}
	})
}

// TestForwardedCredentialsInSeveralPlaces: a route forwarding Authorization
// keeps its alternative header and cookie too, so a request carrying
// alice's token in one place and another token in another is refused, as
// the upstream may read either; the same token in several places passes.
func TestForwardedCredentialsInSeveralPlaces(t *testing.T) {
	s := start(t, `routes:
  - name: mcp
    default: true
    issuers: [hs]
    forward_authorization: true
    credentials: {header: x-api-token, cookie: at}
`, options{})
	alice := token(t, issuerHS, "alice", "tools.call")
	forged := forgedAdmin(t)
	refused := []struct {
		name    string
		headers map[string]string
	}{
		{"Authorization alice's, the header a forged token", map[string]string{"authorization": "Bearer " + alice, "x-api-token": forged}},
		{"Authorization alice's, the header a forged bearer token", map[string]string{"authorization": "Bearer " + alice, "x-api-token": "Bearer " + forged}},
		{"Authorization alice's, the cookie a forged token", map[string]string{"authorization": "Bearer " + alice, "cookie": "theme=dark; at=" + forged}},
		{"the header alice's, the cookie a forged token", map[string]string{"x-api-token": alice, "cookie": "at=" + forged}},
		{"Authorization alice's, the header not a token at all", map[string]string{"authorization": "Bearer " + alice, "x-api-token": "x"}},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			v := s.check(t, raw{Headers: tc.headers, Body: toolCall(1, "whoami", "")})
			v.wantInvalidRequest(t, "1")
			if !strings.Contains(v.Body, "another place") {
				t.Errorf("refusal %s does not say why", v.Body)
			}
		})
	}
	allowed := []struct {
		name    string
		headers map[string]string
	}{
		{"Authorization alone", map[string]string{"authorization": "Bearer " + alice}},
		{"the header alone", map[string]string{"x-api-token": alice}},
		{"the same token in Authorization, the header and the cookie", map[string]string{"authorization": "Bearer " + alice, "x-api-token": "Bearer " + alice, "cookie": "at=" + alice}},
		{"Authorization and an empty header", map[string]string{"authorization": "Bearer " + alice, "x-api-token": " "}},
		{"Authorization and other cookies", map[string]string{"authorization": "Bearer " + alice, "cookie": "theme=dark"}},
	}
	for _, tc := range allowed {
		t.Run(tc.name, func(t *testing.T) {
			if v := s.check(t, raw{Headers: tc.headers, Body: toolCall(1, "whoami", "")}); !v.Allowed {
				t.Fatalf("%d %s", v.Status, v.Body)
			}
		})
	}
}
