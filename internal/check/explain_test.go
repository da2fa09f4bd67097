package check

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/authzen"
	"github.com/extauthz/extauthz/internal/cache"
	"github.com/extauthz/extauthz/internal/config"
	"github.com/extauthz/extauthz/internal/testing/authzenpdp"
	"github.com/extauthz/extauthz/internal/testing/introspecttest"
	"github.com/extauthz/extauthz/internal/testing/ststest"
	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

// countingObserver counts every report a decision makes.
type countingObserver struct {
	mu sync.Mutex
	n  map[string]int
}

func (o *countingObserver) add(what string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n == nil {
		o.n = map[string]int{}
	}
	o.n[what]++
}

func (o *countingObserver) Checked(route string, out Outcome, _ time.Duration) {
	o.add("checked " + route + " " + out.String())
}
func (o *countingObserver) SessionConflict(route string) { o.add("conflict " + route) }
func (o *countingObserver) SessionRefused(route string)  { o.add("refused " + route) }
func (o *countingObserver) SessionLookup(route string, hit bool) {
	o.add(fmt.Sprintf("lookup %s %v", route, hit))
}
func (o *countingObserver) SessionCreated(route string) { o.add("created " + route) }

func (o *countingObserver) snapshot() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return fmt.Sprint(o.n)
}

// everything is what a decision could change: the state, both verdict
// caches and the observer's counts.
func everything(pl *Pipeline, obs *countingObserver) string {
	return fmt.Sprintf("state %+v grants %+v refusals %+v observed %s",
		pl.state.snapshot(), pl.cache.Stats(), pl.refusals.Stats(), obs.snapshot())
}

// TestExplainWritesNothing runs Explain on a request reaching each stage
// and each outcome, over state real checks made (a bound session, a bound
// task, cached grants and refusals, a pending consent), and compares
// everything a decision could change before and after.
func TestExplainWritesNothing(t *testing.T) {
	sts := ststest.New(t, ststest.Options{Clients: []ststest.Client{{ID: "extauthz", Method: "client_secret_post", Secret: "s"}}})
	doc := fmt.Sprintf(`
issuers: [{name: dex, issuer: https://dex.example.com, algorithms: [HS256], secret: %[1]s}]
sessions: {task_ownership: true}
exchanges:
  - {name: sts, token_endpoint: %[2]s, client_auth: {method: client_secret_post, client_id: extauthz, client_secret_env: STS_SECRET}}
routes:
  - {name: mcp, hosts: [mcp.example.com], protocol: mcp, issuers: [dex], public_paths: [/health]}
  - {name: a2a, hosts: [agent.example.com], protocol: a2a, issuers: [dex]}
  - name: tools
    hosts: [tools.example.com]
    protocol: mcp
    issuers: [dex]
    rules:
      - {methods: [tools/call], names: [admin_*], action: deny}
    exchange:
      sts: sts
      audience: [https://backend.example.com]
      methods: [tools/call]
      authorize_url: https://idp.example.com/authorize
      tools: [{names: ["calendar_*"], audience: [https://calendar.example.com], consent: true}]
`, secret, sts.TokenURL)
	clk := newClock()
	obs := &countingObserver{}
	pl := newPipeline(t, doc, Deps{Now: clk.Now, HTTPClient: sts.Client(), Getenv: func(string) string { return "s" }}, Options{Now: clk.Now, Observer: obs})
	mint := func(sub string) string {
		return testtoken.HMAC(t, "HS256", secret, jwt.MapClaims{"iss": "https://dex.example.com", "sub": sub, "iat": t0.Unix(), "exp": t0.Add(time.Hour).Unix()})
	}
	alice, bob, fresh := mint("alice"), mint("bob"), mint("carol")
	expired := testtoken.HMAC(t, "HS256", secret, jwt.MapClaims{"iss": "https://dex.example.com", "sub": "alice", "exp": t0.Add(-time.Hour).Unix()})
	ctx := context.Background()

	// State real checks leave behind.
	for _, req := range []*Request{
		call("mcp.example.com", alice, Headers{"mcp-session-id": "s-alice"}, mcpPing),
		call("agent.example.com", alice, nil, `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"t-alice"}}`),
		call("agent.example.com", alice, nil, a2aSend("ctx-alice")),
		call("mcp.example.com", expired, nil, mcpPing),
		call("tools.example.com", alice, nil, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"calendar_add"}}`),
	} {
		pl.Check(ctx, req)
	}
	if pl.state.sessions.Len() == 0 || pl.state.tasks.Len() == 0 || pl.state.elicitations.Len() == 0 {
		t.Fatalf("the checks left no state to protect: %+v", pl.state.snapshot())
	}

	tests := []struct {
		name string
		req  *Request
		want Outcome
	}{
		{"own session", call("mcp.example.com", alice, Headers{"mcp-session-id": "s-alice"}, mcpPing), Allowed},
		{"another user's session", call("mcp.example.com", bob, Headers{"mcp-session-id": "s-alice"}, mcpPing), SessionConflict},
		{"a new session", call("mcp.example.com", alice, Headers{"mcp-session-id": "s-new"}, mcpPing), Allowed},
		{"a session's DELETE", func() *Request {
			r := call("mcp.example.com", alice, Headers{"mcp-session-id": "s-alice", ":method": "DELETE"}, "")
			r.Method = "DELETE"
			return r
		}(), Allowed},
		{"initialize", call("mcp.example.com", alice, nil, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{"url":{}}},"clientInfo":{"name":"c","version":"1"}}}`), Allowed},
		{"another user's task", call("agent.example.com", bob, nil, `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"t-alice"}}`), Forbidden},
		{"a new task", call("agent.example.com", bob, nil, `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"t-bob"}}`), Allowed},
		{"another user's context", call("agent.example.com", bob, nil, a2aSend("ctx-alice")), SessionConflict},
		{"a token never seen", call("mcp.example.com", fresh, nil, mcpPing), Allowed},
		{"a cached refusal", call("mcp.example.com", expired, nil, mcpPing), InvalidToken},
		{"a refusal never seen", call("mcp.example.com", "x"+alice[1:], nil, mcpPing), InvalidToken},
		{"no token", call("mcp.example.com", "", nil, mcpPing), MissingToken},
		{"a rule denies", call("tools.example.com", alice, nil, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"admin_drop"}}`), Forbidden},
		{"consent needed", call("tools.example.com", bob, nil, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"calendar_add"}}`), AuthorizationRequired},
		{"an exchange", call("tools.example.com", alice, nil, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read"}}`), Allowed},
		{"a public path", &Request{Method: "GET", Scheme: "https", Host: "mcp.example.com", Path: "/health", Headers: Headers{":authority": "mcp.example.com", ":path": "/health"}}, Public},
		{"no route", call("nowhere.example.com", alice, nil, mcpPing), NoRoute},
		{"malformed", call("mcp.example.com", alice, nil, `{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}`), Malformed},
	}
	// The empty token's request carries "Bearer " alone: drop the header.
	delete(tests[11].req.Headers, "authorization")

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := everything(pl, obs)
			v, steps := pl.Explain(ctx, tt.req)
			if v.Outcome != tt.want {
				t.Fatalf("explained %v (%s), want %v; steps %+v", v.Outcome, v.Description, tt.want, steps)
			}
			if after := everything(pl, obs); after != before {
				t.Fatalf("Explain changed what it must not:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
	// The capability initialize declared was not remembered either.
	if _, ok := pl.state.initURL.Peek(cache.NewKey("mcp", "alice")); ok {
		t.Fatal("Explain of initialize remembered the client's capability")
	}
}

// stateSnapshot is everything a decision could change in the state, to
// prove Explain changes none of it.
type stateSnapshot struct {
	sessions, tasks, elicitations, consents, initURL, revoked int
	initURLStats                                              cache.Stats
}

func (s *state) snapshot() stateSnapshot {
	n := 0
	if m := s.revoked.Load(); m != nil {
		n = len(*m)
	}
	return stateSnapshot{
		sessions: s.sessions.Len(), tasks: s.tasks.Len(), elicitations: s.elicitations.Len(),
		consents: s.consents.Len(), initURL: s.initURL.Len(), revoked: n,
		initURLStats: s.initURL.Stats(),
	}
}

// TestExplainLeavesPDPAndIntrospectionCaches: explaining a request whose
// rule delegates to an AuthZEN PDP, or whose token is opaque, asks the PDP
// or the introspection endpoint when nothing is cached but keeps none of
// the answers: the next check still asks, and the clients' counters do not
// move. A cached answer is read by Explain without a call.
func TestExplainLeavesPDPAndIntrospectionCaches(t *testing.T) {
	clk := newClock()
	pdp := authzenpdp.Start(func(authzenpdp.Request) (bool, map[string]any) { return true, nil })
	t.Cleanup(pdp.Close)
	as := introspecttest.New(t, introspecttest.Options{Now: clk.Now})
	const opaque, inactive = "opaque-token-0123456789", "inactive-token-0123456789"
	as.Set(opaque, map[string]any{"sub": "carol", "scope": "read", "exp": float64(t0.Add(time.Hour).Unix())})
	doc := fmt.Sprintf(`
issuers:
  - {name: dev, algorithms: [HS256], secret: %s}
  - name: opaque
    issuer: %s
    introspection:
      endpoint: %s
      client_auth: {method: client_secret_basic, client_id: %s, client_secret_env: AS_SECRET}
routes:
  - name: tools
    hosts: [tools.example.com]
    protocol: mcp
    issuers: [dev, opaque]
    rules:
      - {name: pay, methods: [tools/call], names: ["pay_*"], authzen: {endpoint: "%s", cache_ttl: 1m}}
`, secret, as.URL, as.IntrospectURL, introspecttest.ClientID, pdp.Endpoint())
	cfg, err := config.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	getenv := func(k string) string {
		if k == "AS_SECRET" {
			return introspecttest.ClientSecret
		}
		return ""
	}
	p, err := Compile(t.Context(), cfg, Deps{Now: clk.Now, Getenv: getenv})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	pl, err := New(p, Options{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	alice := testtoken.HMAC(t, "HS256", secret, jwt.MapClaims{"sub": "alice", "exp": t0.Add(time.Hour).Unix()})
	pay := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pay_invoice"}}`
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	var pdpClient *authzen.Client
	tools, _ := p.routes.ByName("tools")
	for _, ru := range tools.rules {
		if ru.pdp != nil {
			pdpClient = ru.pdp.client
		}
	}
	intro := p.verifier.intro["opaque"]
	counters := func() string { return fmt.Sprintf("%+v %+v", pdpClient.Stats(), intro.Stats()) }

	tests := []struct {
		name  string
		req   func() *Request
		calls func() int // calls the dependency received
		want  Outcome
	}{
		{"authzen rule", func() *Request { return call("tools.example.com", alice, nil, pay) }, func() int { return int(pdp.Calls.Load()) }, Allowed},
		{"active opaque token", func() *Request { return call("tools.example.com", opaque, nil, list) }, func() int { return as.Calls(opaque) }, Allowed},
		{"inactive opaque token", func() *Request { return call("tools.example.com", inactive, nil, list) }, func() int { return as.Calls(inactive) }, InvalidToken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, calls := counters(), tt.calls()
			for i := range 2 {
				if v, _ := pl.Explain(context.Background(), tt.req()); v.Outcome != tt.want {
					t.Fatalf("explain %d: %v (%s)", i, v.Outcome, v.Description)
				}
			}
			if got := tt.calls(); got != calls+2 {
				t.Fatalf("explaining twice made %d calls, want 2: an answer was kept", got-calls)
			}
			if after := counters(); after != before {
				t.Fatalf("explain moved the counters:\n%s\n%s", before, after)
			}
			// A check asks once and keeps the answer: the next check and
			// an explanation read it.
			if v := pl.Check(context.Background(), tt.req()); v.Outcome != tt.want {
				t.Fatalf("check: %v (%s)", v.Outcome, v.Description)
			}
			if got := tt.calls(); got != calls+3 {
				t.Fatalf("the check after explaining made %d calls, want 1", got-calls-2)
			}
			pl.Explain(context.Background(), tt.req())
			if got := tt.calls(); got != calls+3 {
				t.Fatalf("explaining a cached answer made %d calls", got-calls-3)
			}
		})
	}
}
