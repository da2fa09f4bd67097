package check

import (
	"context"
	"slices"
	"strings"

	"github.com/extauthz/extauthz/internal/jsonrpc"
)

// Tasks belong to their creator (MCP tasks since 2025-11-25, A2A
// tasks). A task id is a capability: whoever knows it can poll the result,
// cancel the work or subscribe to its events, so the service binds each task
// to a user like an MCP session (the same store design: bounded per user,
// never evicting another user's live task, shared through Redis) and
// refuses every task operation by anybody else (403, JSON-RPC error with
// the request's id) but the delegates sessions.delegates lets join.
//
// ext_authz never sees the response that creates a task, so a task is bound
// on first sight: the first task operation that names it. TaskCreated binds
// it at creation instead, with the tool it was created for, once a
// response-path filter reports it; rules then see task operations under
// that tool's name, and tasks/result of a delete_* task needs what
// tools/call delete_* needs. A binding does not last (it idles out, its
// owner's newer ones push it out), so where the response path records
// tools, an MCP task whose tool is not known is one of any tool
// (authorizeCall).

// maxTaskID bounds a task id: longer ones are not ids but an attack on the
// store's memory.
const maxTaskID = 512

// taskMethod classifies a method in either protocol's spelling: op names an
// existing task by id (get, result, cancel, resubscribe, push notification
// configurations); send may continue one (params.message.taskId). tasks/list
// names none: its answer is the upstream's to filter.
func taskMethod(method string) (op, send bool) {
	switch method {
	case "tasks/get", "tasks/result", "tasks/cancel", "tasks/resubscribe",
		"GetTask", "CancelTask", "SubscribeToTask":
		return true, false
	case "message/send", "message/stream", "SendMessage", "SendStreamingMessage":
		return false, true
	}
	if strings.HasPrefix(method, "tasks/pushNotificationConfig/") ||
		strings.HasSuffix(method, "TaskPushNotificationConfig") || strings.HasSuffix(method, "TaskPushNotificationConfigs") {
		return true, false
	}
	return false, false
}

// taskIDs are the ids of the tasks the call acts on. An operation's every
// id is checked, whichever field its upstream reads (MCP params.taskId, A2A
// params.id); a message continues the task of params.message.taskId.
func taskIDs(call *Call) []string {
	op, send := taskMethod(call.Method)
	var ids []string
	switch {
	case op:
		for _, id := range call.taskRefs {
			if id != "" && !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	case send && call.taskRefs[2] != "":
		ids = append(ids, call.taskRefs[2])
	}
	return ids
}

// bindTasks is the task ownership stage.
func (e *evaluation) bindTasks() *denial {
	call, g := &e.call, e.grant
	if !e.p.taskOwnership || call.Protocol == jsonrpc.ProtocolUnknown || call.Method == "" {
		return nil
	}
	op, send := taskMethod(call.Method)
	if !op && !send {
		return nil
	}
	if op && !call.Body {
		// Mcp-Method alone names a task operation but not its task.
		return &denial{outcome: Malformed, desc: "a task operation needs its body to be checked: send the body to the service", rpcCode: jsonrpc.CodeInvalidRequest}
	}
	for _, id := range taskIDs(call) {
		if len(id) > maxTaskID {
			return &denial{outcome: Malformed, desc: "task id is too long", rpcCode: jsonrpc.CodeInvalidParams}
		}
		if d := e.bind(e.pl.state.tasks, bindTask, id); d != nil {
			return d
		}
		e.rec.add("bound", func() string { return "task " + id + " belongs to " + g.Subject })
	}
	return nil
}

// authorizeCall applies the route's rules. A task operation on a task
// whose tool is known is matched under the tool's name, and must also pass
// what tools/call of that tool needs. On a route that records the tool of
// each MCP task it sees created (recordsTaskTools), an MCP task operation
// whose tool is not known is one on a task of any tool: its binding idled
// out or was pushed out by its owner's newer ones (which a token the tool's
// rules refuse can create), or its creation was not read. It must pass what
// the operation and tools/call need whatever the tool, or the rules keyed
// on the tool would no longer apply once the binding is forgotten.
func (e *evaluation) authorizeCall(r *Route, g *Grant, call *Call) (Outcome, string, string) {
	name, tool := call.Name, ""
	op, _ := taskMethod(call.Method)
	records := op && name == "" && e.recordsTaskTools(r, call)
	if op && name == "" {
		var err error
		if tool, err = e.taskTool(call, records); err != nil {
			return Unavailable, "the session store is unavailable", ""
		}
		name = tool
	}
	o, desc, scope, by := r.authorizeFor(e, g, call.Method, name)
	e.decidedBy = by
	switch {
	case o != Allowed:
	case tool != "":
		if o2, desc2, scope2, _ := r.authorizeFor(e, g, "tools/call", tool); o2 != Allowed {
			return o2, "the task's tool " + tool + ": " + desc2, scope2
		}
	case records:
		for _, m := range [...]string{call.Method, "tools/call"} {
			if o2, desc2, scope2, _ := r.authorizeEveryName(e, g, m); o2 != Allowed {
				return o2, "the task's tool is not known, and " + m + " of some tool is refused: " + desc2, scope2
			}
		}
	}
	return o, desc, scope
}

// recordsTaskTools reports whether the call is an MCP task operation on a
// route whose response path records the tool each MCP task was created
// for (response_path with task ownership). An MCP operation names its task
// in params.taskId, the one field MCP servers read; A2A operations (params.id,
// and A2A-only methods) are not recorded with a tool and are left alone.
func (e *evaluation) recordsTaskTools(r *Route, call *Call) bool {
	if !r.responsePath || !e.p.taskOwnership || call.taskRefs[0] == "" {
		return false
	}
	for _, i := range jsonrpc.Meanings(call.Method, r.rpcProtocol()) {
		if jsonrpc.Methods[i].Protocol == jsonrpc.ProtocolMCP {
			return true
		}
	}
	return false
}

// taskTool is the tool the call's task was created for, "" when unknown;
// shared asks the shared tier for a task this replica holds no binding of
// (a route that records task tools: another replica may have seen it
// created).
func (e *evaluation) taskTool(call *Call, shared bool) (string, error) {
	for _, id := range taskIDs(call) {
		tool, err := e.st.taskTool(e.ctx, bindingKey(bindTask, id), shared)
		if tool != "" || err != nil {
			return tool, err
		}
	}
	return "", nil
}

// TaskCreated binds a task to the user who created it, with the tool it
// was created for (MCP tools/call with params.task; "" for none), as a
// response-path filter sees the creating answer. subject is the user as
// Grant.Subject names it. It reports false when another user already holds
// the id or the store has no room.
func (pl *Pipeline) TaskCreated(ctx context.Context, taskID, subject, tool string) bool {
	return pl.state.taskCreated(ctx, bindingKey(bindTask, taskID), subject, tool, pl.Policy().perSubject)
}

// TaskCount is the number of task bindings held.
func (pl *Pipeline) TaskCount() int { return pl.state.tasks.Len() }
