package extprocauthz_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/extauthz/extauthz/internal/check"
	"github.com/extauthz/extauthz/internal/extprocauthz"
	"github.com/extauthz/extauthz/internal/testing/envoytest"
	"github.com/extauthz/extauthz/internal/testing/pipelinetest"
)

// newA2AFixture is newFixture for an A2A route with a response path, as
// docs/extproc.md configures one for an agent.
func newA2AFixture(t *testing.T) *fixture {
	t.Helper()
	return newA2AFixtureWith(t, "")
}

// newA2AFixtureWith is newA2AFixture with more of the policy (a sessions
// section).
func newA2AFixtureWith(t *testing.T, more string) *fixture {
	t.Helper()
	doc := fmt.Sprintf(`
issuers:
  - {name: corp, issuer: https://idp.example.com, algorithms: [HS256], secret: %s}
routes:
  - {name: agent, hosts: [agent.example.com], protocol: a2a, issuers: [corp], response_path: true}
%s`, secret, more)
	return serve(t, pipelinetest.New(t, doc, check.Deps{}, check.Options{}))
}

// TestA2AStreamingSendBindsItsTask: docs/extproc.md binds the task an A2A
// message send's answer creates to the caller, in JSON and in an event
// stream; docs/jsonrpc.md counts message/stream and SendStreamingMessage
// among the message sends. A task created by a streaming send must be the
// creator's as one created by message/send is: nobody else may act on it.
func TestA2AStreamingSendBindsItsTask(t *testing.T) {
	const msg = `{"messageId":"m1","role":"user","parts":[{"kind":"text","text":"hi"}]}`
	for _, tc := range []struct {
		name, method, answer string
		sse                  bool
	}{
		{"v0.3 message/send, JSON (control)", "message/send",
			`{"jsonrpc":"2.0","id":1,"result":{"kind":"task","id":"TASK","contextId":"c1","status":{"state":"submitted"}}}`, false},
		{"v0.3 message/send, event stream (control)", "message/send",
			`{"jsonrpc":"2.0","id":1,"result":{"kind":"task","id":"TASK","contextId":"c1","status":{"state":"submitted"}}}`, true},
		{"v0.3 message/stream", "message/stream",
			`{"jsonrpc":"2.0","id":1,"result":{"kind":"task","id":"TASK","contextId":"c1","status":{"state":"submitted"}}}`, true},
		{"v1.0 SendStreamingMessage", "SendStreamingMessage",
			`{"jsonrpc":"2.0","id":1,"result":{"task":{"id":"TASK","contextId":"c1","status":{"state":"TASK_STATE_SUBMITTED"}}}}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newA2AFixture(t)
			taskID := "task-" + strings.NewReplacer("/", "-", " ", "").Replace(tc.method)
			answer := strings.Replace(tc.answer, "TASK", taskID, 1)
			send := `{"jsonrpc":"2.0","id":1,"method":"` + tc.method + `","params":{"message":` + msg + `}}`
			alice := token(t, "alice", nil)
			md := f.authorize(t, "agent.example.com", alice, nil, send)
			if md == nil {
				t.Fatal("ext_authz denied alice's send")
			}
			response := jsonResponse(answer, nil)
			if tc.sse {
				response = sseResponse("event: message\ndata: "+answer+"\n\n", "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"kind\":\"status-update\",\"taskId\":\""+taskID+"\",\"final\":true}}\n\n")
			}
			res := envoytest.ExtProc(t, f.conn, recommended(md), envoytest.ExtProcExchange{
				Request:  envoytest.ExtProcRequest("POST", "agent.example.com", "/", http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"}}, send),
				Response: response,
			})
			if res.Err != nil || res.Reset {
				t.Fatalf("protocol: %v (reset %v)", res.Err, res.Reset)
			}
			bound := f.pl.TaskCount()
			// The creator's task: mallory, another user of the agent, gets it.
			get := `{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"id":"` + taskID + `"}}`
			if f.authorize(t, "agent.example.com", token(t, "mallory", nil), nil, get) != nil {
				t.Fatalf("mallory reads alice's task %s created by %s (%d tasks bound at creation)", taskID, tc.method, bound)
			}
		})
	}
}

// TestServerAssignedContextIsBound: a message that names no context gets
// one the agent assigns, in its answer (a Task's or a Message's
// contextId). The request path never sees that id; the response path
// binds it to the sender, as a context the message named would have been
// (docs/sessions.md), so that nobody else lists its tasks or talks in it.
// An answer clients could read differently, or an id the request path
// would not bind, binds nothing.
func TestServerAssignedContextIsBound(t *testing.T) {
	const (
		msg     = `{"messageId":"m1","role":"user","parts":[{"kind":"text","text":"hi"}]}`
		ctxID   = "ctx-server-1"
		v03Task = `{"jsonrpc":"2.0","id":1,"result":{"kind":"task","id":"t1","contextId":"ctx-server-1","status":{"state":"submitted"}}}`
		v10Task = `{"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t1","contextId":"ctx-server-1","status":{"state":"TASK_STATE_SUBMITTED"}}}}`
	)
	for _, tc := range []struct {
		name, more, method, answer string
		sse, bound                 bool
	}{
		{name: "v0.3 Task, JSON", method: "message/send", answer: v03Task, bound: true},
		{name: "v0.3 Message, JSON", method: "message/send", bound: true,
			answer: `{"jsonrpc":"2.0","id":1,"result":{"kind":"message","messageId":"m2","role":"agent","parts":[],"contextId":"ctx-server-1"}}`},
		{name: "v0.3 Task, message/stream", method: "message/stream", answer: v03Task, sse: true, bound: true},
		{name: "v1.0 Task, JSON", method: "SendMessage", answer: v10Task, bound: true},
		{name: "v1.0 Task, proto field name", method: "SendMessage", bound: true,
			answer: `{"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t1","context_id":"ctx-server-1"}}}`},
		{name: "v1.0 Message, JSON", method: "SendMessage", bound: true,
			answer: `{"jsonrpc":"2.0","id":1,"result":{"message":{"messageId":"m2","role":"ROLE_AGENT","contextId":"ctx-server-1"}}}`},
		{name: "v1.0 Task, SendStreamingMessage", method: "SendStreamingMessage", answer: v10Task, sse: true, bound: true},
		{name: "v1.0 Message, SendStreamingMessage", method: "SendStreamingMessage", sse: true, bound: true,
			answer: `{"jsonrpc":"2.0","id":1,"result":{"message":{"messageId":"m2","contextId":"ctx-server-1"}}}`},
		{name: "without task ownership", more: "sessions: {task_ownership: false}", method: "message/send", answer: v03Task, bound: true},

		{name: "contextId twice", method: "message/send",
			answer: `{"jsonrpc":"2.0","id":1,"result":{"kind":"task","id":"t1","contextId":"ctx-server-1","contextId":"ctx-other"}}`},
		{name: "ContextId beside contextId", method: "message/send",
			answer: `{"jsonrpc":"2.0","id":1,"result":{"kind":"task","id":"t1","contextId":"ctx-server-1","ContextId":"ctx-other"}}`},
		{name: "contextId beside context_id", method: "SendMessage",
			answer: `{"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t1","contextId":"ctx-server-1","context_id":"ctx-server-1"}}}`},
		{name: "two contexts", method: "SendMessage",
			answer: `{"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t1","contextId":"ctx-server-1"},"message":{"contextId":"ctx-other"}}}`},
		{name: "contextId not a string", method: "message/send",
			answer: `{"jsonrpc":"2.0","id":1,"result":{"kind":"task","id":"t1","contextId":["ctx-server-1"]}}`},
		{name: "contextId with a control byte", method: "message/send",
			answer: `{"jsonrpc":"2.0","id":1,"result":{"kind":"task","id":"t1","contextId":"ctx-server-1\u0007"}}`},
		{name: "contextId padded", method: "message/send",
			answer: `{"jsonrpc":"2.0","id":1,"result":{"kind":"task","id":"t1","contextId":" ctx-server-1"}}`},
		{name: "contextId too long", method: "message/send",
			answer: `{"jsonrpc":"2.0","id":1,"result":{"kind":"task","id":"t1","contextId":"` + strings.Repeat("c", 2000) + `"}}`},
		{name: "contextId outside result", method: "message/send",
			answer: `{"jsonrpc":"2.0","id":1,"result":{"kind":"task","id":"t1"},"contextId":"ctx-server-1"}`},
		{name: "an error", method: "message/send",
			answer: `{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"m","data":{"contextId":"ctx-server-1"}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newA2AFixtureWith(t, tc.more)
			send := `{"jsonrpc":"2.0","id":1,"method":"` + tc.method + `","params":{"message":` + msg + `}}`
			alice, mallory := token(t, "alice", nil), token(t, "mallory", nil)
			md := f.authorize(t, "agent.example.com", alice, nil, send)
			if md == nil {
				t.Fatal("ext_authz denied alice's send")
			}
			response := jsonResponse(tc.answer, nil)
			if tc.sse {
				response = sseResponse("event: message\ndata: " + tc.answer + "\n\n")
			}
			res := envoytest.ExtProc(t, f.conn, recommended(md), envoytest.ExtProcExchange{
				Request:  envoytest.ExtProcRequest("POST", "agent.example.com", "/", http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"}}, send),
				Response: response,
			})
			if res.Err != nil || res.Reset {
				t.Fatalf("protocol: %v (reset %v)", res.Err, res.Reset)
			}
			bound := 0
			if tc.bound {
				bound = 1
			}
			if got := f.pl.SessionCount(); got != bound {
				t.Errorf("%d contexts bound, want %d", got, bound)
			}
			if got := f.counted.get(extprocauthz.ActionContextBound); got != bound {
				t.Errorf("%s counted %d times, want %d", extprocauthz.ActionContextBound, got, bound)
			}
			if !tc.bound {
				return
			}
			list := `{"jsonrpc":"2.0","id":2,"method":"ListTasks","params":{"contextId":"` + ctxID + `"}}`
			into := `{"jsonrpc":"2.0","id":3,"method":"message/send","params":{"message":{"messageId":"m3","role":"user","contextId":"` + ctxID + `","parts":[]}}}`
			for _, probe := range []struct {
				who, tok, body string
				allowed        bool
			}{
				{"mallory lists the context", mallory, list, false},
				{"mallory sends into the context", mallory, into, false},
				{"alice lists her context", alice, list, true},
				{"alice sends into her context", alice, into, true},
			} {
				if got := f.authorize(t, "agent.example.com", probe.tok, nil, probe.body) != nil; got != probe.allowed {
					t.Errorf("%s: allowed %v, want %v", probe.who, got, probe.allowed)
				}
			}
		})
	}
}

// TestAssignedContextNotTakenOver: an answer naming a context another user
// holds leaves it theirs: the response path binds on first sight only, as
// the request path does.
func TestAssignedContextNotTakenOver(t *testing.T) {
	f := newA2AFixture(t)
	alice, bob := token(t, "alice", nil), token(t, "bob", nil)
	bobs := `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"messageId":"b1","role":"user","contextId":"ctx-bob","parts":[]}}}`
	if f.authorize(t, "agent.example.com", bob, nil, bobs) == nil {
		t.Fatal("ext_authz denied bob's send into his new context")
	}
	send := `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"messageId":"a1","role":"user","parts":[]}}}`
	md := f.authorize(t, "agent.example.com", alice, nil, send)
	if md == nil {
		t.Fatal("ext_authz denied alice's send")
	}
	answer := `{"jsonrpc":"2.0","id":1,"result":{"kind":"task","id":"t1","contextId":"ctx-bob"}}`
	res := envoytest.ExtProc(t, f.conn, recommended(md), envoytest.ExtProcExchange{
		Request:  envoytest.ExtProcRequest("POST", "agent.example.com", "/", http.Header{"Content-Type": {"application/json"}}, send),
		Response: jsonResponse(answer, nil),
	})
	if res.Err != nil || res.Reset {
		t.Fatalf("protocol: %v (reset %v)", res.Err, res.Reset)
	}
	if got := f.counted.get(extprocauthz.ActionContextBound); got != 0 {
		t.Errorf("%s counted %d times, want 0", extprocauthz.ActionContextBound, got)
	}
	list := `{"jsonrpc":"2.0","id":2,"method":"ListTasks","params":{"contextId":"ctx-bob"}}`
	if f.authorize(t, "agent.example.com", alice, nil, list) != nil {
		t.Error("alice lists bob's context after an answer named it")
	}
	if f.authorize(t, "agent.example.com", bob, nil, list) == nil {
		t.Error("bob may no longer list his context")
	}
}
