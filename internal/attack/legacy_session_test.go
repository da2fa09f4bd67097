package attack

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestLegacySessionBesideHeader: MCP's HTTP+SSE transport (2024-11-05)
// runs a POST in the session its query names (?sessionId= for TypeScript,
// ?session_id= for Python, ?sessionid= for Go) and never reads
// Mcp-Session-Id. Bob binds a header id of his own and posts into alice's
// legacy session through her query id: a request whose header and query
// name different sessions is refused, whoever owns them; one naming the
// same session in both is bound as that session. A query id that is not
// visible ASCII, as no header id can be, is refused too.
func TestLegacySessionBesideHeader(t *testing.T) {
	s := start(t, stateYAML, options{})
	aliceTok, bobTok := token(t, issuerHS, "alice"), token(t, issuerHS, "bob")
	alice := map[string]string{"authorization": "Bearer " + aliceTok}
	cases := []struct{ name, path string }{
		{"typescript sessionId", "/messages?sessionId=alice-legacy-1"},
		{"python session_id", "/messages/?session_id=alice-legacy-2"},
		{"go sessionid", "/message?sessionid=alice-legacy-3"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if v := s.check(t, raw{Path: c.path, Headers: alice, Body: toolCall(1, "whoami", "")}); !v.Allowed {
				t.Fatalf("alice: %d %s", v.Status, v.Body)
			}
			sid := c.path[strings.IndexByte(c.path, '=')+1:]
			steps := []struct {
				name    string
				headers map[string]string
				allowed bool
			}{
				{"bob's own header session beside alice's query", inSessionRaw(bobTok, fmt.Sprintf("bob-own-%d", i)), false},
				{"alice's header session beside her own query", inSessionRaw(aliceTok, sid), true},
				{"bob naming alice's session in both", inSessionRaw(bobTok, sid), false},
				{"alice's other header session beside her query", inSessionRaw(aliceTok, fmt.Sprintf("alice-other-%d", i)), false},
			}
			for _, st := range steps {
				v := s.check(t, raw{Path: c.path, Headers: st.headers, Body: toolCall(2, "whoami", "")})
				if v.Allowed != st.allowed {
					t.Fatalf("%s: allowed %v (%d %s), want %v", st.name, v.Allowed, v.Status, v.Body, st.allowed)
				}
			}
		})
	}
	for _, path := range []string{"/messages?sessionId=alice%00legacy", "/messages?sessionId=a%20b", "/messages?sessionId=%C3%A9"} {
		t.Run("query id "+path, func(t *testing.T) {
			v := s.check(t, raw{Path: path, Headers: alice, Body: toolCall(3, "whoami", "")})
			if v.Allowed || v.Status != http.StatusBadRequest || !strings.Contains(v.Body, `"id":3`) {
				t.Fatalf("allowed %v (%d %s), want 400 with the request id", v.Allowed, v.Status, v.Body)
			}
		})
	}
}

// TestLegacySessionBesideHeaderEndToEnd: the same against the Go SDK's
// HTTP+SSE server behind the Envoy-like proxy. Alice opens her stream and
// posts through the proxy; bob posts to her endpoint with an
// Mcp-Session-Id of his own, which the service binds and checks, while the
// server runs his message in alice's session, named by the query: his
// call's answer appears on alice's stream.
func TestLegacySessionBesideHeaderEndToEnd(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "legacy", Version: "1"}, nil)
	sse := mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return server }, &mcp.SSEOptions{DisableLocalhostProtection: true})
	direct := httptest.NewServer(sse)
	t.Cleanup(direct.Close)
	s := start(t, stateYAML, options{Upstream: func(http.Handler) http.Handler { return sse }})
	alice, bob := token(t, issuerHS, "alice"), token(t, issuerHS, "bob")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, direct.URL+"/sse", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events := make(chan string, 16)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				events <- data
			}
		}
	}()
	next := func() string {
		t.Helper()
		select {
		case e, ok := <-events:
			if !ok {
				t.Fatal("alice's stream ended")
			}
			return e
		case <-ctx.Done():
			t.Fatal("no event on alice's stream")
		}
		return ""
	}
	endpoint := next()
	if !strings.Contains(endpoint, "sessionid=") {
		t.Fatalf("first event %q, want the endpoint", endpoint)
	}
	post := func(h http.Header, body string) int {
		status, _, _ := s.viaEnvoy(t, http.MethodPost, endpoint, h, body)
		return status
	}
	if got := post(bearer(alice), `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"alice","version":"1"}}}`); got != http.StatusAccepted {
		t.Fatalf("alice's initialize: %d", got)
	}
	if e := next(); !strings.Contains(e, `"id":1`) {
		t.Fatalf("alice's stream: %s, want the initialize answer", e)
	}
	post(bearer(alice), `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	cases := []struct{ name, header string }{
		{"bob's own header session", "bob-own-session"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := bearer(bob)
			h.Set("Mcp-Session-Id", c.header)
			got := post(h, `{"jsonrpc":"2.0","id":99,"method":"ping"}`)
			if got == http.StatusAccepted {
				e := next()
				t.Fatalf("bob's message into alice's legacy session (query %s) with Mcp-Session-Id %q was passed (%d) and run there: alice's stream got %s", endpoint, c.header, got, e)
			}
			if got != http.StatusBadRequest {
				t.Fatalf("bob's message: status %d, want 400", got)
			}
		})
	}
}
