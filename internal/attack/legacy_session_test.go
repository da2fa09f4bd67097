package attack

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
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
