package check

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/testing/ststest"
)

// Who acts for the user (RFC 8693 act) decides lineage trust and the
// per-agent exchange overrides. Section 4.1: only the current actor, the
// outermost act, counts for access control; prior actors nested inside it
// are informational. And the act the peer stage adds for a workload on a
// route taking a user's token and the workload's identity is no token's
// say: the workload is judged by its principal.

// TestPeerActorIsNoTokensAct: on a route taking a user token and a
// workload identity, a workload the lineage trust does not name has its
// lineage headers dropped, although the grant names it as the outermost
// actor; an allow-listed one keeps them, as does a token with an act of
// its own.
func TestPeerActorIsNoTokensAct(t *testing.T) {
	doc := `
issuers:
  - {name: dex, issuer: https://dex.example.com, algorithms: [HS256], secret: ` + secret + `}
  - name: mesh
    peer: {trust_domains: [cluster.local], paths: ["/ns/**"]}
lineage:
  trust: {principals: ["spiffe://cluster.local/ns/agents/*"]}
routes:
  - {name: mcp, hosts: [mcp.example.com], protocol: mcp, issuers: [dex, mesh]}
`
	clk := newClock()
	pl := newPipeline(t, doc, Deps{Now: clk.Now}, Options{Now: clk.Now})
	mint := agentMint(t)
	forged := Headers{"x-root-context-id": "victim-conversation", "x-parent-context-id": "victim-parent", "x-lineage-depth": "3"}
	for _, tc := range []struct {
		name, principal string
		claims          jwt.MapClaims
		trusted         bool
	}{
		{"an allow-listed workload", "spiffe://cluster.local/ns/agents/sa/planner", nil, true},
		{"a workload the trust does not name", "spiffe://cluster.local/ns/tools/sa/scraper", nil, false},
		{"that workload with a token naming an actor of its own", "spiffe://cluster.local/ns/tools/sa/scraper", jwt.MapClaims{"act": map[string]any{"sub": "planner-agent"}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := call("mcp.example.com", mint(tc.claims), forged, mcpPing)
			req.SourcePrincipal = tc.principal
			v := pl.Check(context.Background(), req)
			if v.Outcome != Allowed {
				t.Fatalf("%v %s", v.Outcome, v.Description)
			}
			root, _ := header(v.Set, "x-root-context-id")
			if got := root == "victim-conversation"; got != tc.trusted || v.Lineage.Trusted != tc.trusted {
				t.Errorf("x-root-context-id %q, trusted %v, want trusted %v (actors %v)", root, v.Lineage.Trusted, tc.trusted, v.Lineage.ActorChain)
			}
		})
	}
}

// TestAgentOverrideByTheCurrentActor: an exchange.agents override for
// planner-agent applies when planner-agent acts, not when it handed the
// delegation on to helper-agent, who acts now.
func TestAgentOverrideByTheCurrentActor(t *testing.T) {
	clk := newClock()
	sts := ststest.New(t, ststest.Options{Now: clk.Now, Clients: []ststest.Client{{ID: "extauthz", Method: "client_secret_basic", Secret: "sts-secret"}}})
	doc := fmt.Sprintf(`
issuers:
  - {name: dex, issuer: https://dex.example.com, algorithms: [HS256], secret: %[1]s}
exchanges:
  - {name: sts, token_endpoint: %[2]s, client_auth: {method: client_secret_basic, client_id: extauthz, client_secret_env: STS_SECRET}}
routes:
  - name: files
    hosts: [mcp.example.com]
    protocol: mcp
    issuers: [dex]
    exchange:
      sts: sts
      audience: [https://files.example.com]
      scope: files
      methods: [tools/call]
      agents:
        - {act_subjects: ["planner-agent"], audience: [https://planner-admin.example.com], scope: "files admin"}
`, secret, sts.TokenURL)
	env := map[string]string{"STS_SECRET": "sts-secret"}
	pl := newPipeline(t, doc, Deps{Now: clk.Now, Getenv: func(k string) string { return env[k] }, HTTPClient: sts.Client()}, Options{Now: clk.Now})
	mint := agentMint(t)
	for _, tc := range []struct {
		name     string
		act      map[string]any
		audience string
	}{
		{"planner-agent acting", map[string]any{"sub": "planner-agent"}, "https://planner-admin.example.com"},
		{"helper-agent acting, planner-agent before it", map[string]any{"sub": "helper-agent", "act": map[string]any{"sub": "planner-agent"}}, "https://files.example.com"},
		{"planner-agent acting, helper-agent before it", map[string]any{"sub": "planner-agent", "act": map[string]any{"sub": "helper-agent"}}, "https://planner-admin.example.com"},
		{"nobody acting", nil, "https://files.example.com"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			claims := jwt.MapClaims{}
			if tc.act != nil {
				claims["act"] = tc.act
			}
			req := call("mcp.example.com", mint(claims), nil, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file"}}`)
			v := pl.Check(context.Background(), req)
			if v.Outcome != Allowed {
				t.Fatalf("%v: %s", v.Outcome, v.Description)
			}
			if auth, _ := header(v.Set, "authorization"); !strings.HasPrefix(auth, "Bearer ") {
				t.Fatalf("no exchanged token upstream: %q", auth)
			}
			if v.ExchangeAudience != tc.audience {
				t.Errorf("audience %q, want %q", v.ExchangeAudience, tc.audience)
			}
		})
	}
}

// TestUnusableActorEndsTheChain: an act level whose subject cannot be
// carried in a header ends the chain there, so the prior actor below it is
// never sent upstream as the one acting.
func TestUnusableActorEndsTheChain(t *testing.T) {
	pl, mint := agentPipeline(t, "", nil)
	tok := mint(jwt.MapClaims{"act": map[string]any{"sub": "evil,agent", "act": map[string]any{"sub": "planner-agent"}}})
	v := pl.Check(context.Background(), call("mcp.example.com", tok, nil, mcpPing))
	if !v.Outcome.Allow() {
		t.Fatalf("%v %s", v.Outcome, v.Description)
	}
	if chain, _ := header(v.Set, "x-actor-chain"); strings.Contains(chain, "planner-agent") {
		t.Fatalf("x-actor-chain %q: the prior actor stands for the current one", chain)
	}
}
