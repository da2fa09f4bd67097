package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/testing/testpeers"
)

// mcpTSConfig is one MCP route for the whole host denying delete_*,
// sampling (the server may not have what the client's model writes) and
// resources/read of the skills under skill://internal.
const mcpTSConfig = `
issuers:
  - {name: e2e, algorithms: [HS256], secret: %s}
routes:
  - name: mcp
    default: true
    protocol: mcp
    issuers: [e2e]
    rules:
      - {methods: ["tools/call"], names: ["delete_*"], action: deny}
      - {methods: ["sampling/*"], action: deny}
      - {methods: ["resources/read"], names: ["skill://internal/*"], action: deny}
`

// TestMCPTypeScriptServerV2 puts Envoy's ext_authz (envoytest's proxy,
// with the body) in front of an MCP server built with the TypeScript SDK
// v2, which serves 2026-07-28 and checks Mcp-Method and Mcp-Name against
// the body itself, and drives it with the SDK's v2 client and with
// requests as that client sends them. The service must read the headers
// as the server does: refusing what the server would refuse, and passing
// what it serves (a task operation's Mcp-Name is its task).
func TestMCPTypeScriptServerV2(t *testing.T) {
	server, proxy, called := tsBehindEnvoy(t, "call", "tool")
	alice := token(t, jwt.MapClaims{"session_id": "sess-ts"})

	t.Run("the SDK's own client calls a tool, which sees the token's identity", func(t *testing.T) {
		res := nodeClient(t, map[string]any{"sdk": "v2", "url": proxy + "/mcp", "token": alice, "scenario": "call", "tool": "whoami"}, nil)
		if len(res) == 0 || !res[len(res)-1].OK {
			t.Fatalf("the v2 client's call failed: %+v", res)
		}
		var o testpeers.Observation
		if err := json.Unmarshal([]byte(res[len(res)-1].Text), &o); err != nil {
			t.Fatalf("the tool answered %q: %v", res[len(res)-1].Text, err)
		}
		wantHeaders(t, "the v2 server's tool", o, map[string]string{"X-User-Id": "alice", "X-Session-Id": "sess-ts"})
		if o.Authorization {
			t.Error("the token reached the server")
		}
	})
	t.Run("a denied tool never reaches the server", func(t *testing.T) {
		before := len(called())
		res := nodeClient(t, map[string]any{"sdk": "v2", "url": proxy + "/mcp", "token": alice, "scenario": "call", "tool": "delete_file"}, nil)
		if len(res) == 0 || res[len(res)-1].OK {
			t.Fatalf("the v2 client's call of delete_file was not refused: %+v", res)
		}
		if got := called()[before:]; len(got) != 0 {
			t.Fatalf("the server ran %v", got)
		}
	})

	// Requests as the v2 client sends them in 2026-07-28, asked of the
	// server directly and through the service: the JSON-RPC error code of
	// each answer (0 for a result).
	code := func(t *testing.T, base string, h http.Header, body string) int {
		t.Helper()
		_, c := postMCP(t, base, alice, h, body)
		return c
	}
	for _, tc := range []struct {
		name, method, mcpName, params string
		want                          int // the JSON-RPC error code both answer with
	}{
		{"a tool named in the header and the body", "tools/call", "whoami", `"name":"whoami","arguments":{},`, 0},
		{"a tool the header names otherwise", "tools/call", "echo", `"name":"whoami","arguments":{},`, -32020},
		// Mcp-Name mirrors a task operation's params.taskId: the server
		// reads it so (and has no tasks: -32601).
		{"a task operation named by its task", "tasks/get", "task-1", `"taskId":"task-1",`, -32601},
		{"a task operation the header names otherwise", "tasks/get", "task-2", `"taskId":"task-1",`, -32020},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, body := modern(tc.method, tc.mcpName, tc.params)
			if got := code(t, server, h, body); got != tc.want {
				t.Fatalf("the server itself answered %d, want %d: the case shows nothing", got, tc.want)
			}
			if got := code(t, proxy, h, body); got != tc.want {
				t.Fatalf("through the service %d, the server alone %d", got, tc.want)
			}
		})
	}
}

// modern is a 2026-07-28 request as the TypeScript SDK v2 client sends
// it: the headers naming method (and Mcp-Name name), and the body with
// params (members ending in a comma, or none) and the _meta envelope.
func modern(method, name, params string) (http.Header, string) {
	h := http.Header{
		"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"},
		"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {method}, "Mcp-Name": {name},
	}
	body := `{"jsonrpc":"2.0","id":7,"method":"` + method + `","params":{` + params +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	return h, body
}

// postMCP POSTs one JSON-RPC message to base's /mcp with token as a bearer
// token and the headers h, and returns the status and the JSON-RPC error
// code of the answer (0 for a result).
func postMCP(t *testing.T, base, token string, h http.Header, body string) (status, code int) {
	t.Helper()
	status, raw := postMCPRaw(t, base, token, h, body)
	var msg struct {
		Error *struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &msg); err != nil {
		t.Fatalf("answered %d %q", status, raw)
	}
	if msg.Error == nil {
		return status, 0
	}
	return status, msg.Error.Code
}

// postMCPRaw is postMCP returning the answer's one JSON-RPC message as
// sent (the data of an event stream's one event).
func postMCPRaw(t *testing.T, base, token string, h http.Header, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = h.Clone()
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	return res.StatusCode, bytes.TrimPrefix(bytes.TrimSpace(raw), []byte("data: "))
}

// TestMCPTypeScriptServerV1RelatedTask puts Envoy's ext_authz in front of
// a stateless MCP server built with the TypeScript SDK v1, which hands a
// tool the task a request's _meta says it belongs to
// (io.modelcontextprotocol/related-task) as the call's own, looking it up
// nowhere without a session (and, with a task store, queues the answer to
// that task and sets its status). Asked directly, it runs bob's call as
// part of alice's task; through the service, a call related to another
// user's task never reaches it, and one related to the caller's own does.
func TestMCPTypeScriptServerV1RelatedTask(t *testing.T) {
	type call struct{ Tool, Task string }
	var (
		mu    sync.Mutex
		calls []call
	)
	peer := startNodePeer(t, "mcpserver1.mjs", "@modelcontextprotocol/sdk", map[string]any{}, func(line []byte) {
		var ev struct{ Event, Tool, Task string }
		if json.Unmarshal(line, &ev) == nil && ev.Event == "call" {
			mu.Lock()
			calls = append(calls, call{ev.Tool, ev.Task})
			mu.Unlock()
		}
	})
	// ran waits (at most five seconds) for the n-th call to have reached
	// the server, and returns the task it ran in ("" if none came).
	ran := func(n int) (string, bool) {
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			mu.Lock()
			if len(calls) >= n {
				c := calls[n-1]
				mu.Unlock()
				return c.Task, true
			}
			mu.Unlock()
		}
		return "", false
	}
	addrs := startService(t, fmt.Sprintf(mcpTSConfig, secret), "")
	p := envoyWithBody(t, addrs.GRPC, peer.addr)
	alice := token(t, jwt.MapClaims{"session_id": "sess-alice"})
	bob := token(t, jwt.MapClaims{"sub": "bob", "session_id": "sess-bob"})
	h := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"}, "Mcp-Protocol-Version": {"2025-11-25"}}
	related := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"whoami","arguments":{},` +
		`"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"task-of-alice"}}}}`

	// Alice polls her task through the service, which binds it to her (the
	// server, without tasks, answers that it has no such method).
	if status, _ := postMCP(t, p.URL, alice, h, `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"task-of-alice"}}`); status == http.StatusForbidden || status == http.StatusUnauthorized {
		t.Fatalf("alice's tasks/get was refused: %d", status)
	}
	if status, code := postMCP(t, "http://"+peer.addr, bob, h, related); status != http.StatusOK || code != 0 {
		t.Fatalf("bob's call asked directly: %d %d", status, code)
	}
	if task, ok := ran(1); !ok || task != "task-of-alice" {
		t.Fatalf("asked directly, the server ran bob's call in task %q (reached: %v): the test shows nothing", task, ok)
	}
	if status, code := postMCP(t, p.URL, bob, h, related); status != http.StatusForbidden || code != -32000 {
		t.Fatalf("bob's call through the service: %d %d, want 403", status, code)
	}
	if status, code := postMCP(t, p.URL, alice, h, related); status != http.StatusOK || code != 0 {
		t.Fatalf("alice's call in her own task through the service: %d %d", status, code)
	}
	if task, ok := ran(2); !ok || task != "task-of-alice" {
		t.Fatalf("the second call to reach the server ran in task %q (reached: %v), want alice's own: bob's never came", task, ok)
	}
}

// TestMCPTypeScriptServerV2Skills: the TypeScript SDK v2 serves the skills
// extension (SEP-2640), which tells of a skill's files by other methods
// than resources/read: skills/get answers a skill's frontmatter with the
// URI, size and SHA-256 digest of each file, skills/list every skill's,
// resources/directory/read a directory's files. Asked directly, the SDK's
// server hands the SDK's own skills client the internal skill; through
// the Envoy-like proxy (ext_authz, then ext_proc on the answer), a rule
// denying resources/read of skill://internal/* holds for all of them,
// and the other skill is served as before.
func TestMCPTypeScriptServerV2Skills(t *testing.T) {
	peer := startNodePeer(t, "mcpserver.mjs", "@modelcontextprotocol/server", map[string]any{}, nil)
	cfg := filepath.Join(t.TempDir(), "extauthz.yaml")
	if err := os.WriteFile(cfg, []byte(strings.Replace(fmt.Sprintf(mcpTSConfig, secret), "    protocol: mcp\n", "    protocol: mcp\n    response_path: true\n", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	svc := startReplica(t, cfg, nil)
	proxy := startExtProcProxy(t, svc.GRPC, map[string]string{"": "http://" + peer.addr})
	alice := token(t, jwt.MapClaims{})
	const hello, internal = "skill://hello/SKILL.md", "skill://internal/deploy/SKILL.md"
	run := func(t *testing.T, base, get, directory string) map[string]nodeResult {
		t.Helper()
		out := map[string]nodeResult{}
		for _, r := range nodeClient(t, map[string]any{"sdk": "v2", "url": base + "/mcp", "token": alice,
			"scenario": "skills", "get": get, "directory": directory}, nil) {
			out[r.Op] = r
		}
		if len(out) != 3 {
			t.Fatalf("the skills client reported %v", out)
		}
		return out
	}

	direct := run(t, "http://"+peer.addr, internal, "skill://internal/deploy")
	if !slices.Equal(direct["list"].URIs, []string{hello, internal}) || !direct["get"].OK || !direct["directory"].OK {
		t.Fatalf("the server itself does not serve the internal skill, so the case shows nothing: %+v", direct)
	}

	through := run(t, proxy, internal, "skill://internal/deploy")
	if l := through["list"]; !l.OK || !slices.Equal(l.URIs, []string{hello}) {
		t.Errorf("skills/list through the service: %+v, want only %s", l, hello)
	}
	for _, op := range []string{"get", "directory"} {
		if r := through[op]; r.OK || !strings.Contains(r.Message, "resources/read") {
			t.Errorf("%s of the internal skill through the service: %+v, want the refusal naming resources/read", op, r)
		}
	}
	open := run(t, proxy, hello, "skill://hello")
	if !open["get"].OK || open["get"].Description != "Says hello." || !open["directory"].OK || !slices.Equal(open["directory"].URIs, []string{hello}) {
		t.Errorf("the open skill through the service: %+v", open)
	}
}

// TestMCPTypeScriptSamplingDenied: in 2026-07-28 a server asks its client
// for input by answering a call with input_required, and the client
// retries the call with the answers in params.inputResponses; the
// TypeScript SDK v2's client does it on its own with the handlers it has.
// Asked directly, the SDK's server gets what the client's model wrote;
// through Envoy's ext_authz, on a route denying sampling/*, the retry is
// refused and the server never has it.
func TestMCPTypeScriptSamplingDenied(t *testing.T) {
	server, proxy, seen := tsBehindEnvoy(t, "sampled", "text")
	alice := token(t, jwt.MapClaims{})
	summarize := func(base, text string) nodeResult {
		res := nodeClient(t, map[string]any{"sdk": "v2", "url": base + "/mcp", "token": alice, "scenario": "call", "tool": "summarize", "sampling": text}, nil)
		if len(res) == 0 {
			t.Fatal("the client reported nothing")
		}
		return res[len(res)-1]
	}
	if r := summarize(server, "asked directly"); !r.OK || r.Text != "sampled: asked directly" {
		t.Fatalf("the server itself did not sample through the client, so the case shows nothing: %+v", r)
	}
	r := summarize(proxy, "through the service")
	if r.OK || !strings.Contains(r.Message+string(r.Data), "sampling/createMessage") {
		t.Errorf("through the service the call answered %+v, want the refusal naming sampling/createMessage", r)
	}
	if got := seen(); !slices.Equal(got, []string{"asked directly"}) {
		t.Errorf("the server had what the model wrote: %q", got)
	}
}

// TestMCPTypeScriptRequestStateReplay: the TypeScript SDK v2 serves a
// 2026-07-28 retry's requestState to whoever sends it back (it binds it to
// nobody without a codec configured). Asked directly, the server resumes
// alice's round for bob; through Envoy's ext_authz only alice's retry
// reaches it.
func TestMCPTypeScriptRequestStateReplay(t *testing.T) {
	server, proxy, seen := tsBehindEnvoy(t, "resumed", "state")
	alice, bob := token(t, jwt.MapClaims{"sub": "alice"}), token(t, jwt.MapClaims{"sub": "bob"})
	// call calls resume as the v2 client sends it, with state unless empty,
	// and returns the status and the requestState or text answered.
	call := func(base, tok, state string) (int, string) {
		t.Helper()
		retry := ""
		if state != "" {
			retry = `"requestState":"` + state + `",`
		}
		h, body := modern("tools/call", "resume", `"name":"resume","arguments":{},`+retry)
		status, raw := postMCPRaw(t, base, tok, h, body)
		var msg struct {
			Result struct {
				RequestState string `json:"requestState"`
				Content      []struct{ Text string }
			}
		}
		_ = json.Unmarshal(raw, &msg)
		switch {
		case msg.Result.RequestState != "":
			return status, msg.Result.RequestState
		case len(msg.Result.Content) == 1:
			return status, msg.Result.Content[0].Text
		}
		return status, string(raw)
	}
	_, direct := call(server, alice, "")
	if status, got := call(server, bob, direct); status != http.StatusOK || got != "resumed "+direct {
		t.Fatalf("asked directly, the server did not resume alice's round for bob (%d %q): the case shows nothing", status, got)
	}
	status, state := call(proxy, alice, "")
	if status != http.StatusOK || !strings.HasPrefix(state, "round-") {
		t.Fatalf("alice's first call through the service: %d %q", status, state)
	}
	if status, got := call(proxy, alice, state); status != http.StatusOK || got != "resumed "+state {
		t.Fatalf("alice's retry through the service: %d %q", status, got)
	}
	if status, got := call(proxy, bob, state); status != http.StatusForbidden || !strings.Contains(got, "requestState") {
		t.Errorf("bob's retry with alice's state through the service: %d %q, want 403 naming the requestState", status, got)
	}
	if got := seen(); !slices.Equal(got, []string{direct, state}) {
		t.Errorf("the server resumed %q, want only the direct replay and alice's own", got)
	}
}

// tsBehindEnvoy starts the TypeScript SDK v2 server of mcpserver.mjs
// behind the service (mcpTSConfig) and Envoy's ext_authz, with the body.
// It returns the server's and the proxy's base URLs, and what the server
// printed so far in the field of its events named event.
func tsBehindEnvoy(t *testing.T, event, field string) (server, proxy string, recorded func() []string) {
	t.Helper()
	var mu sync.Mutex
	var got []string
	peer := startNodePeer(t, "mcpserver.mjs", "@modelcontextprotocol/server", map[string]any{}, func(line []byte) {
		var ev map[string]any
		if json.Unmarshal(line, &ev) == nil && ev["event"] == event {
			v, _ := ev[field].(string)
			mu.Lock()
			got = append(got, v)
			mu.Unlock()
		}
	})
	addrs := startService(t, fmt.Sprintf(mcpTSConfig, secret), "")
	p := envoyWithBody(t, addrs.GRPC, peer.addr)
	return "http://" + peer.addr, p.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
}
