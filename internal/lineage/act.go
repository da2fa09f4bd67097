package lineage

// ActChain returns the subjects of the RFC 8693 act claim in verified token
// claims, outermost (the current actor) first:
//
//	{"sub":"alice","act":{"sub":"agent-b","act":{"sub":"agent-a"}}} -> [agent-b agent-a]
//
// It follows at most MaxActors levels. A level that is not an object, or
// whose sub is missing or unusable in a header (see ValidID), ends the
// chain: skipping it would move the actors below it up a place, and show a
// prior actor as the current one. The result is nil when there is no act
// claim or its outermost level ends it. It allocates, so compute it once
// per verified token, not per request.
func ActChain(claims map[string]any) []string {
	return ActChainOf(claims["act"])
}

// ActChainOf is ActChain of the act claim's value alone (nil when the
// token has none), for a caller that reads claims one by one.
func ActChainOf(act any) []string {
	first, _ := act.(map[string]any)
	n := 0
	for act, i := first, 0; act != nil && i < MaxActors && actor(act) != ""; i++ {
		n++
		act, _ = act["act"].(map[string]any)
	}
	if n == 0 {
		return nil
	}
	chain := make([]string, 0, n)
	for act := first; len(chain) < n; act, _ = act["act"].(map[string]any) {
		chain = append(chain, actor(act))
	}
	return chain
}

// actor is the usable subject of one act level, or "".
func actor(act map[string]any) string {
	sub, _ := act["sub"].(string)
	if !ValidID(sub) {
		return ""
	}
	return sub
}
