package extprocauthz_test

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/extauthz/extauthz/internal/check"
	"github.com/extauthz/extauthz/internal/envoyauthz"
	"github.com/extauthz/extauthz/internal/extprocauthz"
	"github.com/extauthz/extauthz/internal/testing/envoytest"
	"github.com/extauthz/extauthz/internal/testing/pipelinetest"
)

// newA2AFixture is newFixture for an A2A route with a response path, as
// docs/extproc.md configures one for an agent.
func newA2AFixture(t *testing.T) *fixture {
	t.Helper()
	doc := fmt.Sprintf(`
issuers:
  - {name: corp, issuer: https://idp.example.com, algorithms: [HS256], secret: %s}
routes:
  - {name: agent, hosts: [agent.example.com], protocol: a2a, issuers: [corp], response_path: true}
`, secret)
	pl := pipelinetest.New(t, doc, check.Deps{}, check.Options{})
	c := &counter{n: map[string]int{}, opened: make(chan struct{}, 4)}
	f := &fixture{authz: envoyauthz.NewServer(pl), pl: pl, counted: c}
	f.proc = extprocauthz.NewServer(pl, extprocauthz.Options{Observer: c})
	gs := grpc.NewServer(envoyauthz.ServerOptions()...)
	envoyauthz.Register(gs, f.authz)
	extprocauthz.Register(gs, f.proc)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	f.conn, err = grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.conn.Close() })
	return f
}

// TestA2AStreamingSendBindsItsTask: docs/extproc.md binds the task an A2A
// message send's answer creates to the caller, in JSON and in an event
// stream; docs/jsonrpc.md counts message/stream and SendStreamingMessage
// among the message sends. A task created by a streaming send must be the
// creator's as one created by message/send is: nobody else may act on it.
func TestA2AStreamingSendBindsItsTask(t *testing.T) {
	const msg = `{"messageId":"m1","role":"user","parts":[{"kind":"text","text":"hi"}]}`
	for _, tc := range []struct {
		name, method, answer string
		sse                  bool
	}{
		{"v0.3 message/send, JSON (control)", "message/send",
			`{"jsonrpc":"2.0","id":1,"result":{"kind":"task","id":"TASK","contextId":"c1","status":{"state":"submitted"}}}`, false},
		{"v0.3 message/send, event stream (control)", "message/send",
			`{"jsonrpc":"2.0","id":1,"result":{"kind":"task","id":"TASK","contextId":"c1","status":{"state":"submitted"}}}`, true},
		{"v0.3 message/stream", "message/stream",
			`{"jsonrpc":"2.0","id":1,"result":{"kind":"task","id":"TASK","contextId":"c1","status":{"state":"submitted"}}}`, true},
		{"v1.0 SendStreamingMessage", "SendStreamingMessage",
			`{"jsonrpc":"2.0","id":1,"result":{"task":{"id":"TASK","contextId":"c1","status":{"state":"TASK_STATE_SUBMITTED"}}}}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newA2AFixture(t)
			taskID := "task-" + strings.NewReplacer("/", "-", " ", "").Replace(tc.method)
			answer := strings.Replace(tc.answer, "TASK", taskID, 1)
			send := `{"jsonrpc":"2.0","id":1,"method":"` + tc.method + `","params":{"message":` + msg + `}}`
			alice := token(t, "alice", nil)
			md := f.authorize(t, "agent.example.com", alice, nil, send)
			if md == nil {
				t.Fatal("ext_authz denied alice's send")
			}
			response := jsonResponse(answer, nil)
			if tc.sse {
				response = sseResponse("event: message\ndata: "+answer+"\n\n", "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"kind\":\"status-update\",\"taskId\":\""+taskID+"\",\"final\":true}}\n\n")
			}
			res := envoytest.ExtProc(t, f.conn, recommended(md), envoytest.ExtProcExchange{
				Request:  envoytest.ExtProcRequest("POST", "agent.example.com", "/", http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"}}, send),
				Response: response,
			})
			if res.Err != nil || res.Reset {
				t.Fatalf("protocol: %v (reset %v)", res.Err, res.Reset)
			}
			bound := f.pl.TaskCount()
			// The creator's task: mallory, another user of the agent, gets it.
			get := `{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"id":"` + taskID + `"}}`
			if f.authorize(t, "agent.example.com", token(t, "mallory", nil), nil, get) != nil {
				t.Fatalf("mallory reads alice's task %s created by %s (%d tasks bound at creation)", taskID, tc.method, bound)
			}
		})
	}
}
