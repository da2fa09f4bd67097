package envoyauthz_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/check"
	"github.com/extauthz/extauthz/internal/envoyauthz"
	"github.com/extauthz/extauthz/internal/envoytest"
	"github.com/extauthz/extauthz/internal/fixtures"
	"github.com/extauthz/extauthz/internal/jsonrpc"
	"github.com/extauthz/extauthz/internal/testing/pipelinetest"
	"github.com/extauthz/extauthz/internal/testtoken"
)

const protoSecret = "protocol-test-secret-0123456789abcdef-xyz"

// protocolConfig: an MCP server with tool rules, an A2A agent with method
// rules, and the auto-detecting default route.
const protocolConfig = `
issuers:
  - {name: corp, issuer: https://idp.example.com, algorithms: [HS256], secret: ` + protoSecret + `}
routes:
  - name: files
    hosts: [mcp.example.com]
    path_prefix: /mcp
    protocol: mcp
    issuers: [corp]
    rules:
      - {name: destructive tools, methods: [tools/call], names: ["delete_*"], scopes: ["files:write"]}
      - {name: admin resources, methods: [resources/read], claims: {groups: [admins]}}
      - {name: no sampling, methods: ["sampling/*"], action: deny}
  - name: meta
    hosts: [meta.example.com]
    protocol: mcp
    issuers: [corp]
    mcp: {token_in_meta: true}
  - name: agent
    hosts: [agent.example.com]
    protocol: a2a
    issuers: [corp]
    rules:
      - {name: talking needs a scope, methods: [SendMessage, SendStreamingMessage], scopes: ["agent:invoke"]}
    protected_resource:
      resource: https://agent.example.com/
      authorization_servers: [https://login.example.com]
  - name: fallback
    default: true
    issuers: [corp]
`

type protoFixture struct {
	srv *envoyauthz.Server
}

func newProtoFixture(t *testing.T) *protoFixture {
	t.Helper()
	pl := pipelinetest.New(t, protocolConfig, check.Deps{}, check.Options{})
	return &protoFixture{srv: envoyauthz.NewServer(pl)}
}

func token(t testing.TB, sub string, extra jwt.MapClaims) string {
	c := jwt.MapClaims{"sub": sub, "iss": "https://idp.example.com", "exp": time.Now().Add(time.Hour).Unix(), "scope": "files:read"}
	for k, v := range extra {
		c[k] = v
	}
	return testtoken.HMAC(t, "HS256", protoSecret, c)
}

// result is what Envoy would do with the answer.
type result struct {
	status   int
	header   http.Header // client response headers (denied)
	body     []byte
	upstream http.Header // upstream request headers (allowed)
	metadata map[string]any
}

// send replays an HTTP request through the Envoy-like builder and the server.
func (f *protoFixture) send(t *testing.T, r *http.Request, body []byte, opts envoytest.BuildOptions) result {
	t.Helper()
	if body != nil && !opts.WithBody {
		opts.WithBody, opts.MaxRequestBytes = true, 1<<20
	}
	req := envoytest.BuildCheckRequest(r, body, opts)
	resp, err := f.srv.Check(context.Background(), req)
	if err != nil {
		t.Fatalf("gRPC error for a decision: %v", err)
	}
	res := result{metadata: resp.GetDynamicMetadata().AsMap()}
	if ok := resp.GetOkResponse(); ok != nil && resp.GetStatus().GetCode() == 0 {
		if _, err := envoytest.ApplyOK(r, ok); err != nil {
			t.Fatalf("Envoy would reject the answer: %v", err)
		}
		res.status, res.upstream = 200, r.Header
		return res
	}
	res.status, res.header, res.body = envoytest.DeniedResponse(resp.GetDeniedResponse())
	return res
}

func recording(t *testing.T, name string) fixtures.Recording {
	t.Helper()
	rec, err := fixtures.Named(name)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// replay sends a recording with a real token in place of the placeholder.
func (f *protoFixture) replay(t *testing.T, rec fixtures.Recording, host, tok string, edit func(*http.Request)) result {
	t.Helper()
	r := rec.HTTPRequest(host)
	if tok == "" {
		r.Header.Del("Authorization")
	} else {
		r.Header.Set("Authorization", "Bearer "+tok)
	}
	if edit != nil {
		edit(r)
	}
	var body []byte
	if len(rec.Body) > 0 {
		body = rec.Body
	}
	return f.send(t, r, body, envoytest.BuildOptions{})
}

type rpcError struct {
	ID    json.RawMessage `json:"id"`
	Error struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Data    struct {
			Status int    `json:"status"`
			Error  string `json:"error"`
			Scope  string `json:"scope"`
		} `json:"data"`
	} `json:"error"`
}

func decodeRPC(t *testing.T, body []byte) rpcError {
	t.Helper()
	var e rpcError
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("body is not JSON-RPC: %q", body)
	}
	return e
}

// TestMCPRecordings replays what the official MCP Go SDK client sends, in the
// 2025-06-18 session flow and the 2026-07-28 sessionless flow.
func TestMCPRecordings(t *testing.T) {
	f := newProtoFixture(t)
	alice := token(t, "alice", nil)
	recs, err := fixtures.MCP()
	if err != nil {
		t.Fatal(err)
	}
	// What alice (scope files:read, no groups) may do.
	want := map[string]struct {
		status int
		code   int
		method string
	}{
		"mcp-01-initialize":                      {200, 0, "initialize"},
		"mcp-02-get-sse":                         {200, 0, ""},
		"mcp-03-notifications-initialized":       {200, 0, "notifications/initialized"},
		"mcp-04-tools-list":                      {200, 0, "tools/list"},
		"mcp-05-tools-call-whoami":               {200, 0, "tools/call"},
		"mcp-06-tools-call-echo":                 {200, 0, "tools/call"},
		"mcp-07-tools-call-delete-file":          {403, -32000, "tools/call"},
		"mcp-08-resources-read":                  {403, -32000, "resources/read"},
		"mcp-09-delete-session":                  {200, 0, ""},
		"mcp-20260728-01-server-discover":        {200, 0, "server/discover"},
		"mcp-20260728-02-tools-list":             {200, 0, "tools/list"},
		"mcp-20260728-03-tools-call-whoami":      {200, 0, "tools/call"},
		"mcp-20260728-04-tools-call-echo":        {200, 0, "tools/call"},
		"mcp-20260728-05-tools-call-delete-file": {403, -32000, "tools/call"},
		"mcp-20260728-06-resources-read":         {403, -32000, "resources/read"},
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
			if res.status != w.status {
				t.Fatalf("status %d, want %d: %s", res.status, w.status, res.body)
			}
			if got, _ := res.metadata["method"].(string); got != w.method {
				t.Errorf("metadata method %q, want %q", got, w.method)
			}
			if res.status == 200 {
				if got := res.upstream.Get("X-User-Id"); got != "alice" {
					t.Errorf("x-user-id %q", got)
				}
				if res.upstream.Get("Authorization") != "" {
					t.Error("authorization forwarded")
				}
				return
			}
			e := decodeRPC(t, res.body)
			var recID struct {
				ID json.RawMessage `json:"id"`
			}
			json.Unmarshal(rec.Body, &recID)
			if e.Error.Code != w.code || !bytes.Equal(e.ID, recID.ID) {
				t.Errorf("error %+v, want code %d and id %s", e, w.code, recID.ID)
			}
		})
	}
	if seen != len(want) {
		t.Errorf("replayed %d of %d expected recordings", seen, len(want))
	}
}

func TestMCPRules(t *testing.T) {
	f := newProtoFixture(t)
	call := func(method, params string) []byte {
		return []byte(`{"jsonrpc":"2.0","id":"req-1","method":"` + method + `","params":` + params + `}`)
	}
	post := func(host string, body []byte, headers map[string]string) *http.Request {
		r, _ := http.NewRequest("POST", "http://"+host+"/mcp", bytes.NewReader(body))
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
		opts     envoytest.BuildOptions
		status   int
		code     int    // JSON-RPC error code; 0 for none
		www      string // substring of WWW-Authenticate
		upstream map[string]string
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
		{name: "partial body is not trusted: headers decide", body: call("tools/call", `{"name":"echo"}`), opts: envoytest.BuildOptions{WithBody: true, MaxRequestBytes: 30, AllowPartial: true},
			headers: map[string]string{"Authorization": "Bearer " + reader, "Mcp-Method": "tools/call", "Mcp-Name": "delete_x"}, status: 403},
		{name: "partial body and no headers fails closed", body: call("tools/call", `{"name":"delete_file","arguments":{"x":"yyyyyyyyyyyyy"}}`), opts: envoytest.BuildOptions{WithBody: true, MaxRequestBytes: 40, AllowPartial: true},
			headers: bearer(reader), status: 400, code: jsonrpc.CodeInvalidRequest},
		{name: "token in _meta when allowed", host: "meta.example.com", body: call("tools/call", `{"name":"x","_meta":{"authorization":"Bearer `+reader+`"}}`), status: 200, upstream: map[string]string{"X-User-Id": "rita"}},
		{name: "token in arguments._metadata", host: "meta.example.com", body: call("tools/call", `{"name":"x","arguments":{"_metadata":{"authorization":"Bearer `+admin+`"}}}`), status: 200, upstream: map[string]string{"X-User-Id": "ada"}},
		{name: "header wins over _meta", host: "meta.example.com", body: call("tools/call", `{"name":"x","_meta":{"authorization":"Bearer `+reader+`"}}`), headers: map[string]string{"Authorization": "Bearer not.a.jwt"}, status: 401},
		{name: "token in _meta ignored where not allowed", body: call("tools/call", `{"name":"x","_meta":{"authorization":"Bearer `+reader+`"}}`), status: 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			host := tt.host
			if host == "" {
				host = "mcp.example.com"
			}
			r := post(host, tt.body, tt.headers)
			var body []byte
			if tt.body != nil {
				body = tt.body
				if tt.opts.WithBody {
					r, _ = http.NewRequest("POST", r.URL.String(), bytes.NewReader(body))
					for k, v := range tt.headers {
						r.Header.Set(k, v)
					}
				}
			}
			res := f.send(t, r, body, tt.opts)
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
				if strings.Contains(string(tt.body), `"id":"req-1"`) && tt.code != jsonrpc.CodeParseError && tt.code != jsonrpc.CodeInvalidRequest && tt.name != "malformed Mcp-Name" {
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

func TestMCPSessionBinding(t *testing.T) {
	f := newProtoFixture(t)
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
		if s.status == 200 && res.metadata["mcp_session"] != s.sid {
			t.Fatalf("%s: metadata %v", s.name, res.metadata)
		}
	}
}

func TestA2A(t *testing.T) {
	f := newProtoFixture(t)
	invoker := token(t, "ivan", jwt.MapClaims{"scope": "agent:invoke"})
	plain := token(t, "paul", nil)
	card := recording(t, "a2a-01-agent-card")
	send := recording(t, "a2a-02-message-send")
	get := recording(t, "a2a-03-tasks-get")

	if res := f.replay(t, card, "agent.example.com", "", nil); res.status != 200 {
		t.Fatalf("agent card needs no token: %d %s", res.status, res.body)
	}
	res := f.replay(t, send, "agent.example.com", invoker, nil)
	if res.status != 200 || res.metadata["protocol"] != "a2a" || res.metadata["a2a_context_id"] != "00000000-0000-4000-8000-000000000002" {
		t.Fatalf("message/send: %d %v %s", res.status, res.metadata, res.body)
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
	r, _ := http.NewRequest("POST", "http://agent.example.com/", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","contextId":"c","role":"ROLE_USER","parts":[]}}}`))
	r.Header.Set("Authorization", "Bearer "+plain)
	if res := f.send(t, r, []byte(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","contextId":"c","role":"ROLE_USER","parts":[]}}}`), envoytest.BuildOptions{}); res.status != 403 {
		t.Fatalf("SendMessage without scope: %d", res.status)
	}
}

func TestProtectedResourceMetadata(t *testing.T) {
	f := newProtoFixture(t)
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
			res := f.send(t, r, nil, envoytest.BuildOptions{})
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

// TestCapturesDecide runs every real Envoy capture through the server: each
// gets a decision (never a gRPC error) with an explicit status.
func TestCapturesDecide(t *testing.T) {
	f := newProtoFixture(t)
	caps, err := envoytest.Captures()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range caps {
		t.Run(c.Name, func(t *testing.T) {
			resp, err := f.srv.Check(context.Background(), c.Request)
			if err != nil {
				t.Fatal(err)
			}
			// None of the captures carries a token we accept.
			d := resp.GetDeniedResponse()
			if resp.GetStatus().GetCode() == 0 || d == nil || d.GetStatus().GetCode() == 0 {
				t.Fatalf("capture was not denied with a status: %v", resp)
			}
			if code := int(d.GetStatus().GetCode()); code != 401 && code != 400 {
				t.Fatalf("status %d: %s", code, d.GetBody())
			}
		})
	}
}
