package route

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// isASCII reports whether s is ASCII, where case is what every reader
// takes it for.
func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// TestLookupVariants: a path that has a route's prefix only in another
// case, or is the prefix without its trailing slash, ahead of the route it
// matches, names that route.
func TestLookupVariants(t *testing.T) {
	tbl := NewTable([]Matcher{
		{Name: "admin", Hosts: []string{"files.example.com"}, PathPrefix: "/mcp/admin"},
		{Name: "files", Hosts: []string{"files.example.com"}, PathPrefix: "/mcp"},
		{Name: "a2a", PathPrefix: "/a2a/"},
		{Name: "fallback", Hosts: []string{"never.invalid"}},
	}, []string{"admin", "files", "a2a", "fallback"}, 3)
	tests := []struct {
		name, host, path string
		want, variant    string
	}{
		{"the prefix as configured", "files.example.com", "/mcp/admin/x", "admin", ""},
		{"below the prefix, in any case", "files.example.com", "/mcp/admin/X", "admin", ""},
		{"in capitals, past the route", "files.example.com", "/MCP/ADMIN", "fallback", "admin"},
		{"the inner route capitalised", "files.example.com", "/mcp/Admin/users", "files", "admin"},
		{"a later route's prefix in another case", "files.example.com", "/Mcp", "fallback", "files"},
		{"another host's prefix", "other.example.com", "/MCP/admin", "fallback", ""},
		{"a prefix with a slash", "x", "/A2A/agent", "fallback", "a2a"},
		{"the prefix without its trailing slash", "x", "/a2a", "fallback", "a2a"},
		{"without it, in capitals", "x", "/A2A", "fallback", "a2a"},
		{"a longer path", "x", "/a2ab", "fallback", ""},
		{"not on a segment boundary", "files.example.com", "/MCPX", "fallback", ""},
		{"the query is not the path", "x", "/b?/A2A/", "fallback", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, variant := tbl.Lookup(tt.host, tt.path)
			if !ok || got != tt.want || variant != tt.variant {
				t.Fatalf("Lookup(%q, %q) = %q, %v, %q; want %q, true, %q", tt.host, tt.path, got, ok, variant, tt.want, tt.variant)
			}
		})
	}
}

func TestMatch(t *testing.T) {
	matchers := []Matcher{
		{Name: "files", Hosts: []string{"files.example.com"}, PathPrefix: "/mcp"},
		{Name: "wild", Hosts: []string{"*.agents.example.com"}},
		{Name: "any-host-a2a", PathPrefix: "/a2a/"},
	}
	names := []string{"files", "wild", "any-host-a2a"}
	withFallback := NewTable(append(matchers, Matcher{Name: "fallback", Hosts: []string{"never.invalid"}}), append(names, "fallback"), 3)
	without := NewTable(matchers, names, -1)

	tests := []struct {
		name   string
		table  *Table[string]
		host   string
		path   string
		want   string
		wantOK bool
	}{
		{"exact host and prefix", without, "files.example.com", "/mcp", "files", true},
		{"host with port", without, "files.example.com:8443", "/mcp/x", "files", true},
		{"host case-insensitive", without, "Files.Example.COM", "/mcp", "files", true},
		{"query ignored", without, "files.example.com", "/mcp?x=1", "files", true},
		{"prefix on segment boundary only", without, "files.example.com", "/mcpx", "", false},
		{"wildcard subdomain", without, "a.agents.example.com", "/", "wild", true},
		{"wildcard needs a label", without, "agents.example.com", "/", "", false},
		{"trailing slash prefix", without, "x", "/a2a/agent", "any-host-a2a", true},
		{"no match without fallback", without, "other", "/", "", false},
		{"fallback", withFallback, "other", "/", "fallback", true},
		{"ipv6 literal", without, "[::1]:80", "/a2a/x", "any-host-a2a", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := tt.table.Match(tt.host, tt.path)
			if got != tt.want || ok != tt.wantOK {
				t.Fatalf("Match(%q, %q) = %q, %v; want %q, %v", tt.host, tt.path, got, ok, tt.want, tt.wantOK)
			}
		})
	}
	if r, ok := without.ByName("wild"); !ok || r != "wild" {
		t.Fatal("ByName failed")
	}
	if _, ok := without.ByName("nope"); ok {
		t.Fatal("ByName found an unknown route")
	}
}

// fuzzMatchers overlap on purpose: files and admin share a host and
// admin's prefix lies below files' (so admin, listed later, never wins),
// wild is a wildcard, a2a and root match any host.
var fuzzMatchers = []Matcher{
	{Name: "files", Hosts: []string{"files.example.com"}, PathPrefix: "/mcp"},
	{Name: "admin", Hosts: []string{"files.example.com"}, PathPrefix: "/mcp/admin"},
	{Name: "wild", Hosts: []string{"*.agents.example.com", "agents.example.net"}},
	{Name: "a2a", PathPrefix: "/a2a/"},
	{Name: "root", Hosts: []string{"example.com"}, PathPrefix: "/"},
	{Name: "fallback", Hosts: []string{"never.invalid"}},
}

// refCovers is a deliberately plain reference for one matcher: ASCII
// lower-case comparison of a host without port, and a path that is the
// prefix or continues it after a "/".
func refCovers(m Matcher, host, path string) bool {
	host = strings.ToLower(host)
	hostOK := len(m.Hosts) == 0
	for _, h := range m.Hosts {
		if rest, ok := strings.CutPrefix(h, "*."); ok {
			label, found := strings.CutSuffix(host, "."+rest)
			hostOK = hostOK || (found && label != "")
		} else {
			hostOK = hostOK || host == h
		}
	}
	if m.PathPrefix == "" || m.PathPrefix == "/" {
		return hostOK
	}
	below := strings.TrimSuffix(m.PathPrefix, "/") + "/"
	return hostOK && (path == m.PathPrefix || strings.HasPrefix(path, below))
}

// refMatch is the first matcher covering host and path, else the fallback.
func refMatch(host, path string) string {
	for _, m := range fuzzMatchers {
		if refCovers(m, host, path) {
			return m.Name
		}
	}
	return "fallback"
}

// refVariant is the first matcher whose host matches and whose prefix
// the path has only in another (ASCII) case, or is without its trailing
// slash, ahead of the one that covers it; "" when there is none.
func refVariant(host, path string) string {
	for _, m := range fuzzMatchers {
		if refCovers(m, host, path) {
			return ""
		}
		lower := Matcher{Hosts: m.Hosts, PathPrefix: strings.ToLower(m.PathPrefix)}
		bare := strings.TrimSuffix(lower.PathPrefix, "/")
		if refCovers(lower, host, strings.ToLower(path)) || bare != lower.PathPrefix && refCovers(lower, host, strings.ToLower(path)+"/") {
			return m.Name
		}
	}
	return ""
}

// FuzzMatch: Match never panics, and for a plain ASCII host it agrees with
// the reference: the chosen route covers the request and no route before
// it does; the port, the query and the host's case change nothing.
func FuzzMatch(f *testing.F) {
	f.Add("files.example.com", "/mcp/x", "y=1", uint16(443))
	f.Add("files.example.com", "/mcp/admin/users", "", uint16(0))
	f.Add("Files.Example.COM", "/mcpx", "", uint16(80))
	f.Add("a.agents.example.com", "/", "", uint16(8443))
	f.Add("agents.example.com", "/a2a/", "", uint16(0))
	f.Add("example.com", "", "", uint16(1))
	f.Add("[::1]", "/a2a/x", "", uint16(80))
	f.Add("x.y", "/a2a", "#/a2a/", uint16(0))
	f.Add("files.example.com", "/MCP/admin", "", uint16(0))
	f.Add("x.y", "/A2A/", "", uint16(0))
	names := make([]string, len(fuzzMatchers))
	for i, m := range fuzzMatchers {
		names[i] = m.Name
	}
	tbl := NewTable(fuzzMatchers, names, len(fuzzMatchers)-1)
	f.Fuzz(func(t *testing.T, host, path, query string, port uint16) {
		got, ok := tbl.Match(host, path)
		if !ok {
			t.Fatalf("Match(%q, %q) found nothing despite a fallback", host, path)
		}
		plain := !strings.ContainsAny(host, ":[]") && !strings.ContainsAny(path, "?#")
		for _, r := range host {
			plain = plain && r < utf8.RuneSelf
		}
		if !plain {
			return // only "no panic" and a result for the rest
		}
		if want := refMatch(host, path); got != want {
			t.Fatalf("Match(%q, %q) = %s, the reference says %s", host, path, got, want)
		}
		if _, _, v := tbl.Lookup(host, path); v != refVariant(host, path) && isASCII(path) {
			t.Fatalf("Lookup(%q, %q) names %q as the route an upstream may read, the reference %q", host, path, v, refVariant(host, path))
		}
		if got == "admin" {
			t.Fatalf("Match(%q, %q) = admin, which files (listed first) always covers", host, path)
		}
		for _, variant := range []struct{ host, path string }{
			{fmt.Sprintf("%s:%d", host, port), path},
			{strings.ToUpper(host), path},
			{host, path + "?" + query},
			{host, path + "#" + query},
		} {
			if r, _ := tbl.Match(variant.host, variant.path); r != got {
				t.Fatalf("Match(%q, %q) = %s but Match(%q, %q) = %s", host, path, got, variant.host, variant.path, r)
			}
		}
		// PathHasPrefix agrees with the reference's path rule.
		for _, m := range fuzzMatchers {
			if PathHasPrefix(path, m.PathPrefix) != refCovers(Matcher{PathPrefix: m.PathPrefix}, host, path) {
				t.Fatalf("PathHasPrefix(%q, %q) disagrees with the reference", path, m.PathPrefix)
			}
		}
	})
}
