package check

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/shared"
	"github.com/extauthz/extauthz/internal/testing/redistest"
	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

// How agent platforms use the pipeline: session ids
// from real identity providers, tasks owned by their creator, delegated
// sub-agents, per-agent audiences, the kagent preset without a
// conversation, session metrics.

// agentPipeline is one issuer (a Dex-like one: its tokens carry sid, not
// session_id), an MCP route and an A2A route.
func agentPipeline(t testing.TB, extra string, obs Observer, routes ...string) (*Pipeline, func(jwt.MapClaims) string) {
	t.Helper()
	clk := newClock()
	pl := newPipeline(t, agentDoc(routes...)+extra, Deps{Now: clk.Now}, Options{Now: clk.Now, Observer: obs})
	return pl, agentMint(t)
}

// agentDoc is agentPipeline's configuration with routes added.
func agentDoc(routes ...string) string {
	return `
issuers: [{name: dex, issuer: https://dex.example.com, algorithms: [HS256], secret: ` + secret + `}]
routes:
  - {name: mcp, hosts: [mcp.example.com], protocol: mcp, issuers: [dex]}
  - {name: a2a, hosts: [agent.example.com], protocol: a2a, issuers: [dex]}
  - {name: unbound, hosts: [unbound.example.com], protocol: mcp, issuers: [dex], mcp: {session_binding: false}}
` + strings.Join(routes, "")
}

// agentMint mints agentPipeline's tokens: alice's, with claims set or
// (nil values) removed.
func agentMint(t testing.TB) func(jwt.MapClaims) string {
	return func(claims jwt.MapClaims) string {
		c := jwt.MapClaims{"iss": "https://dex.example.com", "sub": "alice", "iat": t0.Unix(), "exp": t0.Add(time.Hour).Unix()}
		for k, v := range claims {
			if v == nil {
				delete(c, k)
			} else {
				c[k] = v
			}
		}
		return testtoken.HMAC(t, "HS256", secret, c)
	}
}

// call is a request to host with tok, extra headers and a JSON-RPC body.
func call(host, tok string, headers Headers, body string) *Request {
	h := Headers{":authority": host, ":path": "/", ":method": "POST", "authorization": "Bearer " + tok}
	for k, v := range headers {
		h[k] = v
	}
	return &Request{Method: "POST", Scheme: "https", Host: host, Path: "/", Headers: h, Body: []byte(body)}
}

func a2aSend(contextID string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":"message/send","params":{"message":{"messageId":"m1","contextId":%q,"role":"user","parts":[]}}}`, contextID)
}

const mcpPing = `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`

// explained is the outcome Explain gives the named step.
func explained(steps []Step, name string) (Step, bool) {
	for _, s := range steps {
		if s.Name == name {
			return s, true
		}
	}
	return Step{}, false
}

// TestSessionSources: the session header comes from the first
// source that names one, and Explain says which.
func TestSessionSources(t *testing.T) {
	pl, mint := agentPipeline(t, "identity: {default_session: default}\n", nil)
	tests := []struct {
		name     string
		claims   jwt.MapClaims
		req      func(tok string) *Request
		want     string // x-session-id upstream; "" means removed
		wantFrom string // the session-id step's outcome
	}{
		{"session_id claim before sid", jwt.MapClaims{"session_id": "sess-42", "sid": "oidc-1"},
			func(tok string) *Request { return call("mcp.example.com", tok, nil, mcpPing) }, "sess-42", "claim:session_id"},
		{"Dex-like token: only sid", jwt.MapClaims{"sid": "CiQ5ZGV4"},
			func(tok string) *Request { return call("mcp.example.com", tok, nil, mcpPing) }, "CiQ5ZGV4", "claim:sid"},
		{"the token's session beats the MCP session", jwt.MapClaims{"sid": "oidc-1"},
			func(tok string) *Request {
				return call("mcp.example.com", tok, Headers{"mcp-session-id": "mcp-s1"}, mcpPing)
			}, "oidc-1", "claim:sid"},
		{"no session claim: the bound MCP session", nil,
			func(tok string) *Request {
				return call("mcp.example.com", tok, Headers{"mcp-session-id": "mcp-s2"}, mcpPing)
			}, "mcp-s2", "mcp-session-id"},
		{"no session claim: the bound A2A context", nil,
			func(tok string) *Request { return call("agent.example.com", tok, nil, a2aSend("ctx-1")) }, "ctx-1", "a2a-context-id"},
		{"a route without binding never takes the header", nil,
			func(tok string) *Request {
				return call("unbound.example.com", tok, Headers{"mcp-session-id": "mcp-s3"}, mcpPing)
			}, "default", "default"},
		{"nothing names one: default_session", nil,
			func(tok string) *Request { return call("mcp.example.com", tok, nil, mcpPing) }, "default", "default"},
		{"a forged session header is replaced", nil,
			func(tok string) *Request {
				return call("mcp.example.com", tok, Headers{"x-session-id": "../../bob"}, mcpPing)
			}, "default", "default"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok := mint(tt.claims)
			_, steps := pl.Explain(context.Background(), tt.req(tok))
			v := pl.Check(context.Background(), tt.req(tok))
			if v.Outcome != Allowed {
				t.Fatalf("outcome %v: %s", v.Outcome, v.Description)
			}
			if got, _ := header(v.Set, "x-session-id"); got != tt.want {
				t.Fatalf("x-session-id %q, want %q (set %v)", got, tt.want, v.Set)
			}
			if has(v.Remove, "x-session-id") {
				t.Fatalf("x-session-id both set and removed: %v", v.Remove)
			}
			st, ok := explained(steps, "session-id")
			if !ok || st.Outcome != tt.wantFrom {
				t.Fatalf("Explain session-id step %+v, want source %s (steps %+v)", st, tt.wantFrom, steps)
			}
		})
	}
}

// TestSessionHeaderValue: a value the session header cannot carry as it
// is names no session: control bytes, and spaces at either end, which HTTP
// trims into another session's id.
func TestSessionHeaderValue(t *testing.T) {
	p := compileDoc(t, `issuers: [{name: dev, algorithms: [HS256], secret: `+secret+`}]
routes: [{name: r, default: true, issuers: [dev]}]
`, Deps{})
	for _, tt := range []struct {
		in string
		ok bool
	}{
		{"ctx-1", true},
		{"a b", true},
		{" ctx-1", false},
		{"ctx-1 ", false},
		{"ctx-1\u00a0", false},
		{"\u3000ctx-1", false},
		{"ctx-1\ufeff", false},
		{"ctx\u00a01", true},
		{"ctx\t1", false},
		{"ctx\r\n1", false},
		{"", false},
	} {
		if _, ok := p.sessionHeaderValue(tt.in); ok != tt.ok {
			t.Errorf("sessionHeaderValue(%q) ok = %v, want %v", tt.in, ok, tt.ok)
		}
	}
}

// TestSessionSourcesOnlyAfterBinding: a request id names the session only
// for the user it is bound to; anybody else is refused, never named.
func TestSessionSourcesOnlyAfterBinding(t *testing.T) {
	pl, mint := agentPipeline(t, "", nil)
	alice, bob := mint(nil), mint(jwt.MapClaims{"sub": "bob"})
	ctx := context.Background()
	for _, st := range []struct {
		name string
		req  *Request
		want Outcome
	}{
		{"alice binds her MCP session", call("mcp.example.com", alice, Headers{"mcp-session-id": "s-alice"}, mcpPing), Allowed},
		{"bob presents it", call("mcp.example.com", bob, Headers{"mcp-session-id": "s-alice"}, mcpPing), SessionConflict},
		{"alice binds her A2A context", call("agent.example.com", alice, nil, a2aSend("ctx-alice")), Allowed},
		{"bob writes into it", call("agent.example.com", bob, nil, a2aSend("ctx-alice")), SessionConflict},
		{"bob's own context", call("agent.example.com", bob, nil, a2aSend("ctx-bob")), Allowed},
	} {
		v := pl.Check(ctx, st.req)
		if v.Outcome != st.want {
			t.Fatalf("%s: %v (%s), want %v", st.name, v.Outcome, v.Description, st.want)
		}
		if !v.Outcome.Allow() {
			if _, set := header(v.Set, "x-session-id"); set {
				t.Fatalf("%s: a refused request names a session", st.name)
			}
			if !strings.Contains(string(v.Body), `"id":`) {
				t.Fatalf("%s: body %s lacks the JSON-RPC id", st.name, v.Body)
			}
		}
	}
	// Without a session source for request ids, the request names no
	// session; its A2A context is bound all the same, as the agent keys
	// its conversation on it whatever the session header says.
	pl2, mint2 := agentPipeline(t, "identity: {session_sources: [\"claim:session_id\"]}\n", nil)
	for _, st := range []struct {
		sub  string
		want Outcome
	}{{"alice", Allowed}, {"bob", SessionConflict}} {
		v := pl2.Check(ctx, call("agent.example.com", mint2(jwt.MapClaims{"sub": st.sub}), nil, a2aSend("ctx-x")))
		if v.Outcome != st.want {
			t.Fatalf("%s: %v (%s), want %v", st.sub, v.Outcome, v.Description, st.want)
		}
		if _, set := header(v.Set, "x-session-id"); set {
			t.Fatalf("claim-only sources named a session from the request")
		}
	}
}

// sessionStats counts the session metrics (SessionStatsObserver).
type sessionStats struct {
	observerFunc
	hits, misses, created, conflicts, refused map[string]int
}

func (s *sessionStats) SessionLookup(route string, hit bool) {
	if hit {
		s.hits[route]++
	} else {
		s.misses[route]++
	}
}
func (s *sessionStats) SessionCreated(route string)  { s.created[route]++ }
func (s *sessionStats) SessionRefused(route string)  { s.refused[route]++ }
func (s *sessionStats) SessionConflict(route string) { s.conflicts[route]++ }

// TestSessionMetrics: hits, misses, bindings created, conflicts
// and refusals, by route.
func TestSessionMetrics(t *testing.T) {
	st := &sessionStats{observerFunc: func(string, Outcome) {},
		hits: map[string]int{}, misses: map[string]int{}, created: map[string]int{}, conflicts: map[string]int{}, refused: map[string]int{}}
	pl, mint := agentPipeline(t, "sessions: {max_entries: 2, max_per_subject: 1}\n", st)
	alice, bob, carol := mint(nil), mint(jwt.MapClaims{"sub": "bob"}), mint(jwt.MapClaims{"sub": "carol"})
	ctx := context.Background()
	use := func(tok, sid string) {
		pl.Check(ctx, call("mcp.example.com", tok, Headers{"mcp-session-id": sid}, mcpPing))
	}
	use(alice, "s1")                                                    // miss, created
	use(alice, "s1")                                                    // hit
	use(bob, "s1")                                                      // conflict
	use(bob, "s2")                                                      // miss, created
	use(carol, "s3")                                                    // miss, refused: the store is full
	pl.Check(ctx, call("agent.example.com", alice, nil, a2aSend("c1"))) // another route: miss, created (contexts count too)
	want := map[string][5]int{"mcp": {1, 3, 2, 1, 1}, "a2a": {0, 1, 1, 0, 0}}
	for route, w := range want {
		got := [5]int{st.hits[route], st.misses[route], st.created[route], st.conflicts[route], st.refused[route]}
		if got != w {
			t.Errorf("route %s: hits, misses, created, conflicts, refused = %v, want %v", route, got, w)
		}
	}
}

// TestKagentPresetNoConversation: with preset kagent and nothing
// naming the conversation, no lineage header goes upstream (and forged ones
// are stripped); the default preset still mints a root.
func TestKagentPresetNoConversation(t *testing.T) {
	for _, tt := range []struct {
		preset   string
		claims   jwt.MapClaims
		headers  Headers
		wantRoot bool
		rootName string
	}{
		{"kagent", nil, nil, false, "x-kagent-root-context-id"},
		{"kagent", nil, Headers{"x-kagent-root-context-id": "forged"}, false, "x-kagent-root-context-id"},
		{"kagent", jwt.MapClaims{"session_id": "sess-1"}, nil, true, "x-kagent-root-context-id"},
		{"kagent", nil, Headers{"mcp-session-id": "mcp-1"}, true, "x-kagent-root-context-id"},
		{"default", nil, nil, true, "x-root-context-id"},
	} {
		t.Run(fmt.Sprintf("%s/%v/%v", tt.preset, tt.claims, tt.headers), func(t *testing.T) {
			pl, mint := agentPipeline(t, "lineage: {preset: "+tt.preset+"}\nidentity: {session_sources: [\"claim:session_id\", mcp-session-id]}\n", nil)
			v := pl.Check(context.Background(), call("mcp.example.com", mint(tt.claims), tt.headers, mcpPing))
			if v.Outcome != Allowed {
				t.Fatalf("%v: %s", v.Outcome, v.Description)
			}
			_, root := header(v.Set, tt.rootName)
			if root != tt.wantRoot {
				t.Fatalf("root header set %v, want %v (set %v)", root, tt.wantRoot, v.Set)
			}
			if !tt.wantRoot {
				for _, h := range v.Set {
					if strings.Contains(h.Name, "context-id") || h.Name == "x-lineage-depth" || h.Name == "x-actor-chain" {
						t.Fatalf("lineage header %s set without a conversation", h.Name)
					}
				}
				if !has(v.Remove, tt.rootName) || !has(v.Remove, "x-lineage-depth") {
					t.Fatalf("lineage headers not stripped: %v", v.Remove)
				}
			}
		})
	}
}

// TestDelegatedSubAgentJoinsSession: a sub-agent acting for the
// user joins the user's session (and tasks) only by an explicit delegates
// rule; an unrelated principal is still refused.
func TestDelegatedSubAgentJoinsSession(t *testing.T) {
	pl, mint := agentPipeline(t, `sessions:
  delegates:
    - {name: research, client_ids: [research-agent]}
    - {name: planner, act_subjects: [planner-agent]}
`, nil)
	ctx := context.Background()
	alice := mint(jwt.MapClaims{"azp": "chat-ui"})
	if v := pl.Check(ctx, call("mcp.example.com", alice, Headers{"mcp-session-id": "s-1"}, mcpPing)); v.Outcome != Allowed {
		t.Fatalf("alice: %v", v.Outcome)
	}
	tests := []struct {
		name   string
		claims jwt.MapClaims
		want   Outcome
	}{
		{"exchanged for the user: same sub, act names the agent", jwt.MapClaims{"act": map[string]any{"sub": "some-agent"}}, Allowed},
		{"the research agent's own token, the user in act", jwt.MapClaims{"sub": "research-agent", "azp": "research-agent", "act": map[string]any{"sub": "alice"}}, Allowed},
		{"a planner acting for alice through a service account", jwt.MapClaims{"sub": "svc", "act": map[string]any{"sub": "planner-agent", "act": map[string]any{"sub": "alice"}}}, Allowed},
		{"a listed agent acting for somebody else", jwt.MapClaims{"sub": "research-agent", "azp": "research-agent", "act": map[string]any{"sub": "bob"}}, SessionConflict},
		{"an unlisted agent acting for alice", jwt.MapClaims{"sub": "rogue", "azp": "rogue-agent", "act": map[string]any{"sub": "alice"}}, SessionConflict},
		{"the listed agent without an act chain", jwt.MapClaims{"sub": "research-agent", "azp": "research-agent"}, SessionConflict},
		{"an unrelated principal", jwt.MapClaims{"sub": "mallory"}, SessionConflict},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := call("mcp.example.com", mint(tt.claims), Headers{"mcp-session-id": "s-1"}, mcpPing)
			_, steps := pl.Explain(ctx, req)
			v := pl.Check(ctx, req)
			if v.Outcome != tt.want {
				t.Fatalf("%v (%s), want %v", v.Outcome, v.Description, tt.want)
			}
			if tt.want == Allowed {
				if b, _ := pl.state.sessions.Lookup(bindingKey(bindSession, "s-1")); b.Subject != "alice" {
					t.Fatalf("the session now belongs to %q", b.Subject)
				}
				if got, _ := header(v.Set, "x-user-id"); got == "" {
					t.Fatal("no user header")
				}
			} else if vs, _ := explained(steps, "verdict"); !strings.Contains(vs.Outcome, "session_conflict") {
				t.Fatalf("Explain disagrees: %+v", steps)
			}
		})
	}
}

// TestDelegatesAcrossIssuers: a delegates rule names its client ids and act
// subjects in their issuer's namespace, as users are: another identity
// provider on the route can issue a client "research-agent" or an act
// subject "planner-agent" too, and that client is not dex's research
// agent, even for its own issuer's users' sessions.
func TestDelegatesAcrossIssuers(t *testing.T) {
	clk := newClock()
	pl := newPipeline(t, `
issuers:
  - {name: dex, issuer: https://dex.example.com, algorithms: [HS256], secret: `+secret+`}
  - {name: tenant, issuer: https://tenant.example.com, algorithms: [HS256], secret: `+secret+`}
routes:
  - {name: mcp, hosts: [mcp.example.com], protocol: mcp, issuers: [dex, tenant]}
sessions:
  delegates:
    - {name: research, client_ids: ["dex:research-agent"]}
    - {name: planner, act_subjects: ["dex:planner-agent"]}
    - {name: tenant helper, client_ids: ["tenant:helper"]}
`, Deps{Now: clk.Now}, Options{Now: clk.Now})
	mint := agentMint(t)
	ctx := context.Background()
	tenant := "https://tenant.example.com"
	// s-dex is dex's alice's session, s-tenant the tenant's alice's.
	for id, claims := range map[string]jwt.MapClaims{"s-dex": nil, "s-tenant": {"iss": tenant}} {
		if v := pl.Check(ctx, call("mcp.example.com", mint(claims), Headers{"mcp-session-id": id}, mcpPing)); v.Outcome != Allowed {
			t.Fatalf("%s: %v %s", id, v.Outcome, v.Description)
		}
	}
	actsForAlice := map[string]any{"sub": "alice"}
	tests := []struct {
		name, session string
		claims        jwt.MapClaims
		want          Outcome
	}{
		{"dex's research agent", "s-dex", jwt.MapClaims{"sub": "research-agent", "azp": "research-agent", "act": actsForAlice}, Allowed},
		{"dex's planner", "s-dex", jwt.MapClaims{"sub": "svc", "act": map[string]any{"sub": "planner-agent", "act": actsForAlice}}, Allowed},
		{"the tenant's helper, named with its issuer", "s-tenant", jwt.MapClaims{"iss": tenant, "sub": "helper", "azp": "helper", "act": actsForAlice}, Allowed},
		{"the tenant's client research-agent", "s-tenant", jwt.MapClaims{"iss": tenant, "sub": "research-agent", "azp": "research-agent", "act": actsForAlice}, SessionConflict},
		{"the tenant's act subject planner-agent", "s-tenant", jwt.MapClaims{"iss": tenant, "sub": "svc", "act": map[string]any{"sub": "planner-agent", "act": actsForAlice}}, SessionConflict},
		{"the tenant's client named as the entry", "s-tenant", jwt.MapClaims{"iss": tenant, "sub": "x", "azp": "dex:research-agent", "act": actsForAlice}, SessionConflict},
		{"the tenant's helper for dex's alice", "s-dex", jwt.MapClaims{"iss": tenant, "sub": "helper", "azp": "helper", "act": actsForAlice}, SessionConflict},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := pl.Check(ctx, call("mcp.example.com", mint(tt.claims), Headers{"mcp-session-id": tt.session}, mcpPing))
			if v.Outcome != tt.want {
				t.Fatalf("%v (%s), want %v", v.Outcome, v.Description, tt.want)
			}
		})
	}
}

// TestTasksBelongToCreator: task operations in both protocols and
// spellings by another user are refused with a JSON-RPC error carrying the
// id; the creator and the delegates go on.
func TestTasksBelongToCreator(t *testing.T) {
	pl, mint := agentPipeline(t, "sessions: {delegates: [{client_ids: [research-agent]}]}\n", nil)
	alice, bob := mint(nil), mint(jwt.MapClaims{"sub": "bob"})
	helper := mint(jwt.MapClaims{"sub": "research-agent", "azp": "research-agent", "act": map[string]any{"sub": "alice"}})
	ctx := context.Background()
	ops := []struct {
		host, body string
	}{
		{"mcp.example.com", `{"jsonrpc":"2.0","id":11,"method":"tasks/get","params":{"taskId":"T"}}`},
		{"mcp.example.com", `{"jsonrpc":"2.0","id":12,"method":"tasks/result","params":{"taskId":"T"}}`},
		{"mcp.example.com", `{"jsonrpc":"2.0","id":13,"method":"tasks/cancel","params":{"taskId":"T"}}`},
		{"agent.example.com", `{"jsonrpc":"2.0","id":14,"method":"tasks/get","params":{"id":"T"}}`},
		{"agent.example.com", `{"jsonrpc":"2.0","id":15,"method":"GetTask","params":{"id":"T"}}`},
		{"agent.example.com", `{"jsonrpc":"2.0","id":16,"method":"tasks/cancel","params":{"id":"T"}}`},
		{"agent.example.com", `{"jsonrpc":"2.0","id":17,"method":"CancelTask","params":{"id":"T"}}`},
		{"agent.example.com", `{"jsonrpc":"2.0","id":18,"method":"tasks/resubscribe","params":{"id":"T"}}`},
		{"agent.example.com", `{"jsonrpc":"2.0","id":19,"method":"SubscribeToTask","params":{"id":"T"}}`},
		{"agent.example.com", `{"jsonrpc":"2.0","id":20,"method":"message/send","params":{"message":{"messageId":"m","taskId":"T","role":"user","parts":[]}}}`},
		{"agent.example.com", `{"jsonrpc":"2.0","id":21,"method":"ListTaskPushNotificationConfigs","params":{"task_id":"T"}}`},
		{"agent.example.com", `{"jsonrpc":"2.0","id":22,"method":"CreateTaskPushNotificationConfig","params":{"task_id":"T","config":{"url":"https://hook.example"}}}`},
		{"agent.example.com", `{"jsonrpc":"2.0","id":23,"method":"SendMessage","params":{"message":{"messageId":"m","task_id":"T","role":"ROLE_USER","parts":[]}}}`},
	}
	for _, op := range ops {
		t.Run(op.body[30:60], func(t *testing.T) {
			if v := pl.Check(ctx, call(op.host, alice, nil, op.body)); v.Outcome != Allowed {
				t.Fatalf("alice, first sight: %v %s", v.Outcome, v.Description)
			}
			v := pl.Check(ctx, call(op.host, bob, nil, op.body))
			if v.Outcome != Forbidden || v.Status() != 403 {
				t.Fatalf("bob: %v %d, want 403", v.Outcome, v.Status())
			}
			id := op.body[strings.Index(op.body, `"id":`)+5 : strings.Index(op.body, `,"method"`)]
			if !strings.Contains(string(v.Body), `"id":`+id) || !strings.Contains(string(v.Body), "task belongs to another user") {
				t.Fatalf("bob's refusal %s lacks the id %s or the reason", v.Body, id)
			}
			if v := pl.Check(ctx, call(op.host, helper, nil, op.body)); v.Outcome != Allowed {
				t.Fatalf("alice's delegate: %v", v.Outcome)
			}
			if v := pl.Check(ctx, call(op.host, alice, nil, op.body)); v.Outcome != Allowed {
				t.Fatalf("alice again: %v", v.Outcome)
			}
		})
	}
	// An id in another field than the one the upstream reads is checked
	// too: bob cannot smuggle alice's task past in params.id.
	v := pl.Check(ctx, call("mcp.example.com", bob, nil, `{"jsonrpc":"2.0","id":30,"method":"tasks/get","params":{"taskId":"bobs","id":"T"}}`))
	if v.Outcome != Forbidden {
		t.Fatalf("split ids: %v", v.Outcome)
	}
	// Off by configuration.
	pl2, mint2 := agentPipeline(t, "sessions: {task_ownership: false}\n", nil)
	for _, sub := range []string{"alice", "bob"} {
		if v := pl2.Check(ctx, call("mcp.example.com", mint2(jwt.MapClaims{"sub": sub}), nil, ops[0].body)); v.Outcome != Allowed {
			t.Fatalf("task_ownership false, %s: %v", sub, v.Outcome)
		}
	}
}

// TestTaskRulesNameTheTool: once the creating call is known, a task
// operation is matched under its tool's name and needs what tools/call of
// the tool needs.
func TestTaskRulesNameTheTool(t *testing.T) {
	pl, mint := agentPipeline(t, "", nil, `  - name: files
    hosts: [files.example.com]
    protocol: mcp
    issuers: [dex]
    rules:
      - {name: results of deletes are audited, methods: [tasks/result], names: [delete_*], claims: {groups: [audit]}}
      - {name: delete needs admin, methods: [tools/call], names: [delete_*], scopes: [files:admin]}
`)
	ctx := context.Background()
	alice := mint(jwt.MapClaims{"scope": "files:read", "groups": []any{"audit"}})
	if !pl.TaskCreated(ctx, "T-del", "alice", "delete_file") || !pl.TaskCreated(ctx, "T-read", "alice", "read_file") {
		t.Fatal("TaskCreated refused")
	}
	if pl.TaskCreated(ctx, "T-del", "bob", "read_file") {
		t.Fatal("bob took over alice's task")
	}
	for _, tt := range []struct {
		name, body string
		want       Outcome
	}{
		{"a read task's result", `{"jsonrpc":"2.0","id":1,"method":"tasks/result","params":{"taskId":"T-read"}}`, Allowed},
		{"a delete task's result needs what delete needs", `{"jsonrpc":"2.0","id":2,"method":"tasks/result","params":{"taskId":"T-del"}}`, InsufficientScope},
		{"polling a delete task too", `{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"taskId":"T-del"}}`, InsufficientScope},
	} {
		v := pl.Check(ctx, call("files.example.com", alice, nil, tt.body))
		if v.Outcome != tt.want {
			t.Fatalf("%s: %v (%s), want %v", tt.name, v.Outcome, v.Description, tt.want)
		}
	}
	admin := mint(jwt.MapClaims{"scope": "files:admin", "groups": []any{"dev"}})
	v := pl.Check(ctx, call("files.example.com", admin, nil, `{"jsonrpc":"2.0","id":4,"method":"tasks/result","params":{"taskId":"T-del"}}`))
	if v.Outcome != Forbidden || !strings.Contains(v.Description, "groups") {
		t.Fatalf("a rule naming the task's tool was not applied: %v %s", v.Outcome, v.Description)
	}
}

// TestTaskRulesNameTheToolAcrossReplicas: replicas share task bindings
// through Redis, and with them the tool a task was created for. A task
// created through one replica and polled through another is still matched
// under its tool's name: a token without what delete needs gets no result
// of a delete task from any replica. The route's response path records
// task tools (TaskCreated stands for it here).
func TestTaskRulesNameTheToolAcrossReplicas(t *testing.T) {
	srv := redistest.Start(t)
	ctx := t.Context()
	route := `  - name: files
    hosts: [files.example.com]
    protocol: mcp
    response_path: true
    issuers: [dex]
    rules:
      - {name: delete needs admin, methods: [tools/call], names: [delete_*], scopes: [files:admin]}
`
	replica := func() (*Pipeline, func(jwt.MapClaims) string) {
		st, err := shared.New(ctx, shared.Config{Addrs: []string{srv.Addr}, OpTimeout: time.Second}, shared.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		p := compileDoc(t, agentDoc(route), Deps{Now: newClock().Now})
		t.Cleanup(p.Close)
		pl, err := New(p, Options{Now: newClock().Now, Shared: st})
		if err != nil {
			t.Fatal(err)
		}
		return mustLoad(t, pl), agentMint(t)
	}
	a, mint := replica()
	b, _ := replica()
	if !a.TaskCreated(ctx, "T-del", "alice", "delete_file") {
		t.Fatal("TaskCreated refused")
	}
	reader := mint(jwt.MapClaims{"scope": "files:read"})
	poll := `{"jsonrpc":"2.0","id":1,"method":"tasks/result","params":{"taskId":"T-del"}}`
	for _, tt := range []struct {
		name string
		pl   *Pipeline
	}{
		{"the replica that saw it created", a},
		{"another replica", b},
		{"another replica again", b},
	} {
		if v := tt.pl.Check(ctx, call("files.example.com", reader, nil, poll)); v.Outcome != InsufficientScope {
			t.Errorf("%s: %v (%s), want insufficient_scope", tt.name, v.Outcome, v.Description)
		}
	}
	if v := b.Check(ctx, call("files.example.com", mint(jwt.MapClaims{"sub": "bob", "scope": "files:admin"}), nil, poll)); v.Outcome != Forbidden {
		t.Errorf("another user on another replica: %v (%s), want forbidden", v.Outcome, v.Description)
	}
	// A replica that cannot ask Redis for the task's tool answers 503, as
	// its binding stage would, not a refusal the client would not retry.
	c, _ := replica()
	srv.Kill()
	if v := c.Check(ctx, call("files.example.com", reader, nil, poll)); v.Outcome != Unavailable {
		t.Errorf("Redis down: %v (%s), want unavailable", v.Outcome, v.Description)
	}
}

// BenchmarkSessionSources: a session named by the token costs nothing per
// request; one named by the request's own (bound) id costs the binding
// lookup and a copy of the header lists; a task operation the task's; an
// A2A message under a session claim its context's binding lookup alone.
func BenchmarkSessionSources(b *testing.B) {
	pl, mint := agentPipeline(b, "", nil)
	ctx := context.Background()
	for _, bc := range []struct {
		name string
		req  *Request
	}{
		{"claim", call("mcp.example.com", mint(jwt.MapClaims{"sid": "s"}), nil, mcpPing)},
		{"mcp-session", call("mcp.example.com", mint(nil), Headers{"mcp-session-id": "m"}, mcpPing)},
		{"a2a-context", call("agent.example.com", mint(nil), nil, a2aSend("c"))},
		{"a2a-context-under-a-claim", call("agent.example.com", mint(jwt.MapClaims{"sid": "s"}), nil, a2aSend("c2"))},
		{"task", call("mcp.example.com", mint(jwt.MapClaims{"sid": "s"}), nil, `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"t"}}`)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			if v := pl.Check(ctx, bc.req); v.Outcome != Allowed {
				b.Fatalf("%v", v.Outcome)
			}
			b.ReportAllocs()
			for b.Loop() {
				pl.Check(ctx, bc.req)
			}
		})
	}
}

// TestRequestSessionSafeValues: a request's session id is held to
// identity.safe_values: skipped with refuse, encoded with encode.
func TestRequestSessionSafeValues(t *testing.T) {
	for _, tt := range []struct {
		unsafe, want string
	}{
		{"refuse", "default"},
		{"encode", "~Li4vLi4vYm9i"},
	} {
		pl, mint := agentPipeline(t, "identity: {safe_values: path-segment, unsafe_values: "+tt.unsafe+", default_session: default}\n", nil)
		v := pl.Check(context.Background(), call("mcp.example.com", mint(nil), Headers{"mcp-session-id": "../../bob"}, mcpPing))
		if v.Outcome != Allowed {
			t.Fatalf("%s: %v %s", tt.unsafe, v.Outcome, v.Description)
		}
		if got, _ := header(v.Set, "x-session-id"); got != tt.want {
			t.Fatalf("%s: x-session-id %q, want %q", tt.unsafe, got, tt.want)
		}
	}
}
