package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

// a2aAutoConfig is one route for the whole host that guesses each
// request's protocol, with the body sent: an agent behind it may serve
// A2A's HTTP+JSON binding beside its JSON-RPC one.
const a2aAutoConfig = `
issuers:
  - {name: e2e, algorithms: [HS256], secret: %s}
routes:
  - name: agent
    default: true
    protocol: auto
    issuers: [e2e]
`

// TestA2AJavaScriptSDKOverHTTPJSON puts Envoy's ext_authz (envoytest's
// proxy, with the body) in front of the A2A JavaScript SDK's agent
// serving both bindings, on an auto route. Alice creates a task with the
// SDK's own client over JSON-RPC, and polls it; bob then asks for it over HTTP+JSON,
// where the SDK's router (Express) reads paths regardless of case and of
// a trailing slash, and lists every caller's tasks to an unfiltered
// ListTasks. Asked directly, the agent hands bob alice's task both ways:
// through the service, neither reaches it.
func TestA2AJavaScriptSDKOverHTTPJSON(t *testing.T) {
	agent := startJSAgent(t)
	addrs := startService(t, fmt.Sprintf(a2aAutoConfig, secret), "")
	p := envoyWithBody(t, addrs.GRPC, agent.addr)
	agent.publish(t, p.URL)
	alice := token(t, jwt.MapClaims{"session_id": "sess-js", "scope": "agent:write"})
	bob := token(t, jwt.MapClaims{"sub": "bob", "session_id": "sess-bob", "scope": "agent:write"})

	created := agent.run(t, p.URL, alice, map[string]any{"scenario": "task"})
	if !created.OK || created.TaskID == "" {
		t.Fatalf("no task: %+v", created)
	}
	task := created.TaskID
	// Behind ext_authz alone a task is bound by the first operation naming
	// it (the answer that creates it is not seen): alice's GetTask.
	if got := agent.run(t, p.URL, alice, map[string]any{"scenario": "get", "taskId": task}); !got.OK || got.TaskID != task {
		t.Fatalf("alice's GetTask: %+v", got)
	}
	// The agent's own answer, without the service: the attack is real.
	direct := "http://" + agent.addr
	if status, body := restGet(t, direct, "/rest/TASKS/"+task, ""); status != http.StatusOK || !containsTask(body, task) {
		t.Fatalf("the agent did not answer GetTask in capitals with the task: %d %s", status, body)
	}
	if status, body := restGet(t, direct, "/rest/tasks", ""); status != http.StatusOK || !containsTask(body, task) {
		t.Fatalf("the agent's unfiltered ListTasks did not list alice's task: %d %s", status, body)
	}

	for _, tc := range []struct{ name, path, reason string }{
		{"GetTask", "/rest/tasks/" + task, "task belongs to another user"},
		{"GetTask in capitals", "/rest/TASKS/" + task, "task belongs to another user"},
		{"GetTask, capitalised, with a trailing slash", "/rest/Tasks/" + task + "/", "task belongs to another user"},
		{"ListTasks, unfiltered", "/rest/tasks", "upstream_scopes_task_lists"},
		{"ListTasks in capitals with a trailing slash", "/rest/TASKS/", "upstream_scopes_task_lists"},
		{"ListTasks by a spelling the agent ignores", "/rest/tasks?context_id=ctx-bob", "upstream_scopes_task_lists"},
		{"ListTasks of alice's context, a trailing slash", "/rest/tasks/?contextId=ctx-js", "session"},
	} {
		t.Run("bob's "+tc.name, func(t *testing.T) {
			status, body := restGet(t, p.URL, tc.path, bob)
			if status != http.StatusForbidden || containsTask(body, task) || !strings.Contains(body, tc.reason) {
				t.Fatalf("want 403 (%s), got %d %s", tc.reason, status, body)
			}
		})
	}
	t.Run("alice's own, over HTTP+JSON", func(t *testing.T) {
		for _, path := range []string{"/rest/Tasks/" + task, "/rest/tasks?contextId=ctx-js"} {
			if status, body := restGet(t, p.URL, path, alice); status != http.StatusOK || !containsTask(body, task) {
				t.Fatalf("%s: %d %s", path, status, body)
			}
		}
	})
}

// restGet GETs path from base as an A2A v1.0 client does (the SDK's
// agent takes a request without A2A-Version for v0.3's, which it does not
// serve), with token as a bearer token if any, and returns the status and
// body.
func restGet(t *testing.T, base, path, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("A2A-Version", "1.0")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, string(body)
}

// containsTask reports whether an HTTP+JSON answer is task id or lists it.
func containsTask(body, id string) bool {
	var one struct {
		ID    string `json:"id"`
		Tasks []struct {
			ID string `json:"id"`
		} `json:"tasks"`
	}
	if json.Unmarshal([]byte(body), &one) != nil {
		return false
	}
	return one.ID == id || slices.ContainsFunc(one.Tasks, func(t struct {
		ID string `json:"id"`
	}) bool {
		return t.ID == id
	})
}
