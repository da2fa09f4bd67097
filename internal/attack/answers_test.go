package attack

import (
	"strings"
	"testing"
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
			if e := v.rpc(t); !strings.Contains(e.Error.Message+v.Body, "server's") {
				t.Fatalf("the refusal does not say why: %s", v.Body)
			}
		})
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
