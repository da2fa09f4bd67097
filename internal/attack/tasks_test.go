package attack

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"
	"github.com/golang-jwt/jwt/v5"
)

// Tasks belong to their creator (threat model classes 3 and 6). A task id is
// a capability: whoever holds it can read the result, cancel the work or
// follow its events. An attacker with a valid token of their own and the
// victim's task id tries every spelling of every task operation, splits the
// id across the fields different upstreams read, hides the call in headers,
// borrows the victim's name from another issuer, and floods the store to get
// the victim's binding dropped.

// tasksYAML is an MCP route with a deliberately small store: 20 bindings,
// at most 4 per user.
const tasksYAML = `routes:
  - name: mcp
    default: true
    protocol: mcp
    issuers: [hs, other]
    audiences: [` + audience + `]
sessions: {max_entries: 20, max_per_subject: 4}
`

// taskOp is a task operation body naming task in params.taskId (MCP) or
// params.id (A2A).
func taskOp(id int, method, field, task string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{%q:%q}}`, id, method, field, task)
}

// wantTaskRefused fails unless v refuses the task as another user's, with
// the request's JSON-RPC id.
func wantTaskRefused(t *testing.T, v verdict, id string) {
	t.Helper()
	v.wantDenied(t, 403)
	if e := v.rpc(t); string(e.ID) != id || !strings.Contains(v.Body, "task belongs to another user") {
		t.Fatalf("refusal %s, want id %s and the reason", v.Body, id)
	}
}

// TestTasksOverTheHTTPJSONBinding: an agent may serve A2A's HTTP+JSON
// binding beside its JSON-RPC one, where the task is named in the path
// (GET /v1/tasks/{id} is GetTask, POST /v1/tasks/{id}:cancel CancelTask;
// v1.0 drops the /v1 and may put a tenant first). An a2a route refuses
// that binding; on an auto route, which cannot tell an agent from another
// service, a task named so must not be another user's. An id nobody holds
// passes: a service with its own /tasks/{id} is left alone.
func TestTasksOverTheHTTPJSONBinding(t *testing.T) {
	s, alice, bob, task := aliceHoldsATask(t, strings.Replace(a2aTasksYAML, "protocol: a2a", "protocol: auto", 1))
	send := `{"jsonrpc":"2.0","id":3,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[],"contextId":"ctx-of-alice"}}}`
	if v := s.check(t, raw{Headers: alice, Body: send}); !v.Allowed {
		t.Fatalf("alice's message: %d %s", v.Status, v.Body)
	}
	carol := map[string]string{"authorization": "Bearer " + token(t, issuerHS, "carol")}
	if v := s.check(t, raw{Headers: carol, Body: taskOp(2, "GetTask", "id", "task of carol")}); !v.Allowed {
		t.Fatalf("carol polls her task: %d %s", v.Status, v.Body)
	}
	for _, tc := range []struct {
		name, method, path string
		headers            map[string]string
		status             int // 0: allowed
	}{
		{"GetTask", "GET", "/v1/tasks/" + task, bob, 403},
		{"GetTask with a history length", "GET", "/v1/tasks/" + task + "?historyLength=10", bob, 403},
		{"CancelTask", "POST", "/v1/tasks/" + task + ":cancel", bob, 403},
		{"SubscribeToTask", "GET", "/v1/tasks/" + task + ":subscribe", bob, 403},
		{"the task's push notification configurations", "GET", "/v1/tasks/" + task + "/pushNotificationConfigs", bob, 403},
		{"one of them, deleted", "DELETE", "/v1/tasks/" + task + "/pushNotificationConfigs/cfg-1", bob, 403},
		{"v1.0, without /v1", "GET", "/tasks/" + task, bob, 403},
		{"v1.0, under a tenant", "GET", "/acme/tasks/" + task + ":cancel", bob, 403},
		// Express, under the A2A JavaScript SDK, routes regardless of case
		// and of a trailing slash.
		{"GetTask, the segment in capitals", "GET", "/v1/TASKS/" + task, bob, 403},
		{"CancelTask, the segment capitalised", "POST", "/Tasks/" + task + ":cancel", bob, 403},
		{"GetTask, a trailing slash", "GET", "/v1/tasks/" + task + "/", bob, 403},
		{"the id escaped, as no path needs", "GET", "/v1/tasks/task-of-%61lice", bob, 400},
		{"an id another user holds, escaped as it must be", "GET", "/v1/tasks/task%20of%20carol", bob, 403},
		{"ListTasks of another user's context", "GET", "/v1/tasks?contextId=ctx-of-alice&includeArtifacts=true", bob, 403},
		{"ListTasks by the proto field name", "GET", "/v1/tasks?context_id=ctx-of-alice", bob, 403},
		{"ListTasks naming two contexts", "GET", "/v1/tasks?contextId=ctx-of-bob&contextId=ctx-of-alice", bob, 403},
		{"ListTasks, escaped", "GET", "/acme/tasks?contextId=ctx-of-%61lice", bob, 403},
		{"ListTasks behind a semicolon", "GET", "/v1/tasks?pageSize=1;contextId=ctx-of-alice", bob, 403},
		{"ListTasks, the name escaped", "GET", "/v1/tasks?context%49d=ctx-of-alice", bob, 403},
		{"ListTasks, a trailing slash", "GET", "/v1/tasks/?contextId=ctx-of-alice", bob, 403},
		{"ListTasks, the segment in capitals", "GET", "/v1/TASKS?contextId=ctx-of-alice", bob, 403},
		{"ListTasks of a context nobody holds", "GET", "/v1/tasks?contextId=ctx-unbound", bob, 0},
		{"ListTasks of her own context", "GET", "/v1/tasks?contextId=ctx-of-alice", alice, 0},
		{"the owner", "GET", "/v1/tasks/" + task, alice, 0},
		{"a task nobody holds", "GET", "/v1/tasks/task-of-nobody", bob, 0},
		{"another service's tasks", "GET", "/todo/tasks/42", bob, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := map[string]string{"content-length": "0"}
			maps.Copy(h, tc.headers)
			v := s.check(t, raw{Method: tc.method, Path: tc.path, Headers: h})
			if v.wantStatus(t, tc.status) && tc.status == 403 && !strings.Contains(v.Body, "belongs to another user") {
				t.Fatalf("the refusal does not say why: %s", v.Body)
			}
		})
	}
	// A context is bound by session binding, not task ownership: without
	// task ownership the list is refused all the same, as over JSON-RPC.
	t.Run("ListTasks of another user's context, task ownership off", func(t *testing.T) {
		s := start(t, "sessions: {task_ownership: false}\n"+strings.Replace(a2aTasksYAML, "protocol: a2a", "protocol: auto", 1), options{})
		send := `{"jsonrpc":"2.0","id":3,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[],"contextId":"ctx-of-alice"}}}`
		if v := s.check(t, raw{Headers: alice, Body: send}); !v.Allowed {
			t.Fatalf("alice's message: %d %s", v.Status, v.Body)
		}
		h := map[string]string{"content-length": "0"}
		maps.Copy(h, bob)
		s.check(t, raw{Method: "GET", Path: "/v1/tasks?contextId=ctx-of-alice", Headers: h}).wantDenied(t, 403)
	})
	// SendMessage over HTTP+JSON carries the task in a JSON body that is no
	// JSON-RPC call: refused as a body nobody can read unambiguously.
	t.Run("SendMessage continuing the task", func(t *testing.T) {
		h := map[string]string{"content-type": "application/json"}
		maps.Copy(h, bob)
		v := s.check(t, raw{Path: "/v1/message:send", Headers: h,
			Body: `{"message":{"messageId":"m","role":"ROLE_USER","taskId":"` + task + `","content":[{"text":"hi"}]}}`})
		v.wantDenied(t, 400)
	})
}

// TestTaskListsOverTheHTTPJSONBinding: A2A's HTTP+JSON ListTasks (GET
// /v1/tasks, v1.0 /tasks or /{tenant}/tasks) lists what the agent keeps,
// and the A2A JavaScript SDK's store keeps every caller's tasks together:
// unfiltered, it answers bob with alice's tasks. On an auto route that
// binds tasks a list must be filtered by a context (checked as a message
// in it would be) in the one spelling the agent reads (contextId; the SDK
// ignores context_id), with no value of any spelling empty and no ";" in
// the query (where servers split the query differently), unless the route
// declares that its upstream scopes lists itself.
func TestTaskListsOverTheHTTPJSONBinding(t *testing.T) {
	auto := strings.Replace(a2aTasksYAML, "protocol: a2a", "protocol: auto", 1)
	s, _, bob, _ := aliceHoldsATask(t, auto)
	get := func(method, path string) raw {
		h := map[string]string{"content-length": "0"}
		maps.Copy(h, bob)
		return raw{Method: method, Path: path, Headers: h}
	}
	for _, tc := range []struct{ name, method, path string }{
		{"ListTasks, unfiltered", "GET", "/v1/tasks"},
		{"with artifacts", "GET", "/v1/tasks?includeArtifacts=true&pageSize=100"},
		{"v1.0", "GET", "/tasks"},
		{"under a tenant", "GET", "/acme/tasks?status=TASK_STATE_COMPLETED"},
		{"HEAD, which Express answers as GET", "HEAD", "/v1/tasks"},
		{"in capitals", "GET", "/V1/TASKS"},
		{"a trailing slash", "GET", "/v1/tasks/"},
		{"behind a mount point", "GET", "/a2a/rest/tasks?pageSize=1"},
		{"an empty context", "GET", "/v1/tasks?contextId="},
		{"an empty context beside one", "GET", "/v1/tasks?contextId=&contextId=ctx-of-bob"},
		{"an empty context in the proto spelling", "GET", "/v1/tasks?contextId=ctx-of-bob&context_id="},
		{"the proto spelling alone, which the SDK ignores", "GET", "/v1/tasks?context_id=ctx-of-bob"},
		{"another case, which the SDK ignores", "GET", "/v1/tasks?contextid=ctx-of-bob"},
		{"the filter behind a semicolon", "GET", "/v1/tasks?pageSize=1;contextId=ctx-of-bob"},
		{"the filter before a semicolon", "GET", "/v1/tasks?contextId=ctx-of-bob;pageSize=1"},
		{"another service's list, which the route cannot tell from an agent's", "GET", "/todo/tasks"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := s.check(t, get(tc.method, tc.path))
			if v.wantStatus(t, 403) && !strings.Contains(v.Body, "upstream_scopes_task_lists") {
				t.Fatalf("the refusal does not say why: %s", v.Body)
			}
		})
	}
	for _, tc := range []struct{ name, method, path string }{
		{"filtered by a context", "GET", "/v1/tasks?contextId=ctx-of-bob&pageSize=10"},
		{"filtered, escaped", "GET", "/tasks?context%49d=ctx%2Dof%2Dbob"},
		{"filtered, in both spellings", "GET", "/acme/tasks?context_id=ctx-of-bob&contextId=ctx-of-bob"},
		{"a task, not a list", "GET", "/v1/tasks/task-of-nobody"},
		{"a list posted, which no binding has", "POST", "/v1/tasks"},
		{"a path that only ends so", "GET", "/v1/subtasks"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if v := s.check(t, get(tc.method, tc.path)); !v.Allowed {
				t.Fatalf("refused: %d %s", v.Status, v.Body)
			}
		})
	}
	for _, tc := range []struct{ name, yaml string }{
		{"an upstream that scopes its lists", strings.Replace(auto, "protocol: auto", "protocol: auto\n    upstream_scopes_task_lists: true", 1)},
		{"task ownership off", "sessions: {task_ownership: false}\n" + auto},
		{"an HTTP route", strings.Replace(auto, "protocol: auto", "protocol: http", 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := start(t, tc.yaml, options{})
			if v := s.check(t, get("GET", "/v1/tasks")); !v.Allowed {
				t.Fatalf("refused: %d %s", v.Status, v.Body)
			}
		})
	}
	// The forward-auth front end decides the same: the path and method
	// come from X-Forwarded-Uri and X-Forwarded-Method.
	t.Run("behind a forward-auth proxy", func(t *testing.T) {
		auth := http.Header{"Authorization": {bob["authorization"]}}
		for _, tc := range []struct{ name, uri string }{
			{"ListTasks, unfiltered", "/v1/tasks"},
			{"ListTasks in capitals", "/v1/TASKS/"},
			{"GetTask in capitals", "/v1/TASKS/task-of-alice"},
		} {
			if status, _, body := s.forwardAuth(t, fwd{Method: "GET", URI: tc.uri, Header: auth}); status != 403 {
				t.Errorf("%s: status %d, body %s", tc.name, status, body)
			}
		}
		if status, _, body := s.forwardAuth(t, fwd{Method: "GET", URI: "/v1/tasks?contextId=ctx-of-bob", Header: auth}); status != 200 {
			t.Errorf("a filtered list: status %d, body %s", status, body)
		}
	})
	t.Run("a context filter where contexts are not bound", func(t *testing.T) {
		s := start(t, strings.Replace(auto, "protocol: auto", "protocol: auto\n    mcp: {session_binding: false}", 1), options{})
		v := s.check(t, get("GET", "/v1/tasks?contextId=ctx-of-alice"))
		if v.wantStatus(t, 403) && !strings.Contains(v.Body, "upstream_scopes_task_lists") {
			t.Fatalf("the refusal does not say why: %s", v.Body)
		}
	})
}

// TestTasksOverTheGRPCBinding: A2A's gRPC binding names the task in a
// protobuf body the service does not read (GetTaskRequest.name is
// "tasks/{id}"), and the method in the path. On an auto route with task
// ownership or rules, a gRPC call to an A2A service is refused: neither
// could see what it does. Other gRPC services pass.
func TestTasksOverTheGRPCBinding(t *testing.T) {
	for _, tc := range []struct {
		name, routes, path string
		status             int // 0: allowed
	}{
		{"v0.3 GetTask", "", "/a2a.v1.A2AService/GetTask", 400},
		{"v1.0 CancelTask", "", "/lf.a2a.v1.A2AService/CancelTask", 400},
		{"rules, task ownership off", "rules", "/a2a.v1.A2AService/CancelTask", 400},
		{"another gRPC service", "", "/grpc.health.v1.Health/Check", 0},
		{"neither rules nor task ownership", "off", "/a2a.v1.A2AService/GetTask", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			yaml := `routes:
  - name: auto
    default: true
    issuers: [hs]
    audiences: [` + audience + `]
`
			switch tc.routes {
			case "rules":
				yaml += "    rules:\n      - {methods: [\"CancelTask\"], action: deny}\nsessions: {task_ownership: false}\n"
			case "off":
				yaml += "sessions: {task_ownership: false}\n"
			}
			s := start(t, yaml, options{})
			// A gRPC frame: uncompressed, 12 bytes of GetTaskRequest{name: "tasks/t-1"}.
			frame := "\x00\x00\x00\x00\x0b\x0a\x09tasks/t-1"
			v := s.check(t, raw{Path: tc.path, Body: frame, Headers: map[string]string{
				"authorization": "Bearer " + token(t, issuerHS, "bob"), "content-type": "application/grpc", "te": "trailers"}})
			if v.wantStatus(t, tc.status) && !strings.Contains(v.Body, "gRPC") {
				t.Fatalf("the refusal does not say why: %s", v.Body)
			}
		})
	}
}

func TestTasksAnotherUsersTask(t *testing.T) {
	s := start(t, tasksYAML, options{})
	alice := token(t, issuerHS, "alice")
	bob := token(t, issuerHS, "bob")
	const task = "task-of-alice"
	if v := s.check(t, raw{Headers: map[string]string{"authorization": "Bearer " + alice}, Body: taskOp(1, "tasks/get", "taskId", task)}); !v.Allowed {
		t.Fatalf("alice polls her task: %d %s", v.Status, v.Body)
	}
	bobAuth := map[string]string{"authorization": "Bearer " + bob}
	cases := []struct {
		name, body, id string
	}{
		{"MCP tasks/get", taskOp(2, "tasks/get", "taskId", task), "2"},
		{"MCP tasks/result", taskOp(3, "tasks/result", "taskId", task), "3"},
		{"MCP tasks/cancel", taskOp(4, "tasks/cancel", "taskId", task), "4"},
		{"A2A v0.3 tasks/get by params.id", taskOp(5, "tasks/get", "id", task), "5"},
		{"A2A v1.0 GetTask", taskOp(6, "GetTask", "id", task), "6"},
		{"A2A v1.0 CancelTask", taskOp(7, "CancelTask", "id", task), "7"},
		{"A2A v0.3 tasks/resubscribe", taskOp(8, "tasks/resubscribe", "id", task), "8"},
		{"A2A v1.0 SubscribeToTask", taskOp(9, "SubscribeToTask", "id", task), "9"},
		{"push notification config of the task", taskOp(10, "tasks/pushNotificationConfig/get", "id", task), "10"},
		{"the id split across fields: the upstream may read either", `{"jsonrpc":"2.0","id":11,"method":"tasks/get","params":{"taskId":"bobs-own","id":"` + task + `"}}`, "11"},
		{"an escaped method name", `{"jsonrpc":"2.0","id":12,"method":"tasks\/result","params":{"taskId":"` + task + `"}}`, "12"},
		{"a string id", `{"jsonrpc":"2.0","id":"x-13","method":"tasks/get","params":{"taskId":"` + task + `"}}`, `"x-13"`},
		{"continuing the task by a message", `{"jsonrpc":"2.0","id":14,"method":"message/send","params":{"message":{"messageId":"m","taskId":"` + task + `","role":"user","parts":[]}}}`, "14"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wantTaskRefused(t, s.check(t, raw{Headers: bobAuth, Body: tc.body}), tc.id)
		})
	}

	t.Run("alice of another issuer is another user", func(t *testing.T) {
		other := token(t, issuerOther, "alice")
		wantTaskRefused(t, s.check(t, raw{Headers: map[string]string{"authorization": "Bearer " + other}, Body: taskOp(20, "tasks/get", "taskId", task)}), "20")
	})
	t.Run("a task operation named only by headers cannot be checked", func(t *testing.T) {
		h := map[string]string{"authorization": "Bearer " + bob, "mcp-method": "tasks/get", "mcp-protocol-version": "2026-07-28"}
		v := s.check(t, raw{Headers: h})
		v.wantDenied(t, 400)
		v = s.check(t, raw{Headers: h, Body: taskOp(21, "tasks/get", "taskId", task)[:30], Partial: true})
		if v.Allowed {
			t.Fatal("a partial body let a task operation through")
		}
	})
	t.Run("a huge id is refused, not stored", func(t *testing.T) {
		v := s.check(t, raw{Headers: bobAuth, Body: taskOp(22, "tasks/get", "taskId", strings.Repeat("x", 4096))})
		v.wantDenied(t, 400)
	})
	t.Run("duplicate keys never pick the victim's id", func(t *testing.T) {
		body := `{"jsonrpc":"2.0","id":23,"method":"tasks/get","params":{"taskId":"bobs-own","taskId":"` + task + `"}}`
		if v := s.check(t, raw{Headers: bobAuth, Body: body}); v.Allowed {
			t.Fatal("duplicate taskId keys were allowed")
		}
	})
	t.Run("alice still has her task", func(t *testing.T) {
		if v := s.check(t, raw{Headers: map[string]string{"authorization": "Bearer " + alice}, Body: taskOp(24, "tasks/result", "taskId", task)}); !v.Allowed {
			t.Fatalf("alice: %d %s", v.Status, v.Body)
		}
	})
}

// a2aTasksYAML is an A2A route that binds tasks and contexts.
const a2aTasksYAML = `routes:
  - name: a2a
    default: true
    protocol: a2a
    issuers: [hs]
    audiences: [` + audience + `]
`

// TestTasksProtoFieldNames: A2A v1.0's requests name their task in
// task_id (a2a.proto: CreateTaskPushNotificationConfigRequest{tenant,
// task_id, config}, GetTaskPushNotificationConfigRequest{tenant, task_id,
// id}, ...), and protobuf JSON upstreams accept it beside taskId. Bob
// names alice's task by that spelling, or by both spellings at once so
// that the service and the agent could read different ones.
func TestTasksProtoFieldNames(t *testing.T) {
	s, alice, bob, task := aliceHoldsATask(t, a2aTasksYAML)
	hook := `,"config":{"url":"https://bob.example/hook"}`
	refused := []struct{ name, body, id string }{
		{"CreateTaskPushNotificationConfig", `{"jsonrpc":"2.0","id":2,"method":"CreateTaskPushNotificationConfig","params":{"task_id":"` + task + `"` + hook + `}}`, "2"},
		{"SetTaskPushNotificationConfig", `{"jsonrpc":"2.0","id":3,"method":"SetTaskPushNotificationConfig","params":{"task_id":"` + task + `"` + hook + `}}`, "3"},
		{"GetTaskPushNotificationConfig", `{"jsonrpc":"2.0","id":4,"method":"GetTaskPushNotificationConfig","params":{"tenant":"","task_id":"` + task + `","id":"cfg-1"}}`, "4"},
		{"ListTaskPushNotificationConfigs", `{"jsonrpc":"2.0","id":5,"method":"ListTaskPushNotificationConfigs","params":{"task_id":"` + task + `"}}`, "5"},
		{"DeleteTaskPushNotificationConfig", `{"jsonrpc":"2.0","id":6,"method":"DeleteTaskPushNotificationConfig","params":{"task_id":"` + task + `","id":"cfg-1"}}`, "6"},
		{"v0.3 tasks/pushNotificationConfig/set", `{"jsonrpc":"2.0","id":7,"method":"tasks/pushNotificationConfig/set","params":{"task_id":"` + task + `","pushNotificationConfig":{"url":"https://bob.example/hook"}}}`, "7"},
		{"task_id, escaped", `{"jsonrpc":"2.0","id":8,"method":"ListTaskPushNotificationConfigs","params":{"task\u005fid":"` + task + `"}}`, "8"},
		{"a string id", `{"jsonrpc":"2.0","id":"x-9","method":"GetTaskPushNotificationConfig","params":{"task_id":"` + task + `","id":"cfg-1"}}`, `"x-9"`},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			wantTaskRefused(t, s.check(t, raw{Headers: bob, Body: tc.body}), tc.id)
		})
	}
	ambiguous := []struct{ name, body, id string }{
		{"bob's task in taskId, alice's in task_id", `{"jsonrpc":"2.0","id":10,"method":"GetTaskPushNotificationConfig","params":{"taskId":"bobs-own","task_id":"` + task + `","id":"cfg-1"}}`, "10"},
		{"alice's in taskId, bob's in task_id", `{"jsonrpc":"2.0","id":11,"method":"CreateTaskPushNotificationConfig","params":{"taskId":"` + task + `","task_id":"bobs-own"` + hook + `}}`, "11"},
		{"the same id in both", `{"jsonrpc":"2.0","id":12,"method":"ListTaskPushNotificationConfigs","params":{"taskId":"bobs-own","task_id":"bobs-own"}}`, "12"},
		{"a case variant of task_id", `{"jsonrpc":"2.0","id":13,"method":"ListTaskPushNotificationConfigs","params":{"taskId":"bobs-own","TASK_ID":"` + task + `"}}`, "13"},
		{"task_id twice", `{"jsonrpc":"2.0","id":14,"method":"ListTaskPushNotificationConfigs","params":{"task_id":"bobs-own","task_id":"` + task + `"}}`, "14"},
		{"task_id not a string", `{"jsonrpc":"2.0","id":15,"method":"ListTaskPushNotificationConfigs","params":{"task_id":["` + task + `"]}}`, "15"},
		// The v0.3 gRPC proto names a send's message request (json_name
		// message): a protobuf JSON upstream reads either.
		{"the message as the proto's request", `{"jsonrpc":"2.0","id":17,"method":"SendMessage","params":{"request":{"messageId":"m","role":"ROLE_USER","taskId":"` + task + `"}}}`, "17"},
		{"a send without its message", `{"jsonrpc":"2.0","id":18,"method":"message/send","params":{}}`, "18"},
	}
	for _, tc := range ambiguous {
		t.Run(tc.name, func(t *testing.T) {
			s.check(t, raw{Headers: bob, Body: tc.body}).wantInvalidRequest(t, tc.id)
		})
	}
	t.Run("the refusal of both spellings says why", func(t *testing.T) {
		v := s.check(t, raw{Headers: bob, Body: ambiguous[0].body})
		if !strings.Contains(v.Body, "taskId and task_id") {
			t.Fatalf("refusal %s does not name the fields", v.Body)
		}
	})
	t.Run("alice uses the proto field name for her own task", func(t *testing.T) {
		body := `{"jsonrpc":"2.0","id":16,"method":"ListTaskPushNotificationConfigs","params":{"task_id":"` + task + `"}}`
		if v := s.check(t, raw{Headers: alice, Body: body}); !v.Allowed {
			t.Fatalf("alice: %d %s", v.Status, v.Body)
		}
	})
}

// TestTasksResourceNames: A2A v0.3's gRPC binding names a task by
// resource name (GetTaskRequest{name: "tasks/T"},
// CreateTaskPushNotificationConfigRequest{parent: "tasks/T"}, ...). No
// JSON-RPC method has these members, but an agent decoding JSON-RPC params
// into that binding's messages with protobuf JSON (unknown fields
// discarded) acts on the task they name. Bob binds a task id of his own in
// params.id and names alice's task in a resource name.
func TestTasksResourceNames(t *testing.T) {
	s, alice, bob, task := aliceHoldsATask(t, a2aTasksYAML)
	op := func(id int, method, params string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params)
	}
	refused := []struct{ name, body, id string }{
		{"GetTask by name", op(2, "GetTask", `{"id":"bobs-own","name":"tasks/`+task+`"}`), "2"},
		{"tasks/get by name", op(3, "tasks/get", `{"id":"bobs-own","name":"tasks/`+task+`"}`), "3"},
		{"CancelTask by name, without params.id", op(4, "CancelTask", `{"name":"tasks/`+task+`"}`), "4"},
		{"tasks/resubscribe by name", op(5, "tasks/resubscribe", `{"id":"bobs-own","name":"tasks/`+task+`"}`), "5"},
		{"a configuration by its resource name", op(6, "tasks/pushNotificationConfig/get", `{"id":"bobs-own","name":"tasks/`+task+`/pushNotificationConfigs/cfg-1"}`), "6"},
		{"a configuration created under a parent", op(7, "tasks/pushNotificationConfig/set", `{"taskId":"bobs-own","parent":"tasks/`+task+`","pushNotificationConfig":{"url":"https://bob.example/hook"}}`), "7"},
		{"configurations listed under a parent", op(8, "ListTaskPushNotificationConfigs", `{"task_id":"bobs-own","parent":"tasks/`+task+`"}`), "8"},
		{"a parent, escaped", op(9, "GetTask", `{"id":"bobs-own","par\u0065nt":"tasks/`+task+`"}`), "9"},
		{"a name that is no string", op(10, "GetTask", `{"id":"bobs-own","name":["tasks/`+task+`"]}`), "10"},
		{"a parent on a message send", op(11, "message/send", `{"parent":"tasks/`+task+`","message":{"messageId":"m","role":"user","parts":[]}}`), "11"},
		{"a string id", `{"jsonrpc":"2.0","id":"x-12","method":"GetTask","params":{"id":"bobs-own","name":"tasks/` + task + `"}}`, `"x-12"`},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			v := s.check(t, raw{Headers: bob, Body: tc.body})
			v.wantInvalidRequest(t, tc.id)
			if !strings.Contains(v.Body, "params.name or params.parent") {
				t.Fatalf("refusal %s does not say why", v.Body)
			}
		})
	}
	t.Run("a null name is no name", func(t *testing.T) {
		if v := s.check(t, raw{Headers: alice, Body: op(20, "GetTask", `{"id":"`+task+`","name":null}`)}); !v.Allowed {
			t.Fatalf("alice: %d %s", v.Status, v.Body)
		}
	})
	t.Run("bob's own task by params.id", func(t *testing.T) {
		if v := s.check(t, raw{Headers: bob, Body: op(21, "GetTask", `{"id":"bobs-own"}`)}); !v.Allowed {
			t.Fatalf("bob: %d %s", v.Status, v.Body)
		}
	})
}

// TestTasksOperationNamesItsTask: a task operation the service cannot tie
// to a task is refused, not let through unchecked: bob names alice's task
// where the service reads nothing (positional params, a field of no
// protocol), or names none and hopes for the upstream's default. A v1.0
// push notification configuration's params.id is the configuration's
// own id: it is never bound as a task (bob cannot take alice's
// configuration ids from her), but it cannot name her task either.
func TestTasksOperationNamesItsTask(t *testing.T) {
	s, alice, bob, task := aliceHoldsATask(t, a2aTasksYAML)
	op := func(id int, method, params string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params)
	}
	unnamed := []struct{ name, body, id string }{
		{"GetTask without params", `{"jsonrpc":"2.0","id":2,"method":"GetTask"}`, "2"},
		{"GetTask with null params", op(3, "GetTask", `null`), "3"},
		{"GetTask by position", op(4, "GetTask", `["`+task+`"]`), "4"},
		{"tasks/get by a field no protocol has", op(5, "tasks/get", `{"task":"`+task+`"}`), "5"},
		{"CancelTask with an empty id", op(6, "CancelTask", `{"id":""}`), "6"},
		{"SubscribeToTask", op(7, "SubscribeToTask", `{}`), "7"},
		{"tasks/resubscribe", op(8, "tasks/resubscribe", `{}`), "8"},
		{"MCP tasks/result", op(9, "tasks/result", `{}`), "9"},
		{"MCP tasks/cancel", op(10, "tasks/cancel", `{"taskId":null}`), "10"},
		{"CreateTaskPushNotificationConfig", op(11, "CreateTaskPushNotificationConfig", `{"config":{"url":"https://bob.example/hook"}}`), "11"},
		{"tasks/pushNotificationConfig/set", op(12, "tasks/pushNotificationConfig/set", `{"pushNotificationConfig":{"url":"https://bob.example/hook"}}`), "12"},
		{"ListTaskPushNotificationConfigs", op(13, "ListTaskPushNotificationConfigs", `{}`), "13"},
		{"v1.0 GetTaskPushNotificationConfig by the configuration's id alone", op(14, "GetTaskPushNotificationConfig", `{"id":"`+task+`"}`), "14"},
		{"v1.0 DeleteTaskPushNotificationConfig by the configuration's id alone", op(15, "DeleteTaskPushNotificationConfig", `{"id":"cfg-1"}`), "15"},
		{"v0.3 tasks/pushNotificationConfig/get by the configuration's id alone", op(16, "tasks/pushNotificationConfig/get", `{"pushNotificationConfigId":"cfg-1"}`), "16"},
		{"a string id", `{"jsonrpc":"2.0","id":"x-17","method":"GetTask","params":{}}`, `"x-17"`},
	}
	for _, tc := range unnamed {
		t.Run(tc.name, func(t *testing.T) {
			v := s.check(t, raw{Headers: bob, Body: tc.body})
			v.wantDenied(t, 400)
			if e := v.rpc(t); string(e.ID) != tc.id || !strings.Contains(v.Body, "must name its task") {
				t.Fatalf("refusal %s, want id %s and the reason", v.Body, tc.id)
			}
		})
	}
	allowed := []struct{ name, body string }{
		{"a message starting a new task", `{"jsonrpc":"2.0","id":20,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[]}}}`},
		{"a v0.3 message starting a new task", `{"jsonrpc":"2.0","id":21,"method":"message/stream","params":{"message":{"messageId":"m","role":"user","parts":[]}}}`},
		{"ListTasks of a context", op(22, "ListTasks", `{"pageSize":10,"contextId":"ctx-new"}`)},
		{"tasks/list of a context", `{"jsonrpc":"2.0","id":23,"method":"tasks/list","params":{"context_id":"ctx-new"}}`},
		{"the extended agent card", `{"jsonrpc":"2.0","id":24,"method":"GetExtendedAgentCard"}`},
	}
	for _, tc := range allowed {
		t.Run(tc.name, func(t *testing.T) {
			if v := s.check(t, raw{Headers: bob, Body: tc.body}); !v.Allowed {
				t.Fatalf("refused: %d %s", v.Status, v.Body)
			}
		})
	}
	t.Run("a configuration id is not bound as a task", func(t *testing.T) {
		get := func(id int, task string) string {
			return op(id, "GetTaskPushNotificationConfig", `{"taskId":"`+task+`","id":"cfg-1"}`)
		}
		if v := s.check(t, raw{Headers: alice, Body: get(30, task)}); !v.Allowed {
			t.Fatalf("alice's configuration: %d %s", v.Status, v.Body)
		}
		// Configuration ids are the client's or the agent's choice, and
		// the same in every task: bob's own task's cfg-1 is his.
		for _, m := range []string{"GetTaskPushNotificationConfig", "DeleteTaskPushNotificationConfig"} {
			if v := s.check(t, raw{Headers: bob, Body: op(31, m, `{"task_id":"bobs-own","id":"cfg-1"}`)}); !v.Allowed {
				t.Fatalf("bob's %s of his own task's cfg-1: %d %s", m, v.Status, v.Body)
			}
		}
		if v := s.check(t, raw{Headers: alice, Body: get(32, task)}); !v.Allowed {
			t.Fatalf("alice's configuration after bob's: %d %s", v.Status, v.Body)
		}
		// Nor did either bind cfg-1 as a task: bob may still poll a task
		// of that id.
		if v := s.check(t, raw{Headers: bob, Body: taskOp(33, "GetTask", "id", "cfg-1")}); !v.Allowed {
			t.Fatalf("cfg-1 was bound as a task: %d %s", v.Status, v.Body)
		}
	})
	t.Run("a configuration id naming another user's task", func(t *testing.T) {
		// An upstream reading v0.3's params under the v1.0 name takes
		// params.id as the task.
		wantTaskRefused(t, s.check(t, raw{Headers: bob, Body: op(34, "GetTaskPushNotificationConfig", `{"taskId":"bobs-own","id":"`+task+`"}`)}), "34")
	})
}

// TestTasksReferencedByAMessage: a message may reference other tasks
// (params.message.referenceTaskIds), and an agent may load them into its
// context (a2a-go's ReferencedTasksLoader): their history and artifacts
// are then the agent's to quote. Bob references alice's task instead of
// naming it in a task operation, in every spelling and shape.
func TestTasksReferencedByAMessage(t *testing.T) {
	s := start(t, a2aTasksYAML, options{})
	alice := map[string]string{"authorization": "Bearer " + token(t, issuerHS, "alice")}
	bob := map[string]string{"authorization": "Bearer " + token(t, issuerHS, "bob")}
	const task = "task-of-alice"
	for who, h := range map[string]map[string]string{task: alice, "bobs-own": bob} {
		if v := s.check(t, raw{Headers: h, Body: taskOp(1, "GetTask", "id", who)}); !v.Allowed {
			t.Fatalf("%s: %d %s", who, v.Status, v.Body)
		}
	}
	send := func(id int, method, refs string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{"message":{"messageId":"m%d","role":"user","parts":[{"kind":"text","text":"summarise"}],%s}}}`, id, method, id, refs)
	}
	refused := []struct{ name, body, id string }{
		{"v0.3 message/send", send(2, "message/send", `"referenceTaskIds":["`+task+`"]`), "2"},
		{"v0.3 message/stream", send(3, "message/stream", `"referenceTaskIds":["`+task+`"]`), "3"},
		{"v1.0 SendMessage", send(4, "SendMessage", `"referenceTaskIds":["`+task+`"]`), "4"},
		{"v1.0 SendStreamingMessage", send(5, "SendStreamingMessage", `"referenceTaskIds":["`+task+`"]`), "5"},
		{"the proto field name", send(6, "SendMessage", `"reference_task_ids":["`+task+`"]`), "6"},
		{"after bob's own task", send(7, "message/send", `"referenceTaskIds":["bobs-own","`+task+`"]`), "7"},
		{"escaped", send(8, "message/send", `"referenceTaskIds":["task-of-\u0061lice"]`), "8"},
		{"beside bob's own task continued", send(9, "message/send", `"taskId":"bobs-own","referenceTaskIds":["`+task+`"]`), "9"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			wantTaskRefused(t, s.check(t, raw{Headers: bob, Body: tc.body}), tc.id)
		})
	}
	malformed := []struct{ name, body, id string }{
		{"both spellings", send(10, "message/send", `"referenceTaskIds":["bobs-own"],"reference_task_ids":["`+task+`"]`), "10"},
		{"a case variant", send(11, "message/send", `"referenceTaskIds":["bobs-own"],"ReferenceTaskIDs":["`+task+`"]`), "11"},
		{"twice", send(12, "message/send", `"referenceTaskIds":["bobs-own"],"referenceTaskIds":["`+task+`"]`), "12"},
		{"a string, not an array", send(13, "message/send", `"referenceTaskIds":"`+task+`"`), "13"},
		{"an object in the array", send(14, "message/send", `"referenceTaskIds":[{"id":"`+task+`"}]`), "14"},
		{"a number in the array", send(15, "message/send", `"referenceTaskIds":["bobs-own",7]`), "15"},
		{"too many", send(16, "message/send", `"referenceTaskIds":[`+strings.Repeat(`"bobs-own",`, 64)+`"`+task+`"]`), "16"},
	}
	for _, tc := range malformed {
		t.Run(tc.name, func(t *testing.T) {
			s.check(t, raw{Headers: bob, Body: tc.body}).wantInvalidRequest(t, tc.id)
		})
	}
	t.Run("a task nobody holds is not referenced, nor bound by the reference", func(t *testing.T) {
		v := s.check(t, raw{Headers: bob, Body: send(20, "message/send", `"referenceTaskIds":["task-unbound"]`)})
		v.wantDenied(t, 403)
		if e := v.rpc(t); string(e.ID) != "20" || !strings.Contains(v.Body, "bound to nobody") {
			t.Fatalf("refusal %s, want id 20 and the reason", v.Body)
		}
		if v := s.check(t, raw{Headers: alice, Body: taskOp(21, "GetTask", "id", "task-unbound")}); !v.Allowed {
			t.Fatalf("bob's reference bound the task: %d %s", v.Status, v.Body)
		}
	})
	for _, tc := range []struct {
		name string
		h    map[string]string
		body string
	}{
		{"alice references her task", alice, send(30, "SendMessage", `"referenceTaskIds":["`+task+`","`+task+`"]`)},
		{"bob references his", bob, send(31, "message/send", `"reference_task_ids":["bobs-own"]`)},
		{"an empty list", bob, send(32, "message/send", `"referenceTaskIds":[]`)},
		{"null", bob, send(33, "message/send", `"referenceTaskIds":null`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if v := s.check(t, raw{Headers: tc.h, Body: tc.body}); !v.Allowed {
				t.Fatalf("refused: %d %s", v.Status, v.Body)
			}
		})
	}
}

// TestTasksListedByAnotherUsersContext: an A2A context is bound to its
// user (a message in another user's context is refused), and A2A v1.0's
// ListTasks filters by context (params.contextId), returning that
// context's tasks, their history and, asked, their artifacts. Bob lists
// alice's context in every spelling, on an a2a route and on an auto route
// (where tasks/list without a message reads as MCP's).
func TestTasksListedByAnotherUsersContext(t *testing.T) {
	for _, protocol := range []string{"a2a", "auto"} {
		t.Run(protocol, func(t *testing.T) {
			s := start(t, `routes:
  - name: agent
    default: true
    protocol: `+protocol+`
    issuers: [hs]
    audiences: [`+audience+`]
`, options{})
			alice := map[string]string{"authorization": "Bearer " + token(t, issuerHS, "alice")}
			bob := map[string]string{"authorization": "Bearer " + token(t, issuerHS, "bob")}
			send := func(id int, contextID string) string {
				return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"SendMessage","params":{"message":{"messageId":"m%d","role":"ROLE_USER","parts":[],"contextId":%q}}}`, id, id, contextID)
			}
			if v := s.check(t, raw{Headers: alice, Body: send(1, "ctx-of-alice")}); !v.Allowed {
				t.Fatalf("alice's message: %d %s", v.Status, v.Body)
			}
			wantConflict(t, s.check(t, raw{Headers: bob, Body: send(2, "ctx-of-alice")}))
			list := func(id int, method, params string) string {
				return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params)
			}
			refused := []struct{ name, body, id string }{
				{"ListTasks", list(3, "ListTasks", `{"contextId":"ctx-of-alice","includeArtifacts":true,"historyLength":100}`), "3"},
				{"ListTasks by the proto field name", list(4, "ListTasks", `{"context_id":"ctx-of-alice","include_artifacts":true}`), "4"},
				{"tasks/list", list(5, "tasks/list", `{"contextId":"ctx-of-alice"}`), "5"},
				{"escaped", list(6, "ListTasks", `{"contextId":"ctx-of-\u0061lice"}`), "6"},
				{"a string id", `{"jsonrpc":"2.0","id":"x-7","method":"ListTasks","params":{"contextId":"ctx-of-alice"}}`, `"x-7"`},
			}
			for _, tc := range refused {
				t.Run(tc.name, func(t *testing.T) {
					v := s.check(t, raw{Headers: bob, Body: tc.body})
					v.wantDenied(t, 403)
					if e := v.rpc(t); string(e.ID) != tc.id || !strings.Contains(v.Body, "A2A context belongs to another user") {
						t.Fatalf("refusal %s, want id %s and the reason", v.Body, tc.id)
					}
				})
			}
			for _, tc := range []struct{ name, body string }{
				{"both spellings", list(8, "ListTasks", `{"contextId":"ctx-of-bob","context_id":"ctx-of-alice"}`)},
				{"a case variant", list(9, "ListTasks", `{"contextId":"ctx-of-bob","ContextID":"ctx-of-alice"}`)},
				{"not a string", list(10, "ListTasks", `{"contextId":["ctx-of-alice"]}`)},
			} {
				t.Run(tc.name, func(t *testing.T) {
					v := s.check(t, raw{Headers: bob, Body: tc.body})
					v.wantDenied(t, 400)
					if e := v.rpc(t); e.Error.Code != -32600 {
						t.Fatalf("refusal %s, want -32600", v.Body)
					}
				})
			}
			for _, tc := range []struct {
				name string
				h    map[string]string
				body string
			}{
				{"alice lists her context", alice, list(11, "ListTasks", `{"contextId":"ctx-of-alice"}`)},
				{"bob lists a context nobody holds", bob, list(13, "ListTasks", `{"contextId":"ctx-unbound"}`)},
			} {
				t.Run(tc.name, func(t *testing.T) {
					if v := s.check(t, raw{Headers: tc.h, Body: tc.body}); !v.Allowed {
						t.Fatalf("refused: %d %s", v.Status, v.Body)
					}
				})
			}
			t.Run("a list binds no context", func(t *testing.T) {
				if v := s.check(t, raw{Headers: alice, Body: send(14, "ctx-unbound")}); !v.Allowed {
					t.Fatalf("bob's list took the context: %d %s", v.Status, v.Body)
				}
			})
		})
	}
}

// TestContextsOfUsersWithSessionClaims: a token's session claim names the
// session header, and the A2A context is no source of it then; but the
// agent keys its conversations by the context all the same, whatever the
// token says. Bob, whose token carries a session as alice's does, must be
// kept out of her context: no message in it, no list of its tasks.
func TestContextsOfUsersWithSessionClaims(t *testing.T) {
	for _, protocol := range []string{"a2a", "auto"} {
		t.Run(protocol, func(t *testing.T) {
			s := start(t, strings.Replace(a2aTasksYAML, "protocol: a2a", "protocol: "+protocol, 1), options{})
			alice := map[string]string{"authorization": "Bearer " + tokenWith(t, jwt.MapClaims{"iss": issuerHS, "sub": "alice", "session_id": "s-alice"})}
			bob := map[string]string{"authorization": "Bearer " + tokenWith(t, jwt.MapClaims{"iss": issuerHS, "sub": "bob", "sid": "s-bob"})}
			send := func(id int, contextID string) string {
				return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"SendMessage","params":{"message":{"messageId":"m%d","role":"ROLE_USER","parts":[],"contextId":%q}}}`, id, id, contextID)
			}
			v := s.check(t, raw{Headers: alice, Body: send(1, "ctx-of-alice")})
			if !v.Allowed || v.Upstream["x-session-id"] != "s-alice" {
				t.Fatalf("alice's message: %d %s, session %q", v.Status, v.Body, v.Upstream["x-session-id"])
			}
			wantConflict(t, s.check(t, raw{Headers: bob, Body: send(2, "ctx-of-alice")}))
			wantConflict(t, s.check(t, raw{Headers: bob, Body: `{"jsonrpc":"2.0","id":3,"method":"ListTasks","params":{"contextId":"ctx-of-alice","includeArtifacts":true}}`}))
			if v := s.check(t, raw{Headers: alice, Body: send(4, "ctx-of-alice")}); !v.Allowed {
				t.Fatalf("alice's next message: %d %s", v.Status, v.Body)
			}
		})
	}
}

// TestTasksBodyWithheldFromAnA2ARoute: an a2a route binds tasks when its
// front end sends the body (request_body: sent, the default). A front end
// that does not (plain nginx auth_request, Caddy), in front of a route that
// does not say so, would let every message and task operation through
// unread: bob could poll or cancel alice's task, whose binding nobody
// checks. A2A clients send no Mcp-Method, so nothing else names the call:
// a POST whose body was withheld is refused there, saying how to
// configure the route.
func TestTasksBodyWithheldFromAnA2ARoute(t *testing.T) {
	s, _, bob, _ := aliceHoldsATask(t, a2aTasksYAML)
	withheld := func(kv ...string) map[string]string {
		h := maps.Clone(bob)
		for i := 0; i+1 < len(kv); i += 2 {
			h[kv[i]] = kv[i+1]
		}
		return h
	}
	for _, tc := range []struct {
		name string
		r    raw
	}{
		{"a POST whose length says it has a body", raw{Headers: withheld("content-type", "application/json", "content-length", "93")}},
		{"a chunked POST", raw{Headers: withheld("content-type", "application/json", "transfer-encoding", "chunked")}},
		{"an HTTP/2 POST without a length", raw{Headers: withheld("content-type", "application/json")}},
		{"named by MCP's headers", raw{Headers: withheld("content-type", "application/json", "content-length", "93",
			"mcp-method", "SendMessage", "mcp-protocol-version", "2026-07-28")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := s.check(t, tc.r)
			v.wantDenied(t, 400)
			if !strings.Contains(v.Body, "request_body: none") {
				t.Fatalf("refusal %s does not say how to configure the route", v.Body)
			}
		})
	}
	// An empty POST is no JSON-RPC call (HTTP+JSON's CancelTask is one):
	// refused as another binding, not blamed on the front end.
	t.Run("an empty POST", func(t *testing.T) {
		v := s.check(t, raw{Path: "/v1/tasks/task-of-alice:cancel", Headers: withheld("content-length", "0")})
		v.wantDenied(t, 400)
		if !strings.Contains(v.Body, "JSON-RPC calls only") {
			t.Fatalf("refusal %s does not say why", v.Body)
		}
	})
	t.Run("a route whose front end says it sends no body, task ownership off", func(t *testing.T) {
		s := start(t, "sessions: {task_ownership: false}\n"+strings.Replace(a2aTasksYAML, "protocol: a2a", "protocol: a2a\n    request_body: none", 1), options{})
		if v := s.check(t, raw{Headers: withheld("content-type", "application/json", "content-length", "93")}); !v.Allowed {
			t.Fatalf("refused: %d %s", v.Status, v.Body)
		}
	})
}

// TestTasksListedWithoutAContext: an A2A ListTasks that no context
// filters lists every task the agent keeps for the caller, and an agent
// that leaves users to the service keeps them all in one place (the A2A
// JavaScript SDK's task store, without a user builder of its own, holds
// every caller's under one owner): bob would read alice's tasks, their
// history and, asked, their artifacts. So would an MCP tasks/list made in
// no session. On a route that binds tasks they are refused, unless the
// route declares that its upstream lists only the caller's tasks
// (upstream_scopes_task_lists).
func TestTasksListedWithoutAContext(t *testing.T) {
	list := func(method, params string) string {
		return `{"jsonrpc":"2.0","id":"l-1","method":"` + method + `","params":` + params + `}`
	}
	unfiltered := []struct{ name, body string }{
		{"ListTasks", list("ListTasks", `{"pageSize":50,"includeArtifacts":true}`)},
		{"ListTasks by status", list("ListTasks", `{"status":"TASK_STATE_COMPLETED"}`)},
		{"ListTasks with an empty context", list("ListTasks", `{"contextId":""}`)},
		{"ListTasks without params", `{"jsonrpc":"2.0","id":"l-1","method":"ListTasks"}`},
		{"v0.3 tasks/list", list("tasks/list", `{}`)},
	}
	for _, protocol := range []string{"a2a", "auto"} {
		t.Run(protocol, func(t *testing.T) {
			s, _, bob, _ := aliceHoldsATask(t, strings.Replace(a2aTasksYAML, "protocol: a2a", "protocol: "+protocol, 1))
			for _, tc := range unfiltered {
				t.Run(tc.name, func(t *testing.T) {
					v := s.check(t, raw{Headers: bob, Body: tc.body})
					v.wantDenied(t, 403)
					if e := v.rpc(t); string(e.ID) != `"l-1"` || !strings.Contains(v.Body, "upstream_scopes_task_lists") {
						t.Fatalf("refusal %s, want the id and the reason", v.Body)
					}
				})
			}
			t.Run("filtered by his own context", func(t *testing.T) {
				send := `{"jsonrpc":"2.0","id":2,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[],"contextId":"ctx-of-bob"}}}`
				if v := s.check(t, raw{Headers: bob, Body: send}); !v.Allowed {
					t.Fatalf("bob's message: %d %s", v.Status, v.Body)
				}
				if v := s.check(t, raw{Headers: bob, Body: list("ListTasks", `{"contextId":"ctx-of-bob"}`)}); !v.Allowed {
					t.Fatalf("refused: %d %s", v.Status, v.Body)
				}
			})
		})
	}
	t.Run("an MCP tasks/list in no session", func(t *testing.T) {
		// The TypeScript SDK's task store lists every task to a request
		// without a session (a stateless server's).
		s := start(t, strings.Replace(a2aTasksYAML, "protocol: a2a", "protocol: mcp", 1), options{})
		bob := map[string]string{"authorization": "Bearer " + token(t, issuerHS, "bob")}
		v := s.check(t, raw{Headers: bob, Body: list("tasks/list", `{}`)})
		v.wantDenied(t, 403)
		if e := v.rpc(t); string(e.ID) != `"l-1"` || !strings.Contains(v.Body, "a session of yours") {
			t.Fatalf("refusal %s, want the id and the reason", v.Body)
		}
		maps.Copy(bob, map[string]string{"mcp-session-id": "s-bob"})
		if v := s.check(t, raw{Headers: bob, Body: list("tasks/list", `{}`)}); !v.Allowed {
			t.Fatalf("bob's list in his session: %d %s", v.Status, v.Body)
		}
	})
	t.Run("a context filter where contexts are not bound", func(t *testing.T) {
		s, alice, bob, _ := aliceHoldsATask(t, strings.Replace(a2aTasksYAML, "protocol: a2a", "protocol: a2a\n    mcp: {session_binding: false}", 1))
		send := `{"jsonrpc":"2.0","id":2,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[],"contextId":"ctx-of-alice"}}}`
		if v := s.check(t, raw{Headers: alice, Body: send}); !v.Allowed {
			t.Fatalf("alice's message: %d %s", v.Status, v.Body)
		}
		v := s.check(t, raw{Headers: bob, Body: list("ListTasks", `{"contextId":"ctx-of-alice"}`)})
		v.wantDenied(t, 403)
		if !strings.Contains(v.Body, "upstream_scopes_task_lists") {
			t.Fatalf("refusal %s, want the reason", v.Body)
		}
	})
	for _, tc := range []struct{ name, yaml string }{
		{"an agent that scopes its lists", strings.Replace(a2aTasksYAML, "protocol: a2a", "protocol: a2a\n    upstream_scopes_task_lists: true", 1)},
		{"task ownership off", "sessions: {task_ownership: false}\n" + a2aTasksYAML},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := start(t, tc.yaml, options{})
			bob := map[string]string{"authorization": "Bearer " + token(t, issuerHS, "bob")}
			for _, l := range unfiltered {
				if v := s.check(t, raw{Headers: bob, Body: l.body}); !v.Allowed {
					t.Fatalf("%s refused: %d %s", l.name, v.Status, v.Body)
				}
			}
		})
	}
}

// refStore is an a2a-go task store.
type refStore struct {
	mu    sync.Mutex
	tasks map[a2a.TaskID][]byte
}

func (s *refStore) Save(_ context.Context, task *a2a.Task) error {
	b, err := json.Marshal(task)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tasks[task.ID] = b
	return err
}

func (s *refStore) Get(_ context.Context, id a2a.TaskID) (*a2a.Task, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.tasks[id]
	if !ok {
		return nil, a2a.ErrTaskNotFound
	}
	var task a2a.Task
	return &task, json.Unmarshal(b, &task)
}

// quotingAgent answers a message with its text and the artifacts of the
// tasks it references, which a2a-go loaded (RelatedTasks).
type quotingAgent struct{}

func (quotingAgent) Execute(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	if rc.StoredTask == nil {
		if err := q.Write(ctx, a2a.NewSubmittedTask(rc, rc.Message)); err != nil {
			return err
		}
	}
	var text strings.Builder
	for _, p := range rc.Message.Parts {
		if tp, ok := p.(a2a.TextPart); ok {
			text.WriteString(tp.Text)
		}
	}
	for _, related := range rc.RelatedTasks {
		b, _ := json.Marshal(related.Artifacts)
		fmt.Fprintf(&text, " [quoting %s: %s]", related.ID, b)
	}
	if err := q.Write(ctx, a2a.NewArtifactEvent(rc, a2a.TextPart{Text: text.String()})); err != nil {
		return err
	}
	done := a2a.NewStatusUpdateEvent(rc, a2a.TaskStateCompleted, nil)
	done.Final = true
	return q.Write(ctx, done)
}

func (quotingAgent) Cancel(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	ev := a2a.NewStatusUpdateEvent(rc, a2a.TaskStateCanceled, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

// TestTasksReferencedThroughTheAgent: behind Envoy, an a2a-go agent that
// loads referenced tasks quotes them to whoever references them. Bob's
// reference to alice's task never reaches it. A task the service has not
// bound yet (ext_authz never sees the answer that creates it) cannot be
// referenced by anybody, alice included, until a task operation binds it.
func TestTasksReferencedThroughTheAgent(t *testing.T) {
	store := &refStore{tasks: map[a2a.TaskID][]byte{}}
	agent := a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(quotingAgent{}, a2asrv.WithTaskStore(store),
		a2asrv.WithRequestContextInterceptor(&a2asrv.ReferencedTasksLoader{Store: store})))
	s := start(t, `routes:
  - name: a2a
    default: true
    path_prefix: /a2a
    protocol: a2a
    issuers: [hs]
    audiences: [`+audience+`]
`, options{Upstream: func(http.Handler) http.Handler { return agent }})
	alice, bob := bearer(token(t, issuerHS, "alice")), bearer(token(t, issuerHS, "bob"))
	send := func(h http.Header, id int, text, refs string) (int, string) {
		t.Helper()
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"message/send","params":{"message":{"kind":"message","messageId":"m%d","role":"user","parts":[{"kind":"text","text":%q}]%s}}}`, id, id, text, refs)
		status, _, resp := s.viaEnvoy(t, http.MethodPost, "/a2a", h, body)
		return status, resp
	}
	status, resp := send(alice, 1, "alice-secret-4711", "")
	var created struct {
		Result struct {
			ID string `json:"id"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(resp), &created); status != 200 || err != nil || created.Result.ID == "" {
		t.Fatalf("alice's task: %d %s", status, resp)
	}
	task := created.Result.ID
	refs := `,"referenceTaskIds":["` + task + `"]`
	if status, resp := send(alice, 2, "summarise", refs); status != 403 || !strings.Contains(resp, "bound to nobody") {
		t.Fatalf("a reference to a task nobody operated on yet: %d %s", status, resp)
	}
	if status, _, resp := s.viaEnvoy(t, http.MethodPost, "/a2a", alice, taskOp(3, "tasks/get", "id", task)); status != 200 {
		t.Fatalf("alice polls her task: %d %s", status, resp)
	}
	status, resp = send(bob, 4, "summarise", refs)
	if status != 403 || strings.Contains(resp, "alice-secret-4711") || !strings.Contains(resp, "task belongs to another user") {
		t.Fatalf("bob's reference to alice's task: %d %s", status, resp)
	}
	if status, resp := send(alice, 5, "summarise", refs); status != 200 || !strings.Contains(resp, "alice-secret-4711") {
		t.Fatalf("alice's reference to her task: %d %s", status, resp)
	}
}

// TestTasksBodyWithheldByAnUpgrade: Envoy's ext_authz does not buffer the
// body of a WebSocket upgrade, whatever the method (ext_authz.cc,
// isWebSocketUpgradeRequest), yet forwards it once the check allows. Where
// the connection manager accepts WebSocket upgrades (Istio and Envoy
// Gateway do by default), a POST that merely asks to upgrade reaches the
// upstream with a call the service never saw: here another user's task.
func TestTasksBodyWithheldByAnUpgrade(t *testing.T) {
	var mu sync.Mutex
	var reached []string
	record := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			reached = append(reached, string(b))
			mu.Unlock()
			r.Body = io.NopCloser(bytes.NewReader(b))
			next.ServeHTTP(w, r)
		})
	}
	s := start(t, tasksYAML, options{Upstream: record})
	alice, bob := token(t, issuerHS, "alice"), token(t, issuerHS, "bob")
	const task = "task-of-alice"
	// The MCP server has no tasks: alice's poll is its to refuse, once
	// the service let it through.
	s.viaEnvoy(t, http.MethodPost, "/mcp", bearer(alice), taskOp(1, "tasks/get", "taskId", task))
	if len(reached) != 1 {
		t.Fatalf("alice's poll reached the upstream %d times", len(reached))
	}
	for _, tc := range []struct{ name, connection, upgrade string }{
		{"websocket", "Upgrade", "websocket"},
		{"any case, among other tokens", "keep-alive, upgrade", "WebSocket"},
		{"another protocol", "Upgrade", "h2c-not-really"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := bearer(bob)
			h.Set("Connection", tc.connection)
			h.Set("Upgrade", tc.upgrade)
			status, _, body := s.viaEnvoy(t, http.MethodPost, "/mcp", h, taskOp(2, "tasks/get", "taskId", task))
			if status != http.StatusBadRequest || !strings.Contains(body, "upgrade") {
				t.Fatalf("bob's upgrade: %d %s, want 400 saying why", status, body)
			}
		})
	}
	mu.Lock()
	defer mu.Unlock()
	for _, b := range reached[1:] {
		t.Errorf("reached the upstream unchecked: %s", b)
	}
}

// TestTasksOtherA2ABindings: on an A2A route without rules, task ownership
// still holds for an agent that also serves A2A's HTTP+JSON binding, where
// the task id is in the path: the service cannot see it, so it refuses.
func TestTasksOtherA2ABindings(t *testing.T) {
	s, _, bob, task := aliceHoldsATask(t, a2aTasksYAML)
	for _, tc := range []struct{ method, path string }{
		{"GET", "/v1/tasks/" + task},
		{"GET", "/tasks/" + task},
		{"GET", "/v1/tasks/" + task + ":subscribe"},
		{"DELETE", "/v1/tasks/" + task + "/pushNotificationConfigs/c1"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			s.check(t, raw{Method: tc.method, Path: tc.path, Headers: bob}).wantDenied(t, 400)
		})
	}
}

// TestTasksAcrossRoutes: one server behind two routes (a path with a
// policy of its own) knows a task, and an A2A agent a context, by its id on
// both. A binding made on one route holds on the other: another user
// presenting the id there is refused, not bound anew.
func TestTasksAcrossRoutes(t *testing.T) {
	s := start(t, `routes:
  - name: one
    default: true
    path_prefix: /one
    issuers: [hs, other]
    audiences: [`+audience+`]
  - name: two
    path_prefix: /two
    issuers: [hs, other]
    audiences: [`+audience+`]
`, options{})
	alice := map[string]string{"authorization": "Bearer " + token(t, issuerHS, "alice")}
	bob := map[string]string{"authorization": "Bearer " + token(t, issuerHS, "bob")}
	send := func(id int, contextID string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"message/send","params":{"message":{"role":"user","parts":[],"messageId":"m%d","contextId":%q}}}`, id, id, contextID)
	}
	tests := []struct {
		name            string
		first, other    string // alice's request on /one, bob's on /two
		id, wantRefusal string
	}{
		{"an MCP task", taskOp(1, "tasks/get", "taskId", "task-of-alice"), taskOp(2, "tasks/get", "taskId", "task-of-alice"), "2", "task belongs to another user"},
		{"an A2A task", taskOp(3, "tasks/get", "id", "a2a-task-of-alice"), taskOp(4, "tasks/get", "id", "a2a-task-of-alice"), "4", "task belongs to another user"},
		{"an A2A context", send(5, "context-of-alice"), send(6, "context-of-alice"), "6", "belongs to another user"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if v := s.check(t, raw{Path: "/one", Headers: alice, Body: tc.first}); !v.Allowed {
				t.Fatalf("alice on /one: %d %s", v.Status, v.Body)
			}
			v := s.check(t, raw{Path: "/two", Headers: bob, Body: tc.other})
			v.wantDenied(t, 403)
			if e := v.rpc(t); string(e.ID) != tc.id || !strings.Contains(v.Body, tc.wantRefusal) {
				t.Fatalf("bob on /two: %s, want id %s and %q", v.Body, tc.id, tc.wantRefusal)
			}
			if v := s.check(t, raw{Path: "/two", Headers: alice, Body: tc.other}); !v.Allowed {
				t.Fatalf("alice on /two: %d %s", v.Status, v.Body)
			}
		})
	}
}

// TestTasksFlood: creating tasks never drops another user's binding; a
// full store refuses new tasks with 503 instead.
func TestTasksFlood(t *testing.T) {
	s := start(t, tasksYAML, options{})
	alice := map[string]string{"authorization": "Bearer " + token(t, issuerHS, "alice")}
	const task = "victim-task"
	if v := s.check(t, raw{Headers: alice, Body: taskOp(1, "tasks/get", "taskId", task)}); !v.Allowed {
		t.Fatalf("alice: %d %s", v.Status, v.Body)
	}
	mallory := map[string]string{"authorization": "Bearer " + token(t, issuerHS, "mallory")}
	for i := range 100 {
		if v := s.check(t, raw{Headers: mallory, Body: taskOp(i, "tasks/get", "taskId", fmt.Sprint("m-", i))}); !v.Allowed {
			t.Fatalf("mallory's own task %d: %d (one user's tasks push out only that user's)", i, v.Status)
		}
	}
	refused := 0
	for u := range 10 {
		h := map[string]string{"authorization": "Bearer " + token(t, issuerHS, fmt.Sprint("sybil-", u))}
		for i := range 4 {
			v := s.check(t, raw{Headers: h, Body: taskOp(7, "tasks/get", "taskId", fmt.Sprintf("s-%d-%d", u, i))})
			if !v.Allowed {
				v.wantDenied(t, 503)
				if e := v.rpc(t); string(e.ID) != "7" {
					t.Fatalf("refusal without the id: %s", v.Body)
				}
				refused++
			}
		}
	}
	if refused == 0 {
		t.Fatal("40 new tasks fit a store of 20: nothing was refused")
	}
	wantTaskRefused(t, s.check(t, raw{Headers: mallory, Body: taskOp(8, "tasks/result", "taskId", task)}), "8")
	if v := s.check(t, raw{Headers: alice, Body: taskOp(9, "tasks/result", "taskId", task)}); !v.Allowed {
		t.Fatalf("alice after the flood: %d %s", v.Status, v.Body)
	}
}

// TestSessionMetricsByRoute: the session metrics an operator watches for
// these attacks are exposed by route, and name no user, session or task.
func TestSessionMetricsByRoute(t *testing.T) {
	s := start(t, stateYAML, options{})
	alice, mallory := token(t, issuerHS, "alice"), token(t, issuerHS, "mallory")
	s.check(t, raw{Headers: inSessionRaw(alice, "sess-secret-1"), Body: toolCall(1, "whoami", "")})
	s.check(t, raw{Headers: inSessionRaw(alice, "sess-secret-1"), Body: toolCall(2, "whoami", "")})
	wantConflict(t, s.check(t, raw{Headers: inSessionRaw(mallory, "sess-secret-1"), Body: toolCall(3, "whoami", "")}))
	s.check(t, raw{Headers: map[string]string{"authorization": "Bearer " + alice}, Body: taskOp(4, "tasks/get", "taskId", "task-secret-1")})
	_, body := httpGet(t, "http://"+s.opsAddr+"/metrics")
	for _, want := range []string{
		`extauthz_session_lookups_total{result="hit",route="mcp"} 1`,
		`extauthz_session_lookups_total{result="miss",route="mcp"} 1`,
		`extauthz_session_bindings_created_total{route="mcp"} 1`,
		`extauthz_session_hijack_attempts_total{route="mcp"} 1`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("metrics lack %s", want)
		}
	}
	for _, secret := range []string{"alice", "mallory", "sess-secret", "task-secret"} {
		if strings.Contains(body, secret) {
			t.Errorf("metrics name %q", secret)
		}
	}
}

// wantInvalidRequest fails the test unless v is a 400 carrying a JSON-RPC
// -32600 error with the request's id.
func (v verdict) wantInvalidRequest(t *testing.T, id string) {
	t.Helper()
	v.wantDenied(t, 400)
	if e := v.rpc(t); string(e.ID) != id || e.Error.Code != -32600 {
		t.Fatalf("refusal %s, want -32600 with id %s", v.Body, id)
	}
}

// aliceHoldsATask starts the service on routes (a2aTasksYAML, say) with
// alice's task bound to her (her GetTask names it) and returns it, alice's
// and bob's headers and the task's id.
func aliceHoldsATask(t *testing.T, routes string) (s *suite, alice, bob map[string]string, task string) {
	t.Helper()
	s = start(t, routes, options{})
	alice = map[string]string{"authorization": "Bearer " + token(t, issuerHS, "alice")}
	bob = map[string]string{"authorization": "Bearer " + token(t, issuerHS, "bob")}
	task = "task-of-alice"
	if v := s.check(t, raw{Headers: alice, Body: taskOp(1, "GetTask", "id", task)}); !v.Allowed {
		t.Fatalf("alice polls her task: %d %s", v.Status, v.Body)
	}
	return s, alice, bob, task
}

// tasksAutoYAML binds tasks on a route without rules that guesses the
// protocol, and on an mcp route whose front end says it sends no body.
const tasksAutoYAML = `routes:
  - name: headers-only
    path_prefix: /forward
    protocol: mcp
    request_body: none
    issuers: [hs]
    audiences: [` + audience + `]
  - name: auto
    default: true
    issuers: [hs]
    audiences: [` + audience + `]
`

// TestTasksCutBody: on a route that binds tasks, bob pads a task
// operation on alice's task past the proxy's body limit: Envoy with
// allow_partial_message (and the forward-auth front end past its own
// limit) sends only what fits, so the service would see no call and bind
// nothing, while the agent reads the whole body. Every cut body is refused,
// whatever its Content-Type and whatever Mcp-Method claims. (A body the
// proxy withholds altogether is the proxy's configuration, not the
// client's choice: request_body says which, see docs/forward-auth.md.)
func TestTasksCutBody(t *testing.T) {
	const task = "task-of-alice"
	alice := map[string]string{"authorization": "Bearer " + token(t, issuerHS, "alice")}
	bobToken := token(t, issuerHS, "bob")
	bob := func(kv ...string) map[string]string {
		h := map[string]string{"authorization": "Bearer " + bobToken}
		for i := 0; i+1 < len(kv); i += 2 {
			h[kv[i]] = kv[i+1]
		}
		return h
	}
	cut := taskOp(2, "tasks/get", "taskId", task)
	cut = cut[:len(cut)-2] + `,"pad":"` + strings.Repeat("x", 64) // the rest did not fit
	for _, routes := range []struct{ name, yaml string }{{"mcp", tasksYAML}, {"a2a", a2aTasksYAML}, {"auto", tasksAutoYAML}} {
		t.Run(routes.name, func(t *testing.T) {
			s := start(t, routes.yaml, options{})
			if v := s.check(t, raw{Headers: alice, Body: taskOp(1, "tasks/get", "taskId", task)}); !v.Allowed {
				t.Fatalf("alice polls her task: %d %s", v.Status, v.Body)
			}
			for _, tc := range []struct {
				name string
				r    raw
			}{
				{"json", raw{Headers: bob("content-type", "application/json"), Body: cut, Partial: true}},
				{"text/plain", raw{Headers: bob("content-type", "text/plain"), Body: cut, Partial: true}},
				{"no content type", raw{Headers: bob(), Body: cut, Partial: true}},
				{"Mcp-Method claims another call", raw{Headers: bob("content-type", "application/json",
					"mcp-method", "tools/list", "mcp-protocol-version", "2026-07-28"), Body: cut, Partial: true}},
			} {
				t.Run(tc.name, func(t *testing.T) {
					v := s.check(t, tc.r)
					v.wantInvalidRequest(t, "null")
					if !strings.Contains(v.Body, "max_request_bytes") {
						t.Fatalf("the refusal does not name the remedy: %s", v.Body)
					}
				})
			}
			for _, tc := range []struct {
				name string
				r    raw
			}{
				{"alice's whole body", raw{Headers: alice, Body: taskOp(3, "tasks/get", "taskId", task)}},
				{"bob's own task, whole", raw{Headers: bob(), Body: taskOp(4, "tasks/get", "taskId", "task-of-bob")}},
			} {
				t.Run(tc.name, func(t *testing.T) {
					if v := s.check(t, tc.r); !v.Allowed {
						t.Fatalf("refused: %d %s", v.Status, v.Body)
					}
				})
			}
		})
	}
	t.Run("task ownership off", func(t *testing.T) {
		s := start(t, "sessions: {task_ownership: false}\n"+a2aTasksYAML, options{})
		if v := s.check(t, raw{Headers: bob("content-type", "application/json"), Body: cut, Partial: true}); !v.Allowed {
			t.Fatalf("a cut body on a route that binds nothing: %d %s", v.Status, v.Body)
		}
	})
}

// modernTaskOp is an MCP 2026-07-28 task operation: the protocol version
// claimed in _meta, as the TypeScript SDK's v2 client sends it.
func modernTaskOp(id int, method, task string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{"taskId":%q,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, id, method, task)
}

// modernHeaders are the headers a 2026-07-28 client sends with a task
// operation: Mcp-Name mirrors params.taskId for tasks/get, tasks/update
// and tasks/cancel (the TypeScript SDK's v2 client and server, after
// SEP-2663), so that gateways can route a task's requests by it.
func modernHeaders(auth map[string]string, method, name string) map[string]string {
	h := map[string]string{"content-type": "application/json", "mcp-protocol-version": "2026-07-28", "mcp-method": method}
	if name != "" {
		h["mcp-name"] = name
	}
	maps.Copy(h, auth)
	return h
}

// TestModernTaskOperations: a 2026-07-28 client names the task of
// tasks/get, tasks/update and tasks/cancel in Mcp-Name as well as in the
// body. The header is a second spelling of the task, checked against the
// body as the SDK's server checks it (-32020 when they disagree, or when
// it is missing); the task it names is bound like any other. tasks/update
// is a task operation too.
func TestModernTaskOperations(t *testing.T) {
	s, alice, bob, task := aliceHoldsATask(t, tasksYAML)
	for _, tc := range []struct {
		name   string
		auth   map[string]string
		method string
		header string // Mcp-Name; "" sends none
		body   string
		status int // 0: allowed
		code   int // the JSON-RPC error's, where refused with 400
	}{
		{"the owner polls her task", alice, "tasks/get", task, modernTaskOp(2, "tasks/get", task), 0, 0},
		{"the owner cancels it", alice, "tasks/cancel", task, modernTaskOp(3, "tasks/cancel", task), 0, 0},
		{"the owner updates it", alice, "tasks/update", task, modernTaskOp(4, "tasks/update", task), 0, 0},
		{"bob polls it", bob, "tasks/get", task, modernTaskOp(5, "tasks/get", task), 403, 0},
		{"bob updates it", bob, "tasks/update", task, modernTaskOp(6, "tasks/update", task), 403, 0},
		{"bob updates it, in the old version's shape", bob, "", "", taskOp(7, "tasks/update", "taskId", task), 403, 0},
		{"bob names his own task in the header", bob, "tasks/get", "task-of-bob", modernTaskOp(8, "tasks/get", task), 400, -32020},
		{"the header Base64-encoded, of another task", bob, "tasks/cancel", "=?base64?dGFzay1vZi1ib2I=?=", modernTaskOp(9, "tasks/cancel", task), 400, -32020},
		{"no Mcp-Name", alice, "tasks/get", "", modernTaskOp(10, "tasks/get", task), 400, -32020},
		{"bob's own task", bob, "tasks/get", "task-of-bob", modernTaskOp(11, "tasks/get", "task-of-bob"), 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := maps.Clone(tc.auth)
			if tc.method != "" {
				h = modernHeaders(tc.auth, tc.method, tc.header)
			}
			v := s.check(t, raw{Headers: h, Body: tc.body})
			if !v.wantStatus(t, tc.status) {
				return
			}
			e := v.rpc(t)
			if tc.status == 403 && !strings.Contains(v.Body, "task belongs to another user") {
				t.Fatalf("the refusal does not say why: %s", v.Body)
			}
			if tc.code != 0 && e.Error.Code != tc.code {
				t.Fatalf("JSON-RPC error %d, want %d: %s", e.Error.Code, tc.code, v.Body)
			}
		})
	}
}

// relatedTo is an MCP request of method whose _meta says it belongs to task
// (io.modelcontextprotocol/related-task, MCP 2025-11-25).
func relatedTo(id int, method, params, task string) string {
	meta := `"_meta":{"io.modelcontextprotocol/related-task":{"taskId":` + task + `}}`
	if params != "" {
		meta = params + "," + meta
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{%s}}`, id, method, meta)
}

// TestRelatedTaskMetadata: any MCP request may say it belongs to a task
// (_meta io.modelcontextprotocol/related-task). The TypeScript SDK's
// server hands that task to the handler, queues the answer to the task's
// messages (which its creator reads with tasks/result), and sets the
// task's status when the handler asks the client anything; without a
// session it looks the task up nowhere. Bob relates his calls to alice's
// task: that names her task as surely as tasks/get does, and must be the
// caller's. A task nobody holds is refused too, as a message's
// reference is: relating a call must not be a way to claim a task.
// Notifications, which nothing answers, are left alone.
func TestRelatedTaskMetadata(t *testing.T) {
	s, alice, bob, task := aliceHoldsATask(t, tasksYAML)
	if v := s.check(t, raw{Headers: bob, Body: taskOp(2, "tasks/get", "taskId", "task-of-bob")}); !v.Allowed {
		t.Fatalf("bob polls his task: %d %s", v.Status, v.Body)
	}
	for _, tc := range []struct {
		name   string
		auth   map[string]string
		body   string
		status int    // 0: allowed
		reason string // in the refusal
	}{
		{"a tool call in alice's task", bob, relatedTo(3, "tools/call", `"name":"echo","arguments":{}`, `"`+task+`"`), 403, "task belongs to another user"},
		{"a method the server does not know", bob, relatedTo(4, "no/such", "", `"`+task+`"`), 403, "task belongs to another user"},
		{"a ping", bob, relatedTo(5, "ping", "", `"`+task+`"`), 403, "task belongs to another user"},
		// Answered by nothing, and read by no server: a client hosting a
		// task of its own (2025-11-25) reports on it so.
		{"a notification", bob, `{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"taskId":"client-task","status":"working","_meta":{"io.modelcontextprotocol/related-task":{"taskId":"client-task"}}}}`, 0, ""},
		{"a task nobody holds", bob, relatedTo(6, "tools/call", `"name":"echo"`, `"task-of-nobody"`), 403, "bound to nobody"},
		{"the id not a string", bob, relatedTo(7, "tools/call", `"name":"echo"`, `7`), 400, ""},
		{"the id in another case too", bob, relatedTo(8, "tools/call", `"name":"echo"`, `"task-of-bob","TaskId":"`+task+`"`), 400, ""},
		{"bob's own task", bob, relatedTo(9, "tools/call", `"name":"echo"`, `"task-of-bob"`), 0, ""},
		{"alice's own task", alice, relatedTo(10, "tools/call", `"name":"echo"`, `"`+task+`"`), 0, ""},
		{"an empty id names none", bob, relatedTo(11, "tools/call", `"name":"echo"`, `""`), 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := s.check(t, raw{Headers: tc.auth, Body: tc.body})
			if v.wantStatus(t, tc.status) && !strings.Contains(v.Body, tc.reason) {
				t.Fatalf("the refusal does not say why (%s): %s", tc.reason, v.Body)
			}
		})
	}
	t.Run("task ownership off", func(t *testing.T) {
		s := start(t, strings.Replace(tasksYAML, "sessions: {", "sessions: {task_ownership: false, ", 1), options{})
		if v := s.check(t, raw{Headers: bob, Body: relatedTo(12, "tools/call", `"name":"echo"`, `"`+task+`"`)}); !v.Allowed {
			t.Fatalf("refused where tasks are not bound: %d %s", v.Status, v.Body)
		}
	})
}

// listen is an MCP 2026-07-28 subscriptions/listen request subscribing to
// notifications (a JSON object's members).
func listen(id int, notifications string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"subscriptions/listen","params":{"notifications":{%s},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, id, notifications)
}

// TestSubscriptionsListen: MCP 2026-07-28's subscriptions/listen replaces
// resources/subscribe (params.notifications.resourceSubscriptions, which
// the go-sdk's server honours), and the tasks extension subscribes to
// tasks there (taskIds: each notification carries the task whole, its
// result included). A subscription to a resource must pass what
// resources/subscribe of it needs, in canonical form; one to a task must
// be to the caller's, as a reference is.
func TestSubscriptionsListen(t *testing.T) {
	yaml := strings.Replace(tasksYAML, "    audiences: [", "    rules:\n      - {methods: [\"resources/subscribe\"], names: [\"file:///etc/*\"], action: deny}\n    audiences: [", 1)
	s, alice, bob, task := aliceHoldsATask(t, yaml)
	h := func(auth map[string]string) map[string]string {
		return modernHeaders(auth, "subscriptions/listen", "")
	}
	for _, tc := range []struct {
		name          string
		auth          map[string]string
		notifications string
		status        int    // 0: allowed
		reason        string // in the refusal
	}{
		{"list changes", bob, `"toolsListChanged":true`, 0, ""},
		{"a resource the rules allow", bob, `"resourceSubscriptions":["file:///tmp/a"]`, 0, ""},
		{"a resource the rules refuse", bob, `"resourceSubscriptions":["file:///tmp/a","file:///etc/shadow"]`, 403, "resources/subscribe of file:///etc/shadow"},
		{"the resource spelled otherwise", bob, `"resourceSubscriptions":["FILE:///%65tc/shadow"]`, 403, "resources/subscribe of file:///etc/shadow"},
		{"a resource with no canonical form", bob, `"resourceSubscriptions":["file:///tmp/../etc/shadow"]`, 400, ""},
		{"the list in another case too", bob, `"resourceSubscriptions":[],"ResourceSubscriptions":["file:///etc/shadow"]`, 400, ""},
		{"alice's task", bob, `"taskIds":["` + task + `"]`, 403, "task belongs to another user"},
		{"a task nobody holds", bob, `"taskIds":["task-of-nobody"]`, 403, "bound to nobody"},
		{"her own task", alice, `"taskIds":["` + task + `"]`, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := s.check(t, raw{Headers: h(tc.auth), Body: listen(3, tc.notifications)})
			if !v.wantStatus(t, tc.status) {
				return
			}
			if e := v.rpc(t); string(e.ID) != "3" || !strings.Contains(v.Body, tc.reason) {
				t.Fatalf("refusal %s, want the id and the reason (%s)", v.Body, tc.reason)
			}
		})
	}
	t.Run("named by its headers alone where the body was to be sent", func(t *testing.T) {
		// On a route without rules: one with resource rules refuses it
		// before, as it may subscribe to any resource.
		s := start(t, tasksYAML, options{})
		headers := h(bob)
		headers["content-length"] = "120"
		v := s.check(t, raw{Headers: headers})
		if v.wantStatus(t, 400) && !strings.Contains(v.Body, "needs its body") {
			t.Fatalf("the refusal does not say why: %s", v.Body)
		}
	})
}
