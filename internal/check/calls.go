package check

import (
	"strings"

	"github.com/extauthz/extauthz/internal/jsonrpc"
)

// What a call must pass: its own rules, and those of every call whose
// effect it has too (a task operation its task's tool's, a completion its
// prompt's or template's, a subscription stream each resource's, a skill
// its files', an answer its request's).

// authorizeCall applies the route's rules. A task operation on a task
// whose tool is known is matched under the tool's name, and must also pass
// what tools/call of that tool needs. On a route that records the tool of
// each MCP task it sees created (recordsTaskTools), an MCP task operation
// whose tool is not known is one on a task of any tool: its binding idled
// out or was pushed out by its owner's newer ones (which a token the tool's
// rules refuse can create), or its creation was not read. It must pass what
// the operation and tools/call need whatever the tool, or the rules keyed
// on the tool would no longer apply once the binding is forgotten. A
// message send carrying a push notification configuration registers a
// webhook, as CreateTaskPushNotificationConfig does: it must also pass what
// that method needs, or a rule on it would not hold. So must a completion
// of a prompt's argument what prompts/get of that prompt needs: the
// suggestions are the prompt's; and a completion of a resource template's
// argument what resources/read of every URI it may expand to needs. A
// completion named by its headers alone may be of any prompt or template,
// and must pass what prompts/get of every prompt and resources/read of
// every URI need. A subscriptions/listen stream must pass what
// resources/subscribe of each resource it subscribes to needs (2026-07-28
// replaces that method by it), and, named by its headers alone, of every
// URI. A skills/get or resources/directory/read must pass what
// resources/read of every file under the skill's directory or the
// directory needs (describes), and, named by its headers alone, of every
// URI. A call named by a Base64-encoded Mcp-Name alone must pass its rules
// under the name as sent too: MCP servers are to decode it before
// comparing it with the body, and the go-sdk does not.
func (e *evaluation) authorizeCall(r *Route, g *Grant, call *Call) (Outcome, string, string) {
	name, tool := call.Name, ""
	op := call.task.namesTask()
	records := op && name == "" && e.recordsTaskTools(r, call)
	if op && name == "" {
		var err error
		if tool, err = e.taskTool(call, records); err != nil {
			return Unavailable, "the session store is unavailable", ""
		}
		name = tool
	}
	o, desc, scope, by := r.authorizeName(e, g, call.Method, name, call.nameUnknown)
	e.decidedBy = by
	if o != Allowed {
		if call.nameUnknown {
			desc = "the call is named by its headers alone, and MCP servers do not check its Mcp-Name against the body, so it may be of any name: " + desc
		}
		return o, desc, scope
	}
	needs, n := alsoNeeds(call, tool, records)
	for _, a := range needs[:n] {
		if o2, desc2, scope2, _ := r.authorizeName(e, g, a.method, a.name, a.every); o2 != Allowed {
			return o2, a.refused(call) + desc2, scope2
		}
	}
	for _, uri := range call.subscribedURIs {
		if o2, desc2, scope2, _ := r.authorizeFor(e, g, "resources/subscribe", uri); o2 != Allowed {
			return o2, "the stream subscribes to the resource " + uri + ", and resources/subscribe of " + uri + " is refused: " + desc2, scope2
		}
	}
	return o, desc, scope
}

// authorizeName is authorizeFor of method name, or with every
// authorizeEveryName of every name starting with name.
func (rt *Route) authorizeName(e *evaluation, g *Grant, method, name string, every bool) (o Outcome, desc, scope string, by int) {
	if every {
		return rt.authorizeEveryName(e, g, method, name)
	}
	return rt.authorizeFor(e, g, method, name)
}

// also is a call whose rules a call must also pass, as it does what that
// call does: method of name or, every, of every name starting with name.
type also struct {
	why          alsoWhy
	every        bool
	method, name string
}

// alsoWhy says why a call must pass another's rules.
type alsoWhy uint8

const (
	alsoTaskTool      alsoWhy = iota // tools/call of the tool of the task it operates on
	alsoAnyTaskTool                  // the operation and tools/call of any tool: the task's is not known
	alsoPrompt                       // prompts/get of the prompt it completes
	alsoTemplate                     // resources/read of the template it completes, or of what it expands to
	alsoAnyCompleted                 // prompts/get and resources/read of anything: it was named by headers alone
	alsoWebhook                      // the method that registers the webhook its message registers
	alsoNameAsSent                   // its method of the Mcp-Name as sent: it was named by an encoded header alone
	alsoAnySubscribed                // resources/subscribe of anything: a subscription named by headers alone
	alsoDescribed                    // resources/read of every file a skill or directory it reads holds
)

// alsoNeeds lists the calls whose rules call must also pass (at most two),
// given the tool of the task it operates on ("" when none or unknown) and
// whether the route records task tools (recordsTaskTools).
func alsoNeeds(call *Call, tool string, records bool) (needs [2]also, n int) {
	switch {
	case records && tool == "":
		needs = [2]also{{why: alsoAnyTaskTool, every: true, method: call.Method}, {why: alsoAnyTaskTool, every: true, method: "tools/call"}}
		return needs, 2
	case tool != "":
		needs[0] = also{why: alsoTaskTool, method: "tools/call", name: tool}
	case call.completedPrompt != "":
		needs[0] = also{why: alsoPrompt, method: "prompts/get", name: call.completedPrompt}
	case call.completedTemplate != "":
		needs[0] = also{why: alsoTemplate, every: !call.templateExact, method: "resources/read", name: call.templateURIs}
	case completesUnknown(call):
		needs = [2]also{{why: alsoAnyCompleted, every: true, method: "prompts/get"}, {why: alsoAnyCompleted, every: true, method: "resources/read"}}
		return needs, 2
	case call.Method == "subscriptions/listen" && !call.Body:
		needs[0] = also{why: alsoAnySubscribed, every: true, method: "resources/subscribe"}
	case describes(call.Method):
		needs[0] = also{why: alsoDescribed, every: true, method: "resources/read"}
		if !call.nameUnknown { // else of every URI
			needs[0].name = describedURIs(call.Method, call.Name)
		}
	case call.pushConfig:
		needs[0] = also{why: alsoWebhook, method: pushConfigMethod}
	case call.nameAsSent != "":
		needs[0] = also{why: alsoNameAsSent, method: call.Method, name: call.nameAsSent}
	default:
		return needs, 0
	}
	return needs, 1
}

// refused says why call is refused when a's rules refuse it: built only
// then, so that an allowed call builds no text.
func (a also) refused(call *Call) string {
	switch a.why {
	case alsoTaskTool:
		return "the task's tool " + a.name + ": "
	case alsoAnyTaskTool:
		return "the task's tool is not known, and " + a.method + " of some tool is refused: "
	case alsoPrompt:
		return "the completion is of the prompt " + a.name + ", and prompts/get of it is refused: "
	case alsoTemplate:
		if a.every {
			return "the completion is of the resource template " + call.completedTemplate +
				", and resources/read of some URI it expands to is refused: "
		}
		return "the completion is of the resource template " + a.name + ", and resources/read of it is refused: "
	case alsoAnyCompleted:
		return "the completed prompt or resource template is not known (the call is named by its headers alone), and " +
			a.method + " of some is refused: "
	case alsoAnySubscribed:
		return "the stream is named by its headers alone, so the resources it subscribes to are not known, and " +
			a.method + " of some is refused: "
	case alsoDescribed:
		if call.nameUnknown {
			return "the call is named by its headers alone, so what it reads is not known, and " + a.method + " of some resource is refused: "
		}
		return "it describes the resources under " + a.name + ", and " + a.method + " of some is refused: "
	case alsoNameAsSent:
		return "the call is named by its headers alone, in a Base64-encoded Mcp-Name that some MCP servers compare with the body as sent, and " +
			a.method + " of " + a.name + " is refused: "
	}
	return "the message registers a push notification webhook, and " + a.method + " is refused: "
}

// describes reports whether a method's answer describes resources other
// than the one it names: the skills extension's skills/get answers a
// skill's SKILL.md frontmatter and the URI, size and digest of every file
// of the skill, resources/directory/read the resources of a directory.
// What they tell must be as readable as those resources are.
func describes(method string) bool {
	return method == "skills/get" || method == "resources/directory/read"
}

// describedURIs is the start of every URI the answer to method of uri
// describes (describes): the directory of the skill's SKILL.md, up to its
// last slash, or the directory itself. A query or fragment is cut first,
// so that it cannot narrow what a server ignoring it describes.
func describedURIs(method, uri string) string {
	if i := strings.IndexAny(uri, "?#"); i >= 0 {
		uri = uri[:i]
	}
	if method == "skills/get" {
		uri = uri[:strings.LastIndexByte(uri, '/')+1]
	}
	return uri
}

// completesUnknown reports whether call is a completion whose body was not
// read: MCP mirrors no name of it in a header, so the prompt or resource
// template it completes is unknown.
func completesUnknown(call *Call) bool {
	return call.Method == "completion/complete" && !call.Body
}

// authorizeAnswers: the answers a client's message carries to the
// server's requests (a response's result, a retry's inputResponses) must
// pass what those requests need, as if the client made them, or a rule
// denying sampling/* would still let the server have what the client's
// model wrote. Only a rule naming the request decides it: the route's
// default action is for the calls a client makes, and an allow list of
// tools does not mean the server may no longer ask the user a question.
// An MCP call named by its headers alone may carry any answer (a
// 2026-07-28 call may be a retry). It returns the refusal, or nil.
func (e *evaluation) authorizeAnswers(r *Route, g *Grant, call *Call) *denial {
	if call.Protocol != jsonrpc.ProtocolMCP {
		return nil
	}
	answers, unread := call.answers, !call.Body && call.Method != ""
	if unread {
		answers = jsonrpc.AnswersAny
	}
	for i, method := range jsonrpc.ServerRequests {
		if answers&(1<<i) == 0 {
			continue
		}
		if o, desc, scope, by := r.authorizeFor(e, g, method, ""); o != Allowed && by != 0 {
			why := "the message carries the answer to the server's " + method + " request"
			if unread {
				why = "the call is named by its headers alone, so it may carry the answer to the server's " + method +
					" request (inputResponses)"
			}
			return &denial{outcome: o, desc: why + ", which the rules refuse: " + desc, scope: scope}
		}
	}
	return nil
}
