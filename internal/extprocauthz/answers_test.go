package extprocauthz_test

import (
	"strings"
	"testing"

	"github.com/extauthz/extauthz/internal/testing/envoytest"
)

// readCall is a reader's tools/call (id 2) that the files route allows.
const readCall = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_file","arguments":{}}}`

// callResult answers readCall.
const callResult = `{"jsonrpc":"2.0","id":2,"result":{"content":[]}}`

// TestListUnderAnotherCallsAnswer: a server that holds back a reader's
// tools/list (id 1) answers the reader's tools/call (id 2) with the list's
// response, unfiltered. Clients match responses by id across the session
// (the TypeScript SDK's Protocol resolves the pending request by id from
// one map, the Go SDK queues every message of every answer to one
// connection), so the pending list would take it: on a route that filters
// lists, every POST answer's list responses are filtered by their shape.
func TestListUnderAnotherCallsAnswer(t *testing.T) {
	f := newFixture(t)
	reader := token(t, "alice", nil)
	filteredEvent := "event: message\ndata: " + toolsFiltered + "\n\n"
	resultEvent := "event: message\ndata: " + callResult + "\n\n"
	for _, tc := range []struct {
		name     string
		response envoytest.ExtProcMessage
		want     string
	}{
		{"sse: the list event is filtered, the call's result passes",
			sseResponse("event: message\ndata: "+toolsResult+"\n\n", resultEvent), filteredEvent + resultEvent},
		{"sse: split at every chunk boundary",
			sseResponse("event: message\nda", "ta: "+toolsResult[:40], toolsResult[40:]+"\n", "\n"+resultEvent), filteredEvent + resultEvent},
		{"json: the list response alone is filtered", jsonResponse(toolsResult, nil), toolsFiltered},
		{"json: the call's own result passes unchanged", jsonResponse(callResult, nil), callResult},
		{"json: a batch holding a list is refused", jsonResponse("["+callResult+","+toolsResult+"]", nil), unreadableAnswer(2)},
		{"json: a batch of no list passes", jsonResponse("["+callResult+"]", nil), "[" + callResult + "]"},
		{"json: a result holding two lists is refused",
			jsonResponse(strings.Replace(toolsResult, `"nextCursor"`, `"prompts":[],"nextCursor"`, 1), nil), unreadableAnswer(2)},
		{"json: a tools key in another case is refused",
			jsonResponse(strings.Replace(toolsResult, `"tools"`, `"Tools"`, 1), nil), unreadableAnswer(2)},
		{"json: not JSON is refused", jsonResponse(`{"jsonrpc":"2.0","id":1,"result":{"tools":[`, nil), unreadableAnswer(2)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			md := f.authorize(t, "mcp.example.com", reader, nil, readCall)
			if md == nil {
				t.Fatal("ext_authz denied")
			}
			res := envoytest.ExtProc(t, f.conn, recommended(md), envoytest.ExtProcExchange{Request: mcpRequest("mcp.example.com", readCall, nil), Response: tc.response})
			if res.Err != nil || res.Reset {
				t.Fatalf("protocol: %v (reset %v)", res.Err, res.Reset)
			}
			if got := string(res.Downstream.Body()); got != tc.want {
				t.Errorf("client got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

// unreadableAnswer is the error a JSON answer to call id that cannot be
// read exactly is replaced by.
func unreadableAnswer(id int) string {
	return `{"jsonrpc":"2.0","id":` + string(rune('0'+id)) + `,"error":{"code":-32603,"message":"Internal error","data":{"reason":"an event of the response could not be read"}}}`
}

// TestRefusedRequestAsListAnswer: the JSON answer to a reader's tools/list
// is, or asks for, an elicitation/create the files route's rules refuse.
// The TypeScript SDK dispatches a JSON answer's message whatever its kind,
// a request too: it must not reach the client as the list's answer either.
func TestRefusedRequestAsListAnswer(t *testing.T) {
	f := newFixture(t)
	reader := token(t, "alice", nil)
	elicit := `{"jsonrpc":"2.0","id":9,"method":"elicitation/create","params":{"message":"your password?","requestedSchema":{"type":"object","properties":{}}}}`
	refused := `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"Internal error","data":{"reason":"the server asked the client for elicitation/create, which the rules refuse"}}}`
	for _, tc := range []struct {
		name, body, want string
	}{
		{"the request itself", elicit, refused},
		{"a list result asking for it", strings.Replace(toolsResult, `"_meta":{"k":1}`, `"_meta":{"k":1},"inputRequests":{"a":{"method":"elicitation/create","params":{"message":"x","requestedSchema":{"type":"object"}}}}`, 1), refused},
		{"a method key in another case", strings.Replace(elicit, `"method"`, `"Method"`, 1), filterFailure},
		{"the list alone is filtered", toolsResult, toolsFiltered},
	} {
		t.Run(tc.name, func(t *testing.T) {
			md := f.authorize(t, "mcp.example.com", reader, nil, toolsList)
			if md == nil {
				t.Fatal("ext_authz denied")
			}
			res := envoytest.ExtProc(t, f.conn, recommended(md), envoytest.ExtProcExchange{Request: mcpRequest("mcp.example.com", toolsList, nil), Response: jsonResponse(tc.body, nil)})
			if res.Err != nil || res.Reset {
				t.Fatalf("protocol: %v (reset %v)", res.Err, res.Reset)
			}
			if got := string(res.Downstream.Body()); got != tc.want {
				t.Errorf("client got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}
