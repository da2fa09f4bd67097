package attack

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Threat model class 6: bounded state that fails open. ext_authz binds an
// MCP session to the first user it sees with it, so a binding that is lost
// (evicted, expired early, ended by a DELETE the server refused) is a
// session anyone may claim. Every case here has an attacker holding a valid
// token of their own try to get the victim's binding dropped and then act
// inside the victim's session.

// stateYAML is a route without rules and a deliberately small binding
// store: 20 bindings, at most 4 per user.
const stateYAML = `routes:
  - name: mcp
    default: true
    issuers: [hs, other]
    audiences: [` + audience + `]
sessions: {max_entries: 20, max_per_subject: 4}
`

// initialize opens a real MCP session on the go-sdk server through the
// proxy as tok's user and returns its id.
func (s *suite) initialize(t *testing.T, tok string) string {
	t.Helper()
	status, h, body := s.viaEnvoy(t, http.MethodPost, "/mcp", bearer(tok),
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"attack","version":"1"}}}`)
	sid := h.Get("Mcp-Session-Id")
	if status != 200 || sid == "" {
		t.Fatalf("initialize: status %d, session %q, body %s", status, sid, body)
	}
	status, _, body = s.viaEnvoy(t, http.MethodPost, "/mcp", inSession(tok, sid), `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if status/100 != 2 {
		t.Fatalf("initialized: status %d, body %s", status, body)
	}
	return sid
}

// inSession is the headers of a request of tok's user in MCP session sid.
func inSession(tok, sid string) http.Header {
	h := bearer(tok)
	h.Set("Mcp-Session-Id", sid)
	h.Set("Mcp-Protocol-Version", "2025-06-18")
	return h
}

// inSessionRaw is the same for a raw CheckRequest.
func inSessionRaw(tok, sid string) map[string]string {
	return map[string]string{"authorization": "Bearer " + tok, "mcp-session-id": sid}
}

// wantConflict fails unless v refuses the session as another user's.
func wantConflict(t *testing.T, v verdict) {
	t.Helper()
	v.wantDenied(t, 403)
	if !strings.Contains(v.Body, "session_conflict") {
		t.Fatalf("403 is not a session conflict: %s", v.Body)
	}
}

// wantRefusedFull fails unless v refuses a new session because the store is
// full: 503, a Retry-After in whole seconds, a JSON-RPC error.
func wantRefusedFull(t *testing.T, v verdict, id string) {
	t.Helper()
	v.wantDenied(t, 503)
	if n, err := strconv.Atoi(v.Headers["retry-after"]); err != nil || n < 1 {
		t.Fatalf("Retry-After %q, want whole seconds", v.Headers["retry-after"])
	}
	if e := v.rpc(t); string(e.ID) != id || !strings.Contains(v.Body, "too many MCP sessions") {
		t.Fatalf("refusal body %s, want the request id %s and the reason", v.Body, id)
	}
}

func TestStateSessionFlood(t *testing.T) {
	s := start(t, stateYAML, options{})
	victim := token(t, issuerHS, "alice")
	const sid = "victim-session"
	if v := s.check(t, raw{Headers: inSessionRaw(victim, sid), Body: toolCall(1, "whoami", "")}); !v.Allowed {
		t.Fatalf("victim's first use: %d %s", v.Status, v.Body)
	}

	t.Run("one attacker creating sessions pushes out only their own", func(t *testing.T) {
		mallory := token(t, issuerHS, "mallory")
		for i := range 100 {
			v := s.check(t, raw{Headers: inSessionRaw(mallory, fmt.Sprint("m-", i)), Body: toolCall(i, "whoami", "")})
			if !v.Allowed {
				t.Fatalf("mallory's own session %d: %d %s (one user's sessions must push out only that user's)", i, v.Status, v.Body)
			}
		}
		wantConflict(t, s.check(t, raw{Headers: inSessionRaw(mallory, sid), Body: toolCall(2, "whoami", "")}))
	})

	t.Run("many attackers filling the store are refused with 503, never evict", func(t *testing.T) {
		refused := 0
		for u := range 10 {
			tok := token(t, issuerHS, fmt.Sprint("sybil-", u))
			for i := range 4 {
				v := s.check(t, raw{Headers: inSessionRaw(tok, fmt.Sprintf("s-%d-%d", u, i)), Body: toolCall(7, "whoami", "")})
				if !v.Allowed {
					wantRefusedFull(t, v, "7")
					refused++
				}
			}
		}
		if refused == 0 {
			t.Fatal("40 new sessions fit a store of 20: nothing was refused")
		}
		wantConflict(t, s.check(t, raw{Headers: inSessionRaw(token(t, issuerHS, "sybil-9"), sid), Body: toolCall(3, "whoami", "")}))
	})

	t.Run("the victim keeps using the session after the floods", func(t *testing.T) {
		if v := s.check(t, raw{Headers: inSessionRaw(victim, sid), Body: toolCall(4, "whoami", "")}); !v.Allowed {
			t.Fatalf("victim: %d %s", v.Status, v.Body)
		}
	})

}

// TestStateFloodEndToEnd: after a flood, the attacker's tool call inside the
// victim's real session does not run on the MCP server.
func TestStateFloodEndToEnd(t *testing.T) {
	s := start(t, stateYAML, options{Stateful: true})
	victim, mallory := token(t, issuerHS, "alice"), token(t, issuerHS, "mallory")
	sid := s.initialize(t, victim)
	for u := range 6 {
		tok := token(t, issuerHS, fmt.Sprint("sybil-", u))
		for i := range 8 {
			s.check(t, raw{Headers: inSessionRaw(tok, fmt.Sprintf("flood-%d-%d", u, i)), Body: toolCall(1, "whoami", "")})
		}
	}
	status, _, body := s.viaEnvoy(t, http.MethodPost, "/mcp", inSession(mallory, sid), toolCall(5, "delete_file", `{"path":"/victim"}`))
	if status != 403 || s.ran("delete_file") != 0 {
		t.Fatalf("attacker in the victim's session: status %d, body %s, delete_file ran %d times", status, body, s.ran("delete_file"))
	}
	status, _, body = s.viaEnvoy(t, http.MethodPost, "/mcp", inSession(victim, sid), toolCall(6, "whoami", ""))
	if status != 200 || s.ran("whoami") != 1 {
		t.Fatalf("victim after the flood: status %d, body %s", status, body)
	}
}

// refuseDelete answers DELETE with 405, as an MCP server may: the session
// lives on.
func refuseDelete(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			w.Header().Set("Allow", "GET, POST")
			http.Error(w, "sessions end by expiry", http.StatusMethodNotAllowed)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// TestStateDelete405, end to end: the owner's DELETE is
// answered 405 by the server, which keeps the session; another user's
// request in it is refused and does not run.
func TestStateDelete405(t *testing.T) {
	s := start(t, stateYAML, options{Stateful: true, Upstream: refuseDelete})
	victim := token(t, issuerHS, "alice")
	sid := s.initialize(t, victim)

	status, _, body := s.viaEnvoy(t, http.MethodDelete, "/mcp", inSession(victim, sid), "")
	if status != http.StatusMethodNotAllowed {
		t.Fatalf("owner's DELETE: status %d (%s), want the server's 405", status, body)
	}
	attackers := []struct {
		name string
		tok  string
	}{
		{"another user of the same issuer", token(t, issuerHS, "mallory")},
		{"the same sub from another issuer", token(t, issuerOther, "alice")},
	}
	for _, a := range attackers {
		t.Run(a.name, func(t *testing.T) {
			before := s.ran("whoami")
			status, _, body := s.viaEnvoy(t, http.MethodPost, "/mcp", inSession(a.tok, sid), toolCall(7, "whoami", ""))
			if status != 403 || s.ran("whoami") != before {
				t.Fatalf("status %d, body %s; whoami ran %d times", status, body, s.ran("whoami")-before)
			}
			status, _, _ = s.viaEnvoy(t, http.MethodDelete, "/mcp", inSession(a.tok, sid), "")
			if status != 403 {
				t.Fatalf("their DELETE of the session: status %d, want 403", status)
			}
		})
	}
	t.Run("the owner keeps the session", func(t *testing.T) {
		before := s.ran("whoami")
		status, _, body := s.viaEnvoy(t, http.MethodPost, "/mcp", inSession(victim, sid), toolCall(8, "whoami", ""))
		if status != 200 || s.ran("whoami") != before+1 {
			t.Fatalf("owner after DELETE: status %d, body %s", status, body)
		}
	})
}

// TestStateDeleteKeepsBinding: over raw ext_authz, a DELETE the owner sends
// is allowed and never frees the id; one from anybody else is refused; an
// unknown id is bound by the DELETE like by any request.
func TestStateDeleteKeepsBinding(t *testing.T) {
	s := start(t, stateYAML, options{})
	alice, mallory := token(t, issuerHS, "alice"), token(t, issuerHS, "mallory")
	steps := []struct {
		name    string
		method  string
		tok     string
		sid     string
		allowed bool
	}{
		{"owner binds", "POST", alice, "d-1", true},
		{"owner deletes", "DELETE", alice, "d-1", true},
		{"attacker after the delete", "POST", mallory, "d-1", false},
		{"attacker deletes it again", "DELETE", mallory, "d-1", false},
		{"owner deletes twice", "DELETE", alice, "d-1", true},
		{"owner still uses it", "POST", alice, "d-1", true},
		{"a DELETE binds an unknown id", "DELETE", mallory, "d-2", true},
		{"then it is the deleter's", "POST", alice, "d-2", false},
	}
	for _, st := range steps {
		body := ""
		if st.method == "POST" {
			body = toolCall(1, "whoami", "")
		}
		v := s.check(t, raw{Method: st.method, Headers: inSessionRaw(st.tok, st.sid), Body: body})
		if v.Allowed != st.allowed {
			t.Fatalf("%s: allowed %v (%d %s), want %v", st.name, v.Allowed, v.Status, v.Body, st.allowed)
		}
		if !st.allowed {
			wantConflict(t, v)
		}
	}
}

// TestStateAnyRequestIsBound: a request carrying
// Mcp-Session-Id is checked against the binding whatever its method and
// body look like, so no reading of the body switches binding off.
func TestStateAnyRequestIsBound(t *testing.T) {
	s := start(t, stateYAML, options{})
	victim, mallory := token(t, issuerHS, "alice"), token(t, issuerHS, "mallory")
	const sid = "bound-session"
	if v := s.check(t, raw{Headers: inSessionRaw(victim, sid), Body: toolCall(1, "whoami", "")}); !v.Allowed {
		t.Fatalf("victim: %d %s", v.Status, v.Body)
	}
	cases := []struct {
		name   string
		method string
		body   string
		ctype  string
	}{
		{"A2A tasks/get with a contextId", "POST", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"t1","message":{"contextId":"c1"}}}`, ""},
		{"A2A message/send", "POST", `{"jsonrpc":"2.0","id":2,"method":"message/send","params":{"message":{"role":"user","parts":[],"messageId":"m1","contextId":"c1"}}}`, ""},
		{"A2A v1 SendMessage", "POST", `{"jsonrpc":"2.0","id":3,"method":"SendMessage","params":{"message":{"contextId":"c1"}}}`, ""},
		{"unknown method with a contextId", "POST", `{"jsonrpc":"2.0","id":4,"method":"x/unknown","params":{"message":{"contextId":"c1"}}}`, ""},
		{"unknown method", "POST", `{"jsonrpc":"2.0","id":5,"method":"frobnicate"}`, ""},
		{"a JSON-RPC response", "POST", `{"jsonrpc":"2.0","id":6,"result":{}}`, ""},
		{"a notification", "POST", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`, ""},
		{"no body", "POST", "", ""},
		{"a text body", "POST", "hello", "text/plain"},
		{"GET (the SSE stream)", "GET", "", ""},
		{"DELETE", "DELETE", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := inSessionRaw(mallory, sid)
			if tc.ctype != "" {
				h["content-type"] = tc.ctype
			}
			v := s.check(t, raw{Method: tc.method, Headers: h, Body: tc.body})
			if v.Allowed {
				t.Fatalf("allowed into another user's session (upstream %v)", v.Upstream)
			}
			if v.Status == 403 && !strings.Contains(v.Body, "session_conflict") {
				t.Fatalf("403 for another reason: %s", v.Body)
			}
		})
	}
}

// TestStateForwardAuth: the forward-auth front end (Traefik/Caddy
// convention, no body) binds sessions the same way.
func TestStateForwardAuth(t *testing.T) {
	s := start(t, stateYAML, options{HTTPConvention: "forwarded"})
	alice, otherAlice := token(t, issuerHS, "alice"), token(t, issuerOther, "alice")
	ask := func(method, tok string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, s.httpURL+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Forwarded-Method", method)
		req.Header.Set("X-Forwarded-Proto", "http")
		req.Header.Set("X-Forwarded-Host", host)
		req.Header.Set("X-Forwarded-Uri", "/mcp")
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Mcp-Session-Id", "fa-session")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	steps := []struct {
		name   string
		method string
		tok    string
		want   int
	}{
		{"owner binds", "POST", alice, 200},
		{"owner deletes", "DELETE", alice, 200},
		{"the other issuer's alice after the delete", "POST", otherAlice, 403},
		{"the other issuer's alice opens the stream", "GET", otherAlice, 403},
		{"the other issuer's alice deletes", "DELETE", otherAlice, 403},
	}
	for _, st := range steps {
		if got := ask(st.method, st.tok); got != st.want {
			t.Fatalf("%s: status %d, want %d", st.name, got, st.want)
		}
	}
}

// twoRoutesYAML is one MCP server behind two routes, as when a path or a
// host gets its own policy: the server's session ids are the same on both.
const twoRoutesYAML = `routes:
  - name: mcp
    default: true
    path_prefix: /mcp
    issuers: [hs, other]
    audiences: [` + audience + `]
  - name: tools
    path_prefix: /tools
    issuers: [hs, other]
    audiences: [` + audience + `]
`

// TestStateSessionAcrossRoutes: a session bound to its owner on one route
// is the same session of the same server on any other route in front of
// it, so another user presenting its id there is refused too, not bound
// anew.
func TestStateSessionAcrossRoutes(t *testing.T) {
	s := start(t, twoRoutesYAML, options{Stateful: true})
	victim, mallory := token(t, issuerHS, "alice"), token(t, issuerHS, "mallory")
	sid := s.initialize(t, victim)

	before := s.ran("whoami")
	status, _, body := s.viaEnvoy(t, http.MethodPost, "/tools", inSession(mallory, sid), toolCall(7, "whoami", ""))
	if status != 403 || s.ran("whoami") != before {
		t.Fatalf("another user's call in the session on the other route: status %d, body %s; whoami ran %d times", status, body, s.ran("whoami")-before)
	}
	if !strings.Contains(body, "session_conflict") {
		t.Fatalf("403 is not a session conflict: %s", body)
	}
	for _, path := range []string{"/mcp", "/tools"} {
		if status, _, body := s.viaEnvoy(t, http.MethodPost, path, inSession(victim, sid), toolCall(8, "whoami", "")); status != 200 {
			t.Fatalf("the owner on %s: status %d, body %s", path, status, body)
		}
	}
}

// sharedEventStore wraps the stateless go-sdk server as the TypeScript
// SDK's StreamableHTTPServerTransport serves with an eventStore and
// sessionIdGenerator: undefined (1.32): every POST's answer is stored
// under a fresh stream and sent with its event id, and a GET with
// Last-Event-ID replays that event's stream after it, whoever asks:
// validateSession checks nothing without sessions, and replayEventsAfter
// knows the stream by the event id alone. The go-sdk itself answers such a
// GET 405 (stateless) or 400 without Mcp-Session-Id (stateful), and keys
// its event store by session.
func sharedEventStore(next http.Handler) http.Handler {
	var (
		mu      sync.Mutex
		streams = map[string][]string{} // stream id -> event data, in order
	)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.Header.Get("Last-Event-ID") != "" {
			stream, idx, _ := strings.Cut(r.Header.Get("Last-Event-ID"), "_")
			n, _ := strconv.Atoi(idx)
			mu.Lock()
			events := streams[stream]
			mu.Unlock()
			w.Header().Set("Content-Type", "text/event-stream")
			for i := n + 1; i < len(events); i++ {
				fmt.Fprintf(w, "id: %s_%d\ndata: %s\n\n", stream, i, events[i])
			}
			return
		}
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		if r.Method != http.MethodPost || rec.Code != http.StatusOK {
			maps.Copy(w.Header(), rec.Header())
			w.WriteHeader(rec.Code)
			w.Write(rec.Body.Bytes())
			return
		}
		mu.Lock()
		stream := fmt.Sprintf("stream-%d", len(streams))
		streams[stream] = []string{"", strings.TrimSpace(rec.Body.String())} // priming event, answer
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "id: %s_0\ndata: \n\nid: %s_1\ndata: %s\n\n", stream, stream, streams[stream][1])
	})
}

// TestStateResumeOthersStream: on a server whose streams are known by
// their event ids alone, a GET with Last-Event-ID and no Mcp-Session-Id
// would replay another user's stream. The service cannot bind such a GET
// to anybody, so on MCP (and auto) routes it is refused.
func TestStateResumeOthersStream(t *testing.T) {
	s := start(t, stateYAML, options{Upstream: sharedEventStore})
	alice, bob := token(t, issuerHS, "alice"), token(t, issuerHS, "bob")
	status, _, body := s.viaEnvoy(t, http.MethodPost, "/mcp", bearer(alice), toolCall(1, "whoami", ""))
	if status != 200 || !strings.Contains(body, "id: stream-0_0") || !strings.Contains(body, "alice") {
		t.Fatalf("alice's call: status %d, body %s", status, body)
	}

	h := bearer(bob)
	h.Set("Last-Event-ID", "stream-0_0")
	h.Set("Accept", "text/event-stream")
	status, _, body = s.viaEnvoy(t, http.MethodGet, "/mcp", h, "")
	if status != 400 || strings.Contains(body, "alice") {
		t.Fatalf("bob resumes alice's stream: status %d, body %s", status, body)
	}
	var e rpcError
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error == nil || !strings.Contains(e.Error.Message, "Last-Event-ID") {
		t.Fatalf("refusal body %s, want a JSON-RPC error naming Last-Event-ID", body)
	}

	cases := []struct {
		name    string
		routes  string
		headers map[string]string
		allowed bool
	}{
		{"mcp route", protocolYAML("mcp"), map[string]string{"last-event-id": "stream-0_0"}, false},
		{"auto route", stateYAML, map[string]string{"last-event-id": "stream-0_0"}, false},
		{"with the caller's session", stateYAML, map[string]string{"last-event-id": "stream-0_0", "mcp-session-id": "r-1"}, true},
		{"a GET without Last-Event-ID", stateYAML, nil, true},
		{"http route", protocolYAML("http"), map[string]string{"last-event-id": "stream-0_0"}, true},
		{"session binding off", strings.Replace(stateYAML, "audiences:", "mcp: {session_binding: false}\n    audiences:", 1), map[string]string{"last-event-id": "stream-0_0"}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := start(t, c.routes, options{})
			hs := map[string]string{"authorization": "Bearer " + bob, "accept": "text/event-stream"}
			maps.Copy(hs, c.headers)
			v := s.check(t, raw{Method: http.MethodGet, Headers: hs})
			if v.Allowed != c.allowed {
				t.Fatalf("allowed %v (%d %s), want %v", v.Allowed, v.Status, v.Body, c.allowed)
			}
			if !c.allowed {
				v.wantDenied(t, 400)
				v.rpc(t)
			}
		})
	}
}

// TestStateLegacySSESession: MCP's HTTP+SSE transport (2024-11-05, served
// by the Python SDK at /messages/?session_id=, the TypeScript SDK at
// /messages?sessionId= and the Go SDK at ?sessionid=) runs a POST in the session its query names. Such a
// session is bound to its first user as Mcp-Session-Id is: another user's
// calls, and the JSON-RPC responses that would answer its server's
// requests, are refused; a query naming the session twice is refused.
func TestStateLegacySSESession(t *testing.T) {
	s := start(t, stateYAML, options{})
	alice := map[string]string{"authorization": "Bearer " + token(t, issuerHS, "alice")}
	bob := map[string]string{"authorization": "Bearer " + token(t, issuerHS, "bob")}
	const answer = `{"jsonrpc":"2.0","id":0,"result":{"action":"accept","content":{}}}`
	for _, path := range []string{"/messages/?session_id=alice-sse-1", "/messages?sessionId=alice-sse-2", "/messages?session%5Fid=alice-sse-3", "/message?sessionid=alice-sse-4"} {
		t.Run(path, func(t *testing.T) {
			if v := s.check(t, raw{Path: path, Headers: alice, Body: toolCall(1, "whoami", "")}); !v.Allowed {
				t.Fatalf("alice: %d %s", v.Status, v.Body)
			}
			if v := s.check(t, raw{Path: path, Headers: alice, Body: answer}); !v.Allowed {
				t.Fatalf("alice's answer: %d %s", v.Status, v.Body)
			}
			s.check(t, raw{Path: path, Headers: bob, Body: toolCall(2, "whoami", "")}).wantDenied(t, 403)
			s.check(t, raw{Path: path, Headers: bob, Body: answer}).wantDenied(t, 403)
		})
	}
	for _, tc := range []struct{ name, query string }{
		{"both spellings", "?sessionId=alice-sse-2&session_id=bob-sse"},
		{"one spelling twice", "?sessionId=bob-sse&sessionId=alice-sse-2"},
		{"the Go and TypeScript spellings", "?sessionid=bob-sse&sessionId=alice-sse-2"},
		{"a query that cannot be read", "?sessionId=alice-sse-2;x=1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := s.check(t, raw{Path: "/messages" + tc.query, Headers: bob, Body: toolCall(3, "whoami", "")})
			v.wantDenied(t, 400)
			v.rpc(t)
		})
	}
	t.Run("a route without session binding", func(t *testing.T) {
		s := start(t, strings.Replace(stateYAML, "audiences:", "mcp: {session_binding: false}\n    audiences:", 1), options{})
		s.check(t, raw{Path: "/messages?sessionId=x", Headers: alice, Body: toolCall(1, "whoami", "")})
		if v := s.check(t, raw{Path: "/messages?sessionId=x", Headers: bob, Body: toolCall(2, "whoami", "")}); !v.Allowed {
			t.Fatalf("bound with session binding off: %d %s", v.Status, v.Body)
		}
	})
}

// TestStateLegacySSEEndToEnd: the Go SDK's HTTP+SSE server behind the
// Envoy-like proxy. Alice opens her stream (straight to the server: the
// proxy buffers answers) and posts her messages through the proxy; bob's
// message posted to her endpoint, bare or beside an Mcp-Session-Id of his
// own, is refused and never reaches her session.
func TestStateLegacySSEEndToEnd(t *testing.T) {
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
	post := func(tok, body string) int {
		status, _, _ := s.viaEnvoy(t, http.MethodPost, endpoint, bearer(tok), body)
		return status
	}
	if got := post(alice, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"alice","version":"1"}}}`); got != http.StatusAccepted {
		t.Fatalf("alice's initialize: %d", got)
	}
	if e := next(); !strings.Contains(e, `"id":1`) {
		t.Fatalf("alice's stream: %s, want the initialize answer", e)
	}
	post(alice, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if got := post(bob, `{"jsonrpc":"2.0","id":99,"method":"ping"}`); got != http.StatusForbidden {
		t.Fatalf("bob's message into alice's session: %d, want 403", got)
	}
	// Bob again, with an Mcp-Session-Id of his own, which the service
	// would bind and check while the server runs the message in the
	// session its query names: refused, never run in alice's (her stream's
	// next answer below is her own).
	beside := bearer(bob)
	beside.Set("Mcp-Session-Id", "bob-own-session")
	if got, _, _ := s.viaEnvoy(t, http.MethodPost, endpoint, beside, `{"jsonrpc":"2.0","id":98,"method":"ping"}`); got != http.StatusBadRequest {
		t.Fatalf("bob's message into alice's session beside a header session of his own: %d, want 400", got)
	}
	if got := post(alice, `{"jsonrpc":"2.0","id":2,"method":"ping"}`); got != http.StatusAccepted {
		t.Fatalf("alice's ping: %d", got)
	}
	if e := next(); !strings.Contains(e, `"id":2`) {
		t.Fatalf("alice's stream: %s, want her ping's answer and nothing of bob's", e)
	}
}

// protocolYAML is stateYAML's route declaring protocol p.
func protocolYAML(p string) string {
	return strings.Replace(stateYAML, "audiences:", "protocol: "+p+"\n    audiences:", 1)
}
