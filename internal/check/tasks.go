package check

import (
	"context"
	"net/url"
	"slices"
	"strings"

	"github.com/extauthz/extauthz/internal/jsonrpc"
	"github.com/extauthz/extauthz/internal/session"
)

// Tasks belong to their creator (MCP tasks since 2025-11-25, A2A
// tasks). A task id is a capability: whoever knows it can poll the result,
// cancel the work or subscribe to its events, so the service binds each task
// to a user like an MCP session (the same store design: bounded per user,
// never evicting another user's live task, shared through Redis) and
// refuses every task operation by anybody else (403, JSON-RPC error with
// the request's id) but the delegates sessions.delegates lets join. An
// operation that names no task where the service reads one is refused: the
// upstream would act on a task nobody checked. Ids a call names without
// acting on them as its own are checked against their owner but never
// bound: a message's referenced tasks (which must be the caller's), a v1.0
// push notification configuration's id, a task list's context filter.
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

// taskUse is what a method does with task ids.
type taskUse uint8

const (
	noTask taskUse = iota
	// taskOp names an existing task by id: get, result, cancel,
	// resubscribe, and a task's push notification configurations.
	taskOp
	// taskConfigOp is A2A v1.0's GetTaskPushNotificationConfig and
	// DeleteTaskPushNotificationConfig: the task is params.taskId
	// (task_id), and params.id is the configuration's own id, which v0.3's
	// tasks/pushNotificationConfig/get and /delete name
	// pushNotificationConfigId (their params.id is the task).
	taskConfigOp
	// taskSend may continue a task (params.message.taskId) and reference
	// others (params.message.referenceTaskIds).
	taskSend
	// taskList names no task (its answer is the upstream's to filter), but
	// A2A's may filter by context (params.contextId).
	taskList
)

// namesTask reports whether a call of the method must name its task.
func (u taskUse) namesTask() bool { return u == taskOp || u == taskConfigOp }

// taskUses classifies every spelling of the methods of the vocabulary
// (jsonrpc.Methods) that use tasks, in either protocol. A spelling with
// two meanings (tasks/get: MCP's and A2A's) has the same use in both
// (tasks/list lists in both, by context in A2A's).
var taskUses = func() map[string]taskUse {
	byName := map[string]taskUse{
		"tasks/get": taskOp, "tasks/result": taskOp, "tasks/cancel": taskOp, "tasks/update": taskOp,
		"GetTask": taskOp, "CancelTask": taskOp, "SubscribeToTask": taskOp,
		"CreateTaskPushNotificationConfig": taskOp, "ListTaskPushNotificationConfigs": taskOp,
		"GetTaskPushNotificationConfig": taskConfigOp, "DeleteTaskPushNotificationConfig": taskConfigOp,
		"SendMessage": taskSend, "SendStreamingMessage": taskSend,
		"ListTasks": taskList,
	}
	m := map[string]taskUse{}
	for _, md := range jsonrpc.Methods {
		u, ok := byName[md.Name]
		if !ok {
			continue
		}
		for _, sp := range md.Spellings {
			su := u
			if u == taskConfigOp && sp != md.Name {
				su = taskOp // v0.3's params.id is the task
			}
			m[sp] = su
		}
	}
	return m
}()

// taskMethod classifies a method in either protocol's spelling. A name
// of a push notification configuration method the vocabulary does not
// know (a draft's, an SDK's) is taken for an operation on a task.
func taskMethod(method string) taskUse {
	if u, ok := taskUses[method]; ok {
		return u
	}
	if strings.HasPrefix(method, "tasks/pushNotificationConfig/") ||
		strings.HasSuffix(method, "TaskPushNotificationConfig") || strings.HasSuffix(method, "TaskPushNotificationConfigs") {
		return taskOp
	}
	return noTask
}

// Where Call.taskRefs holds each task id a call may name.
const (
	refParamsTaskID  = iota // params.taskId or params.task_id
	refParamsID             // params.id
	refMessageTaskID        // params.message.taskId or task_id
)

// taskIDs are the ids of the tasks the call acts on, which it binds. An
// operation's every id is bound, whichever field its upstream reads (MCP
// params.taskId, A2A params.id, A2A v1.0 params.task_id), but a v1.0
// configuration's params.id, which is no task (bindTasks checks it
// apart); a message continues the task of params.message.taskId.
func taskIDs(call *Call) []string {
	use := call.task
	var ids []string
	switch {
	case use.namesTask():
		for i, id := range call.taskRefs {
			if id != "" && !(i == refParamsID && use == taskConfigOp) && !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	case use == taskSend && call.taskRefs[refMessageTaskID] != "":
		ids = append(ids, call.taskRefs[refMessageTaskID])
	}
	return ids
}

// bindTasks is the task ownership stage. An operation must name its task
// in a field the service reads: one it names otherwise (params by
// position, a field of no protocol) or not at all (for the upstream to
// pick one, or to fail) would go unchecked.
func (e *evaluation) bindTasks() *denial {
	call, g := &e.call, e.grant
	if e.p.taskOwnership && call.Protocol == jsonrpc.ProtocolUnknown && e.route.protocol == jsonrpc.ProtocolUnknown {
		return e.checkPathTasks()
	}
	if !e.p.taskOwnership || call.Protocol == jsonrpc.ProtocolUnknown || call.Method == "" {
		return nil
	}
	if d := e.checkRelatedTask(); d != nil {
		return d
	}
	if d := e.checkSubscribedTasks(); d != nil {
		return d
	}
	use := call.task
	if use == noTask || use == taskList {
		return nil
	}
	if use.namesTask() && !call.Body {
		// Mcp-Method alone names a task operation but not its task.
		return &denial{outcome: Malformed, desc: "a task operation needs its body to be checked: send the body to the service", rpcCode: jsonrpc.CodeInvalidRequest}
	}
	ids := taskIDs(call)
	if use.namesTask() && len(ids) == 0 {
		desc := call.Method + " must name its task in params.id, params.taskId or params.task_id"
		if use == taskConfigOp {
			desc = call.Method + " must name its task in params.taskId or params.task_id (params.id is the configuration's)"
		}
		return &denial{outcome: Malformed, desc: desc, rpcCode: jsonrpc.CodeInvalidParams}
	}
	for _, id := range ids {
		if len(id) > maxTaskID {
			return &denial{outcome: Malformed, desc: "task id is too long", rpcCode: jsonrpc.CodeInvalidParams}
		}
		if d := e.bind(e.pl.state.tasks, bindTask, id); d != nil {
			return d
		}
		e.rec.add("bound", func() string { return "task " + id + " belongs to " + g.Subject })
	}
	if use == taskSend {
		return e.checkReferences()
	}
	if id := call.taskRefs[refParamsID]; use == taskConfigOp && id != "" && len(id) <= maxTaskID {
		// A configuration's id is not bound: it is no task, and binding it
		// would take the id (ids like cfg-1 recur in every task) from the
		// next user. An upstream reading v0.3's params under the v1.0 name
		// takes it for the task, though, so it must not name somebody
		// else's. (An id over maxTaskID names no bound task.)
		if d := e.checkOwner(e.pl.state.tasks, bindTask, id, nil); d != nil {
			return d
		}
	}
	return nil
}

// checkPathTasks refuses a request that is no JSON-RPC call, on an auto
// route, naming another user's task in its path the way A2A's HTTP+JSON
// binding does (pathTaskIDs). It binds nothing: the route cannot tell an
// agent from a service with paths of its own like these, whose ids nobody
// holds.
func (e *evaluation) checkPathTasks() *denial {
	for _, id := range pathTaskIDs(e.req.Path) {
		if len(id) > maxTaskID {
			continue // names no bound task
		}
		if d := e.checkOwner(e.pl.state.tasks, bindTask, id, nil); d != nil {
			return d
		}
	}
	return nil
}

// pathListContexts are the contexts a task list filters by in A2A's
// HTTP+JSON binding (ListTasks: GET /v1/tasks?contextId=…): every value of
// the query's contextId or context_id, in any case, as sent and unescaped,
// with ";" taken for a separator as some servers take it (one of them is
// what the agent reads).
func pathListContexts(target string) []string {
	path, query, _ := strings.Cut(target, "?")
	if query == "" || !isTaskListPath(path) {
		return nil
	}
	var ids []string
	for k, v := range queryParams(query) {
		if !isContextParam(k) {
			continue
		}
		ids = append(ids, v)
		if uv, err := url.QueryUnescape(v); err == nil && uv != v {
			ids = append(ids, uv)
		}
	}
	return ids
}

// isContextParam reports whether a query parameter may be a task list's
// context filter, in any spelling some agent reads.
func isContextParam(name string) bool {
	return strings.EqualFold(name, "contextId") || strings.EqualFold(name, "context_id")
}

// isTasksSegment reports whether a path segment is the "tasks" of A2A's
// HTTP+JSON paths as an agent's router reads it: Express, under the A2A
// JavaScript SDK, matches routes regardless of case.
func isTasksSegment(seg string) bool { return strings.EqualFold(seg, "tasks") }

// isTaskListPath reports whether a request path may be A2A's HTTP+JSON
// ListTasks (v0.3 /v1/tasks, v1.0 /tasks or /{tenant}/tasks, under any
// mount point), with the trailing slash Express routes alike.
func isTaskListPath(path string) bool {
	path = strings.TrimSuffix(path, "/")
	return isTasksSegment(path[strings.LastIndexByte(path, '/')+1:])
}

// isPathTaskList reports whether a request that is no JSON-RPC call may be
// A2A's HTTP+JSON ListTasks: a GET (or the HEAD Express answers alike) of
// a task list path.
func isPathTaskList(req *Request) bool {
	path, _, _ := strings.Cut(req.Path, "?")
	return (req.Method == "GET" || req.Method == "HEAD") && isTaskListPath(path)
}

// pathListFiltered reports whether every agent reads the query of an
// HTTP+JSON task list as filtered by a context: one named contextId (the
// A2A JavaScript SDK reads no other spelling) and no filter of any
// spelling empty, in a query without ";" (where servers split a query
// differently, a filter the service reads may be no parameter of the
// agent's).
func pathListFiltered(target string) bool {
	_, query, _ := strings.Cut(target, "?")
	if strings.IndexByte(query, ';') >= 0 {
		return false
	}
	filtered := false
	for k, v := range queryParams(query) {
		if !isContextParam(k) {
			continue
		}
		if uv, err := url.QueryUnescape(v); err != nil || uv == "" {
			return false
		}
		filtered = filtered || k == "contextId"
	}
	return filtered
}

// a2aServicePath reports whether a request path calls a method of A2A's
// gRPC service (/a2a.v1.A2AService/GetTask; v1.0's package has another
// name, and a proxy may keep a prefix before it).
func a2aServicePath(target string) bool {
	path, _, _ := strings.Cut(target, "?")
	for seg, rest, ok := strings.Cut(strings.TrimPrefix(path, "/"), "/"); ok; seg, rest, ok = strings.Cut(rest, "/") {
		if (seg == "A2AService" || strings.HasSuffix(seg, ".A2AService")) && rest != "" {
			return true
		}
	}
	return false
}

// pathTaskIDs are the task ids a request path may name in A2A's HTTP+JSON
// binding: the segment after "tasks" (in any case: see isTasksSegment),
// wherever it is (v0.3 /v1/tasks/{id},
// v1.0 /tasks/{id} or /{tenant}/tasks/{id}), unescaped, both whole and
// without a custom method (":cancel", ":subscribe"; an id may hold ":").
func pathTaskIDs(target string) []string {
	path, _, _ := strings.Cut(target, "?")
	var ids []string
	add := func(id string) {
		if id != "" && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	_, rest, _ := strings.Cut(path, "/")
	for seg, rest, more := strings.Cut(rest, "/"); more; seg, rest, more = strings.Cut(rest, "/") {
		if !isTasksSegment(seg) {
			continue
		}
		next, _, _ := strings.Cut(rest, "/")
		id, err := url.PathUnescape(next)
		if err != nil {
			continue
		}
		add(id)
		if j := strings.LastIndexByte(id, ':'); j > 0 {
			add(id[:j]) // "%3A" too: which colon an agent splits at is its own
		}
	}
	return ids
}

// errUnboundReference refuses a reference to a task nobody holds.
const errUnboundReference = "a referenced task is bound to nobody: a message may reference only the caller's tasks, " +
	"and a task is bound to the first user naming it in a task operation (GetTask) or, where the response path is read, to its creator"

// checkReferences refuses a message send referencing a task that is not
// the caller's (or their delegator's): the agent may load referenced tasks
// into its context (a2a-go's ReferencedTasksLoader) and quote their
// history and artifacts. A reference binds nothing, so a task nobody holds
// is refused too: the agent may hold it (its binding idled out, or the
// answer that created it was not seen), and a reference must not be a way
// to claim somebody else's task.
func (e *evaluation) checkReferences() *denial {
	return e.checkNamedTasks(e.call.refTasks, "referenced", errUnboundReference)
}

// checkNamedTasks refuses tasks a call names without acting on them (what
// it references, belongs to or follows: how says which) that are not the
// caller's or their delegator's, and those nobody holds, with unbound. It
// binds nothing. An empty id names no task.
func (e *evaluation) checkNamedTasks(ids []string, how, unbound string) *denial {
	for _, id := range ids {
		if id == "" {
			continue
		}
		if len(id) > maxTaskID {
			return &denial{outcome: Malformed, desc: how + " task id is too long", rpcCode: jsonrpc.CodeInvalidParams}
		}
		if d := e.checkOwner(e.pl.state.tasks, bindTask, id, &denial{outcome: Forbidden, desc: unbound}); d != nil {
			return d
		}
		e.rec.add(how, func() string { return "task " + id + " is " + e.grant.Subject + "'s" })
	}
	return nil
}

// errUnboundRelatedTask refuses a request related to a task nobody holds.
const errUnboundRelatedTask = "the task this request says it belongs to (_meta io.modelcontextprotocol/related-task) is bound to nobody: " +
	"a request may belong only to the caller's tasks, and " + howMCPTasksAreBound

// checkRelatedTask refuses an MCP request that says it belongs to a task
// (_meta io.modelcontextprotocol/related-task, whatever its method) that
// is not the caller's (or their delegator's). The TypeScript SDK's server
// hands that task to the handler, queues the answer (an error for a
// method it does not know) to the task's messages, which its creator
// reads with tasks/result, and sets its status when the handler asks the
// client anything; a server without sessions looks it up nowhere. As a
// message's reference does, a relation binds nothing, so a task nobody
// holds is refused: relating a call must not be a way to claim a task.
// A notification is answered by nothing and the SDK reads no task from
// it (a client hosting a task of its own, which 2025-11-25 allows, tells
// the server of it so).
func (e *evaluation) checkRelatedTask() *denial {
	if e.call.relatedTask == "" || len(e.call.ID) == 0 {
		return nil
	}
	return e.checkNamedTasks([]string{e.call.relatedTask}, "related", errUnboundRelatedTask)
}

// errUnboundSubscribedTask refuses a subscription to a task nobody holds.
const errUnboundSubscribedTask = "a task the stream subscribes to (params.notifications.taskIds) is bound to nobody: " +
	"a stream may follow only the caller's tasks, and " + howMCPTasksAreBound

// howMCPTasksAreBound ends the refusals of MCP tasks nobody holds.
const howMCPTasksAreBound = "a task is bound to the first user naming it in a task operation (tasks/get) " +
	"or, where the response path is read, to its creator"

// checkSubscribedTasks refuses a subscriptions/listen stream following a
// task that is not the caller's (the tasks extension's taskIds: each
// notification carries the task whole, its result included), or one whose
// tasks cannot be seen: a stream named by its headers alone on a route
// whose front end was to send the body. As a reference does, a
// subscription binds nothing, so a task nobody holds is refused.
func (e *evaluation) checkSubscribedTasks() *denial {
	call := &e.call
	if call.Method != "subscriptions/listen" {
		return nil
	}
	if !call.Body && e.route.bindsTasks {
		return &denial{outcome: Malformed, desc: "a subscription needs its body to be checked (it may follow tasks): send the body to the service", rpcCode: jsonrpc.CodeInvalidRequest}
	}
	return e.checkNamedTasks(call.subscribedTasks, "subscribed", errUnboundSubscribedTask)
}

// checkListContext refuses a task list filtered by an A2A context bound to
// another user (A2A v1.0 ListTasks' params.contextId, or over HTTP+JSON
// GET /v1/tasks?contextId=… on an auto route, which cannot tell an agent
// from another service and so reads every spelling): the upstream would answer
// with that context's tasks, their history and, asked, their artifacts.
// The filter is checked against the binding a message in the context
// makes (sessionFor), on the routes that make it, and binds nothing: a
// list creates no context, and one nobody holds is the upstream's to
// filter.
func (e *evaluation) checkListContext() *denial {
	call := &e.call
	switch {
	case !e.route.sessionBinding:
	case call.Protocol != jsonrpc.ProtocolUnknown:
		if call.listContext != "" && call.task == taskList {
			return e.checkListedContext(call.listContext)
		}
	case e.route.protocol == jsonrpc.ProtocolUnknown:
		for _, id := range pathListContexts(e.req.Path) {
			if d := e.checkListedContext(id); d != nil {
				return d
			}
		}
	}
	return nil
}

// errUnscopedList refuses a task list that is not scoped to the caller,
// on a route that binds tasks.
const errUnscopedList = "a task list that is not the caller's may list other users' tasks, with their history and artifacts: " +
	"filter an A2A list by a context of yours, make an MCP list in a session of yours (on a route that binds sessions), " +
	"or set upstream_scopes_task_lists on the route if the upstream lists only the caller's tasks"

// checkUnscopedList refuses a task list (A2A ListTasks, MCP and v0.3
// tasks/list) that nothing scopes to the caller, on a route that binds
// tasks, unless the route declares that its upstream lists only the
// caller's tasks. An upstream that leaves users to the service keeps
// every caller's tasks together and would list them all: the binding of
// each to its creator, which the service checks wherever a call names a
// task, would not hold for the tasks a list returns. An A2A list is
// scoped by the context it filters by (the A2A JavaScript SDK's store,
// without a user builder, keeps every caller's tasks under one owner),
// which checkListContext then checks against its binding; an MCP list by
// the session it is made in (MCP servers keep tasks by session: the
// TypeScript SDK's store lists every task to a request without one). Both
// are bound only on a route that binds sessions. A tasks/list on an auto
// route may be either's, and needs both. So may a request that is no
// JSON-RPC call on an auto route be A2A's HTTP+JSON ListTasks, as it may
// be GetTask (checkPathTasks): the route cannot tell an agent's list from
// another service's, and refuses both unless filtered as the agent reads
// a filter (pathListFiltered).
func (e *evaluation) checkUnscopedList() *denial {
	r, call := e.route, &e.call
	if !r.bindsTasks || r.upstreamScopesTaskLists {
		return nil
	}
	var scoped bool
	switch {
	case call.task == taskList:
		a2a, mcp := r.mayMean(call.Method, jsonrpc.ProtocolA2A), r.mayMean(call.Method, jsonrpc.ProtocolMCP)
		scoped = (!a2a || call.listContext != "") && (!mcp || mcpSessionID(e.req) != "")
	case call.Protocol == jsonrpc.ProtocolUnknown && r.protocol == jsonrpc.ProtocolUnknown && isPathTaskList(e.req):
		scoped = pathListFiltered(e.req.Path)
	default:
		return nil
	}
	if r.sessionBinding && scoped {
		return nil
	}
	return &denial{outcome: Forbidden, desc: errUnscopedList}
}

// checkListedContext refuses a context a task list names when it is
// another user's. An id that cannot be a session header value is never
// bound, and so cannot be.
func (e *evaluation) checkListedContext(id string) *denial {
	if _, good := e.p.sessionHeaderValue(id); !good {
		return nil
	}
	if d := e.checkOwner(e.pl.state.sessions, bindContext, id, nil); d != nil {
		return d
	}
	e.rec.add("listed", func() string { return "the A2A context is not another user's" })
	return nil
}

// checkOwner refuses id (of kind, in store) when it is bound to another
// user than the caller and the caller is no delegate of theirs, and binds
// nothing: it is for ids a call names that are not, or need not be, what
// it acts on. An id nobody holds gets unbound (nil: allowed).
func (e *evaluation) checkOwner(store *session.Store, kind, id string, unbound *denial) *denial {
	g := e.grant
	owner, err := e.st.owner(e.ctx, store, bindingKey(kind, id))
	switch {
	case err != nil:
		return &denial{outcome: Unavailable, desc: "the session store is unavailable"}
	case owner == "":
		return unbound
	case owner == g.Subject:
		return nil
	}
	if rule, ok := e.p.mayJoin(g, owner); ok {
		e.rec.add("delegate", func() string { return "names " + owner + "'s " + kind + " by sessions.delegates " + rule })
		return nil
	}
	return e.conflict(kind)
}

// pushConfigMethod is the method that registers a push notification
// webhook, by its A2A v1.0 name; rules name it in any spelling
// (tasks/pushNotificationConfig/set in v0.3).
const pushConfigMethod = "CreateTaskPushNotificationConfig"

// recordsTaskTools reports whether the call is an MCP task operation on a
// route whose response path records the tool each MCP task was created
// for (response_path with task ownership). An MCP operation names its task
// in params.taskId, the one field MCP servers read; A2A operations (params.id,
// and A2A-only methods) are not recorded with a tool and are left alone.
func (e *evaluation) recordsTaskTools(r *Route, call *Call) bool {
	return r.responsePath && e.p.taskOwnership && call.taskRefs[refParamsTaskID] != "" &&
		r.mayMean(call.Method, jsonrpc.ProtocolMCP)
}

// mayMean reports whether method may mean one of protocol p's methods on
// the route (jsonrpc.Meanings): tasks/list is MCP's and A2A's on an auto
// route.
func (rt *Route) mayMean(method string, p jsonrpc.Protocol) bool {
	return slices.ContainsFunc(jsonrpc.Meanings(method, rt.rpcProtocol()), func(i int) bool { return jsonrpc.Methods[i].Protocol == p })
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
