package check

import (
	"fmt"
	"strings"

	"github.com/extauthz/extauthz/internal/jsonrpc"
	"github.com/extauthz/extauthz/internal/mcpresponse"
)

// explainResponse adds Explain's account of what the response path
// (response.go) would do with the answer to an explained request on a
// route that has one. Only what the request decides is known: which
// entries a list keeps depends on the list the upstream answers with.
func (e *evaluation) explainResponse(v *Verdict) {
	r := e.route
	if e.rec.steps == nil || r == nil || !r.responsePath {
		return
	}
	e.rec.stage = "response"
	if !v.Outcome.Allow() {
		e.rec.add("not processed", func() string {
			return "the request is not allowed: its answer is processed as nobody's (a list answer is replaced by an error)"
		})
		return
	}
	call, who := &e.call, "the caller"
	if e.grant != nil {
		who = e.grant.Subject
	}
	list := mcpresponse.IsListMethod(call.Method)
	switch {
	case e.req.Method == "GET" && r.filterLists && r.hasRules():
		// A GET names no call, but its event stream may replay a list's
		// answer (Last-Event-ID) or carry one on the session's stream.
		e.rec.add("filter by shape", func() string {
			return fmt.Sprintf("an event stream answer: each event that is a list result by its shape has the entries %s cannot use removed", who)
		})
	case call.Method == "initialize":
		e.rec.add("bind session", func() string {
			return fmt.Sprintf("the Mcp-Session-Id the upstream answers with is bound to %s at birth", who)
		})
	case list && r.filterLists && r.hasRules():
		if !call.Body {
			e.rec.add("filter failure", func() string {
				return "the call was not read from a complete body: the list answer would be replaced by an error"
			})
			break
		}
		e.rec.add("filter list", func() string {
			return fmt.Sprintf("%s answer: entries %s cannot use under the route's rules are removed; "+
				"which ones depends on the list the upstream answers with, not known here", call.Method, who)
		})
	case list:
		e.rec.add("pass", func() string { return "list answers of this route are not filtered (filter_lists off or no rules)" })
	case e.p.taskOwnership && CreatesTask(call.Method):
		e.rec.add("bind task", func() string { return "a task a JSON answer creates is bound to " + who })
	}
	if r.bindsContexts(call) {
		e.rec.add("bind context", func() string {
			return "an A2A context the answer puts the message in is bound to " + who + " unless another user holds it"
		})
	}
	if e.grant != nil {
		// What the response path will keep from the client.
		x := &Exchange{pl: e.pl, p: e.p, route: r, grant: e.grant, Call: *call}
		refused := x.RefusedServerRequests(e.ctx, e.req)
		var kept []string
		for i, method := range jsonrpc.ServerRequests {
			if refused&(1<<i) != 0 {
				kept = append(kept, method)
			}
		}
		if len(kept) > 0 {
			e.rec.add("keep server requests", func() string {
				return fmt.Sprintf("the server's requests the rules refuse to %s (%s) are kept from the client: dropped from its event streams, "+
					"a JSON answer or result asking for one replaced by an error", who, strings.Join(kept, ", "))
			})
		}
	}
	if e.reauthorizes(call) {
		e.rec.add("re-authorize", func() string {
			return "an upstream 401 (or 403 insufficient_scope) is replaced by the re-authorization answer; the session's exchanged tokens are dropped"
		})
	}
}

// reauthorizes reports whether Exchange.Reauthorization would answer an
// upstream refusal of call, without starting an elicitation.
func (e *evaluation) reauthorizes(call *Call) bool {
	re := e.route.exchange
	if re == nil || re.authorizeURL == "" || call.Protocol == jsonrpc.ProtocolUnknown || call.ID == nil {
		return false
	}
	if call.Protocol == jsonrpc.ProtocolA2A || call.Method == "tools/call" || call.ElicitationURL {
		return true
	}
	return call.MCPSession != "" && e.st.sessionElicitsURL(bindingKey(bindSession, call.MCPSession))
}

// CreatesTask reports whether an answer to method may create a task: MCP
// tools/call (with params.task) and A2A message sends, streaming ones too,
// in every spelling of the vocabulary (taskUses).
func CreatesTask(method string) bool {
	return method == "tools/call" || taskUses[method] == taskSend
}
