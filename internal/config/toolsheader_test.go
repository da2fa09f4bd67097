package config

import (
	"strings"
	"testing"
	"time"
)

// TestToolsHeader: the route's signed tools header needs the lineage key,
// exact tool names and a header nobody else sets; defaults fill the rest.
func TestToolsHeader(t *testing.T) {
	const signing = "lineage: {signing: {key_file: /keys/lineage.pem, issuer: https://extauthz.example.com}}\n"
	route := func(th string) string {
		return "issuers: [{name: a, secret: s}]\nroutes:\n  - name: files\n    issuers: [a]\n    protocol: mcp\n    claim_headers: [{claim: email, header: x-email}]\n    tools_header: " + th + "\n"
	}
	tests := []struct {
		name string
		doc  string
		want []string // every substring must appear in the error; none: valid
	}{
		{name: "valid", doc: route("{tools: [read_file, list.dir, delete-file]}") + signing},
		{name: "no signing key", doc: route("{tools: [read_file]}"),
			want: []string{"routes[0] (files).tools_header", "lineage.signing.key_file"}},
		{name: "no tools", doc: route("{header: x-tools}") + signing, want: []string{"routes[0] (files).tools_header.tools", "list the names"}},
		{name: "glob is no name", doc: route(`{tools: ["delete_*"]}`) + signing, want: []string{"tools_header.tools[0]", `"delete_*"`, "globs name no tool"}},
		{name: "empty name", doc: route(`{tools: [""]}`) + signing, want: []string{"tools_header.tools[0]"}},
		{name: "too long name", doc: route("{tools: ["+strings.Repeat("a", 129)+"]}") + signing, want: []string{"tools_header.tools[0]"}},
		{name: "duplicate", doc: route("{tools: [a, b, a]}") + signing, want: []string{"tools_header.tools[2]", "twice"}},
		{name: "too many", doc: route("{tools: ["+strings.Repeat("t,", MaxToolsHeaderTools)+"x]}") + signing, want: []string{"at most 256"}},
		{name: "identity header", doc: route("{tools: [a], header: X-User-Id}") + signing, want: []string{"tools_header.header", "already set"}},
		{name: "claim header", doc: route("{tools: [a], header: x-email}") + signing, want: []string{"tools_header.header", "claim header"}},
		{name: "authorization", doc: route("{tools: [a], header: authorization}") + signing, want: []string{"tools_header.header", "cannot be used"}},
		{name: "bad header name", doc: route(`{tools: [a], header: "x tools"}`) + signing, want: []string{"tools_header.header", "not a valid header name"}},
		{name: "ttl too short", doc: route("{tools: [a], ttl: 1s}") + signing, want: []string{"tools_header.ttl"}},
		{name: "ttl too long", doc: route("{tools: [a], ttl: 2h}") + signing, want: []string{"tools_header.ttl"}},
		{name: "a2a route", doc: strings.Replace(route("{tools: [a]}"), "protocol: mcp", "protocol: a2a", 1) + signing,
			want: []string{"tools_header", "mcp or auto"}},
		{name: "unknown key", doc: route("{tools: [a], names: [b]}") + signing, want: []string{"names"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse([]byte(tt.doc))
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				th := f.Routes[0].ToolsHeader
				if th.Header != DefaultToolsHeader || th.TTL.D() != 5*time.Minute {
					t.Errorf("defaults: header %q ttl %v", th.Header, th.TTL.D())
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}
