package check

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

// TestExplainResponse: explaining a request on a route with a response
// path says what the response path would do with its answer, and says
// that which list entries stay is not known without the list.
func TestExplainResponse(t *testing.T) {
	pl, _ := responsePipeline(t, responseConfig, Deps{})
	reader := responseToken(t, "alice", jwt.MapClaims{"scope": "files:read"})
	const initialize = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`
	tests := []struct {
		name    string
		req     *Request
		outcome string // of the response step; "" when there is none
		detail  string
	}{
		{"tools/list is filtered", call("mcp.example.com", reader, nil, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), "filter list", "not known here"},
		{"prompts/list is filtered", call("mcp.example.com", reader, nil, `{"jsonrpc":"2.0","id":1,"method":"prompts/list"}`), "filter list", "prompts/list"},
		{"initialize binds the session", call("mcp.example.com", reader, nil, initialize), "bind session", "bound to alice at birth"},
		{"a task is bound", call("mcp.example.com", reader, nil, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read","task":{}}}`), "bind task", "alice"},
		{"an agent's context is bound", call("a2a.example.com", reader, nil, `{"jsonrpc":"2.0","id":2,"method":"message/send","params":{"message":{"messageId":"m","role":"user","parts":[]}}}`),
			"bind context", "bound to alice"},
		{"a denied request is nobody's", call("mcp.example.com", reader, nil, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"delete_all"}}`), "not processed", "not allowed"},
		{"a GET stream is filtered by shape", &Request{Method: "GET", Scheme: "https", Host: "mcp.example.com", Path: "/", Headers: Headers{":authority": "mcp.example.com", ":path": "/", ":method": "GET", "authorization": "Bearer " + reader, "accept": "text/event-stream"}}, "filter by shape", "by its shape"},
		{"a route without a response path", call("plain.example.com", reader, nil, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), "", ""},
		{"refused server requests are kept from the client", call("mcp.example.com", reader, nil, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read"}}`),
			"keep server requests", "(sampling/createMessage)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, steps := pl.Explain(context.Background(), tt.req)
			var got []Step
			for _, st := range steps {
				if st.Name == "response" {
					got = append(got, st)
				}
			}
			found := slices.ContainsFunc(got, func(st Step) bool { return st.Outcome == tt.outcome && strings.Contains(st.Detail, tt.detail) })
			switch {
			case tt.outcome == "" && len(got) > 0:
				t.Fatalf("response steps: %+v", got)
			case tt.outcome != "" && !found:
				t.Fatalf("response steps %+v, want one %q containing %q", got, tt.outcome, tt.detail)
			}
			if last := steps[len(steps)-1]; last.Name != "verdict" {
				t.Fatalf("the verdict is not last: %+v", last)
			}
		})
	}
}
