package check

import (
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/extauthz/extauthz/internal/authzen"
	"github.com/extauthz/extauthz/internal/config"
	"github.com/extauthz/extauthz/internal/jsonrpc"
	"github.com/extauthz/extauthz/internal/policy"
	"github.com/extauthz/extauthz/internal/ratelimit"
)

// rule is a compiled authorization rule for JSON-RPC calls.
type rule struct {
	name    string
	methods []string // globs as written, for methods no specification defines
	// meanings: meanings[i] says whether one of the globs matches a spelling
	// of jsonrpc.Methods[i]. A request for a known method matches through
	// it, so that message/* matches SendMessage and tasks/* every MCP and A2A
	// task method.
	meanings   []bool
	names      []string // globs on the tool/prompt name or resource URI
	scopes     []string
	scopeParam string
	claims     []claimRequirement
	deny       bool
	when       *policy.Program // nil: none (celrules.go)
	pdp        *rulePDP        // nil: no external decision point
	limits     []ratelimit.Limit

	// uriNames are names canonicalised as resource URI patterns, matched
	// against canonical URIs (nil when the rule cannot apply to a resource
	// method).
	uriNames []string
}

type claimRequirement struct {
	claim  string
	values []string
}

func compileRules(route string, rs []config.Rule) []rule {
	out := make([]rule, 0, len(rs))
	for i, r := range rs {
		cr := rule{name: r.Name, names: r.Names, scopes: r.Scopes, scopeParam: strings.Join(r.Scopes, " "), deny: r.Action == "deny"}
		cr.methods = r.Methods
		cr.meanings = expandMethods(r.Methods)
		for claim, values := range r.Claims {
			cr.claims = append(cr.claims, claimRequirement{claim: claim, values: values})
		}
		if cr.name == "" {
			cr.name = "rule " + strconv.Itoa(len(out))
		}
		cr.limits = compileLimits(route+"/rules["+strconv.Itoa(i)+"]", r.Limits)
		out = append(out, cr)
	}
	return out
}

// rpcProtocol is the protocol the route declares, ProtocolUnknown on auto.
func (rt *Route) rpcProtocol() jsonrpc.Protocol {
	if rt.protocol == jsonrpc.ProtocolHTTP {
		return jsonrpc.ProtocolUnknown
	}
	return rt.protocol
}

// expandMethods compiles method globs to the methods (in jsonrpc.Methods)
// they name: a method is named when a glob matches any of its spellings.
func expandMethods(globs []string) []bool {
	if len(globs) == 0 {
		return nil
	}
	out := make([]bool, len(jsonrpc.Methods))
	for i, m := range jsonrpc.Methods {
		for _, s := range m.Spellings {
			out[i] = out[i] || anyGlob(globs, s)
		}
	}
	return out
}

// matchesMethod reports whether the rule names a request for method, which
// may mean the methods (indexes in jsonrpc.Methods) in meanings.
func (r *rule) matchesMethod(method string, meanings []int) bool {
	return len(r.methods) == 0 || matchMethod(r.methods, r.meanings, method, meanings)
}

// matchMethod reports whether globs (compiled to named, see expandMethods)
// name a request for method, which may mean the methods in meanings: a
// known method by what it means, an unknown one by its name as written.
func matchMethod(globs []string, named []bool, method string, meanings []int) bool {
	if len(meanings) == 0 {
		return anyGlob(globs, method)
	}
	for _, i := range meanings {
		if named[i] {
			return true
		}
	}
	return false
}

func (r *rule) matches(method string, meanings []int, name string) bool {
	return r.matchesMethod(method, meanings) && r.matchesName(method, name)
}

// authorize applies the route's rules to a JSON-RPC call by a grant: the
// first matching rule decides, the route's default action otherwise.
//
// A known method is matched by what it means, not how it is spelled: on a
// route that declares its protocol, by its meaning there; otherwise by every
// meaning its name has (tasks/get is MCP's and A2A's).
func (rt *Route) authorize(g *Grant, method, name string) (o Outcome, desc, scope string) {
	o, desc, scope, _ = rt.authorizeFor(nil, g, method, name)
	return o, desc, scope
}

// authorizeFor is authorize within evaluation e, which rules with when or
// authzen need (nil: no request, they fail closed), also saying which rule
// decided: 1 + its index, 0 when none matched (the default action
// decided). A deny rule's when narrows what it matches; an allow rule's is
// one more requirement. An expression that fails denies (PolicyError); a
// decision point that cannot decide makes the call Unavailable, its
// Retry-After in e.pol, and one that refuses to decide it denies it.
func (rt *Route) authorizeFor(e *evaluation, g *Grant, method, name string) (o Outcome, desc, scope string, by int) {
	meanings := jsonrpc.Meanings(method, rt.rpcProtocol())
	if e != nil {
		e.target.method, e.target.name = method, name
	}
	for i := range rt.rules {
		r := &rt.rules[i]
		if !r.matches(method, meanings, name) {
			continue
		}
		if e != nil && r.when == nil {
			e.rec.add("rule", func() string { return r.name + ": matches " + method + " " + name })
		}
		if o, desc, scope, applies := rt.apply(e, g, i); applies {
			return o, desc, scope, i + 1
		}
	}
	if rt.defaultDeny {
		return Forbidden, "no rule allows this call", "", 0
	}
	return Allowed, "", "", 0
}

// apply decides a call by rule i, which matches it; applies is false for
// a deny rule whose when does not hold (the next matching rule decides).
func (rt *Route) apply(e *evaluation, g *Grant, i int) (o Outcome, desc, scope string, applies bool) {
	r := &rt.rules[i]
	if r.deny {
		if r.when != nil {
			ok, err := e.ruleWhen(i, r, g)
			if err != nil {
				return PolicyError, "the rule " + r.name + " could not be evaluated", "", true
			}
			if !ok {
				return 0, "", "", false
			}
		}
		return Forbidden, "denied by " + r.name, "", true
	}
	if !hasAll(g.Scopes, r.scopes) {
		return InsufficientScope, "this call needs scope " + r.scopeParam, r.scopeParam, true
	}
	for _, req := range r.claims {
		if !claimHasAny(g.Claims.Get(req.claim), req.values) {
			return Forbidden, "this call needs claim " + req.claim, "", true
		}
	}
	if r.when != nil {
		ok, err := e.ruleWhen(i, r, g)
		if err != nil {
			return PolicyError, "the rule " + r.name + " could not be evaluated", "", true
		}
		if !ok {
			return Forbidden, "this call does not meet the condition of " + r.name, "", true
		}
	}
	if r.pdp != nil {
		d, err := e.rulePDP(r)
		if errors.Is(err, errPDPArguments) {
			return PolicyError, "the rule " + r.name + " needs the call's arguments", "", true
		}
		if err != nil {
			var ue *authzen.UnavailableError
			if e != nil && e.pol != nil && errors.As(err, &ue) {
				e.pol.retryAfter = ue.RetryAfter
			}
			return Unavailable, "the policy decision point could not decide", "", true
		}
		if d.Refused {
			// A 4xx: the PDP will not decide what this call carries.
			return Forbidden, "the policy decision point refused to decide this call", "", true
		}
		if !d.Allowed {
			return Forbidden, "the policy decision point denies this call", "", true
		}
	}
	return Allowed, "", "", true
}

// authorizeEveryName is authorizeFor for a call whose name is unknown and
// could be any starting with prefix ("": any name at all; the tool of an
// MCP task whose creation is not known, a URI a resource template expands
// to): it allows only what every such name would be allowed. The rules of
// the method whose names may match one are applied in order as if each
// matched, until one that matches every such name applies; the first
// refusal decides. A rule that decides by the name itself (an expression
// reading mcp, a decision point, which is told the name) cannot be applied
// without it, and refuses. Without an evaluation (e nil: a list filter)
// nothing is recorded, and an expression not decided for the grant
// already refuses.
func (rt *Route) authorizeEveryName(e *evaluation, g *Grant, method, prefix string) (o Outcome, desc, scope string, by int) {
	meanings := jsonrpc.Meanings(method, rt.rpcProtocol())
	if e != nil {
		e.target.method, e.target.name = method, ""
	}
	for i := range rt.rules {
		r := &rt.rules[i]
		names := r.namesFor(method)
		if !r.matchesMethod(method, meanings) || len(names) > 0 && !slices.ContainsFunc(names, func(n string) bool { return globMayMatchPrefixed(n, prefix) }) {
			continue
		}
		if r.pdp != nil || r.when != nil && slices.Contains(r.when.Reads(), policy.VarMCP) {
			return Forbidden, "the rule " + r.name + " decides by the name", "", i + 1
		}
		if e != nil && r.when == nil {
			e.rec.add("rule", func() string { return r.name + ": may match " + method + " of an unknown name" })
		}
		o, desc, scope, applies := rt.apply(e, g, i)
		switch {
		case !applies:
		case o != Allowed:
			return o, desc, scope, i + 1
		case len(names) == 0 || slices.ContainsFunc(names, func(n string) bool { return globMatchesPrefixed(n, prefix) }):
			return Allowed, "", "", i + 1
		}
	}
	if rt.defaultDeny {
		return Forbidden, "no rule allows this call", "", 0
	}
	return Allowed, "", "", 0
}

// claimHasAny reports whether the claim equals, or as a list contains, one
// of values.
func claimHasAny(claim any, values []string) bool {
	switch c := claim.(type) {
	case []any:
		for _, e := range c {
			if s, ok := scalar(e); ok && contains(values, s) {
				return true
			}
		}
	default:
		if s, ok := scalar(c); ok {
			return contains(values, s)
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func anyGlob(patterns []string, s string) bool {
	for _, p := range patterns {
		if glob(p, s) {
			return true
		}
	}
	return false
}

// globMayMatchPrefixed reports whether some string starting with prefix
// matches pattern: prefix matches the pattern up to some point, after
// which any pattern is matched by some string.
func globMayMatchPrefixed(pattern, prefix string) bool {
	for k := 0; k <= len(pattern); k++ {
		if glob(pattern[:k], prefix) {
			return true
		}
	}
	return false
}

// globMatchesPrefixed reports whether every string starting with prefix
// matches pattern: pattern ends in "*", which takes whatever follows
// prefix, and matches prefix itself. (It is false for a few patterns that
// do, like "?*" for a non-empty prefix: the caller then refuses.)
func globMatchesPrefixed(pattern, prefix string) bool {
	return strings.HasSuffix(pattern, "*") && glob(pattern, prefix)
}

// glob matches s against a pattern where * matches any run of characters
// (slashes included) and ? any single byte; everything else is literal.
func glob(pattern, s string) bool {
	px, sx := 0, 0
	star, match := -1, 0
	for sx < len(s) {
		switch {
		case px < len(pattern) && pattern[px] == '*':
			// Before the literal case: a "*" in s is a character for the
			// pattern's "*" to take, not the end of its run.
			star, match = px, sx
			px++
		case px < len(pattern) && (pattern[px] == '?' || pattern[px] == s[sx]):
			px++
			sx++
		case star >= 0:
			px = star + 1
			match++
			sx = match
		default:
			return false
		}
	}
	for px < len(pattern) && pattern[px] == '*' {
		px++
	}
	return px == len(pattern)
}
