package check

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/authzen"
	"github.com/extauthz/extauthz/internal/mcpresponse"
	"github.com/extauthz/extauthz/internal/policy"
	"github.com/extauthz/extauthz/internal/testing/authzenpdp"
)

// celRoutes are routes with CEL and AuthZEN rules (%s: the PDP endpoint).
const celRoutes = `
  - name: ws
    hosts: [ws.example.com]
    issuers: [dev]
    protocol: mcp
    rules:
      - name: no drops outside on-call
        methods: [tools/call]
        names: ["drop_*"]
        action: deny
        when: '!("oncall" in jwt.groups)'
      - name: own workspace
        methods: [tools/call]
        names: [read_file]
        when: cleanPath(mcp.arguments.path).startsWith("/workspace/" + identity.subject + "/")
      - name: finance
        methods: [tools/call]
        names: [refund]
        when: '"finance" in jwt.groups'
      - name: pay
        methods: [tools/call]
        names: ["pay_*"]
        authzen: {endpoint: "%s", cache_ttl: 1m, arguments: [amount]}
      - name: shallow
        methods: [tools/call]
        names: [deep_think]
        when: lineage.depth == 0 && request.headers["x-tenant"] == "acme"
      - name: no nukes below level 3
        methods: [tools/call]
        names: [nuke]
        action: deny
        when: mcp.name == "nuke" && jwt.level < 3
  - name: net
    hosts: [net.example.com]
    issuers: [dev]
    protocol: mcp
    rules:
      - {name: internal peers, methods: [tools/call], when: 'request.source.address.startsWith("10.")'}
  - name: hdr
    hosts: [hdr.example.com]
    issuers: [dev]
    protocol: mcp
    request_body: none
    upstream_validates_mcp_headers: true
    rules:
      - name: own workspace
        methods: [tools/call]
        when: cleanPath(mcp.arguments.path).startsWith("/workspace/")
`

func celCall(name, args string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, name, args)
}

func celFixture(t *testing.T) (*fixture, *authzenpdp.PDP) {
	pdp := authzenpdp.Start(func(r authzenpdp.Request) (bool, map[string]any) {
		args, _ := r.Context["arguments"].(map[string]any)
		amount, _ := args["amount"].(float64)
		return r.Subject.ID == "dev:alice" && r.Resource.Type == "mcp_tool" && amount <= 100, nil
	})
	t.Cleanup(pdp.Close)
	return newFixture(t, fmt.Sprintf(celRoutes, pdp.Endpoint())), pdp
}

func TestCELRules(t *testing.T) {
	f, pdp := celFixture(t)
	finance := jwt.MapClaims{"groups": []any{"finance"}}
	oncall := jwt.MapClaims{"groups": []any{"oncall"}}
	tests := []struct {
		name    string
		claims  jwt.MapClaims
		body    string
		headers Headers
		partial bool
		want    Outcome
	}{
		{"own file", nil, celCall("read_file", `{"path": "/workspace/dev:alice/a.txt"}`), nil, false, Allowed},
		{"climbing out", nil, celCall("read_file", `{"path": "/workspace/dev:alice/../dev:bob/a.txt"}`), nil, false, Forbidden},
		{"no path", nil, celCall("read_file", `{}`), nil, false, PolicyError},
		{"path not a string", nil, celCall("read_file", `{"path": 1}`), nil, false, PolicyError},
		{"partial body", nil, celCall("read_file", `{"path": "/workspace/dev:alice/a.txt"}`), nil, true, Malformed},
		{"finance member", finance, celCall("refund", `{}`), nil, false, Allowed},
		{"not finance", nil, celCall("refund", `{}`), nil, false, PolicyError},
		{"other group", oncall, celCall("refund", `{}`), nil, false, Forbidden},
		{"drop without on-call", jwt.MapClaims{"groups": []any{}}, celCall("drop_table", `{}`), nil, false, Forbidden},
		{"drop on call", oncall, celCall("drop_table", `{}`), nil, false, Allowed},
		{"drop without groups fails closed", nil, celCall("drop_table", `{}`), nil, false, PolicyError},
		{"PDP allows", nil, celCall("pay_invoice", `{"amount": 50}`), nil, false, Allowed},
		{"PDP denies", nil, celCall("pay_invoice", `{"amount": 500}`), nil, false, Forbidden},
		// Go's encoding/json binds AMOUNT to the tool's amount field too,
		// the last key winning: neither the expression nor the PDP may
		// decide on either reading.
		{"the path in another case too", nil, celCall("read_file", `{"path": "/workspace/dev:alice/a.txt", "PATH": "/etc/passwd"}`), nil, false, PolicyError},
		{"PDP shown the amount in another case too", nil, celCall("pay_invoice", `{"amount": 50, "AMOUNT": 5000000}`), nil, false, PolicyError},
		{"PDP shown an amount holding keys equal but for case", nil, celCall("pay_invoice", `{"amount": {"value": 50, "VALUE": 5000000}}`), nil, false, PolicyError},
		{"PDP shown a list holding keys equal but for case", nil, celCall("pay_invoice", `{"amount": [{"value": 50, "Value": 5000000}]}`), nil, false, PolicyError},
		{"lineage and headers", nil, celCall("deep_think", `{}`), Headers{"x-tenant": "acme"}, false, Allowed},
		{"lineage and another tenant", nil, celCall("deep_think", `{}`), Headers{"x-tenant": "other"}, false, Forbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := f.rpcReq(t, "POST", "ws.example.com", tt.body, tt.headers)
			req.Headers["authorization"] = "Bearer " + f.hs(t, tt.claims)
			req.BodyPartial = tt.partial
			v := f.pl.Check(t.Context(), req)
			if v.Outcome != tt.want {
				t.Errorf("outcome %v (%s), want %v", v.Outcome, v.Description, tt.want)
			}
			if v.Outcome == PolicyError && v.Status() != 403 {
				t.Errorf("status %d", v.Status())
			}
		})
	}
	if pdp.Calls.Load() != 2 {
		t.Errorf("PDP calls = %d, want 2", pdp.Calls.Load())
	}
}

// TestCELArgumentsNeedTheBody: on a route that decides on headers alone,
// a rule reading the arguments fails closed.
func TestCELArgumentsNeedTheBody(t *testing.T) {
	f, _ := celFixture(t)
	req := f.rpcReq(t, "POST", "hdr.example.com", "", Headers{"mcp-method": "tools/call", "mcp-name": "read_file", "mcp-protocol-version": "2026-07-28"})
	req.Body = nil
	if v := f.pl.Check(t.Context(), req); v.Outcome != PolicyError {
		t.Errorf("outcome %v (%s), want policy_error", v.Outcome, v.Description)
	}
}

func TestCELPDPDown(t *testing.T) {
	f, pdp := celFixture(t)
	pdp.Status.Store(503)
	v := f.pl.Check(t.Context(), f.rpcReq(t, "POST", "ws.example.com", celCall("pay_invoice", `{"amount": 1}`), nil))
	if v.Outcome != Unavailable || v.Status() != 503 {
		t.Fatalf("outcome %v (%s), want unavailable", v.Outcome, v.Description)
	}
	if ra, ok := header(v.ResponseHeaders, "retry-after"); !ok || ra == "" {
		t.Errorf("no Retry-After: %v", v.ResponseHeaders)
	}
}

// TestPDPBreakerTrippedByOneUsersInput: the PDP's breaker is shared by
// every user of the rule, so a PDP refusing what one user sent (a 4xx)
// denies that user's call and does not count against it: however often
// mallory sends arguments the PDP rejects, alice's calls are still
// decided.
func TestPDPBreakerTrippedByOneUsersInput(t *testing.T) {
	f, pdp := celFixture(t)
	pdp.Answer = func(r authzenpdp.Request, w http.ResponseWriter) bool {
		args, _ := r.Context["arguments"].(map[string]any)
		if _, ok := args["amount"].(float64); !ok {
			w.WriteHeader(http.StatusBadRequest)
			return true
		}
		return false
	}
	mallory := f.rpcReq(t, "POST", "ws.example.com", celCall("pay_invoice", `{"amount": "all of it"}`), nil)
	mallory.Headers["authorization"] = "Bearer " + f.hs(t, jwt.MapClaims{"sub": "mallory"})
	var outcomes []Outcome
	for range authzen.DefaultBreakerThreshold + 1 {
		outcomes = append(outcomes, f.pl.Check(t.Context(), mallory).Outcome)
	}
	if slices.ContainsFunc(outcomes, func(o Outcome) bool { return o != Forbidden }) {
		t.Errorf("mallory's calls: %v, want all forbidden", outcomes)
	}
	v := f.pl.Check(t.Context(), f.rpcReq(t, "POST", "ws.example.com", celCall("pay_invoice", `{"amount": 50}`), nil))
	if v.Outcome != Allowed {
		t.Fatalf("alice's call: %v (%s), want allowed", v.Outcome, v.Description)
	}
	if n := pdp.Calls.Load(); n != authzen.DefaultBreakerThreshold+2 {
		t.Errorf("PDP calls = %d, want %d", n, authzen.DefaultBreakerThreshold+2)
	}
}

// TestCELGrantKeepsOnlyReadClaims: the grant keeps the claims expressions
// read, and identity-only results are computed once with it.
func TestCELGrantKeepsOnlyReadClaims(t *testing.T) {
	f, _ := celFixture(t)
	req := f.rpcReq(t, "POST", "ws.example.com", celCall("refund", `{}`), nil)
	req.Headers["authorization"] = "Bearer " + f.hs(t, jwt.MapClaims{"groups": []any{"finance"}, "email": "a@example.com", "big": strings.Repeat("x", 1000)})
	v := f.pl.Check(t.Context(), req)
	if v.Outcome != Allowed {
		t.Fatalf("outcome %v (%s)", v.Outcome, v.Description)
	}
	g := v.Grant
	var names []string
	for _, c := range g.Claims {
		names = append(names, c.Name)
	}
	if !slices.Equal(names, []string{"groups"}) {
		t.Errorf("grant claims %v, want [groups]", names)
	}
	r, _ := f.pl.policy.Load().routes.ByName("ws")
	if len(r.identityRules) != 2 || g.whenResults == nil || g.whenResults[2] != whenTrue {
		t.Errorf("identity rules %v, results %v", r.identityRules, g.whenResults)
	}
}

func TestCELExplain(t *testing.T) {
	f, _ := celFixture(t)
	_, steps := f.pl.Explain(t.Context(), f.rpcReq(t, "POST", "ws.example.com", celCall("read_file", `{"path": "/etc/passwd"}`), nil))
	var rule string
	for _, s := range steps {
		if s.Name == "authorize" && strings.HasPrefix(s.Detail, "own workspace: when") {
			rule = s.Detail
		}
	}
	for _, want := range []string{`when cleanPath(mcp.arguments.path)`, "=> false", `mcp.arguments.path = "/etc/passwd"`, `identity.subject = "dev:alice"`} {
		if !strings.Contains(rule, want) {
			t.Errorf("explain step %q lacks %q", rule, want)
		}
	}
	if !slices.ContainsFunc(steps, func(s Step) bool {
		return s.Outcome == "can-call" && s.Detail == "read_file, whatever the arguments: depends-on-arguments"
	}) {
		t.Errorf("no can-call step: %+v", steps)
	}

	// An identity-only expression: its result comes with the grant, its
	// values from the claims the grant kept.
	req := f.rpcReq(t, "POST", "ws.example.com", celCall("refund", `{}`), nil)
	req.Headers["authorization"] = "Bearer " + f.hs(t, jwt.MapClaims{"groups": []any{"finance"}})
	_, steps = f.pl.Explain(t.Context(), req)
	if !slices.ContainsFunc(steps, func(s Step) bool {
		return s.Outcome == "rule" && strings.Contains(s.Detail, `finance: when "finance" in jwt.groups => true; read: jwt.groups = ["finance"]`)
	}) {
		t.Errorf("no rule step for the identity-only expression: %+v", steps)
	}
}

func TestCanCall(t *testing.T) {
	f, _ := celFixture(t)
	grant := func(claims jwt.MapClaims) *Grant {
		req := f.rpcReq(t, "POST", "ws.example.com", celCall("refund", `{}`), nil)
		req.Headers["authorization"] = "Bearer " + f.hs(t, claims)
		v := f.pl.Check(t.Context(), req)
		if v.Grant == nil {
			t.Fatalf("no grant: %v %s", v.Outcome, v.Description)
		}
		return v.Grant
	}
	finance := grant(jwt.MapClaims{"groups": []any{"finance"}})
	sales := grant(jwt.MapClaims{"groups": []any{"sales"}})
	// No groups and no level: the deny rules' expressions fail on this
	// token, so calls to drop_table and nuke are refused (PolicyError).
	bare := func() *Grant {
		req := f.rpcReq(t, "POST", "ws.example.com", celCall("other", `{}`), nil)
		req.Headers["authorization"] = "Bearer " + f.hs(t, nil)
		v := f.pl.Check(t.Context(), req)
		if v.Grant == nil {
			t.Fatalf("no grant: %v %s", v.Outcome, v.Description)
		}
		return v.Grant
	}()
	tests := []struct {
		name string
		g    *Grant
		tool string
		want policy.Decision
	}{
		{"arguments decide", finance, "read_file", policy.DependsOnArguments},
		{"the token allows", finance, "refund", policy.Allowed},
		{"the token denies", sales, "refund", policy.Denied},
		{"deny rule applies", sales, "drop_table", policy.Denied},
		{"a decision point decides", finance, "pay_invoice", policy.DependsOnArguments},
		{"request and lineage unknown", finance, "deep_think", policy.DependsOnArguments},
		{"no rule", finance, "other", policy.Allowed},
		{"a deny rule's identity expression fails", bare, "drop_table", policy.Denied},
		{"a deny rule's expression fails", bare, "nuke", policy.Denied},
		{"a failing deny rule matches only its tool", bare, "other", policy.Allowed},
		{"a deny rule's expression decides false", grant(jwt.MapClaims{"level": 5}), "nuke", policy.Allowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := f.pl.CanCall(tt.g, "tools/call", tt.tool, nil); got != tt.want {
				t.Errorf("CanCall = %v, want %v", got, tt.want)
			}
		})
	}
	// A listing hides what a call is refused, and the other way round.
	for _, tool := range []string{"drop_table", "nuke"} {
		req := f.rpcReq(t, "POST", "ws.example.com", celCall(tool, `{}`), nil)
		req.Headers["authorization"] = "Bearer " + f.hs(t, nil)
		if v := f.pl.Check(t.Context(), req); v.Outcome != PolicyError {
			t.Errorf("call %s: outcome %v, want %v", tool, v.Outcome, PolicyError)
		}
	}
}

// benchRoutes are three routes alike but for their rule: a plain one, one
// whose expression reads only the token, one that reads an argument.
const benchRoutes = `
  - name: plain
    hosts: [plain.example.com]
    issuers: [dev]
    protocol: mcp
    rules:
      - {name: read, methods: [tools/call], names: [read_file]}
  - name: identity
    hosts: [identity.example.com]
    issuers: [dev]
    protocol: mcp
    rules:
      - {name: read, methods: [tools/call], names: [read_file], when: '"finance" in jwt.groups'}
  - name: arguments
    hosts: [arguments.example.com]
    issuers: [dev]
    protocol: mcp
    rules:
      - {name: read, methods: [tools/call], names: [read_file], when: 'mcp.arguments.path.startsWith("/workspace/")'}
`

// BenchmarkCELRules: a cached grant's check with a plain rule, with an
// identity-only expression (its result is kept with the grant) and with an
// expression on mcp.arguments.path (evaluated per request).
func BenchmarkCELRules(b *testing.B) {
	f := newFixture(b, benchRoutes)
	tok := f.hs(b, jwt.MapClaims{"groups": []any{"finance"}})
	body := celCall("read_file", `{"path": "/workspace/alice/notes.txt", "limit": 100}`)
	for _, route := range []string{"plain", "identity", "arguments"} {
		b.Run(route, func(b *testing.B) {
			req := &Request{Method: "POST", Scheme: "https", Host: route + ".example.com", Path: "/mcp",
				Headers: Headers{"authorization": "Bearer " + tok, "content-type": "application/json"}, Body: []byte(body),
				ContextExtensions: map[string]string{"route": route}}
			if v := f.pl.Check(b.Context(), req); v.Outcome != Allowed {
				b.Fatalf("%v %s", v.Outcome, v.Description)
			}
			b.ReportAllocs()
			for b.Loop() {
				f.pl.Check(b.Context(), req)
			}
		})
	}
}

// TestListPredicate: a tools/list answer keeps the tools some call could
// pass and drops the others; annotations reach the rules.
func TestListPredicate(t *testing.T) {
	pdp := authzenpdp.Start(func(authzenpdp.Request) (bool, map[string]any) { return true, nil })
	t.Cleanup(pdp.Close)
	f := newFixture(t, fmt.Sprintf(celRoutes+`
  - name: annotated
    hosts: [annotated.example.com]
    issuers: [dev]
    protocol: mcp
    rules:
      - name: destructive needs admin
        methods: [tools/call]
        action: deny
        when: has(mcp.annotations.destructiveHint) && mcp.annotations.destructiveHint == true && !("admin" in identity.scopes)
      - name: hidden tools
        methods: [tools/call]
        action: deny
        when: mcp.name.startsWith("hidden_") && !has(mcp.annotations.readOnlyHint)
`, pdp.Endpoint()))
	req := f.rpcReq(t, "POST", "annotated.example.com", celCall("x", `{}`), nil)
	v := f.pl.Check(t.Context(), req)
	if v.Grant == nil {
		t.Fatalf("%v %s", v.Outcome, v.Description)
	}
	list := `{"jsonrpc":"2.0","id":1,"result":{"tools":[` +
		`{"name":"read","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}},` +
		`{"name":"wipe","inputSchema":{"type":"object"},"annotations":{"destructiveHint":true}},` +
		`{"name":"hidden_a","inputSchema":{"type":"object"}},` +
		`{"name":"hidden_b","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}},` +
		`{"name":"plain","inputSchema":{"type":"object"}}]}}`
	r, _ := f.pl.Policy().routes.ByName(v.Grant.Route)
	x := &Exchange{pl: f.pl, route: r, grant: v.Grant}
	out, dropped, err := mcpresponse.FilterList("tools/list", []byte(list), x.Keep)
	if err != nil {
		t.Fatal(err)
	}
	// The entries share one policy input: each is judged by its own name
	// and annotations.
	if dropped != 2 || strings.Contains(string(out), `"wipe"`) || strings.Contains(string(out), `"hidden_a"`) ||
		!strings.Contains(string(out), `"read"`) || !strings.Contains(string(out), `"hidden_b"`) || !strings.Contains(string(out), `"plain"`) {
		t.Errorf("filtered (%d dropped): %s", dropped, out)
	}
}

func TestCELSourceAddress(t *testing.T) {
	f, _ := celFixture(t)
	for addr, want := range map[string]Outcome{"10.0.0.7": Allowed, "192.168.1.7": Forbidden, "": Forbidden} {
		req := f.rpcReq(t, "POST", "net.example.com", celCall("x", `{}`), nil)
		req.SourceAddress = addr
		if v := f.pl.Check(t.Context(), req); v.Outcome != want {
			t.Errorf("%q: %v (%s), want %v", addr, v.Outcome, v.Description, want)
		}
	}
}

// TestCELA2ASkill: a2a.skill is the skill a message send names in its
// metadata, "" when it names none; a message naming it ambiguously is
// refused before any rule.
func TestCELA2ASkill(t *testing.T) {
	f := newFixture(t, `
  - name: skills
    hosts: [skills.example.com]
    issuers: [dev]
    protocol: a2a
    rules:
      - {name: refunds for finance, methods: [SendMessage], action: deny, when: 'a2a.skill == "refund" && !("finance" in jwt.groups)'}
`)
	finance := jwt.MapClaims{"groups": []any{"finance"}}
	nobody := jwt.MapClaims{"groups": []any{}}
	send := func(method, metadata string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[],"metadata":` + metadata + `}}}`
	}
	tests := []struct {
		name   string
		claims jwt.MapClaims
		body   string
		want   Outcome
	}{
		{"refund by finance (skillId)", finance, send("SendMessage", `{"skillId":"refund"}`), Allowed},
		{"refund by another (skillId)", nobody, send("SendMessage", `{"skillId":"refund"}`), Forbidden},
		{"refund by another (skill, v0.3 method)", nobody, send("message/send", `{"skill":"refund"}`), Forbidden},
		{"refund by another, escaped", nobody, send("SendMessage", `{"skillId":"r\u0065fund"}`), Forbidden},
		{"another skill", nobody, send("SendMessage", `{"skillId":"summarize"}`), Allowed},
		{"no skill", nobody, send("SendMessage", `{}`), Allowed},
		{"both keys", nobody, send("SendMessage", `{"skillId":"summarize","skill":"refund"}`), Malformed},
		{"not a string", nobody, send("SendMessage", `{"skillId":["refund"]}`), Malformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := f.rpcReq(t, "POST", "skills.example.com", tt.body, nil)
			req.Headers["authorization"] = "Bearer " + f.hs(t, tt.claims)
			if v := f.pl.Check(t.Context(), req); v.Outcome != tt.want {
				t.Errorf("outcome %v (%s), want %v", v.Outcome, v.Description, tt.want)
			}
		})
	}
}

// TestCELA2ATenant: a2a.tenant is the tenant an A2A v1.0 call names in
// params.tenant, which an agent serving several tenants reads to pick the
// tasks and contexts it acts on (the A2A JavaScript SDK's context.tenant).
// A rule binds it to the caller's claim; a call naming it in a way the
// agent may read otherwise is refused before any rule.
func TestCELA2ATenant(t *testing.T) {
	f := newFixture(t, `
  - name: tenants
    hosts: [tenants.example.com]
    issuers: [dev]
    protocol: a2a
    rules:
      - {name: own tenant, methods: ["*"], action: deny, when: 'a2a.tenant != jwt.tenant'}
`)
	acme := jwt.MapClaims{"tenant": "acme"}
	call := func(method, params string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + params + `}`
	}
	const message = `"message":{"messageId":"m","role":"ROLE_USER","parts":[]}`
	tests := []struct {
		name string
		body string
		want Outcome
	}{
		{"a message to the caller's tenant", call("SendMessage", `{"tenant":"acme",`+message+`}`), Allowed},
		{"a message to another tenant", call("SendMessage", `{"tenant":"globex",`+message+`}`), Forbidden},
		{"another tenant, escaped", call("SendMessage", `{"tenant":"gl\u006fbex",`+message+`}`), Forbidden},
		{"a task of another tenant", call("GetTask", `{"tenant":"globex","id":"t-1"}`), Forbidden},
		{"v0.3 spelling", call("tasks/get", `{"tenant":"globex","id":"t-1"}`), Forbidden},
		{"no tenant", call("GetTask", `{"id":"t-1"}`), Forbidden},
		{"a tenant that is not a string", call("GetTask", `{"tenant":["acme","globex"],"id":"t-1"}`), Malformed},
		{"the tenant in another case too", call("GetTask", `{"tenant":"acme","TENANT":"globex","id":"t-1"}`), Malformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := f.rpcReq(t, "POST", "tenants.example.com", tt.body, nil)
			req.Headers["authorization"] = "Bearer " + f.hs(t, acme)
			if v := f.pl.Check(t.Context(), req); v.Outcome != tt.want {
				t.Errorf("outcome %v (%s), want %v", v.Outcome, v.Description, tt.want)
			}
		})
	}
}

// TestRulesSeeTheTaskTool: a task operation is re-checked as tools/call of
// the task's tool, and expressions see that call (its name; no arguments,
// which the task operation does not carry), not the task operation.
func TestRulesSeeTheTaskTool(t *testing.T) {
	f := newFixture(t, `
  - name: tk
    hosts: [tk.example.com]
    issuers: [dev]
    protocol: mcp
    rules:
      - {name: no rm, methods: [tools/call], names: ["*"], action: deny, when: 'mcp.name == "rm"'}
      - {name: small writes, methods: [tools/call], names: [write], when: 'mcp.arguments.size < 10'}
`)
	ctx := t.Context()
	for id, tool := range map[string]string{"task-rm": "rm", "task-ls": "ls", "task-write": "write"} {
		if !f.pl.TaskCreated(ctx, id, "dev:alice", tool) {
			t.Fatalf("task %s not bound", id)
		}
	}
	tests := []struct {
		task string
		want Outcome
	}{
		{"task-rm", Forbidden},
		{"task-ls", Allowed},
		{"task-write", PolicyError}, // the tool's arguments are not in a tasks/result
	}
	for _, tt := range tests {
		t.Run(tt.task, func(t *testing.T) {
			body := `{"jsonrpc":"2.0","id":2,"method":"tasks/result","params":{"taskId":"` + tt.task + `"}}`
			if v := f.pl.Check(ctx, f.rpcReq(t, "POST", "tk.example.com", body, nil)); v.Outcome != tt.want {
				t.Fatalf("%v (%s), want %v", v.Outcome, v.Description, tt.want)
			}
		})
	}
}

// TestDecisionPointInputs: a decision point asking for arguments is never
// asked without them (the call is denied, the PDP not called), and always
// gets the request's lineage, whether or not an expression read it.
func TestDecisionPointInputs(t *testing.T) {
	pdp := authzenpdp.Start(func(authzenpdp.Request) (bool, map[string]any) { return true, nil })
	t.Cleanup(pdp.Close)
	f := newFixture(t, fmt.Sprintf(`
  - name: pdp
    hosts: [pdp.example.com]
    issuers: [dev]
    protocol: mcp
    rules:
      - {name: pay, methods: [tools/call], names: ["pay_*"], authzen: {endpoint: "%[1]s", arguments: [amount]}}
  - name: pdphdr
    hosts: [pdphdr.example.com]
    issuers: [dev]
    protocol: mcp
    request_body: none
    upstream_validates_mcp_headers: true
    rules:
      - {name: pay, methods: [tools/call], names: ["pay_*"], authzen: {endpoint: "%[1]s", arguments: [amount]}}
`, pdp.Endpoint()))
	ctx := t.Context()
	headersOnly := f.rpcReq(t, "POST", "pdphdr.example.com", "", Headers{"mcp-method": "tools/call", "mcp-name": "pay_invoice", "mcp-protocol-version": "2026-07-28"})
	if v := f.pl.Check(ctx, headersOnly); v.Outcome != PolicyError || len(pdp.Requests()) != 0 {
		t.Fatalf("without the arguments: %v (%s), %d PDP calls", v.Outcome, v.Description, len(pdp.Requests()))
	}
	if v := f.pl.Check(ctx, f.rpcReq(t, "POST", "pdp.example.com", celCall("pay_invoice", `{"amount": 5}`), nil)); v.Outcome != Allowed {
		t.Fatalf("with the arguments: %v (%s)", v.Outcome, v.Description)
	}
	reqs := pdp.Requests()
	if len(reqs) != 1 || reqs[0].Context["lineage"] == nil {
		t.Fatalf("the PDP was asked %+v: want one request with the lineage", reqs)
	}
}

// TestRepeatedRuleHeader: a rule denying a tenant by its header is not
// escaped by sending the header twice, which the rule would see as
// "blocked,blocked" and the upstream as blocked. A header a rule reads by
// name is refused when the front end saw it repeated; a list header, and a
// repeated header no rule reads, are not.
func TestRepeatedRuleHeader(t *testing.T) {
	f := newFixture(t, `
  - name: tenants
    hosts: [tenants.example.com]
    issuers: [dev]
    protocol: mcp
    rules:
      - name: blocked tenant
        methods: [tools/call]
        action: deny
        when: request.headers["x-tenant"] == "blocked"
      - name: json clients
        methods: [tools/call]
        when: request.headers["accept"].contains("application/json")
`)
	tests := []struct {
		name     string
		headers  Headers
		repeated []string
		want     Outcome
	}{
		{"one tenant header", Headers{"x-tenant": "acme"}, nil, Allowed},
		{"the blocked tenant", Headers{"x-tenant": "blocked"}, nil, Forbidden},
		{"the blocked tenant twice", Headers{"x-tenant": "blocked,blocked"}, []string{"x-tenant"}, Malformed},
		{"another tenant and the blocked one", Headers{"x-tenant": "acme,blocked"}, []string{"x-tenant"}, Malformed},
		{"a list header repeated", Headers{"x-tenant": "acme", "accept": "application/json,text/event-stream"}, []string{"accept"}, Allowed},
		{"a header no rule reads repeated", Headers{"x-tenant": "acme", "x-other": "a,b"}, []string{"x-other"}, Allowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := Headers{"accept": "application/json, text/event-stream"}
			for k, v := range tt.headers {
				h[k] = v
			}
			req := f.rpcReq(t, "POST", "tenants.example.com", celCall("whoami", `{}`), h)
			req.Repeated = tt.repeated
			v := f.pl.Check(t.Context(), req)
			if v.Outcome != tt.want {
				t.Fatalf("outcome %v (%s), want %v", v.Outcome, v.Description, tt.want)
			}
			if tt.want == Malformed && (v.Status() != 400 || !strings.Contains(v.Description, "x-tenant")) {
				t.Errorf("status %d (%s), want 400 naming the header", v.Status(), v.Description)
			}
		})
	}
}
