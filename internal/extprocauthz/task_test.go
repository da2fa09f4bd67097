package extprocauthz

import "testing"

// TestTaskID: the task an answer created, in each protocol's shape; no id
// from a document clients could read differently.
func TestTaskID(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{name: "mcp task", body: `{"jsonrpc":"2.0","id":1,"result":{"task":{"taskId":"t1","status":"working"}}}`, want: "t1"},
		{name: "a2a 0.3 task", body: `{"jsonrpc":"2.0","id":1,"result":{"kind":"task","id":"t2","status":{"state":"submitted"}}}`, want: "t2"},
		{name: "a2a 1.0 task", body: `{"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t3"}}}`, want: "t3"},
		{name: "escaped id", body: `{"result":{"task":{"taskId":"t\u00e9\/1"}}}`, want: "t\u00e9/1"},
		{name: "members in any order", body: `{"result":{"id":"t4","status":{},"kind":"task"},"id":9,"jsonrpc":"2.0"}`, want: "t4"},
		{name: "taskId before id", body: `{"result":{"task":{"id":"b","taskId":"a"}}}`, want: "a"},
		{name: "empty taskId falls back to id", body: `{"result":{"task":{"taskId":"","id":"b"}}}`, want: "b"},
		{name: "null is absent", body: `{"result":{"task":{"taskId":null,"id":"b"}}}`, want: "b"},
		{name: "mcp 2026-07-28 task", body: `{"jsonrpc":"2.0","id":1,"result":{"resultType":"task","taskId":"t5","status":"working","ttlMs":60000}}`, want: "t5"},
		{name: "mcp 2026-07-28, members in any order", body: `{"result":{"taskId":"t6","status":"working","resultType":"task"}}`, want: "t6"},
		{name: "mcp 2026-07-28, a completed result is no creation", body: `{"result":{"resultType":"complete","taskId":"t7","status":"completed"}}`},
		{name: "mcp 2026-07-28, no resultType", body: `{"result":{"taskId":"t8","status":"working"}}`},
		{name: "mcp 2026-07-28, an empty taskId", body: `{"result":{"resultType":"task","taskId":""}}`},
		{name: "both MCP shapes, one task", body: `{"result":{"resultType":"task","taskId":"t9","task":{"taskId":"t9"}}}`, want: "t9"},
		{name: "both MCP shapes, two tasks", body: `{"result":{"resultType":"task","taskId":"a","task":{"taskId":"b"}}}`},
		{name: "case-folded resultType", body: `{"result":{"resultType":"task","ResultType":"x","taskId":"a"}}`},
		{name: "resultType not a string", body: `{"result":{"resultType":1,"taskId":"a"}}`},
		{name: "a message, not a task", body: `{"result":{"kind":"message","id":"m1"}}`},
		{name: "a tool result", body: `{"result":{"content":[{"type":"text","text":"x"}]}}`},
		{name: "an error", body: `{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m","data":{"task":{"taskId":"t"}}}}`},
		{name: "a task outside result", body: `{"params":{"task":{"taskId":"t"}},"result":{}}`},
		{name: "a task deeper in result", body: `{"result":{"x":{"task":{"taskId":"t"}}}}`},

		{name: "duplicate taskId", body: `{"result":{"task":{"taskId":"a","taskId":"b"}}}`},
		{name: "duplicate result", body: `{"result":{"task":{"taskId":"a"}},"result":{"task":{"taskId":"b"}}}`},
		{name: "duplicate deep inside", body: `{"result":{"task":{"taskId":"a"},"meta":{"k":1,"k":2}}}`},
		{name: "case-folded taskId", body: `{"result":{"task":{"taskId":"a","TaskId":"b"}}}`},
		{name: "case-folded task", body: `{"result":{"Task":{"taskId":"a"}}}`},
		{name: "case-folded result", body: `{"Result":{"task":{"taskId":"a"}}}`},
		{name: "kelvin sign in kind", body: `{"result":{"\u212aind":"task","id":"a"}}`},
		{name: "taskId not a string", body: `{"result":{"task":{"taskId":1}}}`},
		{name: "id not a string", body: `{"result":{"kind":"task","id":1}}`},
		{name: "task not an object", body: `{"result":{"task":"t","kind":"task","id":"a"}}`},
		{name: "lone surrogate", body: `{"result":{"task":{"taskId":"\ud800"}}}`},
		{name: "not json", body: `{"result":{"task":{"taskId":"a"}}`},
		{name: "trailing data", body: `{"result":{"task":{"taskId":"a"}}} x`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, _ := answerIDs([]byte(tt.body)); got != tt.want {
				t.Errorf("task id = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestAnswerContextID: the A2A context an answer assigned, as a Task or a
// Message, in v0.3's shape and v1.0's; none from a document clients could
// read differently, or that names two contexts.
func TestAnswerContextID(t *testing.T) {
	tests := []struct {
		name, body, task, context string
	}{
		{name: "v0.3 task", body: `{"jsonrpc":"2.0","id":1,"result":{"kind":"task","id":"t1","contextId":"c1"}}`, task: "t1", context: "c1"},
		{name: "v0.3 message", body: `{"jsonrpc":"2.0","id":1,"result":{"kind":"message","messageId":"m1","contextId":"c1"}}`, context: "c1"},
		{name: "v1.0 task", body: `{"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t1","contextId":"c1"}}}`, task: "t1", context: "c1"},
		{name: "v1.0 message", body: `{"jsonrpc":"2.0","id":1,"result":{"message":{"messageId":"m1","contextId":"c1"}}}`, context: "c1"},
		{name: "v1.0 proto field name", body: `{"result":{"task":{"id":"t1","context_id":"c1"}}}`, task: "t1", context: "c1"},
		{name: "members in any order", body: `{"result":{"contextId":"c1","id":"t1","kind":"task"},"id":1}`, task: "t1", context: "c1"},
		{name: "escaped id", body: `{"result":{"message":{"contextId":"c\/1"}}}`, context: "c/1"},
		{name: "null is absent", body: `{"result":{"task":{"id":"t1","contextId":null}}}`, task: "t1"},
		{name: "no context", body: `{"result":{"kind":"task","id":"t1"}}`, task: "t1"},
		{name: "the same context twice over", body: `{"result":{"contextId":"c1","task":{"contextId":"c1"}}}`, context: "c1"},
		{name: "two contexts", body: `{"result":{"task":{"id":"t1","contextId":"c1"},"message":{"contextId":"c2"}}}`, task: "t1"},
		{name: "a context deeper in result", body: `{"result":{"x":{"message":{"contextId":"c1"}}}}`},
		{name: "a context outside result", body: `{"contextId":"c1","result":{"kind":"task","id":"t1"}}`, task: "t1"},
		{name: "an error", body: `{"error":{"code":1,"message":"m","data":{"contextId":"c1"}}}`},
		{name: "message not an object", body: `{"result":{"message":"c1","contextId":"c1"}}`, context: "c1"},

		{name: "duplicate contextId", body: `{"result":{"kind":"task","id":"t1","contextId":"c1","contextId":"c2"}}`},
		{name: "case-folded contextId", body: `{"result":{"kind":"task","id":"t1","contextId":"c1","ContextId":"c2"}}`},
		{name: "case-folded context_id", body: `{"result":{"task":{"id":"t1","Context_Id":"c1"}}}`},
		{name: "contextId and context_id", body: `{"result":{"task":{"id":"t1","contextId":"c1","context_id":"c1"}}}`},
		{name: "case-folded message", body: `{"result":{"Message":{"contextId":"c1"}}}`},
		{name: "contextId not a string", body: `{"result":{"kind":"task","id":"t1","contextId":1}}`},
		{name: "lone surrogate", body: `{"result":{"message":{"contextId":"\ud800"}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			task, context := answerIDs([]byte(tt.body))
			if task != tt.task || context != tt.context {
				t.Errorf("answerIDs = %q, %q, want %q, %q", task, context, tt.task, tt.context)
			}
		})
	}
}

func TestIsResponse(t *testing.T) {
	// One reader for every case, in the map's random order, as a stream's
	// events are read: nothing of one message may carry to the next.
	r := newResponseReader()
	for body, want := range map[string]bool{
		`{"jsonrpc":"2.0","id":1,"result":{}}`:                               true,
		`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m"}}`:          true,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{}}`:    false,
		`{"jsonrpc":"2.0","id":2,"method":"elicitation/create","params":{}}`: false,
		`{"jsonrpc":"2.0","id":1,"result":{},"method":"x"}`:                  false,
		`{"jsonrpc":"2.0","id":1,"result":{},"result":{}}`:                   false,
		`not json`: false,
	} {
		if got := r.isResponse([]byte(body)); got != want {
			t.Errorf("isResponse(%s) = %v, want %v", body, got, want)
		}
	}
}
