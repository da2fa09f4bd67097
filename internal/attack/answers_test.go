package attack

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/extauthz/extauthz/internal/testing/testpeers"
)

// An MCP server asks its client for things (sampling/createMessage: the
// client's model writes for it; elicitation/create: the user fills a
// form; roots/list: the client's folders), and the client answers: in a
// POSTed JSON-RPC response (streamable HTTP until 2025-11-25), or, in
// 2026-07-28's multi round-trip requests, in the params.inputResponses of
// the call it retries. A rule naming those methods decides whether the
// answer may reach the server: without it, a route denying sampling
// would still hand the server what the client's model wrote.
const answerRoutes = `routes:
  - name: closed
    path_prefix: /closed
    protocol: mcp
    issuers: [hs]
    audiences: [` + audience + `]
    default_action: deny
    rules:
      - {methods: ["tools/call"], names: ["echo"]}
      - {methods: ["elicitation/create"], scopes: [forms]}
  - name: mcp
    default: true
    protocol: mcp
    issuers: [hs]
    audiences: [` + audience + `]
    rules:
      - {methods: ["sampling/*"], action: deny}
      - {methods: ["roots/list"], scopes: [roots]}
`

const (
	samplingResult    = `{"role":"assistant","content":{"type":"text","text":"the summary"},"model":"m-1","stopReason":"endTurn"}`
	elicitationResult = `{"action":"accept","content":{"name":"alice"}}`
	rootsResult       = `{"roots":[{"uri":"file:///home/alice","name":"home"}]}`
)

// TestAnswersToServerRequests: the answer a client sends must pass what the
// request it answers needs, whichever way it travels.
func TestAnswersToServerRequests(t *testing.T) {
	s := start(t, answerRoutes, options{})
	response := func(result string) string { return `{"jsonrpc":"2.0","id":"s-1","result":` + result + `}` }
	retry := func(responses string) string {
		return rpcBody(4, "tools/call", `{"name":"echo","arguments":{},"inputResponses":`+responses+`,"requestState":"opaque"}`)
	}
	for _, tc := range []struct {
		name, path, body string
		scopes           []string
		status           int // 0: allowed
	}{
		{"a sampling result", "", response(samplingResult), nil, 403},
		{"a sampling result with its key in another case", "", response(`{"ROLE":"assistant","Content":{"type":"text","text":"x"}}`), nil, 403},
		{"a roots listing without the scope", "", response(rootsResult), nil, 403},
		{"a roots listing with it", "", response(rootsResult), []string{"roots"}, 0},
		{"an elicitation result", "", response(elicitationResult), nil, 0},
		{"an empty result (a ping's)", "", response(`{}`), nil, 0},
		{"an error: the client declined", "", `{"jsonrpc":"2.0","id":"s-1","error":{"code":-1,"message":"the user declined"}}`, nil, 0},
		{"a retry carrying a sampling result", "", retry(`{"summary":` + samplingResult + `}`), nil, 403},
		{"a retry carrying a sampling result beside an elicitation", "", retry(`{"a":` + elicitationResult + `,"b":` + samplingResult + `}`), nil, 403},
		{"a retry carrying a wrapped answer", "", retry(`{"summary":{"method":"sampling/createMessage","result":` + samplingResult + `}}`), nil, 403},
		{"a retry carrying an answer that is no object", "", retry(`{"summary":"the summary"}`), nil, 403},
		{"a retry carrying the roots, without the scope", "", retry(`{"r":` + rootsResult + `}`), nil, 403},
		{"a retry carrying an elicitation result", "", retry(`{"confirm":` + elicitationResult + `}`), nil, 0},
		{"a retry carrying nothing", "", retry(`{}`), nil, 0},
		{"inputResponses that are no object", "", retry(`[` + samplingResult + `]`), nil, 400},
		{"default deny: an elicitation a rule allows", "/closed/mcp", retry(`{"confirm":` + elicitationResult + `}`), []string{"forms"}, 0},
		{"default deny: an elicitation a rule refuses", "/closed/mcp", retry(`{"confirm":` + elicitationResult + `}`), nil, 403},
		{"default deny: a roots listing no rule names", "/closed/mcp", response(rootsResult), nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := s.check(t, raw{Path: tc.path, Headers: map[string]string{"authorization": "Bearer " + token(t, issuerHS, "mallory", tc.scopes...),
				"content-type": "application/json"}, Body: tc.body})
			if !v.wantStatus(t, tc.status) || tc.status != 403 {
				return
			}
			if v.rpc(t); !strings.Contains(v.Body, "server's") {
				t.Fatalf("the refusal does not say why: %s", v.Body)
			}
		})
	}
}

// TestAnswersForwardAuth: the forward-auth front end, given the body as
// Traefik's forwardBody sends it, refuses the answers and the request
// states ext_authz does.
func TestAnswersForwardAuth(t *testing.T) {
	s := start(t, answerRoutes, options{})
	user := token(t, issuerHS, "mallory")
	for _, tc := range []struct {
		name, body string
		status     int
	}{
		{"a POSTed sampling result", `{"jsonrpc":"2.0","id":"s-1","result":` + samplingResult + `}`, 403},
		{"a retry carrying one", rpcBody(4, "tools/call", `{"name":"echo","arguments":{},"inputResponses":{"s":`+samplingResult+`}}`), 403},
		{"a retry carrying an elicitation result", rpcBody(4, "tools/call", `{"name":"echo","arguments":{},"inputResponses":{"e":`+elicitationResult+`}}`), 200},
		// A requestState is bound as over ext_authz: mallory's first.
		{"a retry sending back a state", rpcBody(4, "tools/call", `{"name":"echo","arguments":{},"requestState":"state-of-mallory"}`), 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if status, _, body := s.forwardAuth(t, fwd{Header: bearer(user), Body: tc.body}); status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, body)
			}
		})
	}
	other := token(t, issuerHS, "eve")
	if status, _, body := s.forwardAuth(t, fwd{Header: bearer(other), Body: rpcBody(4, "tools/call", `{"name":"echo","arguments":{},"requestState":"state-of-mallory"}`)}); status != 403 || !strings.Contains(body, "requestState") {
		t.Fatalf("another user's retry with mallory's state: %d %s, want 403", status, body)
	}
}

// TestAnswersNamedByHeadersAlone: behind a proxy that sends no body, a
// 2026-07-28 call may carry inputResponses of any kind, so on a route
// whose rules refuse one of the server's requests it is refused.
func TestAnswersNamedByHeadersAlone(t *testing.T) {
	s := start(t, headerOnlyRoutes, options{})
	for _, tc := range []struct {
		name, path string
		status     int // 0: allowed
	}{
		{"a route denying sampling", "/nosampling/mcp", 403},
		{"a route that does not", "/open/mcp", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := s.checkByHeaders(t, tc.path, "tools/call", "echo")
			if v.wantStatus(t, tc.status) && tc.status != 0 && !strings.Contains(v.Body, "headers alone") {
				t.Fatalf("the refusal does not say why: %s", v.Body)
			}
		})
	}
}

// TestSDKSamplingDenied: the go-sdk's server asks the client's model for a
// summary (an input request, as its handler returns it), and the go-sdk's
// client, speaking 2026-07-28, answers with its sampling handler in the
// retry's inputResponses. Asked directly, the server gets what the model
// wrote; through the service, on a route denying sampling/*, it never
// does. (Answers POSTed as responses, as 2025-11-25 clients send them, are
// TestAnswersToServerRequests' cases: there the go-sdk's server waits for
// the refused answer until its session ends.)
func TestSDKSamplingDenied(t *testing.T) {
	s := start(t, answerRoutes, options{Summarize: true})
	sampled := func() []string {
		s.mu.Lock()
		defer s.mu.Unlock()
		var out []string
		for _, c := range s.executed {
			if c.Tool == testpeers.ToolSummarize {
				out = append(out, c.Sampled)
			}
		}
		return out
	}
	summarize := func(base, text string) (string, error) {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		cs, err := testpeers.NewMCPClient(ctx, base+"/mcp", testpeers.NewHTTPClient(token(t, issuerHS, "mallory"), nil, nil),
			&testpeers.MCPClientOptions{Sampling: text})
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: testpeers.ToolSummarize})
		if err != nil {
			return "", err
		}
		if res.IsError || len(res.Content) != 1 {
			return "", fmt.Errorf("the tool failed: %+v", res)
		}
		return res.Content[0].(*mcp.TextContent).Text, nil
	}
	if got, err := summarize(s.upstream, "asked directly"); err != nil || got != "sampled: asked directly" {
		t.Fatalf("asked directly, the server did not sample through the client (%q, %v): the case shows nothing", got, err)
	}
	if got, err := summarize(s.proxy.URL, "through the service"); err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Errorf("through the service the call answered %q, %v; want it refused (403)", got, err)
	}
	if got := sampled(); !slices.Equal(got, []string{"asked directly"}) {
		t.Errorf("the server had what the model wrote: %q", got)
	}
}

// TestRequestStateIsTheRecipients: a 2026-07-28 server that needs input
// answers with a requestState, which the client sends back on the retry;
// the server resumes the round from it (SEP-2322 leaves binding it to the
// user to the server, and the SDKs do it only when configured). Like a
// task id it is a capability: it belongs to the first user who sends it
// back, and anybody else's retry with it is refused.
func TestRequestStateIsTheRecipients(t *testing.T) {
	s := start(t, answerRoutes, options{})
	alice := map[string]string{"authorization": "Bearer " + token(t, issuerHS, "alice"), "content-type": "application/json"}
	bob := map[string]string{"authorization": "Bearer " + token(t, issuerHS, "bob"), "content-type": "application/json"}
	retry := func(state string) string {
		return rpcBody(4, "tools/call", `{"name":"echo","arguments":{},"inputResponses":{"e":`+elicitationResult+`},"requestState":`+state+`}`)
	}
	long := `"` + strings.Repeat("s", 4096) + `"`
	for _, tc := range []struct {
		name    string
		headers map[string]string
		state   string
		status  int // 0: allowed
	}{
		{"alice sends back her state", alice, `"state-of-alice"`, 0},
		{"again, a later round", alice, `"state-of-alice"`, 0},
		{"bob sends back hers", bob, `"state-of-alice"`, 403},
		{"bob sends back his own", bob, `"state-of-bob"`, 0},
		{"alice sends back bob's", alice, `"state-of-bob"`, 403},
		{"a long state", alice, long, 0},
		{"the long state, by bob", bob, long, 403},
		{"a state that is no string", bob, `{"s":"state-of-alice"}`, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := s.check(t, raw{Headers: tc.headers, Body: retry(tc.state)})
			if v.wantStatus(t, tc.status) && tc.status == 403 && !strings.Contains(v.Body, "requestState") {
				t.Fatalf("the refusal does not say why: %s", v.Body)
			}
		})
	}
}
