// Package typical is the deployment the hot path's benchmarks measure: an
// MCP route with an audience, a rule on a claim and a claim carried in a
// header, and user i's token on it (sub, session, iss, aud, exp, iat,
// scope, one extra claim the rule reads and one the header carries). The
// miss, memory and scale figures of different packages are figures of the
// same request because they all take it from here. It is not used by the
// service itself, and imports nothing of it, so that every package's own
// tests can use it.
package typical

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

// Audience is the route's audience, every typical token's aud.
const Audience = "https://mcp.example.com"

// ToolsCall is the typical request's body, a call the rule allows.
const ToolsCall = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"search","arguments":{"q":"x"}}}`

// Route is the routes section of a configuration holding the typical
// route, which accepts the named issuers.
func Route(issuers ...string) string {
	return fmt.Sprintf(`routes:
  - name: tools
    default: true
    issuers: [%s]
    audiences: [%s]
    claim_headers: [{claim: email, header: x-user-email}]
    rules:
      - {name: search, methods: [tools/call], names: [search], claims: {department: [eng]}}
`, strings.Join(issuers, ", "), Audience)
}

// Subject is user i's sub.
func Subject(i int) string { return fmt.Sprintf("user-%07d", i) }

// Session is user i's session_id.
func Session(i int) string { return fmt.Sprintf("3f6c1a9e-5d2b-4c8f-a1e7-%012d", i) }

// Email is user i's email, the claim the route carries in x-user-email.
func Email(i int) string { return fmt.Sprintf("user-%07d@example.com", i) }

// Claims are user i's claims from issuer iss, issued at now for an hour.
func Claims(iss string, i int, now time.Time) jwt.MapClaims {
	return jwt.MapClaims{
		"sub": Subject(i), "session_id": Session(i),
		"iss": iss, "aud": Audience,
		"exp": now.Add(time.Hour).Unix(), "iat": now.Unix(), "scope": "openid profile mcp:tools",
		"department": "eng", "email": Email(i),
	}
}

// Issuers are the miss benchmarks' three issuers of typical tokens, one
// per algorithm they measure: HS256 with a shared secret, RS256 and ES256
// with keys published in a JWK set file.
type Issuers struct {
	Secret  string
	RSA, EC testtoken.Key
	jwks    string
}

// issuerOf names each algorithm's issuer.
var issuerOf = map[string]string{
	"HS256": "https://login.example.com",
	"RS256": "https://idp.example.com/rsa",
	"ES256": "https://idp.example.com/ec",
}

// NewIssuers makes the keys and writes their JWK set under tb's temporary
// directory.
func NewIssuers(tb testing.TB, secret string) *Issuers {
	is := &Issuers{Secret: secret, RSA: testtoken.RSA(tb, "rs1"), EC: testtoken.EC(tb, "es1")}
	is.jwks = testtoken.WriteJWKS(tb, tb.TempDir(), is.RSA, is.EC)
	return is
}

// Config is a configuration of the three issuers and the typical route
// accepting them all, with room for a million verdicts.
func (is *Issuers) Config() string {
	return fmt.Sprintf(`issuers:
  - {name: dev, issuer: %s, algorithms: [HS256], secret: %s}
  - {name: rsa, issuer: %s, algorithms: [RS256], jwks_file: %s}
  - {name: ec, issuer: %s, algorithms: [ES256], jwks_file: %s}
%scache: {max_entries: 1000000}
`, issuerOf["HS256"], is.Secret, issuerOf["RS256"], is.jwks, issuerOf["ES256"], is.jwks, Route("dev", "rsa", "ec"))
}

// Token is user i's typical token, signed with alg by its issuer.
func (is *Issuers) Token(tb testing.TB, alg string, i int) string {
	iss, ok := issuerOf[alg]
	if !ok {
		tb.Fatalf("no typical issuer for %s", alg)
	}
	c := Claims(iss, i, time.Now())
	switch alg {
	case "RS256":
		return is.RSA.Sign(tb, c)
	case "ES256":
		return is.EC.Sign(tb, c)
	}
	return testtoken.HMAC(tb, alg, is.Secret, c)
}
