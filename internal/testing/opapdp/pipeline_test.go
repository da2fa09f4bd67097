package opapdp_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/check"
	"github.com/extauthz/extauthz/internal/testing/opapdp"
	"github.com/extauthz/extauthz/internal/testing/pipelinetest"
	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

// Real decisions of Open Policy Agent behind the authzen rule: the Rego
// policy in testdata/policy.rego, served over AuthZEN by a small
// adapter, decides MCP tool calls that went through the whole pipeline.

const (
	opaQuery      = "data.extauthz.mcp.allow"
	corpSecret    = "corp-test-secret-0123456789abcdef-xyz-0"
	partnerSecret = "partner-test-secret-0123456789abcdef-xyz"
)

// opaConfig delegates every tool call to the PDP (%s: its endpoint).
const opaConfig = `
issuers:
  - {name: corp, issuer: https://idp.example.com, algorithms: [HS256], secret: ` + corpSecret + `}
  - {name: partner, issuer: https://idp.partner.example, algorithms: [HS256], secret: ` + partnerSecret + `}
routes:
  - name: tools
    hosts: [tools.example.com]
    protocol: mcp
    issuers: [corp, partner]
    rules:
      - name: decided by OPA
        methods: [tools/call]
        authzen: {endpoint: "%s", timeout: 1s, arguments: [path]}
`

// startOPA runs OPA with module and a pipeline asking it.
func startOPA(t *testing.T, module string) (*opapdp.PDP, *check.Pipeline) {
	t.Helper()
	pdp, err := opapdp.Start(t.Context(), module, opaQuery)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pdp.Close)
	return pdp, pipelinetest.New(t, fmt.Sprintf(opaConfig, pdp.Endpoint()), check.Deps{}, check.Options{})
}

func opaPolicy(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("testdata/policy.rego")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// caller is who calls: a user of issuer corp (or of partner) through the
// agents in actors (outermost first), with scope.
type caller struct {
	partner bool
	sub     string
	actors  []string
	scope   string
}

// toolCall is a tools/call of tool with args (a JSON object) by c.
func toolCall(t *testing.T, c caller, tool, args string) *check.Request {
	t.Helper()
	iss, secret := "https://idp.example.com", corpSecret
	if c.partner {
		iss, secret = "https://idp.partner.example", partnerSecret
	}
	claims := jwt.MapClaims{"sub": c.sub, "iss": iss, "exp": time.Now().Add(time.Hour).Unix(), "scope": c.scope}
	// act nests the chain: the outermost actor is the current one.
	var act map[string]any
	for i := len(c.actors) - 1; i >= 0; i-- {
		a := map[string]any{"sub": c.actors[i]}
		if act != nil {
			a["act"] = act
		}
		act = a
	}
	if act != nil {
		claims["act"] = act
	}
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, tool, args)
	return &check.Request{Method: "POST", Scheme: "https", Host: "tools.example.com", Path: "/mcp", Protocol: "HTTP/1.1",
		Headers: check.Headers{
			"authorization": "Bearer " + testtoken.HMAC(t, "HS256", secret, claims),
			"content-type":  "application/json",
		},
		Body: []byte(body)}
}

func TestOPADecides(t *testing.T) {
	pdp, pl := startOPA(t, opaPolicy(t))
	billing := []string{"billing-agent"}
	alice, bob := caller{sub: "alice"}, caller{sub: "bob"}
	aliceVia := func(actors ...string) caller { return caller{sub: "alice", actors: actors} }
	aliceWith := func(scope string) caller { return caller{sub: "alice", scope: scope} }
	tests := []struct {
		name   string
		caller caller
		tool   string
		args   string
		want   check.Outcome
	}{
		{"finance member through the billing agent refunds", aliceVia("billing-agent"), "refund", `{"order":"o-1"}`, check.Allowed},
		{"finance member calling refund herself", alice, "refund", `{}`, check.Forbidden},
		{"finance member through another agent", aliceVia("support-agent"), "refund", `{}`, check.Forbidden},
		{"billing agent behind a planner", aliceVia("billing-agent", "planner"), "refund", `{}`, check.Forbidden},
		{"engineer through the billing agent", caller{sub: "bob", actors: billing}, "refund", `{}`, check.Forbidden},
		{"unknown user through the billing agent", caller{sub: "mallory", actors: billing}, "refund", `{}`, check.Forbidden},
		{"partner's alice through the billing agent", caller{partner: true, sub: "alice", actors: billing}, "refund", `{}`, check.Forbidden},
		{"own workspace", alice, "read_file", `{"path":"/workspace/corp:alice/notes.txt"}`, check.Allowed},
		{"own workspace, nested", bob, "read_file", `{"path":"/workspace/corp:bob/src/main.go"}`, check.Allowed},
		{"another user's workspace", bob, "read_file", `{"path":"/workspace/corp:alice/notes.txt"}`, check.Forbidden},
		{"partner's alice in corp's alice's workspace", caller{partner: true, sub: "alice"}, "read_file", `{"path":"/workspace/corp:alice/notes.txt"}`, check.Forbidden},
		{"partner's alice in her own workspace", caller{partner: true, sub: "alice"}, "read_file", `{"path":"/workspace/partner:alice/notes.txt"}`, check.Allowed},
		{"climbing out with ..", alice, "read_file", `{"path":"/workspace/corp:alice/../corp:bob/notes.txt"}`, check.Forbidden},
		{"a . segment", alice, "read_file", `{"path":"/workspace/corp:alice/./notes.txt"}`, check.Forbidden},
		{"a workspace whose name extends the user's", alice, "read_file", `{"path":"/workspace/corp:alice2/notes.txt"}`, check.Forbidden},
		{"the workspace root", alice, "read_file", `{"path":"/workspace/corp:alice"}`, check.Forbidden},
		{"path not under /workspace", alice, "read_file", `{"path":"/etc/passwd"}`, check.Forbidden},
		{"path not a string", alice, "read_file", `{"path":["/workspace/corp:alice/a"]}`, check.Forbidden},
		{"no path", alice, "read_file", `{}`, check.Forbidden},
		{"write with the scope", aliceWith("files:write"), "write_file", `{"path":"/workspace/corp:alice/out.txt"}`, check.Allowed},
		{"write without the scope", aliceWith("files:read"), "write_file", `{"path":"/workspace/corp:alice/out.txt"}`, check.Forbidden},
		{"write elsewhere with the scope", aliceWith("files:write"), "write_file", `{"path":"/workspace/corp:bob/out.txt"}`, check.Forbidden},
		{"a tool the policy does not name", caller{sub: "alice", actors: billing, scope: "files:write"}, "drop_table", `{}`, check.Forbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := pl.Check(t.Context(), toolCall(t, tt.caller, tt.tool, tt.args))
			if v.Outcome != tt.want {
				t.Fatalf("outcome %v (%s), want %v; OPA's inputs: %s", v.Outcome, v.Description, tt.want, pdp.Inputs())
			}
		})
	}
	// Every case is a distinct request: each was decided by OPA, none by
	// the cache.
	if n := pdp.Calls.Load(); n != int64(len(tests)) {
		t.Errorf("OPA decided %d calls, want %d", n, len(tests))
	}
}

// TestOPAFailureNeverAllows: a PDP that fails, or answers anything but a
// boolean decision, makes a call the policy would allow fail with 503 and
// Retry-After; one that refuses to decide it (a 4xx) denies it.
func TestOPAFailureNeverAllows(t *testing.T) {
	// A policy whose result is the path itself: OPA evaluates it, the
	// adapter refuses to read a string as a decision.
	const notBoolean = "package extauthz.mcp\n\nallow := input.context.arguments.path\n"
	tests := []struct {
		name   string
		module string
		status int32
		body   string
	}{
		{"PDP error", "", 500, ""},
		{"PDP unavailable", "", 503, ""},
		{"PDP rate limiting", "", 429, ""},
		{"PDP not found", "", 404, ""},
		{"not JSON", "", 0, "<html>ok</html>"},
		{"empty object", "", 0, "{}"},
		{"decision a string", "", 0, `{"decision":"true"}`},
		{"decision null", "", 0, `{"decision":null}`},
		{"decision a number", "", 0, `{"decision":1}`},
		{"truncated", "", 0, `{"decision":tr`},
		{"policy result not a boolean", notBoolean, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			module := tt.module
			if module == "" {
				module = opaPolicy(t)
			}
			pdp, pl := startOPA(t, module)
			pdp.Status.Store(tt.status)
			if tt.body != "" {
				pdp.Body.Store(&tt.body)
			}
			v := pl.Check(t.Context(), toolCall(t, caller{sub: "alice"}, "read_file", `{"path":"/workspace/corp:alice/notes.txt"}`))
			if tt.status == 404 {
				if v.Outcome != check.Forbidden || v.Status() != 403 {
					t.Fatalf("outcome %v (%d, %s), want forbidden (403)", v.Outcome, v.Status(), v.Description)
				}
				return
			}
			if v.Outcome != check.Unavailable || v.Status() != 503 {
				t.Fatalf("outcome %v (%d, %s), want unavailable (503)", v.Outcome, v.Status(), v.Description)
			}
			retry := ""
			for _, h := range v.ResponseHeaders {
				if strings.EqualFold(h.Name, "retry-after") {
					retry = h.Value
				}
			}
			if retry == "" {
				t.Errorf("no Retry-After")
			}
			if n := pdp.Calls.Load(); n != 1 {
				t.Errorf("PDP asked %d times, want 1", n)
			}
		})
	}
}
