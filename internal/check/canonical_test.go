package check

import (
	"strings"
	"testing"

	"github.com/extauthz/extauthz/internal/jsonrpc"

	"github.com/extauthz/extauthz/internal/config"
)

// TestCompileCanonicalForms: rule URI patterns are canonicalised at
// compile time, and patterns or paths with no canonical form are
// configuration errors.
func TestCompileCanonicalForms(t *testing.T) {
	tests := []struct {
		name, route, err string
	}{
		{"canonical pattern", `rules: [{methods: [resources/read], names: ["file:///etc/*"]}]`, ""},
		{"pattern canonicalised", `rules: [{methods: [resources/read], names: ["FILE://localhost/%65tc/*"]}]`, ""},
		{"tool rule with a colon is no URI pattern", `rules: [{methods: [tools/call], names: ["file://remote/*"]}]`, ""},
		{"pattern above the root", `rules: [{methods: [resources/read], names: ["file:///../*"]}]`, "dot segments"},
		{"pattern with dot segments", `rules: [{methods: [resources/read], names: ["file:///var/run/../etc/*"]}]`, "dot segments"},
		{"pattern with a remote file host", `rules: [{names: ["file://remote/*"]}]`, "file: host"},
		{"pattern with an encoded slash", `rules: [{methods: ["resources/*"], names: ["file:///etc%2f*"]}]`, "encoded slash"},
		{"public path with dot segments", `public_paths: [/a/../b*]`, "dot segments"},
		{"public path not canonical", `public_paths: [/a%2a]`, "not canonical"},
		{"path prefix with a double slash", `path_prefix: //mcp`, "empty path segment"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := "issuers: [{name: dev, algorithms: [HS256], secret: " + secret + "}]\nroutes:\n  - name: r\n    issuers: [dev]\n    " + tt.route + "\n"
			f, err := config.Parse([]byte(doc))
			if err != nil {
				t.Fatal(err)
			}
			p, err := Compile(t.Context(), f, Deps{})
			if p != nil {
				p.Close()
			}
			switch {
			case tt.err == "" && err != nil:
				t.Fatalf("Compile: %v", err)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Fatalf("Compile error %v, want %q", err, tt.err)
			}
		})
	}
}

func TestRuleMatchesCanonicalURIs(t *testing.T) {
	rules := compileRules("r", []config.Rule{{Methods: []string{"resources/read"}, Names: []string{"FILE:///%65tc/*"}}})
	if err := compileURIPatterns(rules); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		method, name string
		want         bool
	}{
		{"resources/read", "file:///etc/passwd", true},
		{"resources/read", "file:///etcetera", false},
		{"resources/read", "FILE:///etc/passwd", false}, // requests are canonicalised before matching
	} {
		if got := rules[0].matches(tt.method, jsonrpc.Meanings(tt.method, jsonrpc.ProtocolUnknown), tt.name); got != tt.want {
			t.Errorf("matches(%q, %q) = %v, want %v", tt.method, tt.name, got, tt.want)
		}
	}
}

func TestWithoutCookie(t *testing.T) {
	tests := []struct {
		header, rest string
		found        bool
		count        int
	}{
		{"at=x", "", true, 1},
		{"a=1; at=x; b=2", "a=1; b=2", true, 1},
		{"at=x;a=1", "a=1", true, 1},
		{"a=1,at=x", "a=1", true, 1},
		{"AT=1; At=2", "AT=1; At=2", false, 0},
		{"a=1; at=x; at=y", "a=1", true, 2},
		{"ata=1; xat=2", "ata=1; xat=2", false, 0},
		{"flag; at=x", "flag", true, 1},
		{"", "", false, 0},
	}
	for _, tt := range tests {
		rest, found := withoutCookie(tt.header, "at")
		if rest != tt.rest || found != tt.found || cookieCount(tt.header, "at") != tt.count {
			t.Errorf("withoutCookie(%q) = %q, %v (count %d); want %q, %v (count %d)", tt.header, rest, found, cookieCount(tt.header, "at"), tt.rest, tt.found, tt.count)
		}
	}
}

func TestCanonicalRequestKeepsCanonicalStrings(t *testing.T) {
	req := &Request{Host: "Files.Example.COM:8443", Path: "/mcp/a%3bb?x=%2e"}
	if d := canonicalRequest(req); d != nil {
		t.Fatal(d.desc)
	}
	if req.Host != "files.example.com:8443" || req.Path != "/mcp/a%3Bb?x=%2e" {
		t.Fatalf("host %q path %q", req.Host, req.Path)
	}
	req = &Request{Host: "a.example", Path: "/mcp?x"}
	path := req.Path
	allocs := testing.AllocsPerRun(50, func() {
		req.Path = path
		if d := canonicalRequest(req); d != nil {
			t.Fatal(d.desc)
		}
	})
	if allocs != 0 || req.Path != path {
		t.Fatalf("%v allocations, path %q", allocs, req.Path)
	}
}

// TestPublicPathWithCall: a JSON-RPC call on a public path needs a token,
// except on a route that declares plain HTTP.
func TestPublicPathWithCall(t *testing.T) {
	f := newFixture(t, `  - name: hooks
    hosts: [hooks.example.com]
    issuers: [dev]
    protocol: http
    public_paths: [/hook]
`)
	call := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`)
	tests := []struct {
		name string
		req  *Request
		want Outcome
	}{
		{"agent card without a call", &Request{Method: "GET", Path: "/.well-known/agent-card.json", Headers: Headers{}}, Public},
		{"call on a public path", &Request{Method: "POST", Path: "/public/x", Headers: Headers{}, Body: call}, MissingToken},
		{"session header on a public path", &Request{Method: "GET", Path: "/public/x", Headers: Headers{"mcp-session-id": "s"}}, MissingToken},
		{"JSON on a plain HTTP route's public path", &Request{Method: "POST", Path: "/hook", Headers: Headers{}, Body: call, ContextExtensions: map[string]string{"route": "hooks"}}, Public},
		// Envoy sends no body of a WebSocket upgrade; the upgraded
		// connection then carries what the client sends next, unseen.
		{"a WebSocket upgrade of the agent card", &Request{Method: "GET", Path: "/.well-known/agent-card.json", Headers: Headers{"connection": "Upgrade", "upgrade": "websocket"}}, Malformed},
		{"a WebSocket upgrade on a plain HTTP route's public path", &Request{Method: "GET", Path: "/hook", Headers: Headers{"connection": "Upgrade", "upgrade": "websocket"}, ContextExtensions: map[string]string{"route": "hooks"}}, Public},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if v := f.pl.Check(t.Context(), tt.req); v.Outcome != tt.want {
				t.Fatalf("outcome %v, want %v (%s)", v.Outcome, tt.want, v.Description)
			}
		})
	}
}

// BenchmarkRequestStages measures what the canonical-form and header stages
// add to every check: a canonical host and path, typical MCP headers.
func BenchmarkRequestStages(b *testing.B) {
	f := newFixture(b, "")
	p := f.pl.Policy()
	r, _ := p.routes.ByName("agent")
	h := Headers{"authorization": "Bearer x.y.z", "mcp-session-id": "0123456789abcdef", "mcp-protocol-version": "2025-06-18",
		"content-type": "application/json", "accept": "application/json, text/event-stream", "x-request-id": "r-1", "cookie": "theme=dark"}
	req := &Request{Method: "POST", Host: "agent.example.com:8443", Path: "/mcp?x=1", Headers: h}
	b.ReportAllocs()
	for b.Loop() {
		if d := canonicalRequest(req); d != nil {
			b.Fatal(d.desc)
		}
		if d := p.ambiguousHeader(r, req); d != nil {
			b.Fatal(d.desc)
		}
	}
}
