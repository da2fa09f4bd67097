package check

import (
	"context"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

// Who acts for the user (RFC 8693 act) decides lineage trust (and the
// per-agent exchange overrides: TestPerAgentExchangeAudience). The act the
// peer stage adds for a workload on a route taking a user's token and the
// workload's identity is no token's say: the workload is judged by its
// principal.

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
