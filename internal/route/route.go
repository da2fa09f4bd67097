// Package route matches a request to the route whose policy applies to it: by
// the route name Envoy passes in context_extensions when there is one, else by
// host (exact or *.suffix) and path prefix, first match in configuration
// order (as Envoy matches its own routes), else the default route.
package route

import "strings"

// Matcher is one route's match criteria.
type Matcher struct {
	Name       string
	Hosts      []string // lower-case; exact or "*.suffix"; empty matches any host
	PathPrefix string   // "" or "/" matches any path
}

// Table finds routes. It is immutable once built and safe for concurrent use.
type Table[R any] struct {
	byName   map[string]R
	ordered  []entry[R]
	fallback *R
}

type entry[R any] struct {
	m     Matcher
	route R
}

// NewTable builds a table of routes in order; routes[fallback] (when
// fallback is a valid index) is returned for requests that match no route.
func NewTable[R any](matchers []Matcher, routes []R, fallback int) *Table[R] {
	t := &Table[R]{byName: make(map[string]R, len(routes))}
	if fallback >= 0 && fallback < len(routes) {
		t.fallback = &routes[fallback]
	}
	for i, m := range matchers {
		t.byName[m.Name] = routes[i]
		t.ordered = append(t.ordered, entry[R]{m: m, route: routes[i]})
	}
	return t
}

// All returns every route in order.
func (t *Table[R]) All() []R {
	out := make([]R, len(t.ordered))
	for i, e := range t.ordered {
		out[i] = e.route
	}
	return out
}

// ByName returns the route with the given name, as named by Envoy's
// per-route context_extensions.
func (t *Table[R]) ByName(name string) (R, bool) {
	r, ok := t.byName[name]
	return r, ok
}

// Match returns the first route whose host and path match, else the fallback.
// host may carry a port; path may carry a query string.
func (t *Table[R]) Match(host, path string) (R, bool) {
	r, ok, _ := t.Lookup(host, path)
	return r, ok
}

// Lookup is Match, and names the route an upstream may take the path for
// when that is another: the first route whose host matches and whose
// prefix the path has only as an upstream reads it (pathMayMean), ahead
// of the one matched. Express, by default, routes "/ADMIN/x" as "/admin/x"
// and "/a2a" as "/a2a/"; so do ASP.NET and case-insensitive file systems
// for case. A caller refuses such a path: the upstream could serve it as
// that route's without that route's policy.
func (t *Table[R]) Lookup(host, path string) (r R, ok bool, variantOf string) {
	host = stripPort(host)
	if i := strings.IndexAny(path, "?#"); i >= 0 {
		path = path[:i]
	}
	for i := range t.ordered {
		e := &t.ordered[i]
		if !hostMatches(e.m.Hosts, host) {
			continue
		}
		if PathHasPrefix(path, e.m.PathPrefix) {
			return e.route, true, variantOf
		}
		if variantOf == "" && pathMayMean(path, e.m.PathPrefix) {
			variantOf = e.m.Name
		}
	}
	if t.fallback != nil {
		return *t.fallback, true, variantOf
	}
	return r, false, variantOf
}

func hostMatches(patterns []string, host string) bool {
	if len(patterns) == 0 {
		return true
	}
	for _, p := range patterns {
		if suffix, ok := strings.CutPrefix(p, "*"); ok {
			// "*.example.com" matches "a.example.com", not "example.com".
			if len(host) > len(suffix) && hasSuffixFold(host, suffix) {
				return true
			}
		} else if strings.EqualFold(host, p) {
			return true
		}
	}
	return false
}

// PathHasPrefix reports whether path is prefix or lies below it, on segment
// boundaries: "/mcp" matches "/mcp" and "/mcp/x", not "/mcpx".
func PathHasPrefix(path, prefix string) bool {
	return matchesAll(prefix) || strings.HasPrefix(path, prefix) && onBoundary(path, prefix)
}

// pathHasPrefixFold is PathHasPrefix regardless of case.
func pathHasPrefixFold(path, prefix string) bool {
	return matchesAll(prefix) || len(path) >= len(prefix) && strings.EqualFold(path[:len(prefix)], prefix) && onBoundary(path, prefix)
}

// pathMayMean reports whether an upstream may read path as one under
// prefix: regardless of case, or without the prefix's trailing slash.
func pathMayMean(path, prefix string) bool {
	trimmed := strings.TrimSuffix(prefix, "/")
	return pathHasPrefixFold(path, prefix) || trimmed != prefix && strings.EqualFold(path, trimmed)
}

// matchesAll reports whether a prefix is every path's.
func matchesAll(prefix string) bool { return prefix == "" || prefix == "/" }

// onBoundary reports whether a path that starts with prefix (in some
// case) is prefix or lies below it.
func onBoundary(path, prefix string) bool {
	return len(path) == len(prefix) || prefix[len(prefix)-1] == '/' || path[len(prefix)] == '/'
}

func hasSuffixFold(s, suffix string) bool {
	return strings.EqualFold(s[len(s)-len(suffix):], suffix)
}

// stripPort removes a trailing :port, keeping IPv6 literals intact.
func stripPort(host string) string {
	i := strings.LastIndexByte(host, ':')
	if i < 0 || strings.IndexByte(host[i:], ']') >= 0 {
		return host
	}
	return host[:i]
}
