package extprocauthz

import "github.com/extauthz/extauthz/internal/jsonrpc"

// answerIDs reads what an answer to a call created, in one walk.
//
// task is the id of the task a JSON-RPC answer created: MCP's
// CreateTaskResult (result.task.taskId, MCP 2025-11-25; result.resultType
// "task" with result.taskId in the 2026-07-28 tasks extension, SEP-2663),
// A2A 0.3's Task result (result.kind "task", result.id) or A2A 1.0's
// (result.task.id). An answer in both MCP shapes naming two tasks names
// none.
//
// context is the A2A context the answer puts the caller's message in,
// which the agent assigns when the message named none: the contextId of
// A2A 0.3's Task or Message result (result.contextId) or of A2A 1.0's
// (result.task or result.message; context_id is its proto field name,
// which ProtoJSON readers take too). An answer naming two contexts names
// none.
//
// Both are "" when the answer created none or is not one JSON-RPC result.
//
// The answer is read by jsonrpc.WalkStrict, as the request was: a
// document clients could read differently gives no id (a repeated key,
// one equal to a member read here only under case folding, contextId
// beside context_id, an escaped lone surrogate in an id, a member that is
// not a string). The task and the context are then bound on first sight,
// as without the response path.
func answerIDs(body []byte) (task, context string) {
	w := taskWalk{body: body}
	if jsonrpc.WalkStrict(body, 3, w.visit) != nil || w.ambiguous || !w.result.ok {
		return "", ""
	}
	r := &w.result
	// As encoding/json decoded these members into strings: absent or
	// null is "", any other type refuses the whole answer.
	var vals [12]string
	for i, s := range []span{r.taskTaskID, r.taskID, r.kind, r.id, r.resultType, r.resultTaskID,
		r.context.camel, r.context.snake, r.taskContext.camel, r.taskContext.snake, r.messageContext.camel, r.messageContext.snake} {
		if !s.present() {
			continue
		}
		v, ok := jsonrpc.StringValue(s.raw(body))
		if !ok {
			return "", ""
		}
		vals[i] = v
	}
	if r.task.present() && body[r.task.start] != '{' {
		return "", ""
	}
	return createdTask(vals[:6]), assignedContext(vals[6:])
}

// createdTask picks the task of answerIDs from the members read, in
// answerIDs' order.
func createdTask(vals []string) string {
	switch taskTaskID, taskID, kind, id, resultType, resultTaskID := vals[0], vals[1], vals[2], vals[3], vals[4], vals[5]; {
	case resultType == "task" && resultTaskID != "":
		if taskTaskID != "" && taskTaskID != resultTaskID {
			return ""
		}
		return resultTaskID
	case taskTaskID != "":
		return taskTaskID
	case taskID != "":
		return taskID
	case kind == "task":
		return id
	}
	return ""
}

// assignedContext is the one context the members read name, "" when they
// name none or two. Where one is read under both names, visit has already
// refused the answer.
func assignedContext(vals []string) string {
	context := ""
	for _, v := range vals {
		switch {
		case v == "":
		case context == "":
			context = v
		case v != context:
			return ""
		}
	}
	return context
}

// responseReader tells a JSON-RPC response (result or error) from a
// request or notification: the message of an event stream that answers
// the call. It is read once per event until the answer, so its visit is
// bound once (a closure over locals would be three allocations an event).
type responseReader struct {
	response, method bool
	visit            jsonrpc.Visit
}

func newResponseReader() *responseReader {
	r := &responseReader{}
	r.visit = r.see
	return r
}

func (r *responseReader) see(_ int, key []byte, _, _ int) {
	switch string(key) {
	case "result", "error":
		r.response = true
	case "method":
		r.method = true
	}
}

// isResponse reports whether msg is a response, read as strictly as the
// request was (jsonrpc.WalkStrict).
func (r *responseReader) isResponse(msg []byte) bool {
	r.response, r.method = false, false
	err := jsonrpc.WalkStrict(msg, 1, r.visit)
	return err == nil && r.response && !r.method
}

// span is where a member's value lies in the body; a JSON null counts as
// absent, as encoding/json reads it into a string.
type span struct{ start, end int }

func (s span) present() bool { return s.end > s.start }

func (s span) raw(body []byte) []byte { return body[s.start:s.end] }

// contextMembers are an object's context id, under either of its names.
type contextMembers struct{ camel, snake span }

// taskMembers are the members answerIDs reads of one object at depth 2 (a
// candidate result) and of its task and message members.
type taskMembers struct {
	kind, id, task     span
	taskTaskID, taskID span
	// context is the result's own (A2A 0.3), taskContext and
	// messageContext its task's and message's (A2A 1.0); in pending3,
	// context is the depth-3 object's.
	context, taskContext, messageContext contextMembers
	// resultType and resultTaskID are the 2026-07-28 CreateTaskResult's,
	// members of the result itself.
	resultType, resultTaskID span
	ambiguous                bool
	ok                       bool
}

// taskWalk collects, during jsonrpc.WalkStrict, what answerIDs reads. A value
// is visited after what it holds, so the members of each depth are kept
// pending until the member holding them is visited.
type taskWalk struct {
	body      []byte
	pending2  taskMembers // members of the depth-1 value being read
	pending3  taskMembers // members of the depth-2 value being read
	result    taskMembers
	ambiguous bool
}

func (w *taskWalk) visit(depth int, key []byte, start, end int) {
	v := span{start, end}
	if w.body[start] == 'n' { // null
		v = span{}
	}
	switch depth {
	case 1:
		switch is, ambiguous := jsonrpc.KeyIs(key, "result"); {
		case ambiguous:
			w.ambiguous = true
		case is:
			w.result = w.pending2
			w.result.ok = true
			w.ambiguous = w.ambiguous || w.result.ambiguous
		}
		w.pending2 = taskMembers{}
	case 2:
		p := &w.pending2
		switch {
		case w.member(key, "kind", v, &p.kind, &p.ambiguous):
		case w.member(key, "id", v, &p.id, &p.ambiguous):
		case w.member(key, "resultType", v, &p.resultType, &p.ambiguous):
		case w.member(key, "taskId", v, &p.resultTaskID, &p.ambiguous):
		case w.contextMember(key, v, &p.context, &p.ambiguous):
		case w.member(key, "task", v, &p.task, &p.ambiguous):
			p.taskTaskID, p.taskID, p.taskContext = w.pending3.taskTaskID, w.pending3.taskID, w.pending3.context
			p.ambiguous = p.ambiguous || w.pending3.ambiguous
		case w.member(key, "message", v, new(span), &p.ambiguous):
			// Only the message's context is read, not the message.
			p.messageContext = w.pending3.context
			p.ambiguous = p.ambiguous || w.pending3.ambiguous
		}
		w.pending3 = taskMembers{}
	case 3:
		p := &w.pending3
		switch {
		case w.member(key, "taskId", v, &p.taskTaskID, &p.ambiguous):
		case w.member(key, "id", v, &p.taskID, &p.ambiguous):
		default:
			w.contextMember(key, v, &p.context, &p.ambiguous)
		}
	}
}

// contextMember is member for a context id, under either of its names:
// ProtoJSON readers take both, so an object naming both is ambiguous.
func (w *taskWalk) contextMember(key []byte, v span, dst *contextMembers, ambiguous *bool) bool {
	if w.member(key, "contextId", v, &dst.camel, ambiguous) || w.member(key, "context_id", v, &dst.snake, ambiguous) {
		if dst.camel.present() && dst.snake.present() {
			*ambiguous = true
		}
		return true
	}
	return false
}

// member records v in dst when key is want, and reports whether it was
// (ambiguous set when key is want only under case folding).
func (w *taskWalk) member(key []byte, want string, v span, dst *span, ambiguous *bool) bool {
	is, folded := jsonrpc.KeyIs(key, want)
	if folded {
		*ambiguous = true
	}
	if is {
		*dst = v
	}
	return is
}
