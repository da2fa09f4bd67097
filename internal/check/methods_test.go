package check

import (
	"slices"
	"strings"
	"testing"

	"github.com/extauthz/extauthz/internal/config"
	"github.com/extauthz/extauthz/internal/jsonrpc"
)

// specMethod is one method as the specifications define it, with every
// spelling it has across the versions of its protocol.
type specMethod struct {
	protocol  string   // "mcp" or "a2a"
	spellings []string // MCP: the one name; A2A: v0.3, v1.0, then draft/SDK spellings
	versions  string   // the versions that define it
}

const (
	mcpAll  = "2025-06-18 2025-11-25 2026-07-28"
	mcpTask = "2025-11-25 2026-07-28"
	a2aAll  = "0.3 1.0"
)

// specMethods is every method of MCP 2025-06-18, 2025-11-25 and 2026-07-28
// (schema.ts: client and server requests and notifications) and of A2A v0.3
// and v1.0, written from the specifications, not from the service's table.
// Every test of method spellings is generated from it.
var specMethods = []specMethod{
	{"mcp", []string{"initialize"}, "2025-06-18 2025-11-25"},
	{"mcp", []string{"ping"}, mcpAll},
	{"mcp", []string{"server/discover"}, "2026-07-28"},
	{"mcp", []string{"subscriptions/listen"}, "2026-07-28"},
	{"mcp", []string{"tools/list"}, mcpAll},
	{"mcp", []string{"tools/call"}, mcpAll},
	{"mcp", []string{"prompts/list"}, mcpAll},
	{"mcp", []string{"prompts/get"}, mcpAll},
	{"mcp", []string{"resources/list"}, mcpAll},
	{"mcp", []string{"resources/templates/list"}, mcpAll},
	{"mcp", []string{"resources/read"}, mcpAll},
	{"mcp", []string{"resources/subscribe"}, mcpAll},
	{"mcp", []string{"resources/unsubscribe"}, mcpAll},
	{"mcp", []string{"completion/complete"}, mcpAll},
	{"mcp", []string{"logging/setLevel"}, mcpAll},
	{"mcp", []string{"sampling/createMessage"}, mcpAll},
	{"mcp", []string{"elicitation/create"}, mcpAll},
	{"mcp", []string{"roots/list"}, mcpAll},
	{"mcp", []string{"tasks/get"}, mcpTask},
	{"mcp", []string{"tasks/result"}, "2025-11-25"},
	{"mcp", []string{"tasks/list"}, "2025-11-25"},
	{"mcp", []string{"tasks/cancel"}, mcpTask},
	// 2026-07-28 moves tasks to an extension (SEP-2663), which keeps
	// tasks/get and tasks/cancel, adds tasks/update and notifications/tasks,
	// and drops tasks/result, tasks/list and notifications/tasks/status.
	{"mcp", []string{"tasks/update"}, "2026-07-28"},
	{"mcp", []string{"notifications/tasks"}, "2026-07-28"},
	{"mcp", []string{"notifications/initialized"}, "2025-06-18 2025-11-25"},
	{"mcp", []string{"notifications/cancelled"}, mcpAll},
	{"mcp", []string{"notifications/progress"}, mcpAll},
	{"mcp", []string{"notifications/message"}, mcpAll},
	{"mcp", []string{"notifications/resources/updated"}, mcpAll},
	{"mcp", []string{"notifications/resources/list_changed"}, mcpAll},
	{"mcp", []string{"notifications/tools/list_changed"}, mcpAll},
	{"mcp", []string{"notifications/prompts/list_changed"}, mcpAll},
	{"mcp", []string{"notifications/roots/list_changed"}, mcpAll},
	{"mcp", []string{"notifications/tasks/status"}, "2025-11-25"},
	{"mcp", []string{"notifications/elicitation/complete"}, mcpTask},
	{"mcp", []string{"notifications/subscriptions/acknowledged"}, "2026-07-28"},
	// The skills extension (SEP-2640), as the TypeScript SDK v2 serves it
	// under any version.
	{"mcp", []string{"skills/list"}, mcpAll},
	{"mcp", []string{"skills/get"}, mcpAll},
	{"mcp", []string{"resources/directory/read"}, mcpAll},

	{"a2a", []string{"message/send", "SendMessage"}, a2aAll},
	{"a2a", []string{"message/stream", "SendStreamingMessage"}, a2aAll},
	{"a2a", []string{"tasks/get", "GetTask"}, a2aAll},
	{"a2a", []string{"tasks/list", "ListTasks"}, a2aAll},
	{"a2a", []string{"tasks/cancel", "CancelTask"}, a2aAll},
	{"a2a", []string{"tasks/resubscribe", "SubscribeToTask"}, a2aAll},
	{"a2a", []string{"tasks/pushNotificationConfig/set", "CreateTaskPushNotificationConfig", "SetTaskPushNotificationConfig"}, a2aAll},
	{"a2a", []string{"tasks/pushNotificationConfig/get", "GetTaskPushNotificationConfig"}, a2aAll},
	{"a2a", []string{"tasks/pushNotificationConfig/list", "ListTaskPushNotificationConfigs", "ListTaskPushNotificationConfig"}, a2aAll},
	{"a2a", []string{"tasks/pushNotificationConfig/delete", "DeleteTaskPushNotificationConfig"}, a2aAll},
	{"a2a", []string{"agent/getAuthenticatedExtendedCard", "GetExtendedAgentCard"}, a2aAll},
}

// TestMethodTableCoversTheSpecifications: the service's method table and the
// specifications' lists name the same methods with the same spellings.
func TestMethodTableCoversTheSpecifications(t *testing.T) {
	key := func(protocol string, spellings []string) string {
		s := slices.Clone(spellings)
		slices.Sort(s)
		return protocol + ":" + strings.Join(s, ",")
	}
	want := map[string]bool{}
	for _, m := range specMethods {
		want[key(m.protocol, m.spellings)] = true
	}
	got := map[string]bool{}
	for _, m := range jsonrpc.Methods {
		got[key(m.Protocol.String(), m.Spellings)] = true
	}
	for k := range want {
		if !got[k] {
			t.Errorf("the specifications define %s; the method table does not", k)
		}
	}
	for k := range got {
		if !want[k] {
			t.Errorf("the method table has %s; no specification list here does", k)
		}
	}
}

// globsFor are the globs a rule author could write for a method spelled s:
// the name, its family (message/*), a prefix of a v1.0 name (Send*), a
// suffix (*Message, */get) and everything.
func globsFor(s string) []string {
	out := []string{s, "*"}
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		out = append(out, s[:i+1]+"*", "*"+s[i:])
		if j := strings.IndexByte(s, '/'); j >= 0 {
			out = append(out, s[:j+1]+"*")
		}
	} else {
		for i := 1; i < len(s); i++ {
			if s[i] >= 'A' && s[i] <= 'Z' {
				out = append(out, s[:i]+"*", "*"+s[i:])
				break
			}
		}
	}
	return out
}

// meaningsOn returns the spec methods a request spelled s means on a route
// of protocol p ("" for auto): those of p that have the spelling, else
// every method that has it.
func meaningsOn(s string, p jsonrpc.Protocol) []specMethod {
	var all, own []specMethod
	for _, m := range specMethods {
		if slices.Contains(m.spellings, s) {
			all = append(all, m)
			if m.protocol == p.String() {
				own = append(own, m)
			}
		}
	}
	if len(own) > 0 {
		return own
	}
	return all
}

// names reports whether a glob names a method: it matches one of its
// spellings.
func names(glob string, m specMethod) bool {
	for _, s := range m.spellings {
		if globMatchesForTest(glob, s) {
			return true
		}
	}
	return false
}

// globMatchesForTest is the glob of the rules' documentation, written again
// with path.Match-like semantics extended to '/' (here, * spans slashes).
func globMatchesForTest(pattern, s string) bool {
	if pattern == "" {
		return s == ""
	}
	switch pattern[0] {
	case '*':
		for i := 0; i <= len(s); i++ {
			if globMatchesForTest(pattern[1:], s[i:]) {
				return true
			}
		}
		return false
	case '?':
		return s != "" && globMatchesForTest(pattern[1:], s[1:])
	}
	return s != "" && s[0] == pattern[0] && globMatchesForTest(pattern[1:], s[1:])
}

// TestMethodGlobsMatchEverySpelling sends every spelling of every method of
// every specification version, on auto, mcp and a2a routes, against a deny
// rule written with every glob of every spelling: the rule must deny exactly
// when it names what the request means there.
func TestMethodGlobsMatchEverySpelling(t *testing.T) {
	var globs []string
	for _, m := range specMethods {
		for _, s := range m.spellings {
			for _, g := range globsFor(s) {
				if !slices.Contains(globs, g) {
					globs = append(globs, g)
				}
			}
		}
	}
	cases := 0
	for _, proto := range []jsonrpc.Protocol{jsonrpc.ProtocolUnknown, jsonrpc.ProtocolMCP, jsonrpc.ProtocolA2A} {
		for _, g := range globs {
			rt := &Route{protocol: proto, rules: compileRules("r", []config.Rule{{Methods: []string{g}, Action: "deny"}})}
			for _, m := range specMethods {
				for _, s := range m.spellings {
					want := false
					for _, meant := range meaningsOn(s, proto) {
						want = want || names(g, meant)
					}
					o, _, _ := rt.authorize(NewGrant(Identity{}), s, "")
					if got := o == Forbidden; got != want {
						t.Errorf("route protocol %q, rule %q, request %q (%s %s): denied %v, want %v",
							proto, g, s, m.protocol, m.versions, got, want)
					}
					cases++
				}
			}
		}
	}
	if cases < 1000 {
		t.Fatalf("only %d cases", cases)
	}
}

// TestMethodGlobExamples pins the examples the rules' documentation gives.
func TestMethodGlobExamples(t *testing.T) {
	tests := []struct {
		name    string
		proto   jsonrpc.Protocol
		glob    string
		denied  []string
		allowed []string
	}{
		{"A2A v0.3 family matches v1.0 names", jsonrpc.ProtocolUnknown, "message/*",
			[]string{"message/send", "message/stream", "SendMessage", "SendStreamingMessage"},
			[]string{"tasks/get", "GetTask", "tools/call", "sampling/createMessage"}},
		{"tasks/* denies every MCP and A2A task method (auto)", jsonrpc.ProtocolUnknown, "tasks/*",
			[]string{"tasks/get", "tasks/list", "tasks/cancel", "tasks/result", "tasks/resubscribe",
				"GetTask", "ListTasks", "CancelTask", "SubscribeToTask", "tasks/pushNotificationConfig/set",
				"CreateTaskPushNotificationConfig", "SetTaskPushNotificationConfig", "GetTaskPushNotificationConfig",
				"ListTaskPushNotificationConfigs", "ListTaskPushNotificationConfig", "DeleteTaskPushNotificationConfig"},
			[]string{"tools/call", "SendMessage", "notifications/tasks/status", "GetExtendedAgentCard"}},
		{"tasks/* on an MCP route", jsonrpc.ProtocolMCP, "tasks/*",
			[]string{"tasks/get", "tasks/list", "tasks/cancel", "tasks/result", "GetTask", "CancelTask"},
			[]string{"tools/call"}},
		{"tasks/* on an A2A route", jsonrpc.ProtocolA2A, "tasks/*",
			[]string{"tasks/get", "tasks/cancel", "tasks/resubscribe", "GetTask", "CancelTask", "SubscribeToTask", "ListTasks"},
			[]string{"SendMessage", "message/send"}},
		{"v1.0 name matches v0.3 spelling", jsonrpc.ProtocolUnknown, "SendMessage",
			[]string{"SendMessage", "message/send"},
			[]string{"message/stream", "SendStreamingMessage"}},
		{"v1.0 glob matches v0.3 spellings", jsonrpc.ProtocolUnknown, "*Message",
			[]string{"SendMessage", "message/send", "SendStreamingMessage", "message/stream"},
			[]string{"GetTask"}},
		{"GetTask on an MCP route is A2A's, not MCP's tasks/get", jsonrpc.ProtocolMCP, "GetTask",
			[]string{"GetTask"},
			[]string{"tasks/get", "tasks/result"}},
		{"GetTask on auto also catches tasks/get", jsonrpc.ProtocolUnknown, "GetTask",
			[]string{"GetTask", "tasks/get"},
			[]string{"tasks/result", "tasks/list"}},
		{"push configs by v0.3 family", jsonrpc.ProtocolUnknown, "tasks/pushNotificationConfig/*",
			[]string{"CreateTaskPushNotificationConfig", "SetTaskPushNotificationConfig", "GetTaskPushNotificationConfig",
				"ListTaskPushNotificationConfigs", "ListTaskPushNotificationConfig", "DeleteTaskPushNotificationConfig"},
			[]string{"GetTask", "tasks/get"}},
		{"unknown methods match the glob as written", jsonrpc.ProtocolUnknown, "custom/*",
			[]string{"custom/x", "custom/a/b"},
			[]string{"Custom/x", "tools/call"}},
		{"method names are case-sensitive", jsonrpc.ProtocolUnknown, "tools/call",
			[]string{"tools/call"},
			[]string{"Tools/call", "TOOLS/CALL", "tools/Call", "tools/call "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := &Route{protocol: tt.proto, rules: compileRules("r", []config.Rule{{Methods: []string{tt.glob}, Action: "deny"}})}
			for _, m := range tt.denied {
				if o, _, _ := rt.authorize(NewGrant(Identity{}), m, ""); o != Forbidden {
					t.Errorf("%q: %v, want denied", m, o)
				}
			}
			for _, m := range tt.allowed {
				if o, _, _ := rt.authorize(NewGrant(Identity{}), m, ""); o != Allowed {
					t.Errorf("%q: %v, want allowed", m, o)
				}
			}
		})
	}
}

// TestExchangeMethodsMatchEverySpelling: the methods that need an exchanged
// token are matched like rules, by every meaning of the name.
func TestExchangeMethodsMatchEverySpelling(t *testing.T) {
	re := &routeExchange{methods: []string{"message/*", "tasks/get"}}
	re.meanings = expandMethods(re.methods)
	for method, want := range map[string]bool{
		"message/send": true, "SendMessage": true, "SendStreamingMessage": true, "GetTask": true, "tasks/get": true,
		"tasks/cancel": false, "CancelTask": false, "tools/call": false,
		"": true, // unknown: exchanged rather than let through without the token
	} {
		if got := re.needed(&Call{Method: method, Body: true}, false); got != want {
			t.Errorf("needed(%q) = %v, want %v", method, got, want)
		}
	}
}
