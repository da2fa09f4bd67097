package lineage_test

import (
	"errors"
	"fmt"

	"github.com/extauthz/extauthz/internal/lineage"
)

func show(r lineage.Result, err error) {
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Printf("root=%s parent=%q depth=%d actors=%q trusted=%v\n", r.Root, r.Parent, r.Depth, r.ActorChain, r.Trusted)
}

// A request with no inbound lineage starts a chain: its own context (here the
// token's session) is the root, there is no parent and the depth is 0.
func ExampleDerive_root() {
	show(lineage.Derive(lineage.Inbound{}, lineage.Facts{TokenSessionID: "sess-42"}, lineage.Options{Trusted: true}))
	// Output: root=sess-42 parent="" depth=0 actors=[] trusted=true
}

// An A2A message names its own context: a new chain starts there.
func ExampleDerive_a2aContext() {
	facts := lineage.Facts{ContextID: "ctx-9", TokenSessionID: "sess-42"}
	show(lineage.Derive(lineage.Inbound{}, facts, lineage.Options{Trusted: true}))
	// Output: root=ctx-9 parent="" depth=0 actors=[] trusted=true
}

// Mid-chain, a trusted caller's root and parent are kept and the depth grows
// by one hop.
func ExampleDerive_midChain() {
	facts := lineage.Facts{TokenSessionID: "sess-42"}
	show(lineage.Derive(lineage.Inbound{Root: "R", Parent: "P"}, facts, lineage.Options{Trusted: true}))
	show(lineage.Derive(lineage.Inbound{Root: "R", Parent: "P", Depth: "3"}, facts, lineage.Options{Trusted: true}))
	// Output:
	// root=R parent="P" depth=1 actors=[] trusted=true
	// root=R parent="P" depth=4 actors=[] trusted=true
}

// A legacy caller that sends only its own context as the parent is promoted:
// its parent becomes the root.
func ExampleDerive_legacyParent() {
	show(lineage.Derive(lineage.Inbound{Parent: "P"}, lineage.Facts{TokenSessionID: "s"}, lineage.Options{Trusted: true}))
	// Output: root=P parent="P" depth=1 actors=[] trusted=true
}

// Lineage headers from a caller the route does not trust are ignored: the
// request starts a new chain.
func ExampleDerive_untrusted() {
	forged := lineage.Inbound{Root: "forged", Parent: "forged", Depth: "7"}
	show(lineage.Derive(forged, lineage.Facts{TokenSessionID: "sess-42"}, lineage.Options{Trusted: false}))
	// Output: root=sess-42 parent="" depth=0 actors=[] trusted=false
}

// The token's act claim is the signed truth about delegation: it sets the
// actor chain and the least depth, whatever the headers claim.
func ExampleDerive_actChain() {
	claims := map[string]any{"sub": "alice", "act": map[string]any{"sub": "agent-b", "act": map[string]any{"sub": "agent-a"}}}
	facts := lineage.Facts{TokenSessionID: "s", ActChain: lineage.ActChain(claims)}
	in := lineage.Inbound{Root: "R", Parent: "P", Depth: "0", ActorChain: "mallory"}
	show(lineage.Derive(in, facts, lineage.Options{Trusted: true}))
	// Output: root=R parent="P" depth=2 actors=["agent-b" "agent-a"] trusted=true
}

// Too deep a chain is a runaway delegation loop (403); an unusable value is
// a bad request (400).
func ExampleDerive_denials() {
	facts := lineage.Facts{TokenSessionID: "s"}
	_, err := lineage.Derive(lineage.Inbound{Root: "R", Depth: "8"}, facts, lineage.Options{Trusted: true})
	fmt.Println(errors.Is(err, lineage.ErrTooDeep), err)
	_, err = lineage.Derive(lineage.Inbound{Root: "R", Depth: "-1"}, facts, lineage.Options{Trusted: true})
	fmt.Println(errors.Is(err, lineage.ErrMalformed), err)
	// Output:
	// true lineage too deep: depth 9 exceeds 8
	// true malformed lineage: depth
}

// At the root the parent header is stripped from the upstream request, so a
// client cannot slip one through.
func ExampleResult_Headers() {
	r, _ := lineage.Derive(lineage.Inbound{}, lineage.Facts{TokenSessionID: "sess-42"}, lineage.Options{})
	set, remove := r.Headers(lineage.KagentNames())
	fmt.Println(set)
	fmt.Println(remove)
	// Output:
	// [{x-kagent-root-context-id sess-42} {x-lineage-depth 0}]
	// [x-kagent-parent-context-id x-actor-chain x-lineage-token]
}

func ExampleTrust_Trusted() {
	trust, err := lineage.NewTrust(lineage.TrustConfig{
		ClientIDs:  []string{"planner-agent"},
		Principals: []string{"spiffe://cluster.local/ns/agents/*"},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(trust.Trusted(lineage.Caller{ClientID: "planner-agent"}))
	fmt.Println(trust.Trusted(lineage.Caller{Principal: "spiffe://cluster.local/ns/agents/sa/coder"}))
	fmt.Println(trust.Trusted(lineage.Caller{ClientID: "web-ui"}))
	fmt.Println(trust.Trusted(lineage.Caller{ClientID: "web-ui", HasAct: true}))
	// Output:
	// true
	// true
	// false
	// true
}
