package envoyauthz_test

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"github.com/golang-jwt/jwt/v5"
	"google.golang.org/grpc"

	"github.com/extauthz/extauthz/internal/check"
	"github.com/extauthz/extauthz/internal/envoyauthz"
	"github.com/extauthz/extauthz/internal/testing/envoytest"
	"github.com/extauthz/extauthz/internal/testing/pipelinetest"
	"github.com/extauthz/extauthz/internal/testing/testpeers"
	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

// serveGRPC runs the ext_authz server on a real 127.0.0.1 listener.
func serveGRPC(t *testing.T, doc string) string {
	t.Helper()
	pl := pipelinetest.New(t, doc, check.Deps{}, check.Options{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	authv3.RegisterAuthorizationServer(gs, envoyauthz.NewServer(pl))
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	return lis.Addr().String()
}

// forwardLineage is what a workload behind the proxy does on its outbound
// call: pass the root and its depth on, name its own context as parent.
func forwardLineage(in http.Header, contextID string) http.Header {
	out := http.Header{}
	for _, h := range []string{"X-Root-Context-Id", "X-Lineage-Depth"} {
		if v := in.Get(h); v != "" {
			out.Set(h, v)
		}
	}
	out.Set("X-Parent-Context-Id", contextID)
	return out
}

// TestThreeHopChain: client -> proxy -> agent-1 -> proxy -> agent-2 ->
// proxy -> agent-3, every proxy asking the same real ext_authz server over
// gRPC. The root stays, the parent changes per hop, the depth counts up and
// the actor chain comes from the signed act claims.
func TestThreeHopChain(t *testing.T) {
	addr := serveGRPC(t, `
issuers: [{name: idp, issuer: https://idp.example.com, secret: `+pipelinetest.ProtocolSecret+`}]
routes: [{name: agents, default: true, issuers: [idp]}]
`)
	mint := func(claims jwt.MapClaims) string {
		c := jwt.MapClaims{"sub": "alice", "session_id": "sess-42", "iss": "https://idp.example.com", "exp": time.Now().Add(time.Hour).Unix()}
		for k, v := range claims {
			c[k] = v
		}
		return testtoken.HMAC(t, "HS256", pipelinetest.ProtocolSecret, c)
	}
	// Each agent calls on with a token exchanged for it: alice, acted for
	// by the agents so far (RFC 8693 act, outermost = current actor).
	hop2Token := mint(jwt.MapClaims{"act": map[string]any{"sub": "agent-1"}})
	hop3Token := mint(jwt.MapClaims{"act": map[string]any{"sub": "agent-2", "act": map[string]any{"sub": "agent-1"}}})
	userToken := mint(nil)

	proxy := func(upstream http.Handler) *envoytest.Proxy {
		return envoytest.NewProxy(t, addr, upstream, envoytest.ProxyOptions{
			Build: envoytest.BuildOptions{WithBody: true, MaxRequestBytes: 1 << 20}, Timeout: 5 * time.Second})
	}
	p3 := proxy(testpeers.NewA2AAgent(testpeers.A2AOptions{Name: "agent-3"}))
	p2 := proxy(testpeers.NewA2AAgent(testpeers.A2AOptions{Name: "agent-2", Next: &testpeers.NextHop{
		URL: p3.URL, HTTPClient: testpeers.NewHTTPClient(hop3Token, nil, nil), Forward: forwardLineage}}))
	p1 := proxy(testpeers.NewA2AAgent(testpeers.A2AOptions{Name: "agent-1", Next: &testpeers.NextHop{
		URL: p2.URL, HTTPClient: testpeers.NewHTTPClient(hop2Token, nil, nil), Forward: forwardLineage}}))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The client forges lineage and identity; the first hop must drop both.
	forged := http.Header{"X-User-Id": {"mallory"}, "X-Root-Context-Id": {"forged-root"}, "X-Lineage-Depth": {"5"}}
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
	want := []struct {
		peer, depth, actors string
		parentFromPrev      bool
	}{
		{"agent-1", "0", "", false},
		{"agent-2", "1", "agent-1", true},
		{"agent-3", "2", "agent-2,agent-1", true},
	}
	for i, w := range want {
		o := hops[i]
		if o == nil {
			t.Fatalf("hop %d missing: %+v", i+1, obs)
		}
		h := o.Headers
		if o.Peer != w.peer || h.Get("X-User-Id") != "alice" || h.Get("X-Session-Id") != "sess-42" {
			t.Errorf("hop %d: peer %s identity %q/%q", i+1, o.Peer, h.Get("X-User-Id"), h.Get("X-Session-Id"))
		}
		if got := h.Get("X-Root-Context-Id"); got != "conversation-1" {
			t.Errorf("hop %d: root %q, want conversation-1", i+1, got)
		}
		if got := h.Get("X-Lineage-Depth"); got != w.depth {
			t.Errorf("hop %d: depth %q, want %s", i+1, got, w.depth)
		}
		if got := h.Get("X-Actor-Chain"); got != w.actors {
			t.Errorf("hop %d: actor chain %q, want %q", i+1, got, w.actors)
		}
		parent := h.Get("X-Parent-Context-Id")
		switch {
		case !w.parentFromPrev && parent != "":
			t.Errorf("hop %d: a chain root has no parent, got %q", i+1, parent)
		case w.parentFromPrev && (parent == "" || parent == hops[i-1].Headers.Get("X-Parent-Context-Id")):
			t.Errorf("hop %d: parent %q must be the previous hop's own context", i+1, parent)
		}
		if o.Authorization && i == 0 {
			t.Errorf("hop 1: the inbound token reached the agent")
		}
	}
}
