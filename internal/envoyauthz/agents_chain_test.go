package envoyauthz_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/testing/envoytest"
	"github.com/extauthz/extauthz/internal/testing/pipelinetest"
	"github.com/extauthz/extauthz/internal/testing/testpeers"
	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

// reuseToken is what a sub-agent does on its outbound call when
// the service forwards the user's token (forward_authorization: true): it
// sends the Authorization it received and carries the lineage on.
func reuseToken(in http.Header, contextID string) http.Header {
	out := forwardLineage(in, contextID)
	if a := in.Get("Authorization"); a != "" {
		out.Set("Authorization", a)
	}
	return out
}

// TestForwardAuthorizationMultiHop is the multi-hop case with
// forward_authorization: true: client -> instance A -> agent-1 -> instance B
// -> agent-2 -> instance B -> agent-3, each agent reusing the user's token.
// Every hop gets the token and the same identity, and the lineage continues
// across the two service instances.
func TestForwardAuthorizationMultiHop(t *testing.T) {
	instanceA := serveGRPC(t, `
issuers: [{name: idp, issuer: https://idp.example.com, secret: `+pipelinetest.ProtocolSecret+`}]
routes: [{name: agents, default: true, issuers: [idp], forward_authorization: true}]
`)
	// The second instance believes lineage headers from the user's own
	// tokens: the agents calling it are the deployment's own.
	instanceB := serveGRPC(t, `
issuers: [{name: idp, issuer: https://idp.example.com, secret: `+pipelinetest.ProtocolSecret+`}]
routes: [{name: agents, default: true, issuers: [idp], forward_authorization: true}]
lineage: {trust: {issuers: [idp]}}
`)
	userToken := testtoken.HMAC(t, "HS256", pipelinetest.ProtocolSecret, jwt.MapClaims{"sub": "alice", "session_id": "sess-42", "iss": "https://idp.example.com", "exp": time.Now().Add(time.Hour).Unix()})
	proxy := func(addr string, upstream http.Handler) *envoytest.Proxy {
		return envoytest.NewProxy(t, addr, upstream, envoytest.ProxyOptions{
			Build: envoytest.BuildOptions{WithBody: true, MaxRequestBytes: 1 << 20}, Timeout: 5 * time.Second})
	}
	noToken := testpeers.NewHTTPClient("", nil, nil) // the token comes from the inbound request
	p3 := proxy(instanceB, testpeers.NewA2AAgent(testpeers.A2AOptions{Name: "agent-3"}))
	p2 := proxy(instanceB, testpeers.NewA2AAgent(testpeers.A2AOptions{Name: "agent-2", Next: &testpeers.NextHop{URL: p3.URL, HTTPClient: noToken, Forward: reuseToken}}))
	p1 := proxy(instanceA, testpeers.NewA2AAgent(testpeers.A2AOptions{Name: "agent-1", Next: &testpeers.NextHop{URL: p2.URL, HTTPClient: noToken, Forward: reuseToken}}))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	forged := http.Header{"X-Root-Context-Id": {"forged-root"}, "X-Lineage-Depth": {"5"}}
	client, err := testpeers.NewA2AClient(ctx, p1.URL, testpeers.NewHTTPClient(userToken, forged, nil))
	if err != nil {
		t.Fatal(err)
	}
	obs, _, err := testpeers.AskWhoAmI(ctx, client, "conversation-1")
	if err != nil {
		t.Fatal(err)
	}
	hops := []*testpeers.Observation{&obs, obs.Next, nil}
	if hops[1] != nil {
		hops[2] = hops[1].Next
	}
	fp := testpeers.Fingerprint("Bearer " + userToken)
	for i, depth := range []string{"0", "1", "2"} {
		o := hops[i]
		if o == nil {
			t.Fatalf("hop %d missing: %+v", i+1, obs)
		}
		h := o.Headers
		if h.Get("X-User-Id") != "alice" || h.Get("X-Session-Id") != "sess-42" {
			t.Errorf("hop %d: identity %q/%q", i+1, h.Get("X-User-Id"), h.Get("X-Session-Id"))
		}
		if !o.Authorization || o.AuthorizationSHA256 != fp {
			t.Errorf("hop %d: the user's token did not arrive (forward_authorization)", i+1)
		}
		if got := h.Get("X-Root-Context-Id"); got != "conversation-1" {
			t.Errorf("hop %d: root %q, want conversation-1", i+1, got)
		}
		if got := h.Get("X-Lineage-Depth"); got != depth {
			t.Errorf("hop %d: depth %q, want %s", i+1, got, depth)
		}
		if i > 0 && (h.Get("X-Parent-Context-Id") == "" || h.Get("X-Parent-Context-Id") == hops[i-1].Headers.Get("X-Parent-Context-Id")) {
			t.Errorf("hop %d: parent %q is not the previous hop's context", i+1, h.Get("X-Parent-Context-Id"))
		}
	}
}

// TestDelegatedSubAgentChain: a three-hop chain whose last hop is a
// delegated sub-agent calling with its own token (the user in act), which
// then works in the user's MCP session (sub-agents reuse the parent's
// session), allowed by the sessions.delegates rule; an unrelated
// principal presenting the same session is refused.
func TestDelegatedSubAgentChain(t *testing.T) {
	addr := serveGRPC(t, `
issuers: [{name: idp, issuer: https://idp.example.com, secret: `+pipelinetest.ProtocolSecret+`}]
routes:
  - {name: tools, path_prefix: /mcp, protocol: mcp, issuers: [idp]}
  - {name: agents, default: true, issuers: [idp]}
sessions:
  delegates: [{name: research, client_ids: [research-agent]}]
`)
	mint := func(claims jwt.MapClaims) string {
		c := jwt.MapClaims{"sub": "alice", "iss": "https://idp.example.com", "exp": time.Now().Add(time.Hour).Unix()}
		for k, v := range claims {
			c[k] = v
		}
		return testtoken.HMAC(t, "HS256", pipelinetest.ProtocolSecret, c)
	}
	userToken := mint(nil) // a Dex-like token: no session claim
	hop2Token := mint(jwt.MapClaims{"act": map[string]any{"sub": "agent-1"}})
	subAgentToken := mint(jwt.MapClaims{"sub": "research-agent", "azp": "research-agent", "act": map[string]any{"sub": "alice"}})
	rogueToken := mint(jwt.MapClaims{"sub": "rogue-agent", "azp": "rogue-agent", "act": map[string]any{"sub": "alice"}})

	proxy := func(upstream http.Handler) *envoytest.Proxy {
		return envoytest.NewProxy(t, addr, upstream, envoytest.ProxyOptions{
			Build: envoytest.BuildOptions{WithBody: true, MaxRequestBytes: 1 << 20}, Timeout: 5 * time.Second})
	}
	tools := proxy(testpeers.NewMCPServer(testpeers.MCPOptions{JSONResponse: true}))
	p3 := proxy(testpeers.NewA2AAgent(testpeers.A2AOptions{Name: "sub-agent"}))
	p2 := proxy(testpeers.NewA2AAgent(testpeers.A2AOptions{Name: "agent-2", Next: &testpeers.NextHop{
		URL: p3.URL, HTTPClient: testpeers.NewHTTPClient(subAgentToken, nil, nil), Forward: forwardLineage}}))
	p1 := proxy(testpeers.NewA2AAgent(testpeers.A2AOptions{Name: "agent-1", Next: &testpeers.NextHop{
		URL: p2.URL, HTTPClient: testpeers.NewHTTPClient(hop2Token, nil, nil), Forward: forwardLineage}}))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The user's agent opens its MCP session with the SDK client.
	cs, err := testpeers.NewMCPClient(ctx, tools.URL+"/mcp", testpeers.NewHTTPClient(userToken, nil, nil), &testpeers.MCPClientOptions{ProtocolVersion: testpeers.MCPVersion20250618})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	sid := cs.ID()
	seen, err := testpeers.WhoAmI(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	if sid == "" || seen.Headers.Get("X-Session-Id") != sid || seen.Headers.Get("X-User-Id") != "alice" {
		t.Fatalf("session %q: the user's tool saw %v (the bound MCP session names the session)", sid, seen.Headers)
	}

	client, err := testpeers.NewA2AClient(ctx, p1.URL, testpeers.NewHTTPClient(userToken, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	obs, _, err := testpeers.AskWhoAmI(ctx, client, "conversation-1")
	if err != nil {
		t.Fatal(err)
	}
	if obs.Next == nil || obs.Next.Next == nil {
		t.Fatalf("the chain stopped: %+v", obs)
	}
	last := obs.Next.Next.Headers
	if last.Get("X-Root-Context-Id") != "conversation-1" || last.Get("X-Lineage-Depth") != "2" || last.Get("X-Actor-Chain") != "alice" {
		t.Fatalf("sub-agent hop lineage %v", last)
	}

	// The sub-agent, then a rogue agent, work in the user's MCP session.
	callTool := func(tok string) (int, string) {
		body := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"whoami","arguments":{}}}`
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, tools.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", testpeers.MCPVersion20250618)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	status, body := callTool(subAgentToken)
	if status != 200 {
		t.Fatalf("delegated sub-agent in the user's session: %d %s", status, body)
	}
	var res struct {
		Result struct {
			Content []struct{ Text string } `json:"content"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(body), &res); err != nil || len(res.Result.Content) == 0 {
		t.Fatalf("tool answer %s", body)
	}
	sub, err := testpeers.ParseObservation(res.Result.Content[0].Text)
	if err != nil {
		t.Fatal(err)
	}
	if sub.Headers.Get("X-Session-Id") != sid || sub.Headers.Get("X-Actor-Chain") != "alice" {
		t.Fatalf("the sub-agent's tool call saw %v", sub.Headers)
	}
	status, body = callTool(rogueToken)
	if status != 403 || !strings.Contains(body, "session_conflict") || !strings.Contains(body, `"id":9`) {
		t.Fatalf("unrelated principal in the user's session: %d %s", status, body)
	}
}

// TestA2ATaskOwnedByCreator: a task alice's A2A SDK client created is hers:
// bob's client, holding the task id, cannot fetch, cancel or resubscribe to
// it (403, a JSON-RPC error), alice's delegate can.
func TestA2ATaskOwnedByCreator(t *testing.T) {
	addr := serveGRPC(t, `
issuers: [{name: idp, issuer: https://idp.example.com, secret: `+pipelinetest.ProtocolSecret+`}]
routes: [{name: agents, default: true, protocol: a2a, issuers: [idp]}]
sessions: {delegates: [{client_ids: [research-agent]}]}
`)
	mint := func(claims jwt.MapClaims) string {
		c := jwt.MapClaims{"sub": "alice", "session_id": "sess-1", "iss": "https://idp.example.com", "exp": time.Now().Add(time.Hour).Unix()}
		for k, v := range claims {
			c[k] = v
		}
		return testtoken.HMAC(t, "HS256", pipelinetest.ProtocolSecret, c)
	}
	p := envoytest.NewProxy(t, addr, testpeers.NewA2AAgent(testpeers.A2AOptions{Name: "agent"}), envoytest.ProxyOptions{
		Build: envoytest.BuildOptions{WithBody: true, MaxRequestBytes: 1 << 20}, Timeout: 5 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	clientOf := func(tok string) *a2aclient.Client {
		c, err := testpeers.NewA2AClient(ctx, p.URL, testpeers.NewHTTPClient(tok, nil, nil))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Destroy() })
		return c
	}
	alice := clientOf(mint(nil))
	_, task, err := testpeers.AskWhoAmI(ctx, alice, "ctx-alice")
	if err != nil || task == nil {
		t.Fatalf("alice's task: %v %v", task, err)
	}
	if _, err := alice.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID}); err != nil {
		t.Fatalf("alice polls her task: %v", err)
	}
	bob := clientOf(mint(jwt.MapClaims{"sub": "bob", "session_id": "sess-b"}))
	if _, err := bob.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID}); err == nil {
		t.Fatal("bob fetched alice's task")
	}
	if _, err := bob.CancelTask(ctx, &a2a.TaskIDParams{ID: task.ID}); err == nil {
		t.Fatal("bob cancelled alice's task")
	}
	delegate := clientOf(mint(jwt.MapClaims{"sub": "research-agent", "azp": "research-agent", "act": map[string]any{"sub": "alice"}}))
	if got, err := delegate.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID}); err != nil || got.ID != task.ID {
		t.Fatalf("alice's delegate: %v %v", got, err)
	}
	// What bob's client received: 403 with a JSON-RPC error carrying the id.
	body := `{"jsonrpc":"2.0","id":"q-1","method":"GetTask","params":{"id":"` + string(task.ID) + `"}}`
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.URL+"/", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+mint(jwt.MapClaims{"sub": "bob"}))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 403 || !strings.Contains(string(b), `"id":"q-1"`) || !strings.Contains(string(b), "task belongs to another user") {
		t.Fatalf("bob's GetTask: %d %s", resp.StatusCode, b)
	}
}

// TestSessionFromRealIdentityProviders is TestSessionSources as agents
// drive it: the MCP SDK client with a Dex-like token (sid, no session_id)
// gets x-session-id from sid; without any session claim it is the MCP
// session the service bound, or the A2A context; a forged one never
// arrives.
func TestSessionFromRealIdentityProviders(t *testing.T) {
	addr := serveGRPC(t, `
issuers: [{name: dex, issuer: https://dex.example.com, secret: `+pipelinetest.ProtocolSecret+`}]
routes:
  - {name: tools, path_prefix: /mcp, protocol: mcp, issuers: [dex]}
  - {name: agents, default: true, protocol: a2a, issuers: [dex]}
`)
	mint := func(claims jwt.MapClaims) string {
		c := jwt.MapClaims{"sub": "alice", "iss": "https://dex.example.com", "exp": time.Now().Add(time.Hour).Unix()}
		for k, v := range claims {
			c[k] = v
		}
		return testtoken.HMAC(t, "HS256", pipelinetest.ProtocolSecret, c)
	}
	proxy := func(upstream http.Handler) *envoytest.Proxy {
		return envoytest.NewProxy(t, addr, upstream, envoytest.ProxyOptions{
			Build: envoytest.BuildOptions{WithBody: true, MaxRequestBytes: 1 << 20}, Timeout: 5 * time.Second})
	}
	tools := proxy(testpeers.NewMCPServer(testpeers.MCPOptions{JSONResponse: true}))
	agent := proxy(testpeers.NewA2AAgent(testpeers.A2AOptions{Name: "agent"}))
	forged := http.Header{"X-Session-Id": {"../../bob"}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	mcpSession := func(tok string) (testpeers.Observation, string) {
		cs, err := testpeers.NewMCPClient(ctx, tools.URL+"/mcp", testpeers.NewHTTPClient(tok, forged, nil), &testpeers.MCPClientOptions{ProtocolVersion: testpeers.MCPVersion20250618})
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		seen, err := testpeers.WhoAmI(ctx, cs)
		if err != nil {
			t.Fatal(err)
		}
		return seen, cs.ID()
	}
	if seen, _ := mcpSession(mint(jwt.MapClaims{"sid": "CiQ5ZGV4LXNlc3Npb24"})); seen.Headers.Get("X-Session-Id") != "CiQ5ZGV4LXNlc3Npb24" {
		t.Fatalf("Dex-like token: the tool saw session %v, want the sid", seen.Headers["X-Session-Id"])
	}
	if seen, sid := mcpSession(mint(nil)); sid == "" || seen.Headers.Get("X-Session-Id") != sid {
		t.Fatalf("no session claim: the tool saw session %v, want the bound MCP session %q", seen.Headers["X-Session-Id"], sid)
	}
	client, err := testpeers.NewA2AClient(ctx, agent.URL, testpeers.NewHTTPClient(mint(nil), forged, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Destroy()
	obs, _, err := testpeers.AskWhoAmI(ctx, client, "ctx-42")
	if err != nil {
		t.Fatal(err)
	}
	if obs.Headers.Get("X-Session-Id") != "ctx-42" {
		t.Fatalf("A2A without a session claim: the agent saw session %v, want the bound context", obs.Headers["X-Session-Id"])
	}
	// Bob's SDK client in alice's context is refused.
	bob, err := testpeers.NewA2AClient(ctx, agent.URL, testpeers.NewHTTPClient(mint(jwt.MapClaims{"sub": "bob"}), nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer bob.Destroy()
	if _, _, err := testpeers.AskWhoAmI(ctx, bob, "ctx-42"); err == nil {
		t.Fatal("bob wrote into alice's A2A context")
	}
}

// TestKagentPresetWithoutConversation is TestKagentPresetNoConversation
// with kagent's own header convention: an MCP call that nothing names
// (stateless server, no session claim) carries no lineage headers; one that something names does.
func TestKagentPresetWithoutConversation(t *testing.T) {
	addr := serveGRPC(t, `
issuers: [{name: idp, issuer: https://idp.example.com, secret: `+pipelinetest.ProtocolSecret+`}]
routes: [{name: tools, default: true, protocol: mcp, issuers: [idp]}]
lineage: {preset: kagent}
`)
	tools := envoytest.NewProxy(t, addr, testpeers.NewMCPServer(testpeers.MCPOptions{Stateless: true, JSONResponse: true}), envoytest.ProxyOptions{
		Build: envoytest.BuildOptions{WithBody: true, MaxRequestBytes: 1 << 20}, Timeout: 5 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tt := range []struct {
		name     string
		claims   jwt.MapClaims
		wantRoot string
	}{
		{"nothing names the conversation", nil, ""},
		{"the token's session does", jwt.MapClaims{"session_id": "sess-7"}, "sess-7"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := jwt.MapClaims{"sub": "alice", "iss": "https://idp.example.com", "exp": time.Now().Add(time.Hour).Unix()}
			for k, v := range tt.claims {
				c[k] = v
			}
			forged := http.Header{testpeers.HeaderKagentRootContextID: {"forged"}}
			cs, err := testpeers.NewMCPClient(ctx, tools.URL+"/mcp", testpeers.NewHTTPClient(testtoken.HMAC(t, "HS256", pipelinetest.ProtocolSecret, c), forged, nil), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			seen, err := testpeers.WhoAmI(ctx, cs)
			if err != nil {
				t.Fatal(err)
			}
			if got := seen.Headers.Get(testpeers.HeaderKagentRootContextID); got != tt.wantRoot {
				t.Fatalf("root %q, want %q", got, tt.wantRoot)
			}
			if tt.wantRoot == "" {
				for _, h := range []string{testpeers.HeaderKagentParentContextID, "X-Lineage-Depth", "X-Actor-Chain", "X-Root-Context-Id"} {
					if vs := seen.Headers[h]; len(vs) > 0 {
						t.Fatalf("lineage header %s = %v without a conversation", h, vs)
					}
				}
			}
		})
	}
}
