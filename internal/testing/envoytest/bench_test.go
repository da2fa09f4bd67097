package envoytest

import (
	"net/http"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
)

// mcpRequest is a typical MCP tools/call as it reaches the proxy.
func mcpRequest() (*http.Request, []byte) {
	body := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"search","arguments":{"q":"envoy"}}}`)
	r := newRequest("POST", "http://mcp.example.test/mcp", map[string][]string{
		"Authorization":        {"Bearer opaque-test-credential"},
		"Content-Type":         {"application/json"},
		"Accept":               {"application/json", "text/event-stream"},
		"Mcp-Session-Id":       {"9b2f0c1e"},
		"Mcp-Protocol-Version": {"2025-06-18"},
		"User-Agent":           {"mcp-client/1.0"},
		"X-User-Id":            {"forged"},
		"Traceparent":          {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
	}, string(body))
	return r, body
}

func BenchmarkBuildCheckRequest(b *testing.B) {
	cases := []struct {
		name string
		opts BuildOptions
	}{
		{"headers-map", BuildOptions{}},
		{"raw-header-map", BuildOptions{EncodeRawHeaders: true}},
		{"with-body", BuildOptions{WithBody: true, MaxRequestBytes: 8192}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			r, body := mcpRequest()
			b.ReportAllocs()
			for b.Loop() {
				if BuildCheckRequest(r, body, c.opts) == nil {
					b.Fatal("nil")
				}
			}
		})
	}
}

func BenchmarkApplyOK(b *testing.B) {
	ok := &authv3.OkHttpResponse{
		Headers: []*corev3.HeaderValueOption{
			hv("x-user-id", "alice", false),
			hv("x-session-id", "s-123", false),
			hv("x-kagent-root-context-id", "ctx-1", false),
		},
		HeadersToRemove:      []string{"authorization", "x-kagent-parent-context-id"},
		ResponseHeadersToAdd: []*corev3.HeaderValueOption{hv("x-authz", "checked", false)},
	}
	r, _ := mcpRequest()
	header := r.Header
	b.ReportAllocs()
	for b.Loop() {
		r.Header = header.Clone()
		if _, err := ApplyOK(r, ok); err != nil {
			b.Fatal(err)
		}
	}
}
