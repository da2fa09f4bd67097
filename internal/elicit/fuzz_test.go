package elicit_test

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/extauthz/extauthz/internal/elicit"
)

// FuzzWithState: for any URL it accepts, the result parses, carries exactly
// one state, the given one, and keeps every other query parameter.
func FuzzWithState(f *testing.F) {
	f.Add("https://auth.example/a?x=1&state=old#f", "ID")
	f.Add("http://h/?state&state=1&%73tate=2", "a b&c=d")
	f.Add("https://h/p;q?a=%zz", "x")
	f.Fuzz(func(t *testing.T, raw, id string) {
		got, err := elicit.WithState(raw, id)
		if err != nil {
			return
		}
		u, err := url.Parse(got)
		if err != nil {
			t.Fatalf("WithState(%q) = %q, unparsable: %v", raw, got, err)
		}
		states := 0
		for part := range strings.SplitSeq(u.RawQuery, "&") {
			name, value, _ := strings.Cut(part, "=")
			if n, err := url.QueryUnescape(name); err == nil && n == "state" {
				states++
				if v, err := url.QueryUnescape(value); err != nil || v != id {
					t.Fatalf("state = %q, want %q", value, id)
				}
			}
		}
		if states != 1 {
			t.Fatalf("WithState(%q) = %q has %d states", raw, got, states)
		}
		in, _ := url.Parse(raw)
		for part := range strings.SplitSeq(in.RawQuery, "&") {
			name, _, _ := strings.Cut(part, "=")
			if n, err := url.QueryUnescape(name); part != "" && (err != nil || n != "state") && !strings.Contains(u.RawQuery, part) {
				t.Fatalf("parameter %q lost: %q", part, got)
			}
		}
	})
}

// FuzzAnswers: whatever the id, URL and message, every answer is one valid
// JSON-RPC response echoing a valid id or null.
func FuzzAnswers(f *testing.F) {
	f.Add([]byte(`1`), "https://a.example/?x=1&state=2", "msg", "ID")
	f.Add([]byte(`"\u2028"`), "https://a.example/\u2028<>&", "\xff\x00\"", "")
	f.Add([]byte(`{}`), "", "", "\n")
	f.Fuzz(func(t *testing.T, id []byte, u, message, eid string) {
		p := elicit.Pending{ID: eid, URL: u}
		for name, answer := range map[string]func([]byte, elicit.Pending, string) []byte{
			"url": elicit.URLElicitationError, "tool": elicit.ToolResultAuthRequired, "a2a": elicit.A2AAuthRequired,
		} {
			body := answer(id, p, message)
			var resp struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
				Result  json.RawMessage `json:"result"`
				Error   json.RawMessage `json:"error"`
			}
			if err := json.Unmarshal(body, &resp); err != nil || resp.JSONRPC != "2.0" || (resp.Result == nil) == (resp.Error == nil) {
				t.Fatalf("%s answer is not a JSON-RPC response: %v\n%s", name, err, body)
			}
			if string(resp.ID) != "null" && string(resp.ID) != string(id) {
				t.Fatalf("%s answer id = %s for %q", name, resp.ID, id)
			}
		}
	})
}

// FuzzCompleteState: no state but the one issued completes an elicitation,
// and no input makes the check panic.
func FuzzCompleteState(f *testing.F) {
	s := elicit.New(10, time.Hour, nil)
	p, err := s.Begin("idp", "alice", "mcp-1", "files", authorize)
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{"", p.ID, p.State, p.ID + ".", p.ID + ".1.", p.ID + ".-1.x", "..", p.State + "A", p.ID + ".9999999999999999999999.AAAA"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, state string) {
		err := s.VerifyState(p, state)
		if (err == nil) != (state == p.State) {
			t.Fatalf("VerifyState(%q) = %v", state, err)
		}
	})
}
