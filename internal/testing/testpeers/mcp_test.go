package testpeers

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// testContext bounds a test's protocol calls so that a broken peer fails the
// test instead of hanging it.
func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func startMCP(t testing.TB, opts MCPOptions) *httptest.Server {
	srv := httptest.NewServer(NewMCPServer(opts))
	t.Cleanup(srv.Close)
	return srv
}

func connectMCP(t testing.TB, url string, hc *http.Client, opts *MCPClientOptions) *mcp.ClientSession {
	cs, err := NewMCPClient(testContext(t), url, hc, opts)
	if err != nil {
		t.Fatalf("NewMCPClient: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func TestMCPWhoAmI(t *testing.T) {
	forged := http.Header{
		"X-User-Id":                  {"mallory"},
		"X-Session-Id":               {"sess-1"},
		"X-Root-Context-Id":          {"root-1"},
		"X-Parent-Context-Id":        {"parent-1"},
		"X-Lineage-Depth":            {"2"},
		"X-Actor-Chain":              {"agent-a,agent-b"},
		"X-Kagent-Root-Context-Id":   {"kroot"},
		"X-Kagent-Parent-Context-Id": {"kparent"},
		"X-Unrelated":                {"not reported"},
	}
	tests := []struct {
		name      string
		server    MCPOptions
		client    MCPClientOptions
		token     string
		header    http.Header
		wantSeen  http.Header
		wantToken bool
	}{
		{
			name:      "session flow 2025-06-18 with token and identity headers",
			client:    MCPClientOptions{ProtocolVersion: MCPVersion20250618},
			token:     "tok-alice",
			header:    forged,
			wantSeen:  withoutKey(forged, "X-Unrelated"),
			wantToken: true,
		},
		{
			name:      "session flow with JSON responses",
			server:    MCPOptions{JSONResponse: true},
			client:    MCPClientOptions{ProtocolVersion: MCPVersion20251125},
			token:     "tok-alice",
			header:    http.Header{"X-User-Id": {"alice"}},
			wantSeen:  http.Header{"X-User-Id": {"alice"}},
			wantToken: true,
		},
		{
			name:      "stateless server, SDK default protocol",
			server:    MCPOptions{Stateless: true},
			token:     "tok-alice",
			header:    http.Header{"X-User-Id": {"alice", "mallory"}},
			wantSeen:  http.Header{"X-User-Id": {"alice", "mallory"}},
			wantToken: true,
		},
		{
			name:      "stateful server, SDK default protocol",
			token:     "tok-bob",
			header:    http.Header{"X-Session-Id": {"s-1"}},
			wantSeen:  http.Header{"X-Session-Id": {"s-1"}},
			wantToken: true,
		},
		{
			name:     "no token, no headers",
			client:   MCPClientOptions{ProtocolVersion: MCPVersion20250618},
			wantSeen: http.Header{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := startMCP(t, tt.server)
			cs := connectMCP(t, srv.URL, NewHTTPClient(tt.token, tt.header, nil), &tt.client)

			res, err := cs.CallTool(testContext(t), &mcp.CallToolParams{Name: ToolWhoAmI})
			if err != nil {
				t.Fatalf("CallTool: %v", err)
			}
			text := res.Content[0].(*mcp.TextContent).Text
			if tt.token != "" && strings.Contains(text, tt.token) {
				t.Errorf("whoami reply %s contains the raw token", text)
			}
			seen, err := ParseObservation(text)
			if err != nil {
				t.Fatal(err)
			}
			if seen.Peer != "testpeers-mcp" {
				t.Errorf("Peer = %q", seen.Peer)
			}
			assertHeaders(t, seen.Headers, tt.wantSeen)
			if seen.Authorization != tt.wantToken {
				t.Errorf("Authorization = %t, want %t", seen.Authorization, tt.wantToken)
			}
			if tt.wantToken && seen.AuthorizationSHA256 != Fingerprint("Bearer "+tt.token) {
				t.Errorf("AuthorizationSHA256 = %q, want fingerprint of the sent token", seen.AuthorizationSHA256)
			}
		})
	}
}

func TestMCPToolsAndResource(t *testing.T) {
	var (
		mu    sync.Mutex
		calls []ToolCall
	)
	srv := startMCP(t, MCPOptions{Name: "files", OnToolCall: func(c ToolCall) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, c)
	}})
	cs := connectMCP(t, srv.URL, NewHTTPClient("tok", http.Header{"X-User-Id": {"alice"}}, nil),
		&MCPClientOptions{ProtocolVersion: MCPVersion20250618})
	ctx := testContext(t)

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	if want := []string{ToolDeleteFile, ToolEcho, ToolWhoAmI}; !slices.Equal(names, want) {
		t.Errorf("tools = %v, want %v", names, want)
	}

	tests := []struct {
		name string
		tool string
		args any
		want string
	}{
		{name: "echo", tool: ToolEcho, args: EchoArgs{Text: "héllo"}, want: "héllo"},
		{name: "delete_file", tool: ToolDeleteFile, args: DeleteFileArgs{Path: "/etc/passwd"}, want: "deleted /etc/passwd"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tt.tool, Arguments: tt.args})
			if err != nil {
				t.Fatalf("CallTool: %v", err)
			}
			if got := res.Content[0].(*mcp.TextContent).Text; got != tt.want || res.IsError {
				t.Errorf("reply = %q (isError %t), want %q", got, res.IsError, tt.want)
			}
		})
	}

	mu.Lock()
	if len(calls) != 2 || calls[1].Tool != ToolDeleteFile || calls[1].Seen.Peer != "files" ||
		calls[1].Seen.Headers.Get("X-User-Id") != "alice" {
		t.Errorf("OnToolCall saw %+v", calls)
	} else {
		var args DeleteFileArgs
		if err := json.Unmarshal(calls[1].Arguments, &args); err != nil || args.Path != "/etc/passwd" {
			t.Errorf("delete_file arguments = %s (%v)", calls[1].Arguments, err)
		}
	}
	mu.Unlock()

	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: ResourceWhoAmI})
	if err != nil {
		t.Fatalf("ReadResource: %v", err)
	}
	seen, err := ParseObservation(rr.Contents[0].Text)
	if err != nil {
		t.Fatal(err)
	}
	if seen.Headers.Get("X-User-Id") != "alice" || !seen.Authorization {
		t.Errorf("resource observation = %+v", seen)
	}
}

func TestMCPSessions(t *testing.T) {
	tests := []struct {
		name        string
		stateless   bool
		wantSession bool
	}{
		{name: "stateful server assigns and ends sessions", wantSession: true},
		{name: "stateless server has none", stateless: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := startMCP(t, MCPOptions{Stateless: tt.stateless})
			cs, err := NewMCPClient(testContext(t), srv.URL, srv.Client(),
				&MCPClientOptions{ProtocolVersion: MCPVersion20250618, DisableStandaloneSSE: true})
			if err != nil {
				t.Fatal(err)
			}
			id := cs.ID()
			if (id != "") != tt.wantSession {
				t.Fatalf("session id %q, want one: %t", id, tt.wantSession)
			}
			if _, err := WhoAmI(testContext(t), cs); err != nil {
				t.Fatal(err)
			}
			if err := cs.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if !tt.wantSession {
				return
			}
			// The client's DELETE ended the session: the id is dead.
			body := `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`
			req, _ := http.NewRequestWithContext(testContext(t), http.MethodPost, srv.URL, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Protocol-Version", MCPVersion20250618)
			req.Header.Set("Mcp-Session-Id", id)
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound {
				t.Errorf("request on a deleted session: status %d, want 404", resp.StatusCode)
			}
		})
	}
}

func BenchmarkMCPWhoAmI(b *testing.B) {
	srv := startMCP(b, MCPOptions{})
	cs := connectMCP(b, srv.URL, NewHTTPClient("tok", http.Header{"X-User-Id": {"alice"}}, nil),
		&MCPClientOptions{ProtocolVersion: MCPVersion20250618})
	ctx := testContext(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := WhoAmI(ctx, cs); err != nil {
			b.Fatal(err)
		}
	}
}

func assertHeaders(t *testing.T, got, want http.Header) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("saw headers %v, want %v", got, want)
		return
	}
	for name, values := range want {
		if !slices.Equal(got.Values(name), values) {
			t.Errorf("saw %s = %q, want %q", name, got.Values(name), values)
		}
	}
}

func withoutKey(h http.Header, name string) http.Header {
	out := h.Clone()
	out.Del(name)
	return out
}
