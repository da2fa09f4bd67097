package pipelinetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/check"
	"github.com/extauthz/extauthz/internal/testing/ststest"
	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

// ProtocolSecret signs the tokens of ProtocolConfig's issuer "corp".
const ProtocolSecret = "protocol-test-secret-0123456789abcdef-xyz"

// ProtocolConfig: an MCP server with tool rules, an A2A agent with method
// rules, and the auto-detecting default route. The protocol decision
// tables (check) and their encodings (each front end) share it.
const ProtocolConfig = `
issuers:
  - {name: corp, issuer: https://idp.example.com, algorithms: [HS256], secret: ` + ProtocolSecret + `}
routes:
  - name: files
    hosts: [mcp.example.com]
    path_prefix: /mcp
    protocol: mcp
    issuers: [corp]
    rules:
      - {name: destructive tools, methods: [tools/call], names: ["delete_*"], scopes: ["files:write"]}
      - {name: admin resources, methods: [resources/read], claims: {groups: [admins]}}
      - {name: no sampling, methods: ["sampling/*"], action: deny}
  - name: meta
    hosts: [meta.example.com]
    protocol: mcp
    issuers: [corp]
    mcp: {token_in_meta: true}
  - name: agent
    hosts: [agent.example.com]
    protocol: a2a
    issuers: [corp]
    rules:
      - {name: talking needs a scope, methods: [SendMessage, SendStreamingMessage], scopes: ["agent:invoke"]}
    protected_resource:
      resource: https://agent.example.com/
      authorization_servers: [https://login.example.com]
  - name: fallback
    default: true
    issuers: [corp]
`

// ProtocolToken is a token of ProtocolConfig's issuer for sub, with scope
// files:read and an hour to live, extra claims added or overriding.
func ProtocolToken(tb testing.TB, sub string, extra jwt.MapClaims) string {
	tb.Helper()
	c := jwt.MapClaims{"sub": sub, "iss": "https://idp.example.com", "exp": time.Now().Add(time.Hour).Unix(), "scope": "files:read"}
	for k, v := range extra {
		c[k] = v
	}
	return testtoken.HMAC(tb, "HS256", ProtocolSecret, c)
}

// Exchanging is a pipeline whose routes exchange the inbound token at a
// test STS: files (per tool: github_* to another audience, calendar_*
// needing consent, third_party answered consent_required, forbidden_tool
// answered invalid_target), agent (A2A, always consent_required) and plain
// (no exchange). Its tokens are ProtocolToken's.
func Exchanging(tb testing.TB) (*check.Pipeline, *ststest.Server) {
	tb.Helper()
	sts := ststest.New(tb, ststest.Options{
		Clients: []ststest.Client{{ID: "extauthz", Method: "client_secret_basic", Secret: "sts-secret"}},
		Failures: map[string]ststest.Failure{
			"https://consent.example.com": {Code: "consent_required", Description: "the user must consent"},
			"https://nope.example.com":    {Code: "invalid_target"},
		},
	})
	doc := fmt.Sprintf(`
issuers:
  - {name: corp, issuer: https://idp.example.com, algorithms: [HS256], secret: %s}
exchanges:
  - name: sts
    token_endpoint: %s
    client_auth: {method: client_secret_basic, client_id: extauthz, client_secret_env: STS_SECRET}
routes:
  - name: files
    hosts: [mcp.example.com]
    protocol: mcp
    issuers: [corp]
    exchange:
      sts: sts
      audience: [https://files-backend.example.com]
      scope: files
      methods: [tools/call]
      authorize_url: https://idp.example.com/authorize?client_id=files
      tools:
        - {names: ["github_*"], audience: [https://github-proxy.example.com], scope: repo}
        - {names: ["calendar_*"], audience: [https://calendar.example.com], consent: true}
        - {names: ["third_party"], audience: [https://consent.example.com]}
        - {names: ["forbidden_tool"], audience: [https://nope.example.com]}
  - name: agent
    hosts: [agent.example.com]
    protocol: a2a
    issuers: [corp]
    exchange: {sts: sts, audience: [https://consent.example.com], authorize_url: "https://idp.example.com/authorize"}
  - name: plain
    hosts: [plain.example.com]
    protocol: mcp
    issuers: [corp]
`, ProtocolSecret, sts.TokenURL)
	env := map[string]string{"STS_SECRET": "sts-secret"}
	return New(tb, doc, check.Deps{Getenv: func(k string) string { return env[k] }, HTTPClient: sts.Client()}, check.Options{}), sts
}
