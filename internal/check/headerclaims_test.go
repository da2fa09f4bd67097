package check

import (
	"strings"
	"testing"
)

// TestRulesOnHeaderClaims: without the body, Mcp-Method and Mcp-Name are
// the client's claim. A claim may get a call denied, never allowed, unless
// the route's upstream checks the headers against the body, which MCP
// servers do only for a request whose MCP-Protocol-Version is 2026-07-28
// or later: the go-sdk skips the check for an older version or none, and
// runs the body's tool whatever Mcp-Name claims.
func TestRulesOnHeaderClaims(t *testing.T) {
	f := newFixture(t, `
  - name: unchecked
    hosts: [unchecked.example.com]
    protocol: mcp
    issuers: [dev]
    rules:
      - {methods: [tools/call], names: [delete_*], action: deny}
  - name: checked
    hosts: [checked.example.com]
    protocol: mcp
    issuers: [dev]
    upstream_validates_mcp_headers: true
    rules:
      - {methods: [tools/call], names: [delete_*], action: deny}
`)
	tok := f.hs(t, nil)
	req := func(host, method, name, body string) *Request {
		h := Headers{"authorization": "Bearer " + tok, "mcp-protocol-version": "2026-07-28"}
		if method != "" {
			h["mcp-method"] = method
		}
		if name != "" {
			h["mcp-name"] = name
		}
		route := strings.TrimSuffix(host, ".example.com")
		return &Request{Method: "POST", Scheme: "https", Host: host, Path: "/mcp", Headers: h, Body: []byte(body),
			ContextExtensions: map[string]string{"route": route}}
	}
	const deleteBody = `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"delete_file"}}`
	tests := []struct {
		name    string
		req     *Request
		outcome Outcome
		desc    string // substring of the description
	}{
		{name: "claimed allowed tool, unchecked upstream", req: req("unchecked.example.com", "tools/call", "echo", ""), outcome: Malformed, desc: "upstream_validates_mcp_headers"},
		{name: "claimed denied tool, unchecked upstream", req: req("unchecked.example.com", "tools/call", "delete_file", ""), outcome: Forbidden},
		{name: "no claim at all", req: req("unchecked.example.com", "", "", ""), outcome: Malformed, desc: "upstream_validates_mcp_headers"},
		{name: "claimed allowed tool, checked upstream", req: req("checked.example.com", "tools/call", "echo", ""), outcome: Allowed},
		{name: "claimed denied tool, checked upstream", req: req("checked.example.com", "tools/call", "delete_file", ""), outcome: Forbidden},
		{name: "the body decides, unchecked upstream", req: withVersion(req("unchecked.example.com", "", "", deleteBody), ""), outcome: Forbidden},
		{name: "a lying claim next to the body", req: req("unchecked.example.com", "tools/call", "echo", deleteBody), outcome: Malformed, desc: "Mcp-Name"},
		{name: "claimed allowed tool, checked upstream, no version", req: withVersion(req("checked.example.com", "tools/call", "echo", ""), ""), outcome: Malformed, desc: "2026-07-28"},
		{name: "claimed allowed tool, checked upstream, older version", req: withVersion(req("checked.example.com", "tools/call", "echo", ""), "2025-11-25"), outcome: Malformed, desc: "2026-07-28"},
		{name: "claimed denied tool, checked upstream, older version", req: withVersion(req("checked.example.com", "tools/call", "delete_file", ""), "2025-06-18"), outcome: Forbidden},
		{name: "the body decides, checked upstream, older version", req: withVersion(req("checked.example.com", "", "", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo"}}`), "2025-11-25"), outcome: Allowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := f.pl.Check(t.Context(), tt.req)
			if v.Outcome != tt.outcome || !strings.Contains(v.Description, tt.desc) {
				t.Errorf("outcome %v %q, want %v %q", v.Outcome, v.Description, tt.outcome, tt.desc)
			}
		})
	}
}

// withVersion sets req's MCP-Protocol-Version header, or removes it.
func withVersion(req *Request, version string) *Request {
	if version == "" {
		delete(req.Headers, "mcp-protocol-version")
	} else {
		req.Headers["mcp-protocol-version"] = version
	}
	return req
}
