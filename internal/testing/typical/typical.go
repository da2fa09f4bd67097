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
	"time"

	"github.com/golang-jwt/jwt/v5"
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
