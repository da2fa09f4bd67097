package jsonrpc

import "strings"

// Protocol is the service's one vocabulary of protocols: what a route
// declares (the configuration's protocol), what a call was read as, and
// what a method name belongs to.
type Protocol uint8

const (
	// ProtocolUnknown is a route's "auto" (JSON-RPC aware when the body
	// says so), a request that is not a JSON-RPC call, a method of no known
	// specification.
	ProtocolUnknown Protocol = iota
	ProtocolMCP
	ProtocolA2A
	// ProtocolHTTP is a route's "http": plain HTTP, bodies never read as
	// JSON-RPC.
	ProtocolHTTP
)

var protocolNames = [...]string{ProtocolUnknown: "auto", ProtocolMCP: "mcp", ProtocolA2A: "a2a", ProtocolHTTP: "http"}

// String is the protocol's configuration name; ProtocolUnknown's is "auto".
func (p Protocol) String() string {
	if int(p) < len(protocolNames) {
		return protocolNames[p]
	}
	return "auto"
}

// ParseProtocol reads a configuration name: auto, mcp, a2a or http.
func ParseProtocol(name string) (Protocol, bool) {
	for p, n := range protocolNames {
		if n == name {
			return Protocol(p), true
		}
	}
	return ProtocolUnknown, false
}

// Method is one operation a specification defines: one meaning, with every
// name a client may send for it. MCP has one spelling per method; A2A
// renamed its methods in v1.0 (message/send became SendMessage), so an A2A
// method has its v0.3 and v1.0 spellings (and those of v1.0 drafts and
// SDKs). The same spelling may name two methods: tasks/get is both MCP's
// (2025-11-25 tasks) and A2A v0.3's GetTask.
type Method struct {
	Protocol Protocol
	// Name is the method's one name in this service's vocabulary: the MCP
	// name, or the A2A v1.0 name.
	Name string
	// Spellings are every name it is sent under, Name among them.
	Spellings []string
}

// Methods is the one table of methods this service knows: every request and
// notification of MCP 2025-06-18, 2025-11-25 and 2026-07-28 (in both
// directions: a client POSTs only its own, but rules may name any) and of
// its skills extension (SEP-2640), and every method of A2A v0.3 and v1.0.
// Rules are compiled against it; tests check it against each
// specification's list.
var Methods = []Method{
	mcp("initialize"), // until 2025-11-25
	mcp("ping"),
	mcp("server/discover"),      // 2026-07-28
	mcp("subscriptions/listen"), // 2026-07-28
	mcp("tools/list"),
	mcp("tools/call"),
	mcp("prompts/list"),
	mcp("prompts/get"),
	mcp("resources/list"),
	mcp("resources/templates/list"),
	mcp("resources/read"),
	mcp("resources/subscribe"),
	mcp("resources/unsubscribe"),
	mcp("completion/complete"),
	mcp("logging/setLevel"),
	mcp("sampling/createMessage"),
	mcp("elicitation/create"),
	mcp("roots/list"),
	mcp("tasks/get"), // 2025-11-25 tasks
	mcp("tasks/result"),
	mcp("tasks/list"),
	mcp("tasks/cancel"),
	mcp("tasks/update"), // 2026-07-28 tasks (SEP-2663), named in Mcp-Name
	mcp("skills/list"),  // the skills extension (SEP-2640)
	mcp("skills/get"),
	mcp("resources/directory/read"),
	mcp("notifications/initialized"),
	mcp("notifications/cancelled"),
	mcp("notifications/progress"),
	mcp("notifications/message"),
	mcp("notifications/resources/updated"),
	mcp("notifications/resources/list_changed"),
	mcp("notifications/tools/list_changed"),
	mcp("notifications/prompts/list_changed"),
	mcp("notifications/roots/list_changed"),
	mcp("notifications/tasks/status"),
	mcp("notifications/tasks"), // 2026-07-28 tasks (SEP-2663)
	mcp("notifications/elicitation/complete"),
	mcp("notifications/subscriptions/acknowledged"),

	a2a("SendMessage", "message/send"),
	a2a("SendStreamingMessage", "message/stream"),
	a2a("GetTask", "tasks/get"),
	a2a("ListTasks", "tasks/list"),
	a2a("CancelTask", "tasks/cancel"),
	a2a("SubscribeToTask", "tasks/resubscribe"),
	a2a("CreateTaskPushNotificationConfig", "tasks/pushNotificationConfig/set", "SetTaskPushNotificationConfig"),
	a2a("GetTaskPushNotificationConfig", "tasks/pushNotificationConfig/get"),
	a2a("ListTaskPushNotificationConfigs", "tasks/pushNotificationConfig/list", "ListTaskPushNotificationConfig"),
	a2a("DeleteTaskPushNotificationConfig", "tasks/pushNotificationConfig/delete"),
	a2a("GetExtendedAgentCard", "agent/getAuthenticatedExtendedCard"),
}

func mcp(name string) Method {
	return Method{Protocol: ProtocolMCP, Name: name, Spellings: []string{name}}
}

func a2a(v10 string, others ...string) Method {
	return Method{Protocol: ProtocolA2A, Name: v10, Spellings: append([]string{v10}, others...)}
}

// meanings indexes Methods by spelling: which entries a name may mean, in
// any protocol, and within one.
var meanings = func() (m [3]map[string][]int) {
	for p := range m {
		m[p] = map[string][]int{}
	}
	for i, md := range Methods {
		for _, s := range md.Spellings {
			m[ProtocolUnknown][s] = append(m[ProtocolUnknown][s], i)
			m[md.Protocol][s] = append(m[md.Protocol][s], i)
		}
	}
	return m
}()

// Meanings returns the indexes in Methods of what method may mean on a route
// speaking p: the meanings within p when it has any there, else every
// meaning it has (so that a name is never matched by less than it could
// mean); nil for a name no specification defines. The slice is shared:
// do not modify it.
func Meanings(method string, p Protocol) []int {
	if p != ProtocolUnknown {
		if ids := meanings[p][method]; ids != nil {
			return ids
		}
	}
	return meanings[ProtocolUnknown][method]
}

// ProtocolOf tells which protocol a method belongs to, by name alone. A few
// names belong to both (tasks/get, tasks/list, tasks/cancel: MCP 2025-11-25
// tasks and A2A v0.3); those, like unknown names, are ProtocolUnknown and
// the route must say.
func ProtocolOf(method string) Protocol {
	_, a2a := ClassifyA2A(method)
	mcp := IsMCPMethod(method)
	switch {
	case mcp && !a2a:
		return ProtocolMCP
	case a2a && !mcp:
		return ProtocolA2A
	}
	return ProtocolUnknown
}

// ClassifyA2A maps an A2A method name, v0.3 (message/send) or v1.0
// (SendMessage), to its v1.0 name, so that a rule written with either name
// matches both. ok is false for a name A2A does not define.
func ClassifyA2A(method string) (canonical string, ok bool) {
	if ids := meanings[ProtocolA2A][method]; len(ids) > 0 {
		return Methods[ids[0]].Name, true
	}
	return "", false
}

// IsMCPMethod reports whether method is an MCP method: a method of MCP
// 2025-06-18, 2025-11-25 or 2026-07-28, or a notification
// ("notifications/..." is MCP's namespace, which extensions add to).
func IsMCPMethod(method string) bool {
	if len(meanings[ProtocolMCP][method]) > 0 {
		return true
	}
	rest, ok := strings.CutPrefix(method, "notifications/")
	return ok && rest != ""
}

// interned holds the strings Parse returns without allocating: method
// names and protocol versions.
var interned = func() map[string]string {
	m := make(map[string]string)
	for _, md := range Methods {
		for _, s := range md.Spellings {
			m[s] = s
		}
	}
	for _, k := range []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"} {
		m[k] = k
	}
	return m
}()
