package jsonrpc

import "strings"

// Protocol is the protocol a method name belongs to.
type Protocol int

const (
	ProtocolUnknown Protocol = iota
	ProtocolMCP
	ProtocolA2A
)

func (p Protocol) String() string {
	switch p {
	case ProtocolMCP:
		return "mcp"
	case ProtocolA2A:
		return "a2a"
	}
	return "unknown"
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

// a2aMethods maps every A2A JSON-RPC method name, v0.3 and v1.0, to its v1.0
// name.
var a2aMethods = map[string]string{
	// v0.3
	"message/send":                        "SendMessage",
	"message/stream":                      "SendStreamingMessage",
	"tasks/get":                           "GetTask",
	"tasks/list":                          "ListTasks",
	"tasks/cancel":                        "CancelTask",
	"tasks/resubscribe":                   "SubscribeToTask",
	"tasks/pushNotificationConfig/set":    "CreateTaskPushNotificationConfig",
	"tasks/pushNotificationConfig/get":    "GetTaskPushNotificationConfig",
	"tasks/pushNotificationConfig/list":   "ListTaskPushNotificationConfigs",
	"tasks/pushNotificationConfig/delete": "DeleteTaskPushNotificationConfig",
	"agent/getAuthenticatedExtendedCard":  "GetExtendedAgentCard",
	// v1.0
	"SendMessage":                      "SendMessage",
	"SendStreamingMessage":             "SendStreamingMessage",
	"GetTask":                          "GetTask",
	"ListTasks":                        "ListTasks",
	"CancelTask":                       "CancelTask",
	"SubscribeToTask":                  "SubscribeToTask",
	"CreateTaskPushNotificationConfig": "CreateTaskPushNotificationConfig",
	"GetTaskPushNotificationConfig":    "GetTaskPushNotificationConfig",
	"ListTaskPushNotificationConfigs":  "ListTaskPushNotificationConfigs",
	"DeleteTaskPushNotificationConfig": "DeleteTaskPushNotificationConfig",
	"GetExtendedAgentCard":             "GetExtendedAgentCard",
	// Spellings found in v1.0 drafts and SDKs.
	"ListTaskPushNotificationConfig": "ListTaskPushNotificationConfigs",
	"SetTaskPushNotificationConfig":  "CreateTaskPushNotificationConfig",
}

// ClassifyA2A maps an A2A method name, v0.3 (message/send) or v1.0
// (SendMessage), to its v1.0 name, so that a rule written with either name
// matches both. ok is false for a name A2A does not define.
func ClassifyA2A(method string) (canonical string, ok bool) {
	canonical, ok = a2aMethods[method]
	return canonical, ok
}

// mcpMethods are the request methods of MCP 2025-06-18, 2025-11-25 and
// 2026-07-28, in both directions (a client POSTs only its own, but rules
// may name any).
var mcpMethods = map[string]bool{
	"initialize":               true, // until 2025-11-25
	"ping":                     true,
	"server/discover":          true, // 2026-07-28
	"subscriptions/listen":     true, // 2026-07-28
	"tools/list":               true,
	"tools/call":               true,
	"prompts/list":             true,
	"prompts/get":              true,
	"resources/list":           true,
	"resources/templates/list": true,
	"resources/read":           true,
	"resources/subscribe":      true,
	"resources/unsubscribe":    true,
	"completion/complete":      true,
	"logging/setLevel":         true,
	"sampling/createMessage":   true,
	"elicitation/create":       true,
	"roots/list":               true,
	"tasks/get":                true, // 2025-11-25 tasks
	"tasks/result":             true,
	"tasks/list":               true,
	"tasks/cancel":             true,
}

// IsMCPMethod reports whether method is an MCP method: a request method of
// MCP 2025-06-18, 2025-11-25 or 2026-07-28, or a notification
// ("notifications/..." is MCP's namespace, which extensions add to).
func IsMCPMethod(method string) bool {
	if mcpMethods[method] {
		return true
	}
	rest, ok := strings.CutPrefix(method, "notifications/")
	return ok && rest != ""
}

// interned holds the strings Parse returns without allocating: method
// names and protocol versions.
var interned = func() map[string]string {
	m := make(map[string]string)
	for k := range mcpMethods {
		m[k] = k
	}
	for k := range a2aMethods {
		m[k] = k
	}
	for _, k := range []string{
		"notifications/initialized", "notifications/cancelled", "notifications/progress",
		"notifications/roots/list_changed", "notifications/tasks/status",
		"notifications/elicitation/complete",
		"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28",
	} {
		m[k] = k
	}
	return m
}()
