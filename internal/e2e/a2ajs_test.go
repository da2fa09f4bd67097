package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/testing/testpeers"
)

// a2aJSConfig is one A2A route for the whole host, with the request body
// as the front end sends it (%[2]s) and, where the body is sent, rules: a
// caller whose token names a tenant may call for that tenant alone, and,
// in the v0.3 spelling of the methods, sending a message needs agent:write.
// The A2A JavaScript SDK speaks v1.0 (SendMessage). Without the body, a
// task cannot be bound to its creator (the task id is in the body), which
// the service refuses to configure unless tasks are left unbound.
const a2aJSConfig = `
issuers:
  - {name: e2e, algorithms: [HS256], secret: %[1]s}
%[4]sroutes:
  - name: agent
    default: true
    protocol: a2a
    issuers: [e2e]
    request_body: %[2]s
%[3]s`

const a2aJSRules = `    rules:
      - {name: own-tenant, methods: ["*"], action: deny, when: 'has(jwt.tenant) && a2a.tenant != jwt.tenant'}
      - {name: writers-send, methods: [message/send, message/stream], scopes: ["agent:write"]}
`

// TestA2AJavaScriptSDK puts each front end (Envoy's ext_authz, as
// envoytest's proxy speaks it with the body; ext_authz and ext_proc as
// envoy/extproc.yaml chains them; the documented nginx, nginx with njs and
// Caddy) between the official A2A JavaScript SDK's client and an agent
// built with the same SDK, both speaking A2A v1.0 over JSON-RPC: the SDK's
// own card discovery and SendMessage, not a request we wrote.
func TestA2AJavaScriptSDK(t *testing.T) {
	envoy := []frontEnd{{name: "envoy", body: true}, {name: "envoy-extproc", body: true, responsePath: true}}
	for _, fe := range append(envoy, frontEnds...) {
		t.Run(fe.name, func(t *testing.T) {
			agent := startJSAgent(t)
			body, rules, sessions := "none", "", "sessions: {task_ownership: false}\n"
			if fe.body {
				body, rules, sessions = "sent", a2aJSRules, ""
			}
			if fe.responsePath {
				rules = "    response_path: true\n" + rules
			}
			addrs := startService(t, fmt.Sprintf(a2aJSConfig, secret, body, rules, sessions), fe.convention)
			var base string
			switch fe.name {
			case "envoy":
				p := envoyWithBody(t, addrs.GRPC, agent.addr)
				base = p.URL
			case "envoy-extproc":
				base = startExtProcProxy(t, addrs.GRPC, map[string]string{"": "http://" + agent.addr})
			case "caddy":
				base = "http://127.0.0.1:" + startCaddy(t, addrs.HTTP, agent.addr)
			default:
				var module string
				if fe.body {
					module = njsModule(t)
				}
				base = "http://127.0.0.1:" + startNginx(t, nginxBinary(t), func(dir, port string) string {
					return feNginxConfig(dir, port, addrs.HTTP, agent.addr, module, "")
				})
			}
			agent.publish(t, base)
			writer := token(t, jwt.MapClaims{"session_id": "sess-js", "scope": "agent:write"})

			t.Run("a message carries the token's identity, never a forged one", func(t *testing.T) {
				forged := map[string]string{"X-User-Id": "mallory", "X-Session-Id": "evil", "X-Root-Context-Id": "forged-root", "X-Lineage-Depth": "7"}
				o := agent.ask(t, base, writer, forged)
				wantHeaders(t, "the JavaScript SDK's agent", o, map[string]string{
					"X-User-Id":           "alice",
					"X-Session-Id":        "sess-js",
					"X-Lineage-Depth":     "0",
					"X-Parent-Context-Id": "",
					"X-Actor-Chain":       "",
				})
				// The conversation's root is the message's context where the
				// service reads the body, the token's session where it cannot;
				// never the client's header.
				root := "sess-js"
				if fe.body {
					root = "ctx-js"
				}
				if got := header(o, "X-Root-Context-Id"); len(got) != 1 || got[0] != root {
					t.Errorf("root context %q, want %q", got, root)
				}
				if o.ContextID != "ctx-js" {
					t.Errorf("the agent served context %q, want the client's ctx-js", o.ContextID)
				}
			})

			t.Run("an expired token is refused before the agent", func(t *testing.T) {
				expired := token(t, jwt.MapClaims{"exp": time.Now().Add(-time.Hour).Unix()})
				agent.refused(t, base, expired, "invalid_token", http.StatusUnauthorized)
			})

			if !fe.body {
				return
			}
			t.Run("a rule in v0.3 spelling decides the SDK's v1.0 SendMessage", func(t *testing.T) {
				reader := token(t, jwt.MapClaims{"session_id": "sess-js", "scope": "agent:read"})
				agent.refused(t, base, reader, "insufficient_scope", http.StatusForbidden)
				agent.ask(t, base, writer, nil) // the scope it needs lets it through
			})

			t.Run("a message for another tenant than the caller's never reaches the agent", func(t *testing.T) {
				// The SDK's client sends the tenant in params.tenant, and its
				// agent serves the call for it (context.tenant), whatever
				// route the request came by.
				acme := token(t, jwt.MapClaims{"session_id": "sess-acme", "scope": "agent:write", "tenant": "acme"})
				before := agent.seen()
				wantRefused(t, "SendMessage for globex", agent.run(t, base, acme, map[string]any{"scenario": "message", "tenant": "globex"}), "forbidden", http.StatusForbidden)
				if n := agent.seen() - before; n != 0 {
					t.Fatalf("%d messages for another tenant reached the agent", n)
				}
				res := agent.run(t, base, acme, map[string]any{"scenario": "message", "tenant": "acme"})
				if !res.OK {
					t.Fatalf("the message for the caller's tenant: %+v", res)
				}
				o, err := testpeers.ParseObservation(res.Text)
				if err != nil {
					t.Fatal(err)
				}
				if o.Tenant != "acme" {
					t.Fatalf("the agent served tenant %q, want acme", o.Tenant)
				}
			})

			t.Run("a task and its context are their creator's: another user's GetTask, CancelTask and messages in them never reach it", func(t *testing.T) {
				created := agent.run(t, base, writer, map[string]any{"scenario": "task"})
				if !created.OK || created.TaskID == "" {
					t.Fatalf("no task: %+v", created)
				}
				id := created.TaskID
				// The creator's first operation binds the task to her:
				// ext_authz never sees the answer that created it.
				if got := agent.run(t, base, writer, map[string]any{"scenario": "get", "taskId": id}); !got.OK || got.TaskID != id {
					t.Fatalf("the creator's GetTask: %+v", got)
				}
				bob := token(t, jwt.MapClaims{"sub": "bob", "session_id": "sess-bob", "scope": "agent:write"})
				for _, op := range []string{"get", "cancel", "continue"} {
					// Continued in a context of his own: the task alone is hers.
					wantRefused(t, op+" of another user's task", agent.run(t, base, bob, map[string]any{"scenario": op, "taskId": id, "contextId": "ctx-bob"}), "forbidden", http.StatusForbidden)
				}
				// Both tokens carry a session, which names the session
				// header; the agent keeps the conversation by its context.
				wantRefused(t, "a message in another user's context", agent.run(t, base, bob, map[string]any{"scenario": "message"}), "session_conflict", http.StatusForbidden)
				if got := agent.run(t, base, writer, map[string]any{"scenario": "get", "taskId": id}); !got.OK || got.TaskID != id {
					t.Fatalf("the creator's GetTask after the refusals: %+v", got)
				}
			})

			t.Run("a task list is of the caller's own context: one no context filters never reaches the agent", func(t *testing.T) {
				// The agent keeps every caller's tasks together (its task
				// store has no user builder to tell them apart): unfiltered,
				// its ListTasks would answer bob with alice's.
				created := agent.run(t, base, writer, map[string]any{"scenario": "task"})
				if !created.OK || created.TaskID == "" {
					t.Fatalf("no task: %+v", created)
				}
				own := agent.run(t, base, writer, map[string]any{"scenario": "list", "listContext": "ctx-js"})
				if !own.OK || !slices.Contains(own.All, created.TaskID) {
					t.Fatalf("alice's list of her context lacks her task %s: %+v", created.TaskID, own)
				}
				bob := token(t, jwt.MapClaims{"sub": "bob", "session_id": "sess-bob", "scope": "agent:write"})
				wantRefused(t, "bob's unfiltered ListTasks", agent.run(t, base, bob, map[string]any{"scenario": "list"}), "forbidden", http.StatusForbidden)
				wantRefused(t, "bob's ListTasks of alice's context", agent.run(t, base, bob, map[string]any{"scenario": "list", "listContext": "ctx-js"}), "session_conflict", http.StatusForbidden)
			})

			if !fe.responsePath {
				return
			}
			t.Run("the answer that created a task binds it: another user's first GetTask is refused", func(t *testing.T) {
				// Behind ext_authz alone the first operation binds a task;
				// ext_proc reads the SendMessage answer, so the creator owns
				// the task before anybody names it.
				created := agent.run(t, base, writer, map[string]any{"scenario": "task"})
				if !created.OK || created.TaskID == "" {
					t.Fatalf("no task: %+v", created)
				}
				bob := token(t, jwt.MapClaims{"sub": "bob", "session_id": "sess-bob", "scope": "agent:write"})
				wantRefused(t, "bob's GetTask of a task nobody operated on yet", agent.run(t, base, bob, map[string]any{"scenario": "get", "taskId": created.TaskID}), "forbidden", http.StatusForbidden)
				if got := agent.run(t, base, writer, map[string]any{"scenario": "get", "taskId": created.TaskID}); !got.OK || got.TaskID != created.TaskID {
					t.Fatalf("the creator's GetTask: %+v", got)
				}
			})
		})
	}
}

// jsAgent is the A2A JavaScript SDK agent of testdata/ts/a2a.mjs, running
// until the test ends.
type jsAgent struct {
	addr  string // 127.0.0.1:port
	stdin io.Writer
	ready chan struct{}

	mu       sync.Mutex
	messages int // messages that reached it
}

// startJSAgent starts the agent and waits for its port.
func startJSAgent(t *testing.T) *jsAgent {
	t.Helper()
	a := &jsAgent{ready: make(chan struct{}, 1)}
	peer := startNodePeer(t, "a2a.mjs", "@a2a-js/sdk", map[string]any{"mode": "agent"}, func(line []byte) {
		var ev struct {
			Ready bool   `json:"ready"`
			Event string `json:"event"`
		}
		if json.Unmarshal(line, &ev) != nil {
			return
		}
		switch {
		case ev.Ready:
			a.ready <- struct{}{}
		case ev.Event == "message":
			a.mu.Lock()
			a.messages++
			a.mu.Unlock()
		}
	})
	a.addr, a.stdin = peer.addr, peer.stdin
	return a
}

// nodePeer is a server of testdata/ts running until the test ends: one
// that prints {"port":N} once it listens on 127.0.0.1, then a JSON line
// per event, and stops when its stdin ends.
type nodePeer struct {
	addr  string // 127.0.0.1:port
	stdin io.Writer
}

// startNodePeer starts script (which needs pkg) with args, hands every line
// it prints after its port to onLine (from another goroutine), and waits
// for the port.
func startNodePeer(t *testing.T, script, pkg string, args map[string]any, onLine func([]byte)) *nodePeer {
	t.Helper()
	// Not the test's context: the peer outlives the subtests, and its
	// cleanup stops it.
	cmd, stdin, stdout, stderr := startNode(t, context.Background(), script, pkg, args)
	ports := make(chan int, 1)
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var line struct {
				Port int `json:"port"`
			}
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Port != 0 {
				ports <- line.Port
				continue
			}
			onLine(sc.Bytes())
		}
		_ = cmd.Wait()
	}()
	t.Cleanup(func() {
		stdin.Close() // the peer stops once stdin ends
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-exited
		}
		if t.Failed() {
			t.Logf("%s log:\n%s", script, stderr.String())
		}
	})
	select {
	case port := <-ports:
		return &nodePeer{addr: fmt.Sprintf("127.0.0.1:%d", port), stdin: stdin}
	case <-exited:
		t.Fatalf("%s exited:\n%s", script, stderr.String())
	case <-time.After(20 * time.Second):
		t.Fatalf("%s did not start:\n%s", script, stderr.String())
	}
	return nil
}

// publish tells the agent the base URL clients reach it at, for its card.
func (a *jsAgent) publish(t *testing.T, base string) {
	t.Helper()
	if _, err := io.WriteString(a.stdin, base+"\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.ready:
	case <-time.After(10 * time.Second):
		t.Fatal("the agent did not take its URL")
	}
}

func (a *jsAgent) seen() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.messages
}

// run runs the SDK's client once: the card at base, then the scenario of
// args in context ctx-js with token.
func (a *jsAgent) run(t *testing.T, base, token string, args map[string]any) nodeResult {
	t.Helper()
	all := map[string]any{"mode": "client", "url": base, "token": token, "contextId": "ctx-js"}
	for k, v := range args {
		all[k] = v
	}
	out := runNode(t, "a2a.mjs", "@a2a-js/sdk", all, nil)
	return out[len(out)-1]
}

// ask sends a message that must reach the agent, with the extra headers,
// and returns what the agent saw.
func (a *jsAgent) ask(t *testing.T, base, token string, extra map[string]string) testpeers.Observation {
	t.Helper()
	before := a.seen()
	res := a.run(t, base, token, map[string]any{"scenario": "message", "headers": extra})
	if !res.OK {
		t.Fatalf("the SDK's message failed: %+v", res)
	}
	o, err := testpeers.ParseObservation(res.Text)
	if err != nil {
		t.Fatal(err)
	}
	if o.Peer != "agent-js" || a.seen() != before+1 {
		t.Fatalf("answered by %q; %d messages reached the agent, want 1", o.Peer, a.seen()-before)
	}
	return o
}

// refused sends a message that must be refused with the OAuth error code
// (invalid_token, insufficient_scope) and HTTP status given, and reach
// nothing. The card is public: the SDK got as far as SendMessage, and read
// the service's JSON-RPC error as the agent's own (JsonRpcTransportError
// with its code and data), behind every front end.
func (a *jsAgent) refused(t *testing.T, base, token, oauthError string, status int) {
	t.Helper()
	before := a.seen()
	wantRefused(t, "SendMessage", a.run(t, base, token, map[string]any{"scenario": "message"}), oauthError, status)
	if n := a.seen() - before; n != 0 {
		t.Fatalf("%d refused messages reached the agent", n)
	}
}

// wantRefused checks that the SDK read the service's denial of call: a
// JSON-RPC error (JsonRpcTransportError, -32000) whose data names the OAuth
// error and HTTP status.
func wantRefused(t *testing.T, call string, res nodeResult, oauthError string, status int) {
	t.Helper()
	var data struct {
		Status int    `json:"status"`
		Error  string `json:"error"`
	}
	_ = json.Unmarshal(res.Data, &data)
	if res.OK || res.Error != "JsonRpcTransportError" || fmt.Sprint(res.Code) != "-32000" || data.Error != oauthError || data.Status != status {
		t.Fatalf("want %s refused with %s (%d) as a JSON-RPC error: %+v, data %s", call, oauthError, status, res, res.Data)
	}
}
