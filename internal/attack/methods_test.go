package attack

import (
	"cmp"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/extauthz/extauthz/internal/testing/envoytest"
)

// Class 3: one meaning per name, for JSON-RPC and HTTP methods. A rule
// names methods by what they mean, so a glob written in one spelling (A2A
// v0.3 message/*, MCP tasks/*) covers every spelling of what it names (A2A
// v1.0 SendMessage, GetTask); the HTTP method carrying a JSON-RPC body does
// not matter to the rules, and one that is not upper case is refused; and
// the name a rule sees is fixed by the method (the uri of a resource, the
// name of a tool), whatever else the params carry.

const methodRoutes = `routes:
  - name: auto
    default: true
    path_prefix: /mcp
    issuers: [hs, other]
    audiences: [` + audience + `]
    rules:
      - {methods: ["tools/call"], names: ["delete_*"], scopes: [admin]}
      - {methods: ["tasks/*"], action: deny}
      - {methods: ["message/*"], action: deny}
      - {methods: ["agent/*"], action: deny}
      - {methods: ["resources/*"], names: ["file:///etc/*"], action: deny}
  - name: mcp
    path_prefix: /strict
    protocol: mcp
    issuers: [hs, other]
    audiences: [` + audience + `]
    rules:
      - {methods: ["tools/call"], names: ["delete_*"], scopes: [admin]}
      - {methods: ["tasks/*"], action: deny}
  - name: a2a
    path_prefix: /a2a
    protocol: a2a
    issuers: [hs, other]
    audiences: [` + audience + `]
    rules:
      - {methods: ["message/*"], scopes: [a2a.write]}
      - {methods: ["tasks/*"], action: deny}
      - {methods: ["GetExtendedAgentCard"], action: deny}
`

// rpcBody is a JSON-RPC request; method is inserted as written (raw JSON
// string content, so escapes stay escapes).
func rpcBody(id int, method, params string) string {
	if params == "" {
		params = "{}"
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"%s","params":%s}`, id, method, params)
}

// TestTaskMethodsEverySpelling: tasks/* with action deny covers every MCP
// and A2A task method in every spelling, on every route that has the rule.
func TestTaskMethodsEverySpelling(t *testing.T) {
	s := start(t, methodRoutes, options{})
	user := token(t, issuerHS, "mallory", "read", "admin", "a2a.write")
	spellings := []string{
		// MCP 2025-11-25 tasks
		"tasks/get", "tasks/list", "tasks/cancel", "tasks/result",
		// A2A v0.3
		"tasks/resubscribe", "tasks/pushNotificationConfig/set", "tasks/pushNotificationConfig/get",
		"tasks/pushNotificationConfig/list", "tasks/pushNotificationConfig/delete",
		// A2A v1.0 and its drafts
		"GetTask", "ListTasks", "CancelTask", "SubscribeToTask", "CreateTaskPushNotificationConfig",
		"SetTaskPushNotificationConfig", "GetTaskPushNotificationConfig", "ListTaskPushNotificationConfigs",
		"ListTaskPushNotificationConfig", "DeleteTaskPushNotificationConfig",
		// JSON escapes decode to the same names
		`tasks\/get`, `\u0047etTask`, `tasks\u002fcancel`,
	}
	for _, path := range []string{"/mcp", "/strict/mcp", "/a2a"} {
		for _, m := range spellings {
			t.Run(path+"/"+m, func(t *testing.T) {
				v := s.check(t, raw{Path: path, Headers: map[string]string{"authorization": "Bearer " + user},
					Body: rpcBody(3, m, `{"id":"task-1","taskId":"task-1"}`)})
				v.wantDenied(t, 403)
				if e := v.rpc(t); string(e.ID) != "3" {
					t.Fatalf("JSON-RPC error id %s, want 3", e.ID)
				}
			})
		}
	}
}

// TestMessageMethodsEverySpelling: message/* (A2A v0.3) covers the v1.0
// names; on the A2A route a scope rule written message/* guards SendMessage.
func TestMessageMethodsEverySpelling(t *testing.T) {
	s := start(t, methodRoutes, options{})
	low := token(t, issuerHS, "mallory", "read")
	params := `{"message":{"role":"user","parts":[],"messageId":"m1","contextId":"ctx-1"}}`
	for _, m := range []string{"message/send", "message/stream", "SendMessage", "SendStreamingMessage", `message\/send`, `Send\u004dessage`} {
		t.Run("auto/"+m, func(t *testing.T) {
			v := s.check(t, raw{Headers: map[string]string{"authorization": "Bearer " + low}, Body: rpcBody(4, m, params)})
			v.wantDenied(t, 403)
		})
		t.Run("a2a scope/"+m, func(t *testing.T) {
			v := s.check(t, raw{Path: "/a2a", Headers: map[string]string{"authorization": "Bearer " + low}, Body: rpcBody(4, m, params)})
			v.wantDenied(t, 403)
			if !strings.Contains(v.Headers["www-authenticate"], `scope="a2a.write"`) {
				t.Fatalf("challenge %q does not ask for a2a.write", v.Headers["www-authenticate"])
			}
		})
	}
	// The control: with the scope, every spelling passes on the A2A route.
	writer := token(t, issuerHS, "mallory", "a2a.write")
	for _, m := range []string{"message/send", "SendMessage"} {
		v := s.check(t, raw{Path: "/a2a", Headers: map[string]string{"authorization": "Bearer " + writer}, Body: rpcBody(4, m, params)})
		if !v.Allowed {
			t.Fatalf("%s with a2a.write: %d %s", m, v.Status, v.Body)
		}
	}
}

// TestExtendedCardEverySpelling: agent/* (v0.3) and GetExtendedAgentCard
// (v1.0) name the same method.
func TestExtendedCardEverySpelling(t *testing.T) {
	s := start(t, methodRoutes, options{})
	user := token(t, issuerHS, "mallory", "read")
	for _, tc := range []struct{ path, method string }{
		{"/mcp", "agent/getAuthenticatedExtendedCard"}, {"/mcp", "GetExtendedAgentCard"},
		{"/a2a", "agent/getAuthenticatedExtendedCard"}, {"/a2a", "GetExtendedAgentCard"},
	} {
		t.Run(tc.path+"/"+tc.method, func(t *testing.T) {
			s.check(t, raw{Path: tc.path, Headers: map[string]string{"authorization": "Bearer " + user}, Body: rpcBody(5, tc.method, "")}).wantDenied(t, 403)
		})
	}
}

// TestA2AOtherBindings: an A2A agent may serve its operations on more
// than the JSON-RPC binding. A2A's HTTP+JSON binding reads the call from
// the HTTP method and path (GET /v1/tasks/{id} is GetTask, DELETE
// /v1/tasks/{id}/pushNotificationConfigs/{c} deletes a push configuration,
// GET /v1/card and v1.0's GET /extendedAgentCard are GetExtendedAgentCard),
// and the Python SDK's JSON-RPC server serves the extended card on GET
// /agent/authenticatedExtendedCard. None carries a JSON-RPC body, so on an
// a2a route with rules none may pass as "not a call": the rules (tasks/*
// denied, GetExtendedAgentCard denied) could not see it. The agent card
// stays public.
func TestA2AOtherBindings(t *testing.T) {
	s := start(t, methodRoutes, options{})
	user := token(t, issuerHS, "mallory", "read", "a2a.write")
	auth := map[string]string{"authorization": "Bearer " + user}
	for _, tc := range []struct{ method, path string }{
		{"GET", "/a2a/v1/tasks/task-1"},
		{"GET", "/a2a/v1/tasks/task-1:subscribe"},
		{"GET", "/a2a/v1/tasks"},
		{"GET", "/a2a/tasks/task-1"},
		{"GET", "/a2a/v1/tasks/task-1/pushNotificationConfigs/c1"},
		{"DELETE", "/a2a/v1/tasks/task-1/pushNotificationConfigs/c1"},
		{"GET", "/a2a/v1/card"},
		{"GET", "/a2a/extendedAgentCard"},
		{"GET", "/a2a/agent/authenticatedExtendedCard"},
		{"HEAD", "/a2a/v1/tasks/task-1"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			v := s.check(t, raw{Method: tc.method, Path: tc.path, Headers: auth})
			v.wantDenied(t, 400)
			if !strings.Contains(v.Body, "JSON-RPC") {
				t.Fatalf("refusal %q does not say why", v.Body)
			}
		})
	}
	t.Run("a JSON-RPC response carrying an HTTP+JSON message", func(t *testing.T) {
		// A2A clients answer no server request; an HTTP+JSON upstream reads
		// the message member of this body and sends it, past message/*.
		low := map[string]string{"authorization": "Bearer " + token(t, issuerHS, "mallory", "read")}
		body := `{"jsonrpc":"2.0","id":7,"result":{},"message":{"role":"user","parts":[{"text":"hi"}],"messageId":"m2"}}`
		v := s.check(t, raw{Path: "/a2a/v1/message:send", Headers: low, Body: body})
		v.wantDenied(t, 400)
		if e := v.rpc(t); string(e.ID) != "7" {
			t.Fatalf("refusal %s without the id", v.Body)
		}
	})
	t.Run("the agent card stays public", func(t *testing.T) {
		if v := s.check(t, raw{Method: "GET", Path: "/a2a/.well-known/agent-card.json"}); !v.Allowed {
			t.Fatalf("agent card: %d %s", v.Status, v.Body)
		}
	})
	t.Run("a JSON-RPC call still passes", func(t *testing.T) {
		v := s.check(t, raw{Path: "/a2a", Headers: auth, Body: rpcBody(6, "SendMessage", `{"message":{"role":"user","parts":[],"messageId":"m1"}}`)})
		if !v.Allowed {
			t.Fatalf("SendMessage: %d %s", v.Status, v.Body)
		}
	})
}

// TestHTTPMethodsCarryingJSONRPC: rules apply to a tools/call body whatever
// the HTTP method; a method that is not upper case (RFC 9110: methods are
// case-sensitive) is refused with 400 when it carries a JSON-RPC body.
func TestHTTPMethodsCarryingJSONRPC(t *testing.T) {
	s := start(t, methodRoutes, options{})
	user := token(t, issuerHS, "mallory", "read")
	auth := map[string]string{"authorization": "Bearer " + user}
	for _, path := range []string{"/mcp", "/strict/mcp"} {
		for _, m := range []string{"GET", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD", "PROPFIND"} {
			t.Run(path+"/"+m, func(t *testing.T) {
				v := s.check(t, raw{Method: m, Path: path, Headers: auth, Body: deleteBody})
				v.wantDenied(t, 403)
				if e := v.rpc(t); string(e.ID) != "7" {
					t.Fatalf("id %s, want 7", e.ID)
				}
			})
		}
		for _, m := range []string{"post", "Post", "pOST", "get", "delete", "Put", "patch"} {
			t.Run(path+"/"+m, func(t *testing.T) {
				v := s.check(t, raw{Method: m, Path: path, Headers: auth, Body: deleteBody})
				v.wantDenied(t, 400)
				if e := v.rpc(t); e.Error.Code != -32600 {
					t.Fatalf("JSON-RPC code %d, want -32600", e.Error.Code)
				}
			})
		}
	}
}

// TestHTTPMethodsEndToEnd: through the proxy, no HTTP method makes the
// go-sdk server run delete_file, and the refusal is ours.
func TestHTTPMethodsEndToEnd(t *testing.T) {
	s := start(t, methodRoutes, options{})
	user := token(t, issuerHS, "mallory", "read")
	for _, tc := range []struct {
		method string
		want   int
	}{
		{"POST", 403}, {"GET", 403}, {"PUT", 403}, {"PATCH", 403}, {"DELETE", 403},
		{"post", 400}, {"Post", 400}, {"get", 400},
	} {
		t.Run(tc.method, func(t *testing.T) {
			status, _, body := s.viaEnvoy(t, tc.method, "/mcp", bearer(user), deleteBody)
			if status != tc.want || s.ran("delete_file") != 0 {
				t.Fatalf("status %d body %s, delete_file ran %d times; want %d", status, body, s.ran("delete_file"), tc.want)
			}
		})
	}
}

// TestHTTPMethodsForwardAuth: the forward-auth front end reads the original
// method from X-Forwarded-Method and decides the same.
func TestHTTPMethodsForwardAuth(t *testing.T) {
	s := start(t, methodRoutes, options{})
	user := token(t, issuerHS, "mallory", "read")
	h := bearer(user)
	for _, tc := range []struct {
		method string
		want   int
	}{
		{"PUT", 403}, {"GET", 403}, {"post", 400}, {"Post", 400},
	} {
		t.Run(tc.method, func(t *testing.T) {
			if status, _, body := s.forwardAuth(t, fwd{Method: tc.method, Header: h, Body: deleteBody}); status != tc.want {
				t.Fatalf("status %d body %s, want %d", status, body, tc.want)
			}
		})
	}
}

// TestMethodCaseVariants: "Tools/call" is not tools/call. The rules do not
// see it as one, and neither does the SDK: it answers "method not found"
// and runs nothing.
func TestMethodCaseVariants(t *testing.T) {
	s := start(t, methodRoutes, options{})
	user := token(t, issuerHS, "mallory", "read")
	for _, m := range []string{"Tools/call", "TOOLS/CALL", "tools/Call", "tools/call ", " tools/call", "tools//call", "tools/call/"} {
		t.Run(m, func(t *testing.T) {
			body := rpcBody(9, m, `{"name":"delete_file","arguments":{"path":"/etc/passwd"}}`)
			status, _, resp := s.viaEnvoy(t, http.MethodPost, "/mcp", bearer(user), body)
			if s.ran("delete_file") != 0 {
				t.Fatalf("delete_file ran (status %d, %s)", status, resp)
			}
		})
	}
}

// TestRuleNameIsTheResourceURI: for resources/read, subscribe and
// unsubscribe a rule sees params.uri, never an extra params.name; for
// tools/call, params.name, never an extra params.uri.
func TestRuleNameIsTheResourceURI(t *testing.T) {
	s := start(t, methodRoutes, options{})
	user := token(t, issuerHS, "mallory", "read")
	auth := map[string]string{"authorization": "Bearer " + user}
	for _, tc := range []struct {
		name, body string
		want       int
	}{
		{"subscribe /etc with a name", rpcBody(1, "resources/subscribe", `{"uri":"file:///etc/passwd","name":"readme"}`), 403},
		{"subscribe /etc, name first", rpcBody(1, "resources/subscribe", `{"name":"readme","uri":"file:///etc/passwd"}`), 403},
		{"unsubscribe /etc with a name", rpcBody(1, "resources/unsubscribe", `{"uri":"file:///etc/shadow","name":"x"}`), 403},
		{"read /etc with a name", rpcBody(1, "resources/read", `{"uri":"file:///etc/passwd","name":"notes"}`), 403},
		{"read with the uri key in another case", rpcBody(1, "resources/read", `{"uri":"file:///tmp/x","URI":"file:///etc/passwd"}`), 400},
		{"tools/call with a harmless uri", rpcBody(1, "tools/call", `{"name":"delete_file","uri":"echo"}`), 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := s.check(t, raw{Headers: auth, Body: tc.body})
			v.wantDenied(t, tc.want)
			v.rpc(t)
		})
	}
	// The control: a harmless URI with a name that looks like /etc passes.
	v := s.check(t, raw{Headers: auth, Body: rpcBody(1, "resources/subscribe", `{"uri":"file:///tmp/x","name":"file:///etc/passwd"}`)})
	if !v.Allowed {
		t.Fatalf("harmless subscribe: %d %s", v.Status, v.Body)
	}
}

// TestMcpHeadersMustMatchTheBody: the MCP 2026-07-28 headers are a second
// spelling of the call; one that disagrees with the body is -32020.
func TestMcpHeadersMustMatchTheBody(t *testing.T) {
	s := start(t, methodRoutes, options{})
	user := token(t, issuerHS, "mallory", "read")
	for _, tc := range []struct {
		name    string
		headers map[string]string
	}{
		{"Mcp-Method names another method", map[string]string{"mcp-method": "tools/list"}},
		{"Mcp-Method in another case", map[string]string{"mcp-method": "Tools/call"}},
		{"Mcp-Name names another tool", map[string]string{"mcp-method": "tools/call", "mcp-name": "echo"}},
		{"Mcp-Name base64 of another tool", map[string]string{"mcp-method": "tools/call", "mcp-name": "=?base64?ZWNobw==?="}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := map[string]string{"authorization": "Bearer " + user}
			for k, v := range tc.headers {
				h[k] = v
			}
			v := s.check(t, raw{Headers: h, Body: deleteBody})
			v.wantDenied(t, 400)
			if e := v.rpc(t); e.Error.Code != -32020 || string(e.ID) != "7" {
				t.Fatalf("JSON-RPC error %d id %s, want -32020 id 7", e.Error.Code, e.ID)
			}
		})
	}
}

// TestNamesHoldingAStar: a "*" in a call's name is a character like any
// other, which a rule's "*" takes. Matched as the end of the rule's run
// instead, delete_*all slipped past a rule on delete_*.
func TestNamesHoldingAStar(t *testing.T) {
	s := start(t, `routes:
  - name: mcp
    default: true
    protocol: mcp
    issuers: [hs]
    audiences: [`+audience+`]
    rules:
      - {methods: ["tools/call"], names: ["delete_*"], action: deny}
      - {methods: ["resources/read"], names: ["file:///secret/*"], action: deny}
      - {methods: ["prompts/get"], names: ["admin_*_report"], action: deny}
`, options{})
	for _, tc := range []struct {
		name, body string
		status     int // 0: allowed
	}{
		{"a tool", toolCall(1, "delete_*all", ""), 403},
		{"a tool named by the rule's own text", toolCall(2, "delete_*", ""), 403},
		{"a resource", resourceCall(3, "resources/read", `"file:///secret/*x"`), 403},
		{"a prompt", rpcBody(4, "prompts/get", `{"name":"admin_*x_report"}`), 403},
		{"a tool the rule does not name", toolCall(5, "echo*", ""), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := s.check(t, raw{Headers: map[string]string{"authorization": "Bearer " + token(t, issuerHS, "mallory"),
				"content-type": "application/json"}, Body: tc.body})
			v.wantStatus(t, tc.status)
		})
	}
}

// TestCompletionOfAResourceTemplate: completing an argument of a resource
// template returns values of the URIs it expands to (file names, say), so
// it must pass what resources/read of every URI the template can expand to
// needs. Those all start with the template's text before its first
// expression; a template whose text before it is not in canonical form (or
// whose canonical form could be no prefix of the expansions') may expand to
// any URI.
func TestCompletionOfAResourceTemplate(t *testing.T) {
	s := start(t, `routes:
  - name: mcp
    default: true
    protocol: mcp
    issuers: [hs]
    audiences: [`+audience+`]
    default_action: deny
    rules:
      - {methods: ["resources/read"], names: ["file:///etc/*"], action: deny}
      - {methods: ["resources/*"], names: ["file:///private/*"], scopes: [private]}
      - {methods: ["resources/read"], names: ["file:///public/*", "file:///private/*", "file:///etc/*"]}
      - {methods: ["completion/complete"]}
`, options{})
	for _, tc := range []struct {
		name, uri string
		scopes    []string
		status    int // 0: allowed
	}{
		{"a template under a denied directory", `file:///etc/{name}`, nil, 403},
		{"a template that may expand into it", `file:///{+path}`, nil, 403},
		{"a template whose literal text only starts it", `file:///e{rest}`, nil, 403},
		{"a template under an allowed directory", `file:///public/{name}`, nil, 0},
		{"several expressions", `file:///public/{dir}/{name}`, nil, 0},
		{"a template needing a scope, not held", `file:///private/{name}`, nil, 403},
		{"the scope held", `file:///private/{name}`, []string{"private"}, 0},
		{"a template no rule allows", `file:///other/{name}`, nil, 403},
		{"a template without expressions, allowed", `file:///public/readme`, nil, 0},
		{"a template without expressions, denied", `file:///etc/passwd`, nil, 403},
		{"a template without expressions, in another case", `FILE:///%65tc/passwd`, nil, 403},
		{"a template whose text is not canonical", `FILE:///public/{name}`, nil, 403},
		{"a dot segment before the expression", `file:///public/../etc/{name}`, nil, 403},
		{"an http template whose host may go on", `https://public.example{rest}`, nil, 403},
		{"a template without expressions that has no canonical form", `file:///public/../etc/passwd`, nil, 400},
		{"a template holding NUL", `file:///public/\u0000{name}`, nil, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref := `{"type":"ref/resource","uri":"` + tc.uri + `"}`
			body := rpcBody(9, "completion/complete", `{"ref":`+ref+`,"argument":{"name":"name","value":"p"}}`)
			v := s.check(t, raw{Headers: map[string]string{"authorization": "Bearer " + token(t, issuerHS, "mallory", tc.scopes...),
				"content-type": "application/json"}, Body: body})
			if v.wantStatus(t, tc.status) && tc.status == 403 && !strings.Contains(v.Body, "resource template") {
				t.Fatalf("the refusal does not say why: %s", v.Body)
			}
		})
	}
}

// headerOnlyRoutes are routes whose proxy sends no body and whose upstream
// checks Mcp-Method and Mcp-Name against it: one denying a prompt, one
// asking a scope for prompts, one denying resources under /etc, one with a
// tool rule alone, one allowing listed tools only, one denying sampling.
const headerOnlyRoutes = `routes:
  - name: guarded
    path_prefix: /guarded
    protocol: mcp
    issuers: [hs]
    audiences: [` + audience + `]
    request_body: none
    upstream_validates_mcp_headers: true
    rules:
      - {methods: ["prompts/get"], names: ["secret"], action: deny}
  - name: scoped
    path_prefix: /scoped
    protocol: mcp
    issuers: [hs]
    audiences: [` + audience + `]
    request_body: none
    upstream_validates_mcp_headers: true
    rules:
      - {methods: ["prompts/*"], scopes: [prompts]}
  - name: files
    path_prefix: /files
    protocol: mcp
    issuers: [hs]
    audiences: [` + audience + `]
    request_body: none
    upstream_validates_mcp_headers: true
    rules:
      - {methods: ["resources/*"], names: ["file:///etc/*"], action: deny}
  - name: open
    path_prefix: /open
    protocol: mcp
    issuers: [hs]
    audiences: [` + audience + `]
    request_body: none
    upstream_validates_mcp_headers: true
    rules:
      - {methods: ["tools/call"], names: ["delete_*"], action: deny}
  - name: listed
    path_prefix: /listed
    protocol: mcp
    issuers: [hs]
    audiences: [` + audience + `]
    request_body: none
    upstream_validates_mcp_headers: true
    default_action: deny
    rules:
      - {methods: ["tools/call"], names: ["search", "café"]}
  - name: nosampling
    path_prefix: /nosampling
    protocol: mcp
    issuers: [hs]
    audiences: [` + audience + `]
    request_body: none
    upstream_validates_mcp_headers: true
    rules:
      - {methods: ["sampling/createMessage"], action: deny}
`

// checkByHeaders asks about a 2026-07-28 call named by its headers alone,
// as a proxy sending no body forwards it: Mcp-Method method, Mcp-Name name
// (none when empty), from a user holding scopes, to path.
func (s *suite) checkByHeaders(t *testing.T, path, method, name string, scopes ...string) verdict {
	t.Helper()
	h := map[string]string{
		"authorization": "Bearer " + token(t, issuerHS, "mallory", scopes...), "content-type": "application/json",
		"content-length": "120", "mcp-method": method, "mcp-protocol-version": "2026-07-28"}
	if name != "" {
		h["mcp-name"] = name
	}
	return s.check(t, raw{Path: path, Headers: h})
}

// TestEncodedNameNamedByHeadersAlone: MCP 2026-07-28 sends a name that is
// not plain ASCII in Mcp-Name as "=?base64?…?=", which servers are to
// decode before comparing it with the body. The go-sdk compares it as sent:
// behind it, a call named by its headers alone runs the tool whose name is
// the encoded text itself. Such a call must pass the rules under both
// names, the decoded one and the one as sent.
func TestEncodedNameNamedByHeadersAlone(t *testing.T) {
	s := start(t, headerOnlyRoutes, options{})
	b64 := func(name string) string { return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(name)) + "?=" }
	for _, tc := range []struct {
		name, path, mcpName string
		status              int // 0: allowed
	}{
		{"a listed name, plain", "/listed/mcp", "search", 0},
		{"a listed name, encoded: the text as sent is not listed", "/listed/mcp", b64("search"), 403},
		{"a listed name that needs encoding", "/listed/mcp", b64("café"), 403},
		{"a name that needs encoding, on a route denying others", "/open/mcp", b64("café"), 0},
		{"a denied name, encoded", "/open/mcp", b64("delete_all"), 403},
		{"a denied name as the encoded text", "/open/mcp", b64("=?base64?ZGVsZXRlX2FsbA==?="), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := s.checkByHeaders(t, tc.path, "tools/call", tc.mcpName)
			if v.wantStatus(t, tc.status) && strings.Contains(tc.name, "not listed") && !strings.Contains(v.Body, "as sent") {
				t.Fatalf("the refusal does not say why: %s", v.Body)
			}
		})
	}
}

// TestSubscriptionNamedByHeadersAlone: MCP servers check Mcp-Name against
// the body only for the methods whose name MCP mirrors in it (tools/call,
// prompts/get, resources/read; the go-sdk's validateMcpHeaders). A
// resources/subscribe named by Mcp-Method, with an Mcp-Name of a URI the
// rules allow, may subscribe to any URI in its body: on a route whose proxy
// sends no body it must pass what subscribing to every URI needs. So must
// a call without Mcp-Name, whatever its method: a server that does not
// insist on the header runs the body's.
func TestSubscriptionNamedByHeadersAlone(t *testing.T) {
	s := start(t, headerOnlyRoutes, options{})
	for _, tc := range []struct {
		name, path, method, uri string
		status                  int // 0: allowed
	}{
		{"a subscription the headers say is allowed", "/files/mcp", "resources/subscribe", "file:///public/x", 403},
		{"an unsubscription", "/files/mcp", "resources/unsubscribe", "file:///public/x", 403},
		{"a subscription the headers say is denied", "/files/mcp", "resources/subscribe", "file:///etc/passwd", 403},
		{"a read, whose name the server checks", "/files/mcp", "resources/read", "file:///public/x", 0},
		{"a read of a denied URI", "/files/mcp", "resources/read", "file:///etc/passwd", 403},
		{"a subscription on a route without resource rules", "/open/mcp", "resources/subscribe", "file:///etc/passwd", 0},
		{"a read without Mcp-Name", "/files/mcp", "resources/read", "", 403},
		{"a tool call without Mcp-Name", "/open/mcp", "tools/call", "", 403},
		{"a tool call with Mcp-Name", "/open/mcp", "tools/call", "echo", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.checkByHeaders(t, tc.path, tc.method, tc.uri).wantStatus(t, tc.status)
		})
	}
}

// TestCompletionNamedByHeadersAlone: on a route whose proxy sends no body,
// a completion is named by Mcp-Method alone (MCP 2026-07-28 mirrors no name
// for it), and the upstream that checks the headers runs whatever prompt or
// resource template the body completes. Such a completion must pass what
// prompts/get of every prompt and resources/read of every URI would need.
func TestCompletionNamedByHeadersAlone(t *testing.T) {
	s := start(t, headerOnlyRoutes, options{})
	for _, tc := range []struct {
		name, path string
		scopes     []string
		status     int // 0: allowed
	}{
		{"a route denying a prompt", "/guarded/mcp", []string{"prompts"}, 403},
		{"a route asking a scope for prompts, not held", "/scoped/mcp", nil, 403},
		{"the scope held", "/scoped/mcp", []string{"prompts"}, 0},
		{"a route denying resources", "/files/mcp", nil, 403},
		{"a route without prompt or resource rules", "/open/mcp", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := s.checkByHeaders(t, tc.path, "completion/complete", "", tc.scopes...)
			if v.wantStatus(t, tc.status) && !strings.Contains(v.Body, "completed prompt or resource template is not known") {
				t.Fatalf("the refusal does not say why: %s", v.Body)
			}
		})
	}
}

// TestListenNamedByHeadersAlone: on a route whose proxy sends no
// body, a subscriptions/listen is named by Mcp-Method alone, and may
// subscribe to any resource (resourceSubscriptions replaces
// resources/subscribe): it must pass what resources/subscribe of every
// URI would need.
func TestListenNamedByHeadersAlone(t *testing.T) {
	s := start(t, headerOnlyRoutes, options{})
	for _, tc := range []struct {
		name, path string
		status     int // 0: allowed
	}{
		{"a route denying resources", "/files/mcp", 403},
		{"a route without resource rules", "/open/mcp", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := s.checkByHeaders(t, tc.path, "subscriptions/listen", "")
			if v.wantStatus(t, tc.status) && !strings.Contains(v.Body, "resources it subscribes to are not known") {
				t.Fatalf("the refusal does not say why: %s", v.Body)
			}
		})
	}
}

// TestMcpHeadersOfOlderVersions: a route whose proxy sends no body decides
// on Mcp-Method and Mcp-Name when its upstream checks them against the
// body. MCP servers do that only for requests of 2026-07-28 or later: the
// go-sdk skips the check when MCP-Protocol-Version is older or absent, so
// a client that claims echo there and calls delete_file in the body must
// be refused by the service, not passed to a server that runs delete_file.
func TestMcpHeadersOfOlderVersions(t *testing.T) {
	s := start(t, `routes:
  - name: mcp
    default: true
    protocol: mcp
    issuers: [hs]
    audiences: [`+audience+`]
    request_body: none
    upstream_validates_mcp_headers: true
    rules:
      - {methods: ["tools/call"], names: ["delete_*"], action: deny}
`, options{Build: &envoytest.BuildOptions{}})
	user := token(t, issuerHS, "mallory")
	lying := func(version string) http.Header {
		h := bearer(user)
		h.Set("Mcp-Method", "tools/call")
		h.Set("Mcp-Name", "echo")
		if version != "" {
			h.Set("Mcp-Protocol-Version", version)
		}
		return h
	}
	deleteBody := toolCall(1, "delete_file", `{"path":"/etc/passwd"}`)
	for _, version := range []string{"", "2025-06-18", "2025-11-25"} {
		t.Run("version "+cmp.Or(version, "absent"), func(t *testing.T) {
			status, _, body := s.viaEnvoy(t, http.MethodPost, "/mcp", lying(version), deleteBody)
			if n := s.ran("delete_file"); n != 0 || status != 400 {
				t.Fatalf("status %d (%s), delete_file ran %d times", status, body, n)
			}
		})
	}
	t.Run("2026-07-28: the server checks the headers", func(t *testing.T) {
		body := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"delete_file","arguments":{"path":"/x"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`
		status, _, resp := s.viaEnvoy(t, http.MethodPost, "/mcp", lying("2026-07-28"), body)
		if n := s.ran("delete_file"); n != 0 || status != 400 || !strings.Contains(resp, "-32020") {
			t.Fatalf("status %d (%s), delete_file ran %d times", status, resp, n)
		}
	})
	t.Run("a truthful 2026-07-28 call passes", func(t *testing.T) {
		body := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
		status, _, resp := s.viaEnvoy(t, http.MethodPost, "/mcp", lying("2026-07-28"), body)
		if status != 200 || s.ran("echo") != 1 {
			t.Fatalf("status %d (%s), echo ran %d times", status, resp, s.ran("echo"))
		}
	})
}

// pushRoutes guard push notification webhooks: denied outright on one
// route, needing a scope on another, and not allowed by a route whose rules
// allow message sends alone.
const pushRoutes = `routes:
  - name: no-webhooks
    path_prefix: /deny
    protocol: a2a
    issuers: [hs]
    audiences: [` + audience + `]
    rules:
      - {methods: ["tasks/pushNotificationConfig/set"], action: deny}
  - name: scoped
    path_prefix: /scoped
    protocol: a2a
    issuers: [hs]
    audiences: [` + audience + `]
    rules:
      - {methods: ["CreateTaskPushNotificationConfig"], scopes: [push]}
  - name: sends-only
    path_prefix: /sends
    protocol: a2a
    issuers: [hs]
    audiences: [` + audience + `]
    default_action: deny
    rules:
      - {methods: ["message/*"]}
`

// TestPushWebhookInAMessage: a message send may carry a push notification
// configuration (params.configuration.pushNotificationConfig, or a v1.0
// spelling of it), which registers the webhook the agent will call, as
// tasks/pushNotificationConfig/set does. Mallory, whom the rules refuse
// that method, registers hers in a message instead.
func TestPushWebhookInAMessage(t *testing.T) {
	s := start(t, pushRoutes, options{})
	mallory := map[string]string{"authorization": "Bearer " + token(t, issuerHS, "mallory"),
		"content-type": "application/json"}
	pusher := map[string]string{"authorization": "Bearer " + token(t, issuerHS, "pat", "push"),
		"content-type": "application/json"}
	send := func(method, configuration string) string {
		params := `{"message":{"role":"user","parts":[],"messageId":"m-1"}`
		if configuration != "" {
			params += `,"configuration":` + configuration
		}
		return rpcBody(3, method, params+"}")
	}
	const hook = `{"url":"https://mallory.example/hook","token":"t"}`
	registering := []struct{ name, body string }{
		{"v0.3 message/send", send("message/send", `{"pushNotificationConfig":`+hook+`}`)},
		{"v0.3 message/stream", send("message/stream", `{"blocking":false,"pushNotificationConfig":`+hook+`}`)},
		{"v1.0 SendMessage, proto field name", send("SendMessage", `{"push_notification_config":`+hook+`}`)},
		{"v1.0 draft pushNotification", send("SendStreamingMessage", `{"pushNotification":`+hook+`}`)},
		{"v1.0 taskPushNotificationConfig", send("SendMessage", `{"taskPushNotificationConfig":{"pushNotificationConfig":`+hook+`}}`)},
		{"the key escaped", send("message/send", `{"push\u004eotificationConfig":`+hook+`}`)},
	}
	for _, route := range []struct {
		path   string
		status int
	}{{"/deny", 403}, {"/scoped", 403}, {"/sends", 403}} {
		for _, tc := range registering {
			t.Run(route.path+"/"+tc.name, func(t *testing.T) {
				v := s.check(t, raw{Path: route.path, Headers: mallory, Body: tc.body})
				v.wantDenied(t, route.status)
				if e := v.rpc(t); string(e.ID) != "3" || !strings.Contains(v.Body, "push notification webhook") {
					t.Fatalf("refusal %s, want id 3 naming the webhook", v.Body)
				}
			})
		}
	}
	t.Run("the scope asked for", func(t *testing.T) {
		v := s.check(t, raw{Path: "/scoped", Headers: mallory, Body: registering[0].body})
		if www := v.Headers["www-authenticate"]; !strings.Contains(www, `error="insufficient_scope"`) || !strings.Contains(www, `scope="push"`) {
			t.Fatalf("WWW-Authenticate %q, want insufficient_scope for push", www)
		}
	})
	refused := []struct{ name, body string }{
		{"another case", send("message/send", `{"PushNotificationConfig":`+hook+`}`)},
		{"twice", send("message/send", `{"pushNotificationConfig":null,"pushNotificationConfig":`+hook+`}`)},
		{"not an object", send("message/send", `{"pushNotificationConfig":"https://mallory.example/hook"}`)},
		{"configuration not an object", send("SendMessage", `[`+hook+`]`)},
	}
	for _, tc := range refused {
		t.Run("malformed/"+tc.name, func(t *testing.T) {
			s.check(t, raw{Path: "/deny", Headers: mallory, Body: tc.body}).wantDenied(t, 400)
		})
	}
	allowed := []struct {
		name, path string
		headers    map[string]string
		body       string
	}{
		{"no configuration", "/deny", mallory, send("message/send", "")},
		{"a configuration without a webhook", "/sends", mallory, send("SendMessage", `{"blocking":true,"historyLength":2}`)},
		{"a null webhook", "/deny", mallory, send("message/send", `{"pushNotificationConfig":null}`)},
		{"the scope held", "/scoped", pusher, registering[0].body},
	}
	for _, tc := range allowed {
		t.Run("allowed/"+tc.name, func(t *testing.T) {
			if v := s.check(t, raw{Path: tc.path, Headers: tc.headers, Body: tc.body}); !v.Allowed {
				t.Fatalf("refused: %d %s", v.Status, v.Body)
			}
		})
	}
}

// TestCompletionOfADeniedPrompt: completion/complete suggests values for
// a prompt's argument (params.ref.name), from the prompt itself. Mallory,
// whom the rules refuse prompts/get of a prompt, asks for its completions.
func TestCompletionOfADeniedPrompt(t *testing.T) {
	const routes = `routes:
  - name: mcp
    default: true
    protocol: mcp
    issuers: [hs]
    audiences: [` + audience + `]
    rules:
      - {methods: ["prompts/get"], names: ["admin_*"], scopes: [admin]}
      - {methods: ["prompts/*"], names: ["secret"], action: deny}
`
	s := start(t, routes, options{})
	header := func(scopes ...string) map[string]string {
		return map[string]string{"authorization": "Bearer " + token(t, issuerHS, "mallory", scopes...),
			"content-type": "application/json"}
	}
	complete := func(ref string) string {
		return rpcBody(5, "completion/complete", `{"ref":`+ref+`,"argument":{"name":"customer","value":"a"}}`)
	}
	for _, tc := range []struct {
		name, ref string
		scopes    []string
		status    int // 0: allowed
	}{
		{"a prompt that needs a scope", `{"type":"ref/prompt","name":"admin_report"}`, nil, 403},
		{"its name escaped", `{"type":"ref/prompt","name":"admin\u005freport"}`, nil, 403},
		{"a denied prompt", `{"type":"ref/prompt","name":"secret"}`, []string{"admin"}, 403},
		{"the scope held", `{"type":"ref/prompt","name":"admin_report"}`, []string{"admin"}, 0},
		{"another prompt", `{"type":"ref/prompt","name":"greeting"}`, nil, 0},
		{"a resource template", `{"type":"ref/resource","uri":"file:///{path}"}`, nil, 0},
		{"a prompt and a template at once", `{"type":"ref/prompt","name":"greeting","uri":"file:///{path}"}`, nil, 400},
		{"the prompt's name in another case", `{"type":"ref/prompt","name":"greeting","NAME":"secret"}`, nil, 400},
		{"an unknown reference", `{"type":"ref/tool","name":"secret"}`, nil, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := s.check(t, raw{Headers: header(tc.scopes...), Body: complete(tc.ref)})
			if v.wantStatus(t, tc.status) && tc.status == 403 && !strings.Contains(v.Body, "completion is of the prompt") {
				t.Fatalf("the refusal does not say why: %s", v.Body)
			}
		})
	}
}
