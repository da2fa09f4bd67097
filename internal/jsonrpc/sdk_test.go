package jsonrpc_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"iter"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/extauthz/extauthz/internal/jsonrpc"
	"github.com/extauthz/extauthz/internal/testing/fixtures"
)

// The SDK differential: the same body goes to Parse and to the real
// servers of the go-sdk (MCP) and a2a-go (A2A), whose decoders are what
// upstreams run. For every body, either Parse refuses it, or the SDK does
// not act on it, or both read the same method, id, rule name (tool or
// prompt name, resource URI) and conversation ids. (MCP sessions travel
// only in the Mcp-Session-Id header, never in the body.)

// reading is what an SDK server acted on.
type reading struct {
	method   string
	name     string // tool or prompt name, resource URI
	id       []byte // the id of its answer
	context  string // A2A params.message.contextId
	taskID   string // A2A params.message.taskId
	paramsID string // A2A params.id / params.taskId
	refs     string // A2A params.message.referenceTaskIds, joined by commas
	push     bool   // A2A params.configuration.pushNotificationConfig is set
}

// recorder keeps the last reading of an SDK server.
type recorder struct {
	mu  sync.Mutex
	got *reading
}

func (r *recorder) set(x reading) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = &x
}

func (r *recorder) take() *reading {
	r.mu.Lock()
	defer r.mu.Unlock()
	x := r.got
	r.got = nil
	return x
}

var errRecorded = errors.New("recorded")

// newMCPReference is a go-sdk server whose middleware records each call it
// decoded and answers it with an error (nothing runs).
func newMCPReference(rec *recorder) http.Handler {
	server := mcp.NewServer(&mcp.Implementation{Name: "reference", Version: "v1"}, &mcp.ServerOptions{
		Logger:             slog.New(slog.DiscardHandler),
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
		CompletionHandler:  func(context.Context, *mcp.CompleteRequest) (*mcp.CompleteResult, error) { return nil, errRecorded },
	})
	mcp.AddTool(server, &mcp.Tool{Name: "delete_file"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return nil, nil, errRecorded
	})
	server.AddPrompt(&mcp.Prompt{Name: "p"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return nil, errRecorded
	})
	server.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			r := reading{method: method}
			switch p := req.GetParams().(type) {
			case *mcp.CallToolParamsRaw:
				r.name = p.Name
			case *mcp.GetPromptParams:
				r.name = p.Name
			case *mcp.ReadResourceParams:
				r.name = p.URI
			case *mcp.SubscribeParams:
				r.name = p.URI
			case *mcp.UnsubscribeParams:
				r.name = p.URI
			case *mcp.CompleteParams:
				if p.Ref != nil {
					// the prompt or the template, as Parse's CompletedPrompt
					// and CompletedTemplate
					r.name = p.Ref.Name + p.Ref.URI
				}
			}
			rec.set(r)
			return nil, errRecorded
		}
	})
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{
		Stateless: true, JSONResponse: true, Logger: slog.New(slog.DiscardHandler), DisableLocalhostProtection: true,
	})
}

// a2aReference records every call the a2a-go JSON-RPC handler decoded.
type a2aReference struct{ rec *recorder }

func (h a2aReference) OnGetTask(_ context.Context, q *a2a.TaskQueryParams) (*a2a.Task, error) {
	h.rec.set(reading{method: "tasks/get", paramsID: string(q.ID)})
	return nil, errRecorded
}

func (h a2aReference) OnCancelTask(_ context.Context, p *a2a.TaskIDParams) (*a2a.Task, error) {
	h.rec.set(reading{method: "tasks/cancel", paramsID: string(p.ID)})
	return nil, errRecorded
}

func (h a2aReference) message(method string, p *a2a.MessageSendParams) {
	r := reading{method: method}
	if p.Message != nil {
		r.context, r.taskID = p.Message.ContextID, string(p.Message.TaskID)
		r.refs = joinIDs(p.Message.ReferenceTasks)
	}
	r.push = p.Config != nil && p.Config.PushConfig != nil
	h.rec.set(r)
}

func (h a2aReference) OnSendMessage(_ context.Context, p *a2a.MessageSendParams) (a2a.SendMessageResult, error) {
	h.message("message/send", p)
	return nil, errRecorded
}

func (h a2aReference) OnResubscribeToTask(_ context.Context, p *a2a.TaskIDParams) iter.Seq2[a2a.Event, error] {
	h.rec.set(reading{method: "tasks/resubscribe", paramsID: string(p.ID)})
	return func(yield func(a2a.Event, error) bool) { yield(nil, errRecorded) }
}

func (h a2aReference) OnSendMessageStream(_ context.Context, p *a2a.MessageSendParams) iter.Seq2[a2a.Event, error] {
	h.message("message/stream", p)
	return func(yield func(a2a.Event, error) bool) { yield(nil, errRecorded) }
}

func (h a2aReference) OnGetTaskPushConfig(_ context.Context, p *a2a.GetTaskPushConfigParams) (*a2a.TaskPushConfig, error) {
	h.rec.set(reading{method: "tasks/pushNotificationConfig/get", paramsID: string(p.TaskID)})
	return nil, errRecorded
}

func (h a2aReference) OnListTaskPushConfig(_ context.Context, p *a2a.ListTaskPushConfigParams) ([]*a2a.TaskPushConfig, error) {
	h.rec.set(reading{method: "tasks/pushNotificationConfig/list", paramsID: string(p.TaskID)})
	return nil, errRecorded
}

func (h a2aReference) OnSetTaskPushConfig(_ context.Context, p *a2a.TaskPushConfig) (*a2a.TaskPushConfig, error) {
	h.rec.set(reading{method: "tasks/pushNotificationConfig/set", paramsID: string(p.TaskID)})
	return nil, errRecorded
}

func (h a2aReference) OnDeleteTaskPushConfig(_ context.Context, p *a2a.DeleteTaskPushConfigParams) error {
	h.rec.set(reading{method: "tasks/pushNotificationConfig/delete", paramsID: string(p.TaskID)})
	return errRecorded
}

func (h a2aReference) OnGetExtendedAgentCard(context.Context) (*a2a.AgentCard, error) {
	h.rec.set(reading{method: "agent/getAuthenticatedExtendedCard"})
	return nil, errRecorded
}

func joinIDs[S ~string](ids []S) string {
	var b strings.Builder
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(string(id))
	}
	return b.String()
}

// references are the SDK servers a body is sent to.
type references struct {
	mcpRec, a2aRec recorder
	mcp, a2a       http.Handler
}

func newReferences() *references {
	r := &references{}
	r.mcp = newMCPReference(&r.mcpRec)
	r.a2a = a2asrv.NewJSONRPCHandler(a2aReference{&r.a2aRec})
	return r
}

// read sends body to an SDK server and returns what it acted on, nil when
// it acted on nothing.
func read(h http.Handler, rec *recorder, body []byte, header http.Header) *reading {
	req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
	for k, v := range header {
		req.Header[k] = v
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	got := rec.take()
	if got == nil {
		return nil
	}
	// The id of its answer (an error response, or an SSE event holding one).
	answer := w.Body.Bytes()
	if i := bytes.Index(answer, []byte("data: ")); i >= 0 {
		answer = answer[i+len("data: "):]
		if j := bytes.IndexByte(answer, '\n'); j >= 0 {
			answer = answer[:j]
		}
	}
	var resp struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(answer, &resp) == nil {
		got.id = resp.ID
	}
	return got
}

var mcpHeader = http.Header{
	"Content-Type":         {"application/json"},
	"Accept":               {"application/json, text/event-stream"},
	"Mcp-Protocol-Version": {"2025-06-18"},
}

var a2aHeader = http.Header{"Content-Type": {"application/json"}}

// sameID reports whether two raw JSON ids are the same string or number.
func sameID(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return x == y
}

// assertAgreement sends body to both SDKs and fails when one acts on a
// call that Parse accepted but read differently.
func assertAgreement(t *testing.T, refs *references, body []byte) {
	t.Helper()
	r, err := jsonrpc.Parse(body)
	mcpGot := read(refs.mcp, &refs.mcpRec, body, mcpHeader)
	a2aGot := read(refs.a2a, &refs.a2aRec, body, a2aHeader)
	if err != nil {
		return
	}
	if got := mcpGot; got != nil {
		name := r.RuleName()
		if r.Method == "completion/complete" {
			name = r.CompletedPrompt + r.CompletedTemplate // never both
		}
		if got.method != r.Method || got.name != name {
			t.Fatalf("go-sdk read %q as %s %q; Parse as %s %q", body, got.method, got.name, r.Method, name)
		}
		if r.ID != nil && got.id != nil && !sameID(got.id, r.ID) {
			t.Fatalf("go-sdk answered %q with id %s; Parse read id %s", body, got.id, r.ID)
		}
	}
	if got := a2aGot; got != nil {
		if got.method != r.Method {
			t.Fatalf("a2a-go read %q as %s; Parse as %s", body, got.method, r.Method)
		}
		paramsID := r.ParamsID
		if r.Method == "tasks/pushNotificationConfig/set" {
			paramsID = r.ParamsTaskID
		}
		// a2a-go reads only the JSON names; Parse also reads the proto
		// field names (context_id), which protobuf JSON upstreams accept.
		snake := bytes.Contains(body, []byte("context_id")) || bytes.Contains(body, []byte("task_id"))
		// (set reads params.taskId, which Parse also reads as task_id.)
		paramsAgree := got.paramsID == paramsID || snake && r.Method == "tasks/pushNotificationConfig/set"
		// A push configuration is read in every spelling; a2a-go reads one.
		if got.push && !r.PushConfig {
			t.Fatalf("a2a-go read a push notification configuration in %q; Parse did not", body)
		}
		if !paramsAgree || !snake && (got.context != r.ContextID || got.taskID != r.TaskID || got.refs != joinIDs(r.ReferenceTaskIDs)) {
			t.Fatalf("a2a-go read %q as context %q task %q id %q references %q; Parse as %q %q %q %q",
				body, got.context, got.taskID, got.paramsID, got.refs, r.ContextID, r.TaskID, paramsID, joinIDs(r.ReferenceTaskIDs))
		}
		if r.ID != nil && got.id != nil && !sameID(got.id, r.ID) {
			t.Fatalf("a2a-go answered %q with id %s; Parse read id %s", body, got.id, r.ID)
		}
	}
}

// sdkSeeds are the bodies the SDK clients send (the recordings) and
// variations an attacker tries.
func sdkSeeds(t testing.TB) [][]byte {
	var out [][]byte
	for _, load := range []func() ([]fixtures.Recording, error){fixtures.MCP, fixtures.A2A} {
		recs, err := load()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if len(r.Body) > 0 {
				out = append(out, r.Body)
			}
		}
	}
	call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"delete_file","arguments":{"path":"/etc/passwd"}}}`
	for _, s := range []string{
		call,
		strings.Replace(call, `"name"`, `"Name"`, 1),
		strings.Replace(call, `"method"`, `"Method"`, 1),
		strings.Replace(call, `"jsonrpc"`, `"j\u017fonrpc"`, 1),
		strings.Replace(call, `"params":{`, `"params":{"name":"echo",`, 1),
		strings.Replace(call, `"id":7`, `"id":7,"id":8`, 1),
		strings.Replace(call, `"id":7`, `"id":1.5`, 1),
		`[` + call + `]`,
		"\xef\xbb\xbf" + call,
		call + `{}`,
		call + "\n",
		`{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"file:///etc/passwd","name":"x"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"URI":"file:///etc/passwd","uri":"file:///tmp"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"p"}}`,
		`{"jsonrpc":"2.0","id":"a","method":"message/send","params":{"message":{"role":"user","parts":[],"messageId":"m","contextId":"c","taskId":"t"}}}`,
		`{"jsonrpc":"2.0","id":"a","method":"message/send","params":{"message":{"role":"user","parts":[],"messageId":"m","ContextId":"c"}}}`,
		`{"jsonrpc":"2.0","id":"a","method":"message/send","params":{"message":{"role":"user","parts":[],"messageId":"m","context_id":"c"}}}`,
		`{"jsonrpc":"2.0","id":"a","method":"message/send","params":{"message":{"role":"user","parts":[],"messageId":"m"},"configuration":{"pushNotificationConfig":{"url":"https://hook.example.com/"}}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"p"},"argument":{"name":"a","value":""}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"p","Name":"admin"},"argument":{"name":"a","value":""}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"completion/complete","params":{"ref":{"type":"ref/resource","uri":"file:///{x}"},"argument":{"name":"x","value":""}}}`,
		`{"jsonrpc":"2.0","id":"a","method":"message/send","params":{"message":{"role":"user","parts":[],"messageId":"m"},"Configuration":{"pushnotificationconfig":{"url":"https://hook.example.com/"}}}}`,
		`{"jsonrpc":"2.0","id":"a","method":"message/send","params":{"message":{"role":"user","parts":[],"messageId":"m"},"configuration":{"push_notification":{"url":"https://hook.example.com/"}}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"id":"t"}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"id":"t","ID":"u"}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tasks/pushNotificationConfig/set","params":{"taskId":"t","pushNotificationConfig":{"url":"https://x"}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tasks/resubscribe","params":{"id":"t"}}`,
		`{"jsonrpc":"2.0","id":"a","method":"message/send","params":{"message":{"role":"user","parts":[],"messageId":"m","referenceTaskIds":["t","u"]}}}`,
		`{"jsonrpc":"2.0","id":"a","method":"message/send","params":{"message":{"role":"user","parts":[],"messageId":"m","ReferenceTaskIds":["t"]}}}`,
		`{"jsonrpc":"2.0","id":"a","method":"message/send","params":{"message":{"role":"user","parts":[],"messageId":"m","referenceTaskIds":["t",1]}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tasks/pushNotificationConfig/set","params":{"task_id":"t","pushNotificationConfig":{"url":"https://x"}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tasks/pushNotificationConfig/get","params":{"id":"t","taskId":"u"}}`,
	} {
		out = append(out, []byte(s))
	}
	return out
}

// TestSDKsAgreeOnRecordings: every recorded SDK request is accepted by
// Parse and read as the SDK servers read it.
func TestSDKsAgreeOnRecordings(t *testing.T) {
	refs := newReferences()
	for _, load := range []func() ([]fixtures.Recording, error){fixtures.MCP, fixtures.A2A} {
		recs, err := load()
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range recs {
			if len(rec.Body) == 0 {
				continue
			}
			t.Run(rec.Name, func(t *testing.T) {
				if _, err := jsonrpc.Parse(rec.Body); err != nil {
					t.Fatalf("Parse refused a recorded SDK request: %v", err)
				}
				assertAgreement(t, refs, rec.Body)
			})
		}
	}
}

// FuzzSDKAgreement: for any body, Parse refuses it, or the SDK servers do
// not act on it, or they read the same call.
func FuzzSDKAgreement(f *testing.F) {
	for _, s := range sdkSeeds(f) {
		f.Add(s)
	}
	refs := newReferences()
	f.Fuzz(func(t *testing.T, body []byte) {
		assertAgreement(t, refs, body)
	})
}

// TestReferencesAct: the SDK servers do act on well-formed calls, so that
// the differential compares readings rather than refusals.
func TestReferencesAct(t *testing.T) {
	refs := newReferences()
	tests := []struct {
		name, body string
		mcp        bool
		want       reading
	}{
		{"tools/call", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"delete_file","arguments":{}}}`, true,
			reading{method: "tools/call", name: "delete_file", id: []byte("7")}},
		{"resources/subscribe", `{"jsonrpc":"2.0","id":"s","method":"resources/subscribe","params":{"uri":"file:///etc/passwd"}}`, true,
			reading{method: "resources/subscribe", name: "file:///etc/passwd", id: []byte(`"s"`)}},
		{"prompts/get", `{"jsonrpc":"2.0","id":3,"method":"prompts/get","params":{"name":"p"}}`, true,
			reading{method: "prompts/get", name: "p", id: []byte("3")}},
		{"message/send", `{"jsonrpc":"2.0","id":"a","method":"message/send","params":{"message":{"role":"user","parts":[],"messageId":"m","contextId":"c","taskId":"t"}}}`, false,
			reading{method: "message/send", context: "c", taskID: "t", id: []byte(`"a"`)}},
		{"tasks/get", `{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"id":"t"}}`, false,
			reading{method: "tasks/get", paramsID: "t", id: []byte("2")}},
		{"message/send referencing tasks", `{"jsonrpc":"2.0","id":"r","method":"message/send","params":{"message":{"role":"user","parts":[],"messageId":"m","referenceTaskIds":["t","u"]}}}`, false,
			reading{method: "message/send", refs: "t,u", id: []byte(`"r"`)}},
		{"completion of a prompt", `{"jsonrpc":"2.0","id":4,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"p"},"argument":{"name":"a","value":""}}}`, true,
			reading{method: "completion/complete", name: "p", id: []byte("4")}},
		{"message/send registering a webhook", `{"jsonrpc":"2.0","id":"w","method":"message/send","params":{"message":{"role":"user","parts":[],"messageId":"m"},"configuration":{"pushNotificationConfig":{"url":"https://hook.example.com/"}}}}`, false,
			reading{method: "message/send", push: true, id: []byte(`"w"`)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got *reading
			if tt.mcp {
				got = read(refs.mcp, &refs.mcpRec, []byte(tt.body), mcpHeader)
			} else {
				got = read(refs.a2a, &refs.a2aRec, []byte(tt.body), a2aHeader)
			}
			if got == nil {
				t.Fatal("the SDK server did not act on it")
			}
			if got.method != tt.want.method || got.name != tt.want.name || got.context != tt.want.context ||
				got.taskID != tt.want.taskID || got.paramsID != tt.want.paramsID || got.refs != tt.want.refs || got.push != tt.want.push || !sameID(got.id, tt.want.id) {
				t.Fatalf("read %+v (id %s), want %+v (id %s)", *got, got.id, tt.want, tt.want.id)
			}
		})
	}
}
