package check_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/elicit"
	"github.com/extauthz/extauthz/internal/jsonrpc"
	"github.com/extauthz/extauthz/internal/testing/fixtures"
	"github.com/extauthz/extauthz/internal/testing/ststest"
)

// TestMCPRecordings decides what the official MCP Go SDK client sends, in
// the 2025-06-18 session flow and the 2026-07-28 sessionless flow, as alice
// (scope files:read, no groups).
func TestMCPRecordings(t *testing.T) {
	f := newDecider(t)
	alice := token(t, "alice", nil)
	recs, err := fixtures.MCP()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		status int
		method string
	}{
		"mcp-01-initialize":                      {200, "initialize"},
		"mcp-02-get-sse":                         {200, ""},
		"mcp-03-notifications-initialized":       {200, "notifications/initialized"},
		"mcp-04-tools-list":                      {200, "tools/list"},
		"mcp-05-tools-call-whoami":               {200, "tools/call"},
		"mcp-06-tools-call-echo":                 {200, "tools/call"},
		"mcp-07-tools-call-delete-file":          {403, "tools/call"},
		"mcp-08-resources-read":                  {403, "resources/read"},
		"mcp-09-delete-session":                  {200, ""},
		"mcp-20260728-01-server-discover":        {200, "server/discover"},
		"mcp-20260728-02-tools-list":             {200, "tools/list"},
		"mcp-20260728-03-tools-call-whoami":      {200, "tools/call"},
		"mcp-20260728-04-tools-call-echo":        {200, "tools/call"},
		"mcp-20260728-05-tools-call-delete-file": {403, "tools/call"},
		"mcp-20260728-06-resources-read":         {403, "resources/read"},
	}
	seen := 0
	for _, rec := range recs {
		w, ok := want[rec.Name]
		if !ok {
			t.Errorf("recording %s has no expectation", rec.Name)
			continue
		}
		seen++
		t.Run(rec.Name, func(t *testing.T) {
			res := f.replay(t, rec, "mcp.example.com", alice, nil)
			if res.status != w.status || res.call.Method != w.method {
				t.Fatalf("status %d method %q, want %d %q: %s", res.status, res.call.Method, w.status, w.method, res.body)
			}
			if res.status == 200 && (res.upstream.Get("X-User-Id") != "alice" || res.upstream.Get("Authorization") != "") {
				t.Errorf("upstream x-user-id %q, authorization forwarded: %v", res.upstream.Get("X-User-Id"), res.upstream.Get("Authorization") != "")
			}
		})
	}
	if seen != len(want) {
		t.Errorf("decided %d of %d expected recordings", seen, len(want))
	}
}

func TestMCPRules(t *testing.T) {
	f := newDecider(t)
	call := func(method, params string) []byte {
		return []byte(`{"jsonrpc":"2.0","id":"req-1","method":"` + method + `","params":` + params + `}`)
	}
	post := func(host string, body []byte, headers map[string]string) *http.Request {
		r, _ := http.NewRequest("POST", "http://"+host+"/mcp", nil)
		r.Header.Set("Content-Type", "application/json")
		for k, v := range headers {
			r.Header.Set(k, v)
		}
		return r
	}
	bearer := func(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }
	writer := token(t, "wendy", jwt.MapClaims{"scope": "files:read files:write"})
	admin := token(t, "ada", jwt.MapClaims{"groups": []any{"eng", "admins"}})
	reader := token(t, "rita", nil)
	tests := []struct {
		name     string
		host     string
		body     []byte
		headers  map[string]string
		partial  int // the proxy sent only this many bytes of the body
		status   int
		code     int    // JSON-RPC error code; 0 for none
		www      string // substring of WWW-Authenticate
		upstream map[string]string
		// withID: a -32600 for a body that was read, answered with its id.
		withID bool
	}{
		{name: "delete tool with write scope", body: call("tools/call", `{"name":"delete_file","arguments":{}}`), headers: bearer(writer), status: 200},
		{name: "delete tool without write scope", body: call("tools/call", `{"name":"delete_file"}`), headers: bearer(reader), status: 403, code: -32000,
			www: `error="insufficient_scope", error_description="this call needs scope files:write", scope="files:write", resource_metadata="http://mcp.example.com/.well-known/oauth-protected-resource/mcp"`},
		{name: "other tools pass", body: call("tools/call", `{"name":"read_file"}`), headers: bearer(reader), status: 200},
		{name: "claim rule satisfied", body: call("resources/read", `{"uri":"file:///etc/x"}`), headers: bearer(admin), status: 200},
		{name: "claim rule unmet", body: call("resources/read", `{"uri":"file:///etc/x"}`), headers: bearer(reader), status: 403, code: -32000},
		{name: "deny rule", body: call("sampling/createMessage", `{}`), headers: bearer(admin), status: 403, code: -32000},
		{name: "invalid JSON", body: []byte(`{"jsonrpc":"2.0",`), headers: bearer(reader), status: 400, code: jsonrpc.CodeParseError},
		{name: "batch", body: []byte(`[` + string(call("tools/list", `{}`)) + `]`), headers: bearer(reader), status: 400, code: jsonrpc.CodeInvalidRequest},
		{name: "not JSON-RPC", body: []byte(`{"hello":"world"}`), headers: bearer(reader), status: 400, code: jsonrpc.CodeInvalidRequest},
		{name: "notification", body: []byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`), headers: bearer(reader), status: 200},
		{name: "missing token on an MCP call", body: call("tools/list", `{}`), status: 401, code: -32000, www: `Bearer resource_metadata="http://mcp.example.com/.well-known/oauth-protected-resource/mcp"`},
		{name: "Mcp-Method mismatch", body: call("tools/call", `{"name":"echo"}`), headers: map[string]string{"Authorization": "Bearer " + reader, "Mcp-Method": "tools/list"}, status: 400, code: jsonrpc.CodeHeaderMismatch},
		{name: "Mcp-Name mismatch hides a delete", body: call("tools/call", `{"name":"delete_file"}`), headers: map[string]string{"Authorization": "Bearer " + reader, "Mcp-Method": "tools/call", "Mcp-Name": "echo"}, status: 400, code: jsonrpc.CodeHeaderMismatch},
		{name: "2026-07-28 without Mcp-Method", body: call("tools/list", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`), headers: bearer(reader), status: 400, code: jsonrpc.CodeHeaderMismatch},
		{name: "2026-07-28 tools/call without Mcp-Name", body: call("tools/call", `{"name":"echo","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`), headers: map[string]string{"Authorization": "Bearer " + reader, "Mcp-Method": "tools/call"}, status: 400, code: jsonrpc.CodeHeaderMismatch},
		{name: "base64 Mcp-Name matching a non-ASCII name", body: call("tools/call", `{"name":"délete_日本"}`), headers: map[string]string{"Authorization": "Bearer " + reader, "Mcp-Method": "tools/call", "Mcp-Name": "=?base64?" + base64.StdEncoding.EncodeToString([]byte("délete_日本")) + "?="}, status: 200},
		{name: "malformed Mcp-Name", body: call("tools/call", `{"name":"echo"}`), headers: map[string]string{"Authorization": "Bearer " + reader, "Mcp-Name": "=?base64?!!!?="}, status: 400, code: jsonrpc.CodeHeaderMismatch},
		{name: "MCP-Protocol-Version disagrees with _meta", body: call("tools/list", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`), headers: map[string]string{"Authorization": "Bearer " + reader, "Mcp-Method": "tools/list", "MCP-Protocol-Version": "2025-06-18"}, status: 400, code: jsonrpc.CodeHeaderMismatch},
		{name: "headers alone identify a denied call", headers: map[string]string{"Authorization": "Bearer " + reader, "Mcp-Method": "tools/call", "Mcp-Name": "delete_all"}, status: 403, code: -32000},
		// Tasks are bound (the default), so a cut body is refused before the
		// headers could decide: it may hide a task operation (TestTasksCutBody).
		{name: "partial body is not trusted: refused", body: call("tools/call", `{"name":"echo"}`), partial: 30,
			headers: map[string]string{"Authorization": "Bearer " + reader, "Mcp-Method": "tools/call", "Mcp-Name": "echo"}, status: 400, code: jsonrpc.CodeInvalidRequest},
		{name: "partial body and no headers fails closed", body: call("tools/call", `{"name":"delete_file","arguments":{"x":"yyyyyyyyyyyyy"}}`), partial: 40,
			headers: bearer(reader), status: 400, code: jsonrpc.CodeInvalidRequest},
		{name: "token in _meta when allowed", host: "meta.example.com", body: call("tools/call", `{"name":"x","_meta":{"authorization":"Bearer `+reader+`"}}`), status: 200, upstream: map[string]string{"X-User-Id": "rita"}},
		{name: "token in arguments._metadata", host: "meta.example.com", body: call("tools/call", `{"name":"x","arguments":{"_metadata":{"authorization":"Bearer `+admin+`"}}}`), status: 200, upstream: map[string]string{"X-User-Id": "ada"}},
		// The upstream of such a route reads the token in the body, which
		// goes on as it is: it must be the one verified.
		{name: "a header token and another in _meta", host: "meta.example.com", body: call("tools/call", `{"name":"x","_meta":{"authorization":"Bearer `+reader+`"}}`), headers: map[string]string{"Authorization": "Bearer not.a.jwt"}, status: 400, code: jsonrpc.CodeInvalidRequest, withID: true},
		{name: "a valid header token and a forged one in _meta", host: "meta.example.com", body: call("tools/call", `{"name":"x","_meta":{"authorization":"Bearer `+admin+`x"}}`), headers: bearer(reader), status: 400, code: jsonrpc.CodeInvalidRequest, withID: true},
		{name: "a valid header token and another in arguments._metadata", host: "meta.example.com", body: call("tools/call", `{"name":"x","arguments":{"_metadata":{"authorization":"Bearer `+admin+`"}}}`), headers: bearer(reader), status: 400, code: jsonrpc.CodeInvalidRequest, withID: true},
		{name: "two different tokens in the body", host: "meta.example.com", body: call("tools/call", `{"name":"x","_meta":{"authorization":"Bearer `+reader+`"},"arguments":{"_metadata":{"authorization":"Bearer `+admin+`"}}}`), status: 400, code: jsonrpc.CodeInvalidRequest, withID: true},
		{name: "the header's token in _meta too", host: "meta.example.com", body: call("tools/call", `{"name":"x","_meta":{"authorization":"Bearer `+reader+`"}}`), headers: bearer(reader), status: 200, upstream: map[string]string{"X-User-Id": "rita"}},
		{name: "the same token in both body places", host: "meta.example.com", body: call("tools/call", `{"name":"x","_meta":{"authorization":"`+reader+`"},"arguments":{"_metadata":{"authorization":"`+reader+`"}}}`), status: 200, upstream: map[string]string{"X-User-Id": "rita"}},
		{name: "token in _meta ignored where not allowed", body: call("tools/call", `{"name":"x","_meta":{"authorization":"Bearer `+reader+`"}}`), status: 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			host := tt.host
			if host == "" {
				host = "mcp.example.com"
			}
			r := post(host, tt.body, tt.headers)
			body := tt.body
			if tt.partial > 0 {
				body = body[:tt.partial]
			}
			res := f.send(t, r, body, tt.partial > 0)
			if res.status != tt.status {
				t.Fatalf("status %d, want %d: %s", res.status, tt.status, res.body)
			}
			if tt.code != 0 {
				e := decodeRPC(t, res.body)
				if e.Error.Code != tt.code {
					t.Errorf("code %d, want %d (%s)", e.Error.Code, tt.code, res.body)
				}
				// A request whose body was read is answered with its own id;
				// one that could not be read, with null.
				wantID := "null"
				if strings.Contains(string(tt.body), `"id":"req-1"`) && (tt.withID || tt.code != jsonrpc.CodeParseError && tt.code != jsonrpc.CodeInvalidRequest && tt.name != "malformed Mcp-Name") {
					wantID = `"req-1"`
				}
				if string(e.ID) != wantID {
					t.Errorf("id %s, want %s", e.ID, wantID)
				}
			}
			if tt.www != "" && !strings.Contains(res.header.Get("Www-Authenticate"), tt.www) {
				t.Errorf("WWW-Authenticate %q lacks %q", res.header.Get("Www-Authenticate"), tt.www)
			}
			for k, v := range tt.upstream {
				if got := res.upstream.Get(k); got != v {
					t.Errorf("upstream %s = %q, want %q", k, got, v)
				}
			}
		})
	}
}

// TestCutBodyHeadersDecide: where no task is bound, a body cut short at the
// proxy's limit is not refused as such; it is never read either, so the
// Mcp-Method and Mcp-Name headers decide its rule: a call they name as
// denied stays denied, and one they name as allowed is not let through on
// their word alone.
func TestCutBodyHeadersDecide(t *testing.T) {
	f := newDeciderOf(t, "sessions: {task_ownership: false}\n"+protocolConfig)
	reader := token(t, "rita", nil)
	body := []byte(`{"jsonrpc":"2.0","id":"req-1","method":"tools/call","params":{"name":"echo","arguments":{"pad":"xxxxxxxx"}}}`)
	for _, tc := range []struct {
		name, method, tool string
		status             int
	}{
		{"headers name a tool that needs a scope", "tools/call", "delete_x", 403},
		{"headers name a denied method", "sampling/createMessage", "", 403},
		// Allowing on the headers' word needs an upstream that checks them
		// against the body (upstream_validates_mcp_headers).
		{"headers name an allowed tool", "tools/call", "echo", 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := http.NewRequest("POST", "http://mcp.example.com/mcp", nil)
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("Authorization", "Bearer "+reader)
			r.Header.Set("Mcp-Method", tc.method)
			if tc.tool != "" {
				r.Header.Set("Mcp-Name", tc.tool)
			}
			res := f.send(t, r, body[:40], true)
			if res.status != tc.status {
				t.Fatalf("status %d, want %d: %s", res.status, tc.status, res.body)
			}
			if res.call.Method != tc.method {
				t.Errorf("decided as %q, want the headers' %q", res.call.Method, tc.method)
			}
		})
	}
}

func TestMCPSessionBinding(t *testing.T) {
	f := newDecider(t)
	alice, bob := token(t, "alice", nil), token(t, "bob", nil)
	withSession := func(sid string) func(*http.Request) {
		return func(r *http.Request) { r.Header.Set("Mcp-Session-Id", sid) }
	}
	list := recording(t, "mcp-04-tools-list")
	del := recording(t, "mcp-09-delete-session")
	steps := []struct {
		name   string
		rec    fixtures.Recording
		tok    string
		sid    string
		status int
	}{
		{"alice uses her session", list, alice, "s-1", 200},
		{"alice again", list, alice, "s-1", 200},
		{"bob presents alice's session", list, bob, "s-1", 403},
		{"bob cannot end alice's session", del, bob, "s-1", 403},
		{"bob has his own", list, bob, "s-2", 200},
		{"alice ends her session", del, alice, "s-1", 200},
		{"after the end the id still belongs to alice (the server may keep it)", list, bob, "s-1", 403},
		{"a session never authenticates", list, "", "s-2", 401},
	}
	for _, s := range steps {
		res := f.replay(t, s.rec, "mcp.example.com", s.tok, withSession(s.sid))
		if res.status != s.status {
			t.Fatalf("%s: status %d, want %d: %s", s.name, res.status, s.status, res.body)
		}
		if s.status == 403 {
			if e := decodeRPC(t, res.body); e.Error.Data.Error != "session_conflict" {
				t.Fatalf("%s: %s", s.name, res.body)
			}
		}
		if s.status == 200 && res.call.MCPSession != s.sid {
			t.Fatalf("%s: call %+v", s.name, res.call)
		}
	}
}

func TestA2A(t *testing.T) {
	f := newDecider(t)
	invoker := token(t, "ivan", jwt.MapClaims{"scope": "agent:invoke"})
	plain := token(t, "paul", nil)
	card := recording(t, "a2a-01-agent-card")
	send := recording(t, "a2a-02-message-send")
	get := recording(t, "a2a-03-tasks-get")

	if res := f.replay(t, card, "agent.example.com", "", nil); res.status != 200 {
		t.Fatalf("agent card needs no token: %d %s", res.status, res.body)
	}
	res := f.replay(t, send, "agent.example.com", invoker, nil)
	if res.status != 200 || res.call.Protocol != jsonrpc.ProtocolA2A || res.call.ContextID != "00000000-0000-4000-8000-000000000002" {
		t.Fatalf("message/send: %d %+v %s", res.status, res.call, res.body)
	}
	res = f.replay(t, send, "agent.example.com", plain, nil)
	if res.status != 403 {
		t.Fatalf("v0.3 message/send matched by a v1.0 rule name: %d", res.status)
	}
	if e := decodeRPC(t, res.body); string(e.ID) != `"00000000-0000-4000-8000-000000000003"` || e.Error.Data.Scope != "agent:invoke" {
		t.Fatalf("A2A error body %s", res.body)
	}
	if res := f.replay(t, get, "agent.example.com", plain, nil); res.status != 200 {
		t.Fatalf("tasks/get: %d %s", res.status, res.body)
	}
	// The v1.0 spelling is held to the same rule.
	r, _ := http.NewRequest("POST", "http://agent.example.com/", nil)
	r.Header.Set("Authorization", "Bearer "+plain)
	if res := f.send(t, r, []byte(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","contextId":"c","role":"ROLE_USER","parts":[]}}}`), false); res.status != 403 {
		t.Fatalf("SendMessage without scope: %d", res.status)
	}
}

func TestProtectedResourceMetadata(t *testing.T) {
	f := newDecider(t)
	tests := []struct {
		name    string
		url     string
		want    map[string]any
		wantNot bool
	}{
		{name: "path-inserted form for the MCP route", url: "https://mcp.example.com/.well-known/oauth-protected-resource/mcp",
			want: map[string]any{"resource": "https://mcp.example.com/mcp", "authorization_servers": []any{"https://idp.example.com"}, "scopes_supported": []any{"files:write"}, "bearer_methods_supported": []any{"header"}}},
		{name: "configured document", url: "https://agent.example.com/.well-known/oauth-protected-resource",
			want: map[string]any{"resource": "https://agent.example.com/", "authorization_servers": []any{"https://login.example.com"}, "scopes_supported": []any{"agent:invoke"}}},
		{name: "root form on the default route", url: "http://other.example.com/.well-known/oauth-protected-resource",
			want: map[string]any{"resource": "http://other.example.com"}},
		{name: "a longer well-known name is not ours", url: "https://mcp.example.com/.well-known/oauth-protected-resourcex", wantNot: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, _ := http.NewRequest("GET", tt.url, nil)
			res := f.send(t, r, nil, false)
			if tt.wantNot {
				if res.status == 200 && res.upstream == nil {
					t.Fatal("answered a path that is not the metadata document")
				}
				return
			}
			if res.status != 200 || res.upstream != nil {
				t.Fatalf("want a direct 200 answer, got %d upstream=%v", res.status, res.upstream != nil)
			}
			if res.header.Get("Content-Type") != "application/json" {
				t.Errorf("content-type %q", res.header.Get("Content-Type"))
			}
			var doc map[string]any
			if err := json.Unmarshal(res.body, &doc); err != nil {
				t.Fatal(err)
			}
			for k, v := range tt.want {
				if fmt.Sprint(doc[k]) != fmt.Sprint(v) {
					t.Errorf("%s = %v, want %v", k, doc[k], v)
				}
			}
		})
	}
}

func TestTokenExchange(t *testing.T) {
	f := newExchanger(t)
	tok := token(t, "alice", jwt.MapClaims{"session_id": "sess-1"})

	// tools/list is not marked for exchange: the inbound token is removed,
	// nothing is exchanged.
	res := f.mcp(t, tok, "tools/list", `{}`, nil)
	if res.status != 200 || res.upstream.Get("Authorization") != "" || f.sts.Calls() != 0 {
		t.Fatalf("tools/list: %d auth=%q sts=%d", res.status, res.upstream.Get("Authorization"), f.sts.Calls())
	}

	tests := []struct {
		name     string
		tool     string
		audience string
		scope    string
	}{
		{"route default audience", "read_file", "https://files-backend.example.com", "files"},
		{"per-tool override", "github_create_issue", "https://github-proxy.example.com", "repo"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := f.mcp(t, tok, "tools/call", `{"name":"`+tt.tool+`"}`, nil)
			if res.status != 200 {
				t.Fatalf("status %d: %s", res.status, res.body)
			}
			got := strings.TrimPrefix(res.upstream.Get("Authorization"), "Bearer ")
			if got == "" || got == tok {
				t.Fatal("the inbound token reached the upstream (token passthrough)")
			}
			claims, err := f.sts.Verify(got)
			if err != nil {
				t.Fatalf("upstream token not issued by the STS: %v", err)
			}
			if fmt.Sprint(claims["aud"]) != tt.audience && fmt.Sprint(claims["aud"]) != "["+tt.audience+"]" {
				t.Errorf("aud %v, want %s", claims["aud"], tt.audience)
			}
			if claims["scope"] != tt.scope || claims["sub"] != "alice" {
				t.Errorf("claims %v", claims)
			}
		})
	}
	calls := f.sts.Calls()
	for range 5 {
		f.mcp(t, tok, "tools/call", `{"name":"read_file"}`, nil)
	}
	if f.sts.Calls() != calls {
		t.Fatalf("cached exchange called the STS again: %d -> %d", calls, f.sts.Calls())
	}
	last, _ := f.sts.Last()
	if last.Form.Get("grant_type") != "urn:ietf:params:oauth:grant-type:token-exchange" || last.AuthMethod != "client_secret_basic" {
		t.Fatalf("STS request %+v", last)
	}

	// An STS refusal of the target is a 403.
	if res := f.mcp(t, tok, "tools/call", `{"name":"forbidden_tool"}`, nil); res.status != 403 {
		t.Fatalf("invalid_target: %d", res.status)
	}
	// The STS down is a 503 with Retry-After.
	f.sts.SetFault(ststest.Fault{Status: 503, Body: `{"error":"temporarily_unavailable"}`})
	res = f.mcp(t, token(t, "bob", nil), "tools/call", `{"name":"read_file"}`, nil)
	if res.status != 503 || res.header.Get("Retry-After") == "" {
		t.Fatalf("STS down: %d retry-after=%q", res.status, res.header.Get("Retry-After"))
	}
}

// TestReauthorization: the answers MCP and A2A clients understand when the
// user must authorize a third party first.
func TestReauthorization(t *testing.T) {
	f := newExchanger(t)
	tok := token(t, "alice", nil)
	urlCaps := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"url":{}}}}`
	mcpHeaders := func(name string) map[string]string {
		return map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": name, "MCP-Protocol-Version": "2026-07-28"}
	}

	t.Run("client with URL elicitation gets -32042", func(t *testing.T) {
		res := f.mcp(t, tok, "tools/call", `{"name":"third_party",`+urlCaps+`}`, mcpHeaders("third_party"))
		if res.status != 200 || res.upstream != nil {
			t.Fatalf("want a direct 200 answer, got %d: %s", res.status, res.body)
		}
		var body struct {
			ID    int `json:"id"`
			Error struct {
				Code int `json:"code"`
				Data struct {
					Elicitations []struct{ Mode, ElicitationID, URL, Message string } `json:"elicitations"`
				} `json:"data"`
			} `json:"error"`
		}
		if err := json.Unmarshal(res.body, &body); err != nil {
			t.Fatal(err)
		}
		e := body.Error.Data.Elicitations
		if body.ID != 42 || body.Error.Code != -32042 || len(e) != 1 || e[0].Mode != "url" || e[0].ElicitationID == "" || e[0].Message == "" {
			t.Fatalf("body %s", res.body)
		}
		u, _ := url.Parse(e[0].URL)
		if id, _, _ := strings.Cut(u.Query().Get("state"), "."); id != e[0].ElicitationID || u.Query().Get("client_id") != "files" {
			t.Fatalf("authorization URL %s", e[0].URL)
		}
	})

	t.Run("client without URL elicitation gets an isError tool result", func(t *testing.T) {
		res := f.mcp(t, tok, "tools/call", `{"name":"third_party"}`, nil)
		var body struct {
			Result struct {
				IsError bool `json:"isError"`
				Content []struct{ Type, Text string }
				Meta    struct {
					AuthRequired struct {
						URL           string `json:"url"`
						ElicitationID string `json:"elicitation_id"`
						Type          string `json:"type"`
					} `json:"auth_required"`
				} `json:"_meta"`
			} `json:"result"`
		}
		if err := json.Unmarshal(res.body, &body); err != nil || res.status != 200 {
			t.Fatalf("%d %s", res.status, res.body)
		}
		r := body.Result
		if !r.IsError || len(r.Content) == 0 || !strings.Contains(r.Content[0].Text, r.Meta.AuthRequired.URL) ||
			r.Meta.AuthRequired.Type != "oauth2" || r.Meta.AuthRequired.ElicitationID == "" {
			t.Fatalf("body %s", res.body)
		}
	})

	t.Run("A2A client gets a JSON-RPC error", func(t *testing.T) {
		body := []byte(`{"jsonrpc":"2.0","id":"a1","method":"message/send","params":{"message":{"messageId":"m","contextId":"c","role":"user","parts":[]}}}`)
		r, _ := http.NewRequest("POST", "http://agent.example.com/", nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		res := f.send(t, r, body, false)
		var e struct {
			ID    string `json:"id"`
			Error struct {
				Code int `json:"code"`
				Data struct {
					URL           string `json:"url"`
					ElicitationID string `json:"elicitationId"`
				} `json:"data"`
			} `json:"error"`
		}
		if err := json.Unmarshal(res.body, &e); err != nil || e.ID != "a1" || e.Error.Code == 0 || e.Error.Data.URL == "" {
			t.Fatalf("%d %s", res.status, res.body)
		}
	})

	t.Run("consent check: elicitation, completion, then the call goes through", func(t *testing.T) {
		before := f.sts.Calls()
		res := f.mcp(t, tok, "tools/call", `{"name":"calendar_add",`+urlCaps+`}`, mcpHeaders("calendar_add"))
		var body struct {
			Error struct {
				Code int `json:"code"`
				Data struct {
					Elicitations []struct {
						ElicitationID string
						URL           string `json:"url"`
					} `json:"elicitations"`
				} `json:"data"`
			} `json:"error"`
		}
		json.Unmarshal(res.body, &body)
		if body.Error.Code != -32042 || len(body.Error.Data.Elicitations) != 1 {
			t.Fatalf("%s", res.body)
		}
		id := body.Error.Data.Elicitations[0].ElicitationID
		if f.sts.Calls() != before {
			t.Fatal("the STS was called before consent")
		}
		u, err := url.Parse(body.Error.Data.Elicitations[0].URL)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.pl.CompleteElicitation(t.Context(), id, ""); !errors.Is(err, elicit.ErrStateMissing) {
			t.Fatalf("completion by id alone: %v", err)
		}
		if p, err := f.pl.CompleteElicitation(t.Context(), id, u.Query().Get("state")); err != nil || p.Subject != "alice" {
			t.Fatalf("complete: %+v %v", p, err)
		}
		res = f.mcp(t, tok, "tools/call", `{"name":"calendar_add"}`, nil)
		if res.status != 200 || !strings.HasPrefix(res.upstream.Get("Authorization"), "Bearer ") {
			t.Fatalf("after consent: %d %s", res.status, res.body)
		}
		// Consent is per user.
		if res := f.mcp(t, token(t, "bob", nil), "tools/call", `{"name":"calendar_add"}`, nil); res.upstream != nil {
			t.Fatal("alice's consent let bob through")
		}
	})
}

// TestInitializeCapabilityRemembered: a 2025-11-25 client declares URL
// elicitation at initialize (before it has a session id); the session it
// then uses gets -32042 answers.
func TestInitializeCapabilityRemembered(t *testing.T) {
	f := newExchanger(t)
	tok := token(t, "carol", nil)
	init := `{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{"url":{}}},"clientInfo":{"name":"c","version":"1"}}`
	if res := f.mcp(t, tok, "initialize", init, nil); res.status != 200 {
		t.Fatalf("initialize: %d", res.status)
	}
	sess := map[string]string{"Mcp-Session-Id": "s-init", "MCP-Protocol-Version": "2025-11-25"}
	if res := f.mcp(t, tok, "notifications/initialized", `{}`, sess); res.status != 200 {
		t.Fatalf("initialized: %d", res.status)
	}
	res := f.mcp(t, tok, "tools/call", `{"name":"third_party"}`, sess)
	var body struct {
		Error struct{ Code int } `json:"error"`
	}
	if json.Unmarshal(res.body, &body); body.Error.Code != -32042 {
		t.Fatalf("want -32042 for a session whose client declared URL elicitation: %s", res.body)
	}
	// A client that declared form mode only gets the tool result.
	other := token(t, "dave", nil)
	f.mcp(t, other, "initialize", `{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"c","version":"1"}}`, nil)
	sess2 := map[string]string{"Mcp-Session-Id": "s-form", "MCP-Protocol-Version": "2025-11-25"}
	f.mcp(t, other, "notifications/initialized", `{}`, sess2)
	res = f.mcp(t, other, "tools/call", `{"name":"third_party"}`, sess2)
	if !strings.Contains(string(res.body), `"isError":true`) {
		t.Fatalf("form-only client: %s", res.body)
	}
}

// TestSessionEndDropsExchangedTokens: DELETE of an MCP session drops the
// tokens exchanged for it.
func TestSessionEndDropsExchangedTokens(t *testing.T) {
	f := newExchanger(t)
	tok := token(t, "alice", nil)
	sess := map[string]string{"Mcp-Session-Id": "s-9"}
	f.mcp(t, tok, "tools/call", `{"name":"read_file"}`, sess)
	f.mcp(t, tok, "tools/call", `{"name":"read_file"}`, sess)
	if f.sts.Calls() != 1 {
		t.Fatalf("calls %d", f.sts.Calls())
	}
	r, _ := http.NewRequest("DELETE", "http://mcp.example.com/mcp", nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	r.Header.Set("Mcp-Session-Id", "s-9")
	if res := f.send(t, r, nil, false); res.status != 200 {
		t.Fatalf("delete: %d", res.status)
	}
	f.mcp(t, tok, "tools/call", `{"name":"read_file"}`, sess)
	if f.sts.Calls() != 2 {
		t.Fatalf("the ended session's exchanged token was reused: %d calls", f.sts.Calls())
	}
}
