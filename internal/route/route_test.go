package route

import "testing"

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

func FuzzMatch(f *testing.F) {
	f.Add("a.example.com:80", "/mcp/x?y")
	f.Add("[::1]", "")
	tbl := NewTable([]Matcher{{Name: "a", Hosts: []string{"*.example.com"}, PathPrefix: "/mcp"}}, []string{"a"}, -1)
	f.Fuzz(func(t *testing.T, host, path string) {
		tbl.Match(host, path)
	})
}
