package jsonrpc

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		body string
		want Request
	}{
		{
			name: "initialize 2025-06-18, form elicitation only",
			body: `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18",
				"capabilities":{"roots":{"listChanged":true},"sampling":{},"elicitation":{}},
				"clientInfo":{"name":"ExampleClient","title":"Example Client","version":"1.0.0"}}}`,
			want: Request{Method: "initialize", ID: []byte(`0`), ProtocolVersion: "2025-06-18"},
		},
		{
			name: "initialize 2025-11-25 with URL elicitation",
			body: `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",
				"capabilities":{"elicitation":{"form":{},"url":{}},"tasks":{"requests":{}}},
				"clientInfo":{"name":"c","version":"1"}}}`,
			want: Request{Method: "initialize", ID: []byte(`1`), ProtocolVersion: "2025-11-25", ElicitationURL: true},
		},
		{
			name: "initialize with capabilities before protocolVersion and method last",
			body: `{"params":{"capabilities":{"elicitation":{"url":{}}},"protocolVersion":"2025-11-25"},"id":"i","jsonrpc":"2.0","method":"initialize"}`,
			want: Request{Method: "initialize", ID: []byte(`"i"`), ProtocolVersion: "2025-11-25", ElicitationURL: true},
		},
		{
			name: "capabilities outside initialize are not the client's",
			body: `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{"url":{}}}}}`,
			want: Request{Method: "tools/list", ID: []byte(`1`)},
		},
		{
			name: "notifications/initialized",
			body: `{"jsonrpc":"2.0","method":"notifications/initialized"}`,
			want: Request{Method: "notifications/initialized"},
		},
		{
			name: "tools/list with cursor",
			body: `{"jsonrpc":"2.0","id":"list-1","method":"tools/list","params":{"cursor":"eyJwYWdlIjoyfQ=="}}`,
			want: Request{Method: "tools/list", ID: []byte(`"list-1"`)},
		},
		{
			name: "tools/call with _meta (2026-07-28)",
			body: `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"get_weather",
				"arguments":{"location":"Seattle, WA","units":["c","f"]},
				"_meta":{"progressToken":"p-1","io.modelcontextprotocol/protocolVersion":"2026-07-28",
					"io.modelcontextprotocol/clientInfo":{"name":"ExampleClient","version":"1.0.0"},
					"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{},"url":{}}},
					"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
					"tracestate":"rojo=00f067aa0ba902b7","baggage":"userId=alice"}}}`,
			want: Request{
				Method: "tools/call", ID: []byte(`7`), Name: "get_weather", ProtocolVersion: "2026-07-28",
				ElicitationURL: true,
				Traceparent:    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
				Tracestate:     "rojo=00f067aa0ba902b7", Baggage: "userId=alice",
			},
		},
		{
			name: "tools/call with empty clientCapabilities",
			body: `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`,
			want: Request{Method: "tools/call", ID: []byte(`8`), Name: "t", ProtocolVersion: "2026-07-28"},
		},
		{
			name: "tools/call with arguments._metadata.authorization",
			body: `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"write_file",
				"arguments":{"path":"a.txt","_metadata":{"authorization":"Bearer abc.def.ghi","user":"u"}}}}`,
			want: Request{Method: "tools/call", ID: []byte(`3`), Name: "write_file", MetaAuthorization: "Bearer abc.def.ghi"},
		},
		{
			name: "_meta.authorization wins over arguments._metadata, which differs",
			body: `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"w",
				"arguments":{"_metadata":{"authorization":"second"}},"_meta":{"authorization":"first"}}}`,
			want: Request{Method: "tools/call", ID: []byte(`3`), Name: "w", MetaAuthorization: "first", MetaAuthorizationsDiffer: true},
		},
		{
			name: "the same token in _meta and arguments._metadata",
			body: `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"w",
				"arguments":{"_metadata":{"authorization":"same"}},"_meta":{"authorization":"same"}}}`,
			want: Request{Method: "tools/call", ID: []byte(`3`), Name: "w", MetaAuthorization: "same"},
		},
		{
			name: "an empty arguments._metadata.authorization beside _meta's",
			body: `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"w",
				"arguments":{"_metadata":{"authorization":""}},"_meta":{"authorization":"first"}}}`,
			want: Request{Method: "tools/call", ID: []byte(`3`), Name: "w", MetaAuthorization: "first"},
		},
		{
			name: "a _metadata argument of another shape is the tool's business",
			body: `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"w","arguments":{"_metadata":"x"}}}`,
			want: Request{Method: "tools/call", ID: []byte(`3`), Name: "w"},
		},
		{
			name: "resources/read",
			body: `{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"file:///projects/myapp/config.json"}}`,
			want: Request{Method: "resources/read", ID: []byte(`2`), URI: "file:///projects/myapp/config.json"},
		},
		{
			name: "skills/get, named by its URI",
			body: `{"jsonrpc":"2.0","id":2,"method":"skills/get","params":{"uri":"skill://git/SKILL.md"}}`,
			want: Request{Method: "skills/get", ID: []byte(`2`), URI: "skill://git/SKILL.md"},
		},
		{
			name: "prompts/get",
			body: `{"jsonrpc":"2.0","id":4,"method":"prompts/get","params":{"name":"code_review","arguments":{"code":"x"}}}`,
			want: Request{Method: "prompts/get", ID: []byte(`4`), Name: "code_review"},
		},
		{
			name: "A2A v0.3 message/send",
			body: `{"jsonrpc":"2.0","id":"req-001","method":"message/send","params":{"message":{"role":"user",
				"parts":[{"kind":"text","text":"Process order #12345"}],"messageId":"msg-123",
				"contextId":"ctx-456","taskId":"task-789"},"configuration":{"blocking":true}}}`,
			want: Request{Method: "message/send", ID: []byte(`"req-001"`), ContextID: "ctx-456", TaskID: "task-789"},
		},
		{
			name: "A2A v1.0 SendMessage",
			body: `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m-1",
				"contextId":"ctx-1","role":"ROLE_USER","parts":[{"text":"hi"}]},"metadata":{}}}`,
			want: Request{Method: "SendMessage", ID: []byte(`1`), ContextID: "ctx-1"},
		},
		{
			name: "A2A v1.0 SendMessage with proto field names",
			body: `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"message_id":"m-1",
				"context_id":"ctx-1","task_id":"t-1","role":"ROLE_USER","parts":[]}}}`,
			want: Request{Method: "SendMessage", ID: []byte(`1`), ContextID: "ctx-1", TaskID: "t-1"},
		},
		{
			name: "A2A message naming a skill (skillId)",
			body: `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[],
				"metadata":{"skillId":"refund","other":{"skill":1}}}}}`,
			want: Request{Method: "SendMessage", ID: []byte(`1`), Skill: "refund"},
		},
		{
			name: "A2A v0.3 message naming a skill (skill), escaped",
			body: `{"jsonrpc":"2.0","id":1,"method":"message/stream","params":{"message":{"role":"user","parts":[],"messageId":"m",
				"metadata":{"skill":"r\u0065fund"}}}}`,
			want: Request{Method: "message/stream", ID: []byte(`1`), Skill: "refund"},
		},
		{
			name: "A2A message with a null skill",
			body: `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"metadata":{"skillId":null}}}}`,
			want: Request{Method: "SendMessage", ID: []byte(`1`)},
		},
		{
			name: "A2A skill key of another case is not the skill (metadata is a map)",
			body: `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"metadata":{"SkillId":"refund"}}}}`,
			want: Request{Method: "SendMessage", ID: []byte(`1`)},
		},
		{
			name: "the skill of a method that is not a message send is not read",
			body: `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"t","message":{"metadata":{"skillId":"refund"}}}}`,
			want: Request{Method: "tasks/get", ID: []byte(`1`), ParamsID: "t"},
		},
		{
			name: "A2A message without ids",
			body: `{"jsonrpc":"2.0","id":1,"method":"message/stream","params":{"message":{"role":"user","parts":[],"messageId":"m","contextId":null}}}`,
			want: Request{Method: "message/stream", ID: []byte(`1`)},
		},
		{
			name: "A2A tasks/get",
			body: `{"jsonrpc":"2.0","id":5,"method":"tasks/get","params":{"id":"task-789","historyLength":10}}`,
			want: Request{Method: "tasks/get", ID: []byte(`5`), ParamsID: "task-789"},
		},
		{
			name: "MCP tasks/get",
			body: `{"jsonrpc":"2.0","id":5,"method":"tasks/get","params":{"taskId":"786512e2-9e0d-44bd-8f29-789f320fe840"}}`,
			want: Request{Method: "tasks/get", ID: []byte(`5`), ParamsTaskID: "786512e2-9e0d-44bd-8f29-789f320fe840"},
		},
		{
			name: "A2A v1.0 GetTaskPushNotificationConfig",
			body: `{"jsonrpc":"2.0","id":6,"method":"GetTaskPushNotificationConfig","params":{"taskId":"t-1","id":"cfg-1"}}`,
			want: Request{Method: "GetTaskPushNotificationConfig", ID: []byte(`6`), ParamsID: "cfg-1", ParamsTaskID: "t-1"},
		},
		{
			name: "A2A v1.0 push notification configuration by proto field name",
			body: `{"jsonrpc":"2.0","id":6,"method":"GetTaskPushNotificationConfig","params":{"tenant":"","task_id":"t-1","id":"cfg-1"}}`,
			want: Request{Method: "GetTaskPushNotificationConfig", ID: []byte(`6`), ParamsID: "cfg-1", ParamsTaskID: "t-1"},
		},
		{
			name: "A2A v0.3 tasks/pushNotificationConfig/set by proto field name",
			body: `{"jsonrpc":"2.0","id":6,"method":"tasks/pushNotificationConfig/set","params":{"task_id":"t\u002d1","pushNotificationConfig":{"url":"https://x"}}}`,
			want: Request{Method: "tasks/pushNotificationConfig/set", ID: []byte(`6`), ParamsTaskID: "t-1"},
		},
		{
			name: "A2A v1.0 ListTasks by context",
			body: `{"jsonrpc":"2.0","id":7,"method":"ListTasks","params":{"contextId":"ctx-1","includeArtifacts":true}}`,
			want: Request{Method: "ListTasks", ID: []byte(`7`), ParamsContextID: "ctx-1"},
		},
		{
			name: "A2A v1.0 ListTasks by context, proto field name",
			body: `{"jsonrpc":"2.0","id":7,"method":"ListTasks","params":{"context_id":"ctx-1","include_artifacts":true}}`,
			want: Request{Method: "ListTasks", ID: []byte(`7`), ParamsContextID: "ctx-1"},
		},
		{
			name: "subscriptions/listen of resources and tasks",
			body: `{"jsonrpc":"2.0","id":3,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true,"resourceSubscriptions":["file:///a","file:///\u0062"],"taskIds":["t-1"]}}}`,
			want: Request{Method: "subscriptions/listen", ID: []byte(`3`), SubscribedURIs: []string{"file:///a", "file:///b"}, SubscribedTaskIDs: []string{"t-1"}},
		},
		{
			name: "subscriptions/listen of list changes only",
			body: `{"jsonrpc":"2.0","id":3,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true,"resourceSubscriptions":[]}}}`,
			want: Request{Method: "subscriptions/listen", ID: []byte(`3`)},
		},
		{
			name: "notifications of another method are not a subscription",
			body: `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","notifications":{"taskIds":7}}}`,
			want: Request{Method: "tools/call", ID: []byte(`3`), Name: "echo"},
		},
		{
			name: "MCP request belonging to a task",
			body: `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","_meta":{"io.modelcontextprotocol/related-task":{"taskId":"t\u002d1"}}}}`,
			want: Request{Method: "tools/call", ID: []byte(`9`), Name: "echo", RelatedTaskID: "t-1"},
		},
		{
			name: "a related task of any method",
			body: `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1,"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"t-2"}}}}`,
			want: Request{Method: "notifications/progress", RelatedTaskID: "t-2"},
		},
		{
			name: "A2A v1.0 GetTask of a tenant",
			body: `{"jsonrpc":"2.0","id":7,"method":"GetTask","params":{"tenant":"acme\u002fteam","id":"t-1"}}`,
			want: Request{Method: "GetTask", ID: []byte(`7`), ParamsID: "t-1", Tenant: "acme/team"},
		},
		{
			name: "params.tenant of a method that is not A2A's",
			body: `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","tenant":5}}`,
			want: Request{Method: "tools/call", ID: []byte(`7`), Name: "echo"},
		},
		{
			name: "A2A message referencing tasks",
			body: `{"jsonrpc":"2.0","id":8,"method":"message/send","params":{"message":{"role":"user","parts":[],"messageId":"m",
				"referenceTaskIds":[ "t-1" , "t\u002d2","t-1"]}}}`,
			want: Request{Method: "message/send", ID: []byte(`8`), ReferenceTaskIDs: []string{"t-1", "t-2", "t-1"}},
		},
		{
			name: "A2A message referencing tasks by proto field name",
			body: `{"jsonrpc":"2.0","id":8,"method":"SendStreamingMessage","params":{"message":{"message_id":"m","reference_task_ids":["t-1"]}}}`,
			want: Request{Method: "SendStreamingMessage", ID: []byte(`8`), ReferenceTaskIDs: []string{"t-1"}},
		},
		{
			name: "A2A message send registering a webhook",
			body: `{"jsonrpc":"2.0","id":9,"method":"message/send","params":{"message":{},"configuration":{"pushNotificationConfig":{"url":"https://hook.example.com/"}}}}`,
			want: Request{Method: "message/send", ID: []byte(`9`), PushConfig: true},
		},
		{
			name: "A2A v1.0 push configuration, proto field name",
			body: `{"jsonrpc":"2.0","id":9,"method":"SendStreamingMessage","params":{"message":{},"configuration":{"task_push_notification_config":{"url":"https://hook.example.com/"}}}}`,
			want: Request{Method: "SendStreamingMessage", ID: []byte(`9`), PushConfig: true},
		},
		{
			name: "A2A push configuration null",
			body: `{"jsonrpc":"2.0","id":9,"method":"SendMessage","params":{"message":{},"configuration":{"pushNotification":null,"blocking":true}}}`,
			want: Request{Method: "SendMessage", ID: []byte(`9`)},
		},
		{
			name: "a completion of a prompt's argument",
			body: `{"jsonrpc":"2.0","id":4,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"admin_\u0072eport"},"argument":{"name":"customer","value":"a"}}}`,
			want: Request{Method: "completion/complete", ID: []byte(`4`), CompletedPrompt: "admin_report"},
		},
		{
			name: "a completion of a resource template's argument",
			body: `{"jsonrpc":"2.0","id":4,"method":"completion/complete","params":{"ref":{"type":"ref/resource","uri":"file:///{path}"},"argument":{"name":"path","value":"/etc/"}}}`,
			want: Request{Method: "completion/complete", ID: []byte(`4`), CompletedTemplate: "file:///{path}"},
		},
		{
			name: "a configuration outside a message send is not read",
			body: `{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{"configuration":{"pushNotificationConfig":{}}}}`,
			want: Request{Method: "tools/list", ID: []byte(`9`)},
		},
		{
			name: "A2A message referencing no task",
			body: `{"jsonrpc":"2.0","id":8,"method":"SendMessage","params":{"message":{"referenceTaskIds":[],"reference_task_ids":null}}}`,
			want: Request{Method: "SendMessage", ID: []byte(`8`)},
		},
		{
			name: "the references of a method that is not a message send are not read",
			body: `{"jsonrpc":"2.0","id":8,"method":"tasks/get","params":{"id":"t","message":{"referenceTaskIds":[1]}}}`,
			want: Request{Method: "tasks/get", ID: []byte(`8`), ParamsID: "t"},
		},
		{
			name: "notification with params",
			body: `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"123","reason":"User requested cancellation"}}`,
			want: Request{Method: "notifications/cancelled"},
		},
		{
			name: "result response",
			body: `{"jsonrpc":"2.0","id":"srv-1","result":{"action":"accept","content":{"name":"x"}}}`,
			want: Request{ID: []byte(`"srv-1"`), IsResponse: true, Answers: AnswersElicitation},
		},
		{
			name: "a sampling result, its keys in any case",
			body: `{"jsonrpc":"2.0","id":"srv-2","result":{"ROLE":"assistant","content":{"type":"text","text":"t"},"model":"m"}}`,
			want: Request{ID: []byte(`"srv-2"`), IsResponse: true, Answers: AnswersSampling},
		},
		{
			name: "a roots listing",
			body: `{"jsonrpc":"2.0","id":3,"result":{"roots":[]}}`,
			want: Request{ID: []byte(`3`), IsResponse: true, Answers: AnswersRoots},
		},
		{
			name: "an empty result answers nothing it tells",
			body: `{"jsonrpc":"2.0","id":3,"result":{}}`,
			want: Request{ID: []byte(`3`), IsResponse: true},
		},
		{
			name: "a retry's inputResponses, each by its shape",
			body: `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"t","inputResponses":{"a":{"action":"decline"},"b":{"roots":[]}},"requestState":"s"}}`,
			want: Request{Method: "tools/call", ID: []byte(`4`), Name: "t", Answers: AnswersElicitation | AnswersRoots, RequestState: "s"},
		},
		{
			name: "an inputResponses entry wrapping its answer is one of any request",
			body: `{"jsonrpc":"2.0","id":4,"method":"ping","params":{"inputResponses":{"a":{"method":"roots/list","result":{"roots":[]}}}}}`,
			want: Request{Method: "ping", ID: []byte(`4`), Answers: AnswersAny},
		},
		{
			name: "an inputResponses entry of no known shape is one of any request",
			body: `{"jsonrpc":"2.0","id":4,"method":"ping","params":{"inputResponses":{"a":{"content":{}}}}}`,
			want: Request{Method: "ping", ID: []byte(`4`), Answers: AnswersAny},
		},
		{
			name: "empty inputResponses",
			body: `{"jsonrpc":"2.0","id":4,"method":"ping","params":{"inputResponses":{},"requestState":"s\u0031"}}`,
			want: Request{Method: "ping", ID: []byte(`4`), RequestState: "s1"},
		},
		{
			name: "result response with null result",
			body: `{"jsonrpc":"2.0","id":9,"result":null}`,
			want: Request{ID: []byte(`9`), IsResponse: true},
		},
		{
			name: "error response without id",
			body: `{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request"}}`,
			want: Request{IsResponse: true},
		},
		{
			name: "error response with null id",
			body: `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`,
			want: Request{ID: []byte(`null`), IsResponse: true},
		},
		{
			name: "escaped strings are decoded, the id is echoed raw",
			body: `{"jsonrpc":"2\u002e0","id":"a\"b\u00e9","method":"tools\/call","params":{"n\u0061me":"get\u005fweather \u00e9\ud83d\ude00",
				"_meta":{"traceparent":"00-\u0030"}}}`,
			want: Request{Method: "tools/call", ID: []byte(`"a\"b\u00e9"`), Name: "get_weather é😀", Traceparent: "00-0"},
		},
		{
			name: "raw UTF-8 and unusual whitespace",
			body: " \r\n\t{ \"jsonrpc\" : \"2.0\" ,\n\"id\":-1500,\"method\":\"prompts/get\",\"params\":{\"name\":\"résumé ✓\"} }\n",
			want: Request{Method: "prompts/get", ID: []byte(`-1500`), Name: "résumé ✓"},
		},
		{
			name: "unknown members, null and array params",
			body: `{"jsonrpc":"2.0","id":1,"method":"ping","params":null,"extra":{"method":"tools/call","params":{"name":"x"}}}`,
			want: Request{Method: "ping", ID: []byte(`1`)},
		},
		{
			name: "positional params",
			body: `{"jsonrpc":"2.0","id":1,"method":"custom/op","params":["tools/call",{"name":"x"}]}`,
			want: Request{Method: "custom/op", ID: []byte(`1`)},
		},
		{
			name: "nulls read as absent",
			body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":null,"arguments":null,"_meta":null}}`,
			want: Request{Method: "tools/call", ID: []byte(`1`)},
		},
		{
			name: "unpaired surrogate where it is not read",
			body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","arguments":{"q":"\ud800"}}}`,
			want: Request{Method: "tools/call", ID: []byte(`1`), Name: "n"},
		},
		{
			name: "many distinct keys",
			body: `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":{` + manyKeys(100) + `}}}`,
			want: Request{Method: "ping", ID: []byte(`1`)},
		},
		{
			name: "case variants where no struct reads them",
			body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","arguments":{"q":1,"Q":3},"_meta":{"x":1,"X":2}}}`,
			want: Request{Method: "tools/call", ID: []byte(`1`), Name: "n"},
		},
		{
			name: "types of members a method does not define are not checked",
			body: `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"u","name":{"first":"a"}}}`,
			want: Request{Method: "resources/read", ID: []byte(`1`), URI: "u"},
		},
		{
			name: "long strings spill out of the stack buffer",
			body: `{"jsonrpc":"2.0","id":1,"method":"` + strings.Repeat("m", 600) + `","params":{"name":"` + strings.Repeat("n", 700) + `"}}`,
			want: Request{Method: strings.Repeat("m", 600), ID: []byte(`1`), Name: strings.Repeat("n", 700)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.body))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			got.ArgumentsStart, got.ArgumentsEnd = 0, 0 // TestArgumentsSpan
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Parse:\n got %#v\nwant %#v", got, tt.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	const ok = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n"}}`
	if _, err := Parse([]byte(ok)); err != nil {
		t.Fatalf("the base body must parse: %v", err)
	}
	tests := []struct {
		name string
		body string
		want error
	}{
		{"empty", ``, ErrParse},
		{"only whitespace", " \n", ErrParse},
		{"not JSON", `hello`, ErrParse},
		{"truncated", ok[:len(ok)-1], ErrParse},
		{"trailing garbage", ok + `x`, ErrParse},
		{"two objects", ok + ok, ErrParse},
		{"trailing comma", `{"jsonrpc":"2.0","method":"ping",}`, ErrParse},
		{"single quotes", `{'jsonrpc':'2.0'}`, ErrParse},
		{"unquoted key", `{jsonrpc:"2.0"}`, ErrParse},
		{"invalid UTF-8", "{\"jsonrpc\":\"2.0\",\"method\":\"p\xffing\"}", ErrParse},
		{"invalid UTF-8 in a skipped value", "{\"jsonrpc\":\"2.0\",\"method\":\"ping\",\"x\":\"\xc3\"}", ErrParse},
		{"UTF-8 encoded surrogate", "{\"jsonrpc\":\"2.0\",\"method\":\"\xed\xa0\x80\"}", ErrParse},
		{"byte order mark", "\xef\xbb\xbf" + ok, ErrParse},
		{"control character in string", "{\"jsonrpc\":\"2.0\",\"method\":\"a\nb\"}", ErrParse},
		{"bad escape", `{"jsonrpc":"2.0","method":"\x41"}`, ErrParse},
		{"short unicode escape", `{"jsonrpc":"2.0","method":"\u00g1"}`, ErrParse},
		{"leading zero", `{"jsonrpc":"2.0","method":"ping","id":01}`, ErrParse},
		{"bare minus", `{"jsonrpc":"2.0","method":"ping","id":-}`, ErrParse},
		{"dangling fraction", `{"jsonrpc":"2.0","method":"ping","id":1.}`, ErrParse},
		{"dangling exponent", `{"jsonrpc":"2.0","method":"ping","id":1e+}`, ErrParse},
		{"plus sign", `{"jsonrpc":"2.0","method":"ping","id":+1}`, ErrParse},
		{"bad literal", `{"jsonrpc":"2.0","method":"ping","x":nul}`, ErrParse},
		{"literal with suffix", `{"jsonrpc":"2.0","method":"ping","x":truex}`, ErrParse},
		{"NaN", `{"jsonrpc":"2.0","method":"ping","x":NaN}`, ErrParse},
		{"missing colon", `{"jsonrpc" "2.0"}`, ErrParse},
		{"unclosed array deep in arguments", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","arguments":{"a":[1,2}}}`, ErrParse},
		{"syntax error wins over invalid request", `{"jsonrpc":"1.0","method":5,"x":[}`, ErrParse},

		{"batch", `[` + ok + `,` + ok + `]`, ErrBatch},
		{"empty batch", `[]`, ErrBatch},
		{"malformed batch", `[` + ok + `,]`, ErrParse},

		{"string", `"tools/call"`, ErrInvalidRequest},
		{"number", `1`, ErrInvalidRequest},
		{"null", `null`, ErrInvalidRequest},
		{"empty object", `{}`, ErrInvalidRequest},
		{"missing jsonrpc", `{"id":1,"method":"ping"}`, ErrInvalidRequest},
		{"wrong jsonrpc version", `{"jsonrpc":"1.0","id":1,"method":"ping"}`, ErrInvalidRequest},
		{"jsonrpc as number", `{"jsonrpc":2.0,"id":1,"method":"ping"}`, ErrInvalidRequest},
		{"method not a string", `{"jsonrpc":"2.0","id":1,"method":5}`, ErrInvalidRequest},
		{"method null", `{"jsonrpc":"2.0","id":1,"method":null}`, ErrInvalidRequest},
		{"empty method", `{"jsonrpc":"2.0","id":1,"method":""}`, ErrInvalidRequest},
		{"id object", `{"jsonrpc":"2.0","id":{},"method":"ping"}`, ErrInvalidRequest},
		{"id array", `{"jsonrpc":"2.0","id":[1],"method":"ping"}`, ErrInvalidRequest},
		{"fractional id", `{"jsonrpc":"2.0","id":1.5,"method":"ping"}`, ErrInvalidRequest},
		{"id with exponent", `{"jsonrpc":"2.0","id":1e3,"method":"ping"}`, ErrInvalidRequest},
		{"id of 16 digits", `{"jsonrpc":"2.0","id":1234567890123456,"method":"ping"}`, ErrInvalidRequest},
		{"id bool", `{"jsonrpc":"2.0","id":true,"method":"ping"}`, ErrInvalidRequest},
		{"params string", `{"jsonrpc":"2.0","id":1,"method":"ping","params":"x"}`, ErrInvalidRequest},
		{"params number", `{"jsonrpc":"2.0","id":1,"method":"ping","params":1}`, ErrInvalidRequest},
		{"neither method nor result", `{"jsonrpc":"2.0","id":1}`, ErrInvalidRequest},
		{"result and error", `{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"m"}}`, ErrInvalidRequest},
		{"result without id", `{"jsonrpc":"2.0","result":{}}`, ErrInvalidRequest},
		{"error not an object", `{"jsonrpc":"2.0","id":1,"error":"bad"}`, ErrInvalidRequest},
		{"method and result", `{"jsonrpc":"2.0","id":1,"method":"ping","result":{}}`, ErrInvalidRequest},

		{"tools/call params by position", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":["delete_file"]}`, ErrInvalidRequest},
		{"resources/read params by position", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":["file:///etc/passwd"]}`, ErrInvalidRequest},
		{"tools/call name not a string", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":5}}`, ErrInvalidRequest},
		{"tools/call arguments not an object", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","arguments":"x"}}`, ErrInvalidRequest},
		{"prompts/get name not a string", `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":["n"]}}`, ErrInvalidRequest},
		{"resources/read uri not a string", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":{}}}`, ErrInvalidRequest},
		{"a requestState that is no string", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","requestState":{"s":1}}}`, ErrInvalidRequest},
		{"inputResponses that are no object", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","inputResponses":[{"role":"assistant"}]}}`, ErrInvalidRequest},
		{"skills/get params by position", `{"jsonrpc":"2.0","id":1,"method":"skills/get","params":["skill://a/SKILL.md"]}`, ErrInvalidRequest},
		{"resources/directory/read uri not a string", `{"jsonrpc":"2.0","id":1,"method":"resources/directory/read","params":{"uri":1}}`, ErrInvalidRequest},
		{"initialize protocolVersion not a string", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":20250618}}`, ErrInvalidRequest},
		{"initialize capabilities not an object", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"capabilities":[]}}`, ErrInvalidRequest},
		{"initialize elicitation not an object", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"capabilities":{"elicitation":true}}}`, ErrInvalidRequest},
		{"initialize elicitation.url not an object", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"capabilities":{"elicitation":{"url":true}}}}`, ErrInvalidRequest},
		{"_meta not an object", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":"x"}}`, ErrInvalidRequest},
		{"_meta protocolVersion not a string", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":1}}}`, ErrInvalidRequest},
		{"_meta clientCapabilities not an object", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":"all"}}}`, ErrInvalidRequest},
		{"_meta elicitation.url not an object", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"url":1}}}}}`, ErrInvalidRequest},
		{"_meta traceparent not a string", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"traceparent":{}}}}`, ErrInvalidRequest},
		{"_meta authorization not a string", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"authorization":["Bearer x"]}}}`, ErrInvalidRequest},
		{"A2A message not an object", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":"hi"}}`, ErrInvalidRequest},
		{"A2A contextId not a string", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"contextId":1}}}`, ErrInvalidRequest},
		{"A2A task id not a string", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":7}}`, ErrInvalidRequest},
		{"MCP taskId not a string", `{"jsonrpc":"2.0","id":1,"method":"tasks/result","params":{"taskId":7}}`, ErrInvalidRequest},
		{"A2A task_id not a string", `{"jsonrpc":"2.0","id":1,"method":"CreateTaskPushNotificationConfig","params":{"task_id":["t"]}}`, ErrInvalidRequest},
		{"A2A ListTasks contextId not a string", `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"contextId":{}}}`, ErrInvalidRequest},
		{"A2A ListTasks context_id not a string", `{"jsonrpc":"2.0","id":1,"method":"tasks/list","params":{"context_id":1}}`, ErrInvalidRequest},
		{"A2A references not an array", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"referenceTaskIds":"t"}}}`, ErrInvalidRequest},
		{"A2A reference not a string", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"referenceTaskIds":["t",7]}}}`, ErrInvalidRequest},
		{"A2A null reference", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"reference_task_ids":[null]}}}`, ErrInvalidRequest},
		{"A2A nested references", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"referenceTaskIds":[["t"]]}}}`, ErrInvalidRequest},
		{"completion without a reference", `{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"argument":{"name":"a","value":""}}}`, ErrInvalidRequest},
		{"completion of a prompt without its name", `{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","uri":"x"}}}`, ErrInvalidRequest},
		{"completion naming a prompt and a template", `{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"p","uri":"file:///{x}"}}}`, ErrInvalidRequest},
		{"completion of an unknown reference type", `{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{"type":"ref/tool","name":"p"}}}`, ErrInvalidRequest},
		{"completion naming its prompt in another case", `{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"p","Name":"admin"}}}`, ErrInvalidRequest},
		{"completion of a prompt named with NUL", `{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"p\u0000"}}}`, ErrInvalidRequest},
		{"A2A message send without its message", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"request":{"taskId":"t"}}}`, ErrInvalidRequest},
		{"A2A message send with a null message", `{"jsonrpc":"2.0","id":1,"method":"message/stream","params":{"message":null}}`, ErrInvalidRequest},
		{"A2A push configuration not an object", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{},"configuration":{"pushNotificationConfig":"https://hook.example.com/"}}}`, ErrInvalidRequest},
		{"A2A configuration not an object", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{},"configuration":[]}}`, ErrInvalidRequest},
		{"A2A push configuration in another case", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{},"configuration":{"PushNotificationConfig":{}}}}`, ErrInvalidRequest},
		{"A2A push configuration twice", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{},"configuration":{"pushNotificationConfig":null,"pushNotificationConfig":{}}}}`, ErrInvalidRequest},
		{"A2A too many references", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"referenceTaskIds":[` + strings.Repeat(`"t",`, MaxReferenceTaskIDs) + `"t"]}}}`, ErrInvalidRequest},
		{"A2A reference with an unpaired surrogate", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"referenceTaskIds":["\ud800"]}}}`, ErrInvalidRequest},

		{"duplicate method", `{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call"}`, ErrInvalidRequest},
		{"duplicate jsonrpc", `{"jsonrpc":"2.0","jsonrpc":"2.0","id":1,"method":"ping"}`, ErrInvalidRequest},
		{"duplicate params", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"},"params":{"name":"b"}}`, ErrInvalidRequest},
		{"duplicate name", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"allowed","name":"forbidden"}}`, ErrInvalidRequest},
		{"duplicate name, one escaped", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"allowed","n\u0061me":"forbidden"}}`, ErrInvalidRequest},
		{"duplicate _meta authorization", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"authorization":"a","authorization":"b"}}}`, ErrInvalidRequest},
		{"A2A skill not a string", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"metadata":{"skillId":["refund"]}}}}`, ErrInvalidRequest},
		{"A2A skill under both keys", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"metadata":{"skillId":"a","skill":"a"}}}}`, ErrInvalidRequest},
		{"A2A skill twice", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"metadata":{"skill":"a","skill":"b"}}}}`, ErrInvalidRequest},
		{"A2A skill too long", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"metadata":{"skill":"` + strings.Repeat("s", MaxSkillLen+1) + `"}}}}`, ErrInvalidRequest},
		{"A2A skill too long escaped", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"metadata":{"skill":"` + strings.Repeat(`\u0073`, MaxSkillLen+1) + `"}}}}`, ErrInvalidRequest},
		{"A2A skill with a control character", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"metadata":{"skill":"a\nb"}}}}`, ErrInvalidRequest},
		{"listen's notifications not an object", `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":["file:///etc/passwd"]}}`, ErrInvalidRequest},
		{"subscribed resources not an array", `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":"file:///etc/passwd"}}}`, ErrInvalidRequest},
		{"a subscribed resource not a string", `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["file:///a",{"uri":"file:///etc/passwd"}]}}}`, ErrInvalidRequest},
		{"subscribed resources twice", `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":[],"resourceSubscriptions":["file:///etc/passwd"]}}}`, ErrInvalidRequest},
		{"subscribed resources in another case", `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":[],"ResourceSubscriptions":["file:///etc/passwd"]}}}`, ErrInvalidRequest},
		{"too many subscribed resources", `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":[` + strings.TrimSuffix(strings.Repeat(`"file:///a",`, MaxSubscribedURIs+1), ",") + `]}}}`, ErrInvalidRequest},
		{"subscribed tasks not strings", `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"taskIds":[1]}}}`, ErrInvalidRequest},
		{"subscribed tasks in another case", `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"taskIds":[],"TASKIDS":["t"]}}}`, ErrInvalidRequest},
		{"related task not an object", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","_meta":{"io.modelcontextprotocol/related-task":"t-1"}}}`, ErrInvalidRequest},
		{"related task id not a string", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/related-task":{"taskId":7}}}}`, ErrInvalidRequest},
		{"related task id twice", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"a","taskId":"b"}}}}`, ErrInvalidRequest},
		{"related task id in another case", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"a","TaskId":"b"}}}}`, ErrInvalidRequest},
		{"related task id with a control character", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"a\u0000"}}}}`, ErrInvalidRequest},
		{"related task twice", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"a"},"io.modelcontextprotocol/related-task":{"taskId":"b"}}}}`, ErrInvalidRequest},
		{"A2A tenant not a string", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"tenant":{"id":"globex"},"message":{}}}`, ErrInvalidRequest},
		{"A2A tenant a number", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"tenant":7,"id":"t"}}`, ErrInvalidRequest},
		{"A2A tenant twice", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"tenant":"acme","tenant":"globex","id":"t"}}`, ErrInvalidRequest},
		{"A2A tenant in another case", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"tenant":"acme","Tenant":"globex","id":"t"}}`, ErrInvalidRequest},
		{"A2A tenant with a control character", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"tenant":"acme\u0000globex","id":"t"}}`, ErrInvalidRequest},
		{"A2A message metadata not an object", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"metadata":"skill"}}}`, ErrInvalidRequest},
		{"duplicate contextId", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"contextId":"a","contextId":"b"}}}`, ErrInvalidRequest},
		{"both spellings of contextId", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"contextId":"a","context_id":"b"}}}`, ErrInvalidRequest},
		{"both spellings of taskId", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"taskId":"a","task_id":"b"}}}`, ErrInvalidRequest},
		{"both spellings of params.taskId", `{"jsonrpc":"2.0","id":1,"method":"GetTaskPushNotificationConfig","params":{"taskId":"a","task_id":"b","id":"c"}}`, ErrInvalidRequest},
		{"both spellings of params.taskId, the same id", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"a","task_id":"a"}}`, ErrInvalidRequest},
		{"both spellings of params.taskId, any method", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","taskId":"a","task_id":"b"}}`, ErrInvalidRequest},
		{"both spellings of params.contextId", `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"contextId":"a","context_id":"b"}}`, ErrInvalidRequest},
		{"both spellings of referenceTaskIds", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"referenceTaskIds":["a"],"reference_task_ids":["b"]}}}`, ErrInvalidRequest},
		{"case variant of task_id", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"a","Task_Id":"b"}}`, ErrInvalidRequest},
		{"case variant of referenceTaskIds", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"referencetaskids":["a"]}}}`, ErrInvalidRequest},
		{"duplicate task_id", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"task_id":"a","task_id":"b"}}`, ErrInvalidRequest},
		{"case variant of method", `{"jsonrpc":"2.0","id":1,"method":"tools/list","Method":"tools/call"}`, ErrInvalidRequest},
		{"case variant of name", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"allowed","NAME":"forbidden"}}`, ErrInvalidRequest},
		{"Kelvin sign variant of taskId", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"tas\u212aId":"t"}}}`, ErrInvalidRequest},
		{"long s variant of params", `{"jsonrpc":"2.0","id":1,"method":"tools/call","param\u017f":{"name":"x"}}`, ErrInvalidRequest},
		{"unpaired surrogate in name", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a\ud800b"}}`, ErrInvalidRequest},
		{"unpaired low surrogate in method", `{"jsonrpc":"2.0","id":1,"method":"\udc00"}`, ErrInvalidRequest},
		{"reversed surrogate pair", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"\ude00\ud83d"}}`, ErrInvalidRequest},
		{"duplicate key in tool arguments", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","arguments":{"path":"/tmp/a","path":"/etc/passwd"}}}`, ErrInvalidRequest},
		{"duplicate key deep in arguments", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","arguments":{"a":[{"b":{"c":1,"c":2}}]}}}`, ErrInvalidRequest},
		{"duplicate escaped key in an unread object", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":{"k":1,"\u006b":2}}}`, ErrInvalidRequest},
		{"duplicate unknown top-level key", `{"jsonrpc":"2.0","id":1,"method":"ping","extra":1,"extra":2}`, ErrInvalidRequest},
		{"duplicate _meta key we do not read", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"progressToken":1,"progressToken":2}}}`, ErrInvalidRequest},
		{"duplicate among many keys", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":{` + manyKeys(40) + `,"k7":0}}}`, ErrInvalidRequest},
		{"duplicate beyond the first sixteen keys", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":{` + manyKeys(40) + `,"k30":0}}}`, ErrInvalidRequest},
		{"upper-case jsonrpc key", `{"JSONRPC":"2.0","id":1,"method":"ping"}`, ErrInvalidRequest},
		{"long s jsonrpc key", `{"j\u017fonrpc":"2.0","id":1,"method":"ping"}`, ErrInvalidRequest},
		{"long s jsonrpc key, raw UTF-8", "{\"j\u017fonrpc\":\"2.0\",\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}", ErrInvalidRequest},
		{"NUL in method", `{"jsonrpc":"2.0","id":1,"method":"tools/call\u0000x","params":{"name":"n"}}`, ErrInvalidRequest},
		{"NUL in name", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete_file\u0000"}}`, ErrInvalidRequest},
		{"newline in name", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete\nfile"}}`, ErrInvalidRequest},
		{"DEL in uri", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///etc/passwd\u007f"}}`, ErrInvalidRequest},
		{"unpaired surrogate in token", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"authorization":"\ud800"}}}`, ErrInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.body))
			if !errors.Is(err, tt.want) {
				t.Fatalf("Parse(%q) = %#v, %v; want %v", tt.body, got, err, tt.want)
			}
			// Only the id comes back with an error, and only when every
			// upstream reads the same one (every body here that has a
			// readable id has id 1).
			if !reflect.DeepEqual(got, Request{ID: got.ID}) {
				t.Errorf("Parse returned %#v with its error", got)
			}
			if got.ID != nil && string(got.ID) != "1" {
				t.Errorf("Parse returned id %s with its error, want 1 or none", got.ID)
			}
		})
	}
}

// TestParseRefusalReasons: the refusals of A2A ids spelled twice or of the
// wrong shape say why, and echo the id.
func TestParseRefusalReasons(t *testing.T) {
	tests := []struct{ name, body, reason string }{
		{"params.taskId and task_id", `{"jsonrpc":"2.0","id":"g","method":"GetTaskPushNotificationConfig","params":{"taskId":"a","task_id":"b"}}`, "params names the task twice, as taskId and task_id"},
		{"message taskId and task_id", `{"jsonrpc":"2.0","id":"g","method":"message/send","params":{"message":{"taskId":"a","task_id":"b"}}}`, "params.message names its task twice"},
		{"ListTasks contextId and context_id", `{"jsonrpc":"2.0","id":"g","method":"ListTasks","params":{"contextId":"a","context_id":"b"}}`, "params names the context twice"},
		{"references spelled twice", `{"jsonrpc":"2.0","id":"g","method":"SendMessage","params":{"message":{"referenceTaskIds":[],"reference_task_ids":["b"]}}}`, "referenced tasks twice"},
		{"a reference that is no string", `{"jsonrpc":"2.0","id":"g","method":"SendMessage","params":{"message":{"referenceTaskIds":[{"id":"b"}]}}}`, "must be an array of strings"},
		{"a v0.3 gRPC resource name", `{"jsonrpc":"2.0","id":"g","method":"GetTask","params":{"id":"a","name":"tasks/b"}}`, "params.name or params.parent"},
		{"a v0.3 gRPC parent", `{"jsonrpc":"2.0","id":"g","method":"tasks/pushNotificationConfig/list","params":{"id":"a","parent":"tasks/b"}}`, "params.name or params.parent"},
		{"a parent on a message send", `{"jsonrpc":"2.0","id":"g","method":"SendMessage","params":{"parent":"tasks/b","message":{}}}`, "params.name or params.parent"},
		{"too many references", `{"jsonrpc":"2.0","id":"g","method":"SendMessage","params":{"message":{"referenceTaskIds":[` + strings.Repeat(`"t",`, MaxReferenceTaskIDs) + `"t"]}}}`, "more than 64 tasks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.body))
			code, msg := CodeFor(err)
			if !errors.Is(err, ErrInvalidRequest) || code != CodeInvalidRequest || !strings.Contains(msg, tt.reason) {
				t.Fatalf("Parse: %v (%d %q), want -32600 saying %q", err, code, msg, tt.reason)
			}
			if string(got.ID) != `"g"` {
				t.Errorf("refused with id %s, want \"g\"", got.ID)
			}
		})
	}
}

// TestParseErrorID: a refusal echoes the id when it can be read
// unambiguously, and no id otherwise.
func TestParseErrorID(t *testing.T) {
	tests := []struct {
		name, body string
		want       []byte
	}{
		{"duplicate method keeps the id", `{"jsonrpc":"2.0","id":7,"method":"tools/list","method":"tools/call"}`, []byte(`7`)},
		{"string id", `{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"x","NAME":"y"}}`, []byte(`"a"`)},
		{"duplicate id", `{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}`, nil},
		{"case variant of id", `{"jsonrpc":"2.0","id":1,"ID":2,"method":"ping"}`, nil},
		{"long s is no variant of id", `{"jsonrpc":"2.0","id":1,"method":"ping","ſx":1,"ſx":2}`, []byte(`1`)},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, nil},
		{"not JSON", `{"jsonrpc":"2.0","id":1,"method":"ping"`, nil},
		{"invalid UTF-8", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"x\":\"\xff\"}", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.body))
			if err == nil {
				t.Fatalf("Parse(%q) accepted it", tt.body)
			}
			if !bytes.Equal(got.ID, tt.want) {
				t.Errorf("Parse(%q) id = %q, want %q", tt.body, got.ID, tt.want)
			}
		})
	}
}

// manyKeys is n distinct members "k0":0, "k1":0, ...
func manyKeys(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:0", fmt.Sprintf("k%d", i))
	}
	return b.String()
}

func TestParseSizeBound(t *testing.T) {
	const base = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","arguments":{"blob":""}}}`
	pad := func(n int) []byte {
		// Grow the blob argument until the body is n bytes.
		b := []byte(base)
		i := bytes.Index(b, []byte(`""`)) + 1
		return append(b[:i:i], append(bytes.Repeat([]byte{'x'}, n-len(base)), b[i:]...)...)
	}
	atLimit := pad(MaxBodySize)
	if len(atLimit) != MaxBodySize {
		t.Fatalf("test body is %d bytes, want %d", len(atLimit), MaxBodySize)
	}
	if r, err := Parse(atLimit); err != nil || r.Name != "n" {
		t.Errorf("Parse(MaxBodySize bytes) = %v, %v; want the request", r, err)
	}
	if _, err := Parse(pad(MaxBodySize + 1)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Parse(MaxBodySize+1 bytes) = %v, want ErrTooLarge", err)
	}
}

func TestParseDepthBound(t *testing.T) {
	// The top-level object is depth 1 and params depth 2: n arrays in
	// params reach depth n+2.
	nested := func(n int) []byte {
		return []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","arguments":{"a":` +
			strings.Repeat("[", n-3) + strings.Repeat("]", n-3) + `}}}`)
	}
	if _, err := Parse(nested(MaxDepth)); err != nil {
		t.Errorf("Parse(depth %d) = %v, want nil", MaxDepth, err)
	}
	if _, err := Parse(nested(MaxDepth + 1)); !errors.Is(err, ErrTooDeep) {
		t.Errorf("Parse(depth %d) = %v, want ErrTooDeep", MaxDepth+1, err)
	}
	// Deep enough to exhaust an unbounded recursive parser's stack.
	for _, open := range []string{"[", `{"a":`, `{"jsonrpc":"2.0","method":"m","params":`} {
		if _, err := Parse([]byte(strings.Repeat(open, MaxBodySize/len(open)))); !errors.Is(err, ErrTooDeep) {
			t.Errorf("Parse(%q repeated) = %v, want ErrTooDeep", open, err)
		}
	}
}

func TestParseDoesNotAliasBody(t *testing.T) {
	body := []byte(`{"jsonrpc":"2.0","id":"abc","method":"x/custom","params":{"name":"tool","_meta":{"authorization":"tok"}}}`)
	r, err := Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	want := Request{Method: "x/custom", ID: []byte(`"abc"`), Name: "tool", MetaAuthorization: "tok"}
	for i := range body {
		body[i] = 'X'
	}
	r.ArgumentsStart, r.ArgumentsEnd = 0, 0
	if !reflect.DeepEqual(r, want) {
		t.Errorf("after overwriting the body: %#v, want %#v", r, want)
	}
}

// TestNotificationHasNoID: a notification (no id member) and a request
// with id null differ; only the first has a nil ID.
func TestNotificationHasNoID(t *testing.T) {
	tests := []struct {
		name string
		body string
		want bool // no id
	}{
		{"notification", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, true},
		{"request", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, false},
		{"request with null id", `{"jsonrpc":"2.0","id":null,"method":"ping"}`, false},
		{"error response without id", `{"jsonrpc":"2.0","error":{"code":1,"message":"m"}}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Parse([]byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if got := r.ID == nil; got != tt.want {
				t.Errorf("ID %q: no id = %v, want %v", r.ID, got, tt.want)
			}
		})
	}
}

func TestMirroredName(t *testing.T) {
	tests := []struct {
		name     string
		r        Request
		want     string
		required bool
	}{
		{"tools/call", Request{Method: "tools/call", Name: "t", URI: "u"}, "t", true},
		{"prompts/get", Request{Method: "prompts/get", Name: "p"}, "p", true},
		{"resources/read", Request{Method: "resources/read", Name: "n", URI: "file:///a"}, "file:///a", true},
		{"tools/list", Request{Method: "tools/list", Name: "n"}, "", false},
		{"skills/get: named by its URI, which no header mirrors", Request{Method: "skills/get", Name: "n", URI: "skill://a/SKILL.md"}, "", false},
		{"response", Request{IsResponse: true}, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, required := tt.r.MirroredName()
			if got != tt.want || required != tt.required {
				t.Errorf("MirroredName() = %q, %v; want %q, %v", got, required, tt.want, tt.required)
			}
		})
	}
}

func TestLogValueLeavesOutTheToken(t *testing.T) {
	const token = "eyJhbGciOiJIUzI1NiJ9.secret.sig"
	r, err := Parse([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"authorization":"Bearer ` + token + `"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("check", "request", r)
	for _, out := range []string{buf.String(), r.String()} {
		if strings.Contains(out, token) {
			t.Errorf("output holds the token: %s", out)
		}
		if !strings.Contains(out, "tools/call") || !strings.Contains(out, "meta_authorization") {
			t.Errorf("output lacks the request: %s", out)
		}
	}
}

func TestLooksLikeJSON(t *testing.T) {
	for body, want := range map[string]bool{
		`{"a":1}`: true, ` [1]`: true, "\r\n\t{": true, "\xef\xbb\xbf{": true, "\xff\xfe{\x00": true,
		"\x00{": true, "\x00\x00\x00[": true, "/* c */{}": true, "// c\n{}": true,
		"": false, "  ": false, "a=1": false, "hello": false, `"x"`: false, "1": false, "/x": false, "<xml/>": false,
	} {
		if got := LooksLikeJSON([]byte(body)); got != want {
			t.Errorf("LooksLikeJSON(%q) = %v, want %v", body, got, want)
		}
	}
}

func TestArgumentsSpan(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{"object", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments": {"path": "/x", "n": [1]} }}`, `{"path": "/x", "n": [1]}`},
		{"absent", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}`, ``},
		{"null", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":null}}`, ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Parse([]byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if got := tt.body[r.ArgumentsStart:r.ArgumentsEnd]; got != tt.want {
				t.Errorf("arguments = %q, want %q", got, tt.want)
			}
		})
	}
}
