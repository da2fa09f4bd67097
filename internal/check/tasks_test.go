package check

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/jsonrpc"
	"github.com/extauthz/extauthz/internal/shared"
	"github.com/extauthz/extauthz/internal/testing/redistest"
)

// TestTaskMethodEverySpelling: every spelling of every method of the
// vocabulary that acts on tasks is classified, and nothing else is.
func TestTaskMethodEverySpelling(t *testing.T) {
	want := map[string]taskUse{
		"tasks/get": taskOp, "tasks/result": taskOp, "tasks/cancel": taskOp, "tasks/update": taskOp,
		"GetTask": taskOp, "CancelTask": taskOp, "SubscribeToTask": taskOp, "tasks/resubscribe": taskOp,
		"CreateTaskPushNotificationConfig": taskOp, "SetTaskPushNotificationConfig": taskOp, "tasks/pushNotificationConfig/set": taskOp,
		"ListTaskPushNotificationConfigs": taskOp, "ListTaskPushNotificationConfig": taskOp, "tasks/pushNotificationConfig/list": taskOp,
		// v0.3's params.id is the task, v1.0's the configuration.
		"tasks/pushNotificationConfig/get": taskOp, "GetTaskPushNotificationConfig": taskConfigOp,
		"tasks/pushNotificationConfig/delete": taskOp, "DeleteTaskPushNotificationConfig": taskConfigOp,
		"message/send": taskSend, "message/stream": taskSend, "SendMessage": taskSend, "SendStreamingMessage": taskSend,
		"tasks/list": taskList, "ListTasks": taskList,
		// Names the vocabulary does not know.
		"tasks/pushNotificationConfig/update": taskOp, "UpdateTaskPushNotificationConfig": taskOp,
		"tasks/unknown": noTask,
	}
	for _, md := range jsonrpc.Methods {
		for _, sp := range md.Spellings {
			if _, ok := want[sp]; !ok {
				want[sp] = noTask
			}
		}
	}
	for method, use := range want {
		if got := taskMethod(method); got != use {
			t.Errorf("taskMethod(%q) = %d, want %d", method, got, use)
		}
	}
}

// TestTaskOperationMustNameItsTask: a task operation naming no task in a
// field the service reads is refused (400, -32602 with the id); calls
// that need none go on. A v1.0 configuration's params.id is checked but
// not bound.
func TestTaskOperationMustNameItsTask(t *testing.T) {
	pl, mint := agentPipeline(t, "", nil)
	alice, bob := mint(nil), mint(jwt.MapClaims{"sub": "bob"})
	ctx := context.Background()
	if v := pl.Check(ctx, call("agent.example.com", alice, nil, `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"T"}}`)); v.Outcome != Allowed {
		t.Fatalf("alice: %v %s", v.Outcome, v.Description)
	}
	for _, tt := range []struct {
		name, host, body, reason string
	}{
		{"GetTask without params", "agent.example.com", `{"jsonrpc":"2.0","id":2,"method":"GetTask"}`, "GetTask must name its task in params.id, params.taskId or params.task_id"},
		{"GetTask by position", "agent.example.com", `{"jsonrpc":"2.0","id":2,"method":"GetTask","params":["T"]}`, "GetTask must name its task"},
		{"MCP tasks/result", "mcp.example.com", `{"jsonrpc":"2.0","id":2,"method":"tasks/result","params":{"taskId":""}}`, "tasks/result must name its task"},
		{"the configuration's id alone", "agent.example.com", `{"jsonrpc":"2.0","id":2,"method":"DeleteTaskPushNotificationConfig","params":{"id":"T"}}`,
			"DeleteTaskPushNotificationConfig must name its task in params.taskId or params.task_id (params.id is the configuration's)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := pl.Check(ctx, call(tt.host, bob, nil, tt.body))
			if v.Outcome != Malformed || v.Status() != 400 || !strings.HasPrefix(v.Description, tt.reason) {
				t.Fatalf("%v %d %q, want 400 %q", v.Outcome, v.Status(), v.Description, tt.reason)
			}
			if body := string(v.Body); !strings.Contains(body, `"id":2,`) || !strings.Contains(body, `"code":-32602`) {
				t.Fatalf("refusal %s, want -32602 with the id", body)
			}
		})
	}
	for _, tt := range []struct{ name, host, body string }{
		{"a message starting a task", "agent.example.com", `{"jsonrpc":"2.0","id":3,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[]}}}`},
		{"A2A ListTasks of a context", "agent.example.com", `{"jsonrpc":"2.0","id":3,"method":"ListTasks","params":{"contextId":"ctx-new"}}`},
		{"bob's configuration cfg-1", "agent.example.com", `{"jsonrpc":"2.0","id":3,"method":"GetTaskPushNotificationConfig","params":{"task_id":"B","id":"cfg-1"}}`},
		{"alice's configuration cfg-1", "agent.example.com", `{"jsonrpc":"2.0","id":3,"method":"GetTaskPushNotificationConfig","params":{"task_id":"T","id":"cfg-1"}}`},
	} {
		tok := bob
		if strings.HasPrefix(tt.name, "alice") {
			tok = alice
		}
		if v := pl.Check(ctx, call(tt.host, tok, nil, tt.body)); v.Outcome != Allowed {
			t.Errorf("%s: %v %s", tt.name, v.Outcome, v.Description)
		}
	}
	if b, bound := pl.state.tasks.Lookup(bindingKey(bindTask, "cfg-1")); bound {
		t.Errorf("a configuration id was bound as %s's task", b.Subject)
	}
	// Checked all the same: alice's task in a configuration's params.id.
	v := pl.Check(ctx, call("agent.example.com", bob, nil, `{"jsonrpc":"2.0","id":4,"method":"GetTaskPushNotificationConfig","params":{"taskId":"B","id":"T"}}`))
	if v.Outcome != Forbidden || !strings.Contains(v.Description, "task belongs to another user") {
		t.Fatalf("alice's task as bob's configuration id: %v %s", v.Outcome, v.Description)
	}
	if _, steps := pl.Explain(ctx, call("agent.example.com", bob, nil, `{"jsonrpc":"2.0","id":5,"method":"CancelTask","params":{}}`)); !explainedIn(steps, "tasks", "must name its task") {
		t.Errorf("Explain does not say why: %+v", steps)
	}
}

// TestTaskListsScopedToTheCaller: a task list reaches the upstream only
// when something scopes it to the caller: an MCP one a session of the
// caller's (servers keep tasks by session, and the TypeScript SDK's store
// lists every task to a request without one), an A2A one a context of
// theirs, each bound where the route binds sessions; or the route says
// its upstream lists only the caller's tasks.
func TestTaskListsScopedToTheCaller(t *testing.T) {
	pl, mint := agentPipeline(t, "", nil, `  - {name: scoped, hosts: [scoped.example.com], protocol: mcp, issuers: [dex], upstream_scopes_task_lists: true}
  - {name: guess, hosts: [auto.example.com], issuers: [dex]}
`)
	ctx := context.Background()
	bob := mint(jwt.MapClaims{"sub": "bob"})
	const mcpList = `{"jsonrpc":"2.0","id":3,"method":"tasks/list"}`
	const a2aList = `{"jsonrpc":"2.0","id":3,"method":"ListTasks","params":{"contextId":"ctx-bob"}}`
	session := Headers{"mcp-session-id": "s-bob"}
	for _, tt := range []struct {
		name, host string
		headers    Headers
		body       string
		want       Outcome
	}{
		{"MCP, in bob's session", "mcp.example.com", session, mcpList, Allowed},
		{"MCP, in no session", "mcp.example.com", nil, mcpList, Forbidden},
		{"MCP, where sessions are not bound", "unbound.example.com", session, mcpList, Forbidden},
		{"MCP, by an upstream that scopes its lists", "scoped.example.com", nil, mcpList, Allowed},
		{"A2A, of bob's context", "agent.example.com", nil, a2aList, Allowed},
		{"tasks/list on an auto route, in a session, of a context", "auto.example.com", session,
			`{"jsonrpc":"2.0","id":3,"method":"tasks/list","params":{"contextId":"ctx-bob"}}`, Allowed},
		{"tasks/list on an auto route, in a session alone", "auto.example.com", session, mcpList, Forbidden},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := pl.Check(ctx, call(tt.host, bob, tt.headers, tt.body))
			if v.Outcome != tt.want {
				t.Fatalf("%v %s, want %v", v.Outcome, v.Description, tt.want)
			}
			if tt.want == Forbidden && (!strings.Contains(v.Description, "upstream_scopes_task_lists") || !strings.Contains(string(v.Body), `"id":3,`)) {
				t.Fatalf("refusal %s %q lacks the id or the reason", v.Body, v.Description)
			}
		})
	}
}

// explainedIn reports whether Explain's step name says want.
func explainedIn(steps []Step, name, want string) bool {
	s, ok := explained(steps, name)
	return ok && strings.Contains(s.Detail, want)
}

// TestReferencedTasksAreTheCallers: a message may reference only tasks
// bound to the caller (or to the user a delegate acts for); a reference
// to another user's task, or to one nobody holds, is refused, and binds
// nothing.
func TestReferencedTasksAreTheCallers(t *testing.T) {
	pl, mint := agentPipeline(t, "sessions: {delegates: [{client_ids: [research-agent]}]}\n", nil)
	ctx := context.Background()
	alice, bob := mint(nil), mint(jwt.MapClaims{"sub": "bob"})
	helper := mint(jwt.MapClaims{"sub": "research-agent", "azp": "research-agent", "act": map[string]any{"sub": "alice"}})
	// Created through the response path: bound without a task operation.
	if !pl.TaskCreated(ctx, "T-alice", "alice", "") || !pl.TaskCreated(ctx, "T-bob", "bob", "") {
		t.Fatal("TaskCreated refused")
	}
	send := func(refs string) string {
		return `{"jsonrpc":"2.0","id":9,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[],"referenceTaskIds":` + refs + `}}}`
	}
	for _, tt := range []struct {
		name, tok, refs string
		want            Outcome
		reason          string
	}{
		{"alice's own", alice, `["T-alice"]`, Allowed, ""},
		{"alice's delegate", helper, `["T-alice"]`, Allowed, ""},
		{"bob's own", bob, `["T-bob",""]`, Allowed, ""},
		{"alice's, by bob", bob, `["T-bob","T-alice"]`, Forbidden, "task belongs to another user"},
		{"bob's, by alice's delegate", helper, `["T-bob"]`, Forbidden, "task belongs to another user"},
		{"nobody's", alice, `["T-alice","T-nobody"]`, Forbidden, "bound to nobody"},
		{"too long", alice, `["` + strings.Repeat("t", maxTaskID+1) + `"]`, Malformed, "referenced task id is too long"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := pl.Check(ctx, call("agent.example.com", tt.tok, nil, send(tt.refs)))
			if v.Outcome != tt.want || !strings.Contains(v.Description, tt.reason) {
				t.Fatalf("%v %q, want %v %q", v.Outcome, v.Description, tt.want, tt.reason)
			}
			if tt.want != Allowed && !strings.Contains(string(v.Body), `"id":9,`) {
				t.Fatalf("refusal %s without the id", v.Body)
			}
		})
	}
	if b, bound := pl.state.tasks.Lookup(bindingKey(bindTask, "T-nobody")); bound {
		t.Errorf("a reference bound the task to %s", b.Subject)
	}
	// Off with task ownership.
	pl2, mint2 := agentPipeline(t, "sessions: {task_ownership: false}\n", nil)
	if v := pl2.Check(ctx, call("agent.example.com", mint2(nil), nil, send(`["T-nobody"]`))); v.Outcome != Allowed {
		t.Fatalf("task_ownership false: %v %s", v.Outcome, v.Description)
	}
}

// TestReferencedTasksAcrossReplicas: the owner of a referenced task is
// looked up in the shared tier when this replica holds no binding of it;
// a shared tier that does not answer refuses the reference (503).
func TestReferencedTasksAcrossReplicas(t *testing.T) {
	srv := redistest.Start(t)
	ctx := t.Context()
	replica := func() *Pipeline {
		st, err := shared.New(ctx, shared.Config{Addrs: []string{srv.Addr}, OpTimeout: time.Second}, shared.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		p := compileDoc(t, agentDoc(), Deps{Now: newClock().Now})
		t.Cleanup(p.Close)
		pl, err := New(p, Options{Now: newClock().Now, Shared: st})
		if err != nil {
			t.Fatal(err)
		}
		return mustLoad(t, pl)
	}
	a, b := replica(), replica()
	mint := agentMint(t)
	if !a.TaskCreated(ctx, "T-alice", "alice", "") {
		t.Fatal("TaskCreated refused")
	}
	send := `{"jsonrpc":"2.0","id":9,"method":"message/send","params":{"message":{"messageId":"m","role":"user","parts":[],"referenceTaskIds":["T-alice"]}}}`
	if v := b.Check(ctx, call("agent.example.com", mint(nil), nil, send)); v.Outcome != Allowed {
		t.Errorf("alice on another replica: %v %s", v.Outcome, v.Description)
	}
	if v := b.Check(ctx, call("agent.example.com", mint(jwt.MapClaims{"sub": "bob"}), nil, send)); v.Outcome != Forbidden {
		t.Errorf("bob on another replica: %v %s", v.Outcome, v.Description)
	}
	c := replica()
	srv.Kill()
	if v := c.Check(ctx, call("agent.example.com", mint(nil), nil, send)); v.Outcome != Unavailable {
		t.Errorf("Redis down: %v %s, want unavailable", v.Outcome, v.Description)
	}
}

// TestListTasksByContext: a task list filtered by a context bound to
// another user is refused as a message in it is; the owner, a delegate
// and a context nobody holds go on, and a list binds nothing.
func TestListTasksByContext(t *testing.T) {
	pl, mint := agentPipeline(t, "sessions: {delegates: [{client_ids: [research-agent]}]}\n", nil)
	ctx := context.Background()
	alice, bob := mint(nil), mint(jwt.MapClaims{"sub": "bob"})
	helper := mint(jwt.MapClaims{"sub": "research-agent", "azp": "research-agent", "act": map[string]any{"sub": "alice"}})
	if v := pl.Check(ctx, call("agent.example.com", alice, nil, a2aSend("ctx-a"))); v.Outcome != Allowed {
		t.Fatalf("alice's message: %v %s", v.Outcome, v.Description)
	}
	list := func(params string) string {
		return `{"jsonrpc":"2.0","id":5,"method":"ListTasks","params":` + params + `}`
	}
	for _, tt := range []struct {
		name, host, tok, body string
		want                  Outcome
	}{
		{"alice", "agent.example.com", alice, list(`{"contextId":"ctx-a"}`), Allowed},
		{"alice's delegate", "agent.example.com", helper, list(`{"context_id":"ctx-a"}`), Allowed},
		{"bob", "agent.example.com", bob, list(`{"contextId":"ctx-a","includeArtifacts":true}`), SessionConflict},
		{"bob, tasks/list", "agent.example.com", bob, `{"jsonrpc":"2.0","id":5,"method":"tasks/list","params":{"context_id":"ctx-a"}}`, SessionConflict},
		{"bob, without a filter", "agent.example.com", bob, list(`{}`), Forbidden},
		{"bob, a context nobody holds", "agent.example.com", bob, list(`{"contextId":"ctx-x"}`), Allowed},
		{"bob, an id no binding can have", "agent.example.com", bob, list(`{"contextId":" ctx-a"}`), Allowed},
		{"bob, on a route that binds no context: the filter cannot be checked", "unbound.example.com", bob, list(`{"contextId":"ctx-a"}`), Forbidden},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := pl.Check(ctx, call(tt.host, tt.tok, nil, tt.body))
			if v.Outcome != tt.want {
				t.Fatalf("%v %s, want %v", v.Outcome, v.Description, tt.want)
			}
			if tt.want == SessionConflict && (!strings.Contains(string(v.Body), `"id":5,`) || !strings.Contains(v.Description, "A2A context belongs to another user")) {
				t.Fatalf("refusal %s %q lacks the id or the reason", v.Body, v.Description)
			}
		})
	}
	if b, bound := pl.state.sessions.Lookup(bindingKey(bindContext, "ctx-x")); bound {
		t.Errorf("a list bound the context to %s", b.Subject)
	}
}
