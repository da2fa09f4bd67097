package jsonrpc

import "testing"

func TestClassifyA2A(t *testing.T) {
	tests := []struct {
		v03, v10, canonical string
	}{
		{"message/send", "SendMessage", "SendMessage"},
		{"message/stream", "SendStreamingMessage", "SendStreamingMessage"},
		{"tasks/get", "GetTask", "GetTask"},
		{"tasks/list", "ListTasks", "ListTasks"},
		{"tasks/cancel", "CancelTask", "CancelTask"},
		{"tasks/resubscribe", "SubscribeToTask", "SubscribeToTask"},
		{"tasks/pushNotificationConfig/set", "CreateTaskPushNotificationConfig", "CreateTaskPushNotificationConfig"},
		{"tasks/pushNotificationConfig/get", "GetTaskPushNotificationConfig", "GetTaskPushNotificationConfig"},
		{"tasks/pushNotificationConfig/list", "ListTaskPushNotificationConfigs", "ListTaskPushNotificationConfigs"},
		{"tasks/pushNotificationConfig/delete", "DeleteTaskPushNotificationConfig", "DeleteTaskPushNotificationConfig"},
		{"agent/getAuthenticatedExtendedCard", "GetExtendedAgentCard", "GetExtendedAgentCard"},
	}
	for _, tt := range tests {
		t.Run(tt.canonical, func(t *testing.T) {
			for _, name := range []string{tt.v03, tt.v10} {
				got, ok := ClassifyA2A(name)
				if !ok || got != tt.canonical {
					t.Errorf("ClassifyA2A(%q) = %q, %v; want %q, true", name, got, ok, tt.canonical)
				}
			}
		})
	}
	t.Run("draft spellings", func(t *testing.T) {
		for name, want := range map[string]string{
			"SetTaskPushNotificationConfig":  "CreateTaskPushNotificationConfig",
			"ListTaskPushNotificationConfig": "ListTaskPushNotificationConfigs",
		} {
			if got, ok := ClassifyA2A(name); !ok || got != want {
				t.Errorf("ClassifyA2A(%q) = %q, %v; want %q, true", name, got, ok, want)
			}
		}
	})
	t.Run("not A2A", func(t *testing.T) {
		for _, name := range []string{"", "tools/call", "initialize", "sendmessage", "message/Send", "tasks/send", "GetTask "} {
			if got, ok := ClassifyA2A(name); ok {
				t.Errorf("ClassifyA2A(%q) = %q, true; want false", name, got)
			}
		}
	})
}

func TestProtocolOf(t *testing.T) {
	tests := []struct {
		method string
		want   Protocol
		isMCP  bool
	}{
		{"initialize", ProtocolMCP, true},
		{"ping", ProtocolMCP, true},
		{"server/discover", ProtocolMCP, true},
		{"subscriptions/listen", ProtocolMCP, true},
		{"tools/list", ProtocolMCP, true},
		{"tools/call", ProtocolMCP, true},
		{"prompts/list", ProtocolMCP, true},
		{"prompts/get", ProtocolMCP, true},
		{"resources/list", ProtocolMCP, true},
		{"resources/templates/list", ProtocolMCP, true},
		{"resources/read", ProtocolMCP, true},
		{"resources/subscribe", ProtocolMCP, true},
		{"resources/unsubscribe", ProtocolMCP, true},
		{"skills/list", ProtocolMCP, true},
		{"skills/get", ProtocolMCP, true},
		{"resources/directory/read", ProtocolMCP, true},
		{"completion/complete", ProtocolMCP, true},
		{"logging/setLevel", ProtocolMCP, true},
		{"sampling/createMessage", ProtocolMCP, true},
		{"elicitation/create", ProtocolMCP, true},
		{"roots/list", ProtocolMCP, true},
		{"tasks/result", ProtocolMCP, true},
		{"tasks/update", ProtocolMCP, true},
		{"notifications/initialized", ProtocolMCP, true},
		{"notifications/elicitation/complete", ProtocolMCP, true},
		{"notifications/vendor/custom", ProtocolMCP, true},
		// Both MCP 2025-11-25 tasks and A2A v0.3: the route decides.
		{"tasks/get", ProtocolUnknown, true},
		{"tasks/list", ProtocolUnknown, true},
		{"tasks/cancel", ProtocolUnknown, true},
		{"message/send", ProtocolA2A, false},
		{"SendMessage", ProtocolA2A, false},
		{"tasks/resubscribe", ProtocolA2A, false},
		{"notifications/", ProtocolUnknown, false},
		{"tools/delete", ProtocolUnknown, false},
		{"Tools/Call", ProtocolUnknown, false},
		{"", ProtocolUnknown, false},
	}
	for _, tt := range tests {
		t.Run(tt.method, func(t *testing.T) {
			if got := ProtocolOf(tt.method); got != tt.want {
				t.Errorf("ProtocolOf(%q) = %v, want %v", tt.method, got, tt.want)
			}
			if got := IsMCPMethod(tt.method); got != tt.isMCP {
				t.Errorf("IsMCPMethod(%q) = %v, want %v", tt.method, got, tt.isMCP)
			}
		})
	}
}

func TestProtocolString(t *testing.T) {
	for p, want := range map[Protocol]string{ProtocolUnknown: "auto", ProtocolMCP: "mcp", ProtocolA2A: "a2a", ProtocolHTTP: "http", Protocol(9): "auto"} {
		if got := p.String(); got != want {
			t.Errorf("Protocol(%d).String() = %q, want %q", int(p), got, want)
		}
	}
}
