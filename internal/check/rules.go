package check

import (
	"strconv"
	"strings"

	"github.com/extauthz/extauthz/internal/config"
	"github.com/extauthz/extauthz/internal/jsonrpc"
)

// rule is a compiled authorization rule for JSON-RPC calls.
type rule struct {
	name       string
	methods    []string // globs; A2A method names canonicalized
	names      []string // globs on the tool/prompt name or resource URI
	scopes     []string
	scopeParam string
	claims     []claimRequirement
	deny       bool
}

type claimRequirement struct {
	claim  string
	values []string
}

func compileRules(rs []config.Rule) []rule {
	out := make([]rule, 0, len(rs))
	for _, r := range rs {
		cr := rule{name: r.Name, names: r.Names, scopes: r.Scopes, scopeParam: strings.Join(r.Scopes, " "), deny: r.Action == "deny"}
		for _, m := range r.Methods {
			cr.methods = append(cr.methods, canonicalMethod(m))
		}
		for claim, values := range r.Claims {
			cr.claims = append(cr.claims, claimRequirement{claim: claim, values: values})
		}
		if cr.name == "" {
			cr.name = "rule " + strconv.Itoa(len(out))
		}
		out = append(out, cr)
	}
	return out
}

// canonicalMethod maps A2A v0.3 and v1.0 spellings of a method to one name so
// that a rule written with either matches both.
func canonicalMethod(m string) string {
	if c, ok := jsonrpc.ClassifyA2A(m); ok {
		return c
	}
	return m
}

func (r *rule) matches(method, name string) bool {
	if len(r.methods) > 0 && !anyGlob(r.methods, method) {
		return false
	}
	if len(r.names) > 0 && !anyGlob(r.names, name) {
		return false
	}
	return true
}

// authorize applies the route's rules to a JSON-RPC call by a grant: the
// first matching rule decides, the route's default action otherwise.
func (rt *Route) authorize(g *Grant, method, name string) (o Outcome, desc, scope string) {
	method = canonicalMethod(method)
	for i := range rt.rules {
		r := &rt.rules[i]
		if !r.matches(method, name) {
			continue
		}
		if r.deny {
			return Forbidden, "denied by " + r.name, ""
		}
		if !hasAll(g.Scopes, r.scopes) {
			return InsufficientScope, "this call needs scope " + r.scopeParam, r.scopeParam
		}
		for _, req := range r.claims {
			if !claimHasAny(g.Claims.Get(req.claim), req.values) {
				return Forbidden, "this call needs claim " + req.claim, ""
			}
		}
		return Allowed, "", ""
	}
	if rt.defaultDeny {
		return Forbidden, "no rule allows this call", ""
	}
	return Allowed, "", ""
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

// glob matches s against a pattern where * matches any run of characters
// (slashes included) and ? any single byte; everything else is literal.
func glob(pattern, s string) bool {
	px, sx := 0, 0
	star, match := -1, 0
	for sx < len(s) {
		switch {
		case px < len(pattern) && (pattern[px] == '?' || pattern[px] == s[sx]):
			px++
			sx++
		case px < len(pattern) && pattern[px] == '*':
			star, match = px, sx
			px++
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
