package check

import (
	"mime"
	"strings"

	"github.com/extauthz/extauthz/internal/jsonrpc"
)

// Call is what the JSON-RPC step learned about the request: the call it
// makes and the conversation it belongs to. The zero Call means a request
// that is not (known to be) JSON-RPC.
type Call struct {
	Protocol jsonrpc.Protocol // MCP, A2A, or ProtocolUnknown when not JSON-RPC
	Method   string
	Name     string // tool or prompt name, or resource URI
	ID       []byte // JSON-RPC id, echoed in error bodies
	// Body is true when the call was read from a trusted (complete) body,
	// false when only headers identified it.
	Body bool

	ProtocolVersion string
	ElicitationURL  bool
	MCPSession      string // Mcp-Session-Id
	ContextID       string // A2A params.message.contextId
	TaskID          string // A2A params.message.taskId, else params.id
	// Skill is the skill an A2A message send names in its metadata
	// (skillId or skill; jsonrpc.Request.Skill). The client chooses it:
	// it binds only an agent that routes by the same key.
	Skill string
	// Tenant is the tenant an A2A v1.0 call names in params.tenant
	// (jsonrpc.Request.Tenant), whose tasks and contexts an agent serving
	// several acts on: rules bind it to the caller (a2a.tenant).
	Tenant string
	// metaToken is a bearer token found in params._meta (opt-in per route).
	metaToken string
	// metaTokensDiffer: the call carries two different tokens, in
	// params._meta and in params.arguments._metadata.
	metaTokensDiffer bool
	// taskRefs are every task id the call names (params.taskId, params.id,
	// params.message.taskId): an upstream reads one of them (tasks.go).
	taskRefs [3]string
	// refTasks are the tasks a message send references
	// (params.message.referenceTaskIds), which the agent may read.
	refTasks []string
	// relatedTask is the task an MCP request says it belongs to
	// (jsonrpc.Request.RelatedTaskID).
	relatedTask string
	// subscribedURIs and subscribedTasks are what a subscriptions/listen
	// stream subscribes to (jsonrpc.Request.SubscribedURIs, in canonical
	// form after canonicalCall, and SubscribedTaskIDs).
	subscribedURIs, subscribedTasks []string
	// listContext is the context a task list filters by (A2A
	// params.contextId).
	listContext string
	// pushConfig: a message send carries a push notification
	// configuration, registering a webhook (jsonrpc.Request.PushConfig).
	pushConfig bool
	// answers are the server requests whose answers the message carries
	// (jsonrpc.Request.Answers: a response's, a retry's inputResponses).
	answers uint8
	// requestState is the state a retry sends back to its server
	// (jsonrpc.Request.RequestState).
	requestState string
	// completedPrompt is the prompt whose argument a completion completes
	// (jsonrpc.Request.CompletedPrompt).
	completedPrompt string
	// completedTemplate is the resource template whose argument a
	// completion completes (jsonrpc.Request.CompletedTemplate). After
	// canonicalCall, templateURIs is the one canonical URI it names
	// (templateExact) or what every URI it expands to starts with ("":
	// any URI).
	completedTemplate, templateURIs string
	templateExact                   bool
	// nameUnknown: the call has a name rules match, which it was not
	// given in a way its upstream checks (named by its headers alone, for
	// a method whose name MCP does not mirror in Mcp-Name).
	nameUnknown bool
	// nameAsSent is the Mcp-Name of a call named by its headers alone, as
	// sent, when it differs from the name it carries (Base64-encoded): an
	// upstream that compares the header with the body undecoded (the
	// go-sdk) runs the call of this name.
	nameAsSent string
	// task is how Method uses tasks (taskMethod), classified once.
	task taskUse
	// argsStart and argsEnd locate params.arguments in the request body
	// (both 0 when the call has none).
	argsStart, argsEnd int
}

// rpcDenial is a malformed JSON-RPC request: HTTP 400 with this code.
type rpcDenial struct {
	code int
	desc string
}

// mcpHeaderVersion is the first MCP version whose clients must send
// Mcp-Method and Mcp-Name.
const mcpHeaderVersion = "2026-07-28"

// readCall runs the JSON-RPC step for route r: parse the body when it can be
// trusted, cross-check the MCP 2026-07-28 headers, classify the protocol.
//
// On every route but protocol: http, a body that may be JSON-RPC to some
// upstream (see mayBeJSONRPC) is read whatever the HTTP method, and refused
// when it cannot be read unambiguously: "not JSON-RPC, so no rules" would
// let a body the upstream does read skip every rule.
func readCall(r *Route, req *Request) (Call, *rpcDenial) {
	var c Call
	if r.protocol == jsonrpc.ProtocolHTTP {
		return c, nil
	}
	// Denials before classification still answer in JSON-RPC's shape on
	// routes that declare their protocol.
	c.Protocol = r.protocol
	h := req.Headers
	c.MCPSession = h.Get("mcp-session-id")
	headerVersion := h.Get("mcp-protocol-version")
	c.ProtocolVersion = headerVersion
	headerMethod := h.Get("mcp-method")
	rawName, hasName := h["mcp-name"]
	var headerName string
	if hasName {
		var err error
		if headerName, err = jsonrpc.DecodeMcpName(rawName); err != nil {
			c.Protocol = jsonrpc.ProtocolMCP
			return c, &rpcDenial{jsonrpc.CodeHeaderMismatch, "Mcp-Name header is malformed"}
		}
	}

	if req.BodyPartial && r.bindsTasks {
		// Padding a task operation past the proxy's body limit (Envoy's
		// allow_partial_message sends what fits) would hide its task from
		// us but not from the agent, which reads it whole.
		if c.Protocol == jsonrpc.ProtocolUnknown {
			c.Protocol = jsonrpc.ProtocolMCP
		}
		return c, &rpcDenial{jsonrpc.CodeInvalidRequest, errCutBody}
	}

	var rpc jsonrpc.Request
	parsed := false
	// A body may be JSON-RPC when the route says so, when something about
	// it says so, when it is compressed (an upstream that inflates it may
	// read a call), or, on a route with rules, when we were not given it:
	// its Content-Type is only the client's word for what it holds.
	jsonBody := carriesBody(req) && (r.protocol != jsonrpc.ProtocolUnknown || mayBeJSONRPC(req) ||
		hasBody(req) && encoded(req) || r.hasRules() && withheld(req))
	if jsonBody && hasBody(req) {
		if c.Protocol == jsonrpc.ProtocolUnknown {
			c.Protocol = jsonrpc.ProtocolMCP // JSON-RPC's error shape, whichever protocol it is
		}
		if strings.ToUpper(req.Method) != req.Method {
			// RFC 9110: methods are case-sensitive. "post" is not POST to
			// us, but some upstream may still read the body.
			return c, &rpcDenial{jsonrpc.CodeInvalidRequest, "a JSON-RPC body needs an upper-case HTTP method"}
		}
		if encoded(req) {
			// An upstream that inflates the body (a decompressor after
			// us, its own middleware) reads what we cannot.
			return c, &rpcDenial{jsonrpc.CodeParseError, "a JSON-RPC body must not be compressed: the Content-Encoding is not identity"}
		}
		if !UTF8Charset(req.Headers.Get("content-type")) {
			// An upstream that honours the charset reads other characters.
			return c, &rpcDenial{jsonrpc.CodeParseError, "a JSON-RPC body must be UTF-8: the content type names another charset"}
		}
		if !req.BodyPartial {
			var err error
			if rpc, err = jsonrpc.Parse(req.Body); err != nil {
				code, msg := jsonrpc.CodeFor(err)
				c.ID = rpc.ID // set only when every upstream reads the same id
				return c, &rpcDenial{code, msg}
			}
			parsed = true
		}
	}

	if parsed {
		c.Body = true
		c.ID = rpc.ID
		c.Method = rpc.Method
		c.Name = rpc.RuleName()
		if rpc.ProtocolVersion != "" {
			c.ProtocolVersion = rpc.ProtocolVersion
		}
		c.ElicitationURL = rpc.ElicitationURL
		c.ContextID = rpc.ContextID
		c.TaskID = firstNonEmpty(rpc.TaskID, rpc.ParamsID)
		c.Skill, c.Tenant = rpc.Skill, rpc.Tenant
		c.metaToken, c.metaTokensDiffer = rpc.MetaAuthorization, rpc.MetaAuthorizationsDiffer
		c.taskRefs = [3]string{rpc.ParamsTaskID, rpc.ParamsID, rpc.TaskID}
		c.refTasks, c.listContext, c.pushConfig = rpc.ReferenceTaskIDs, rpc.ParamsContextID, rpc.PushConfig
		c.relatedTask = rpc.RelatedTaskID
		c.answers, c.requestState = rpc.Answers, rpc.RequestState
		c.subscribedURIs, c.subscribedTasks = rpc.SubscribedURIs, rpc.SubscribedTaskIDs
		c.completedPrompt, c.completedTemplate = rpc.CompletedPrompt, rpc.CompletedTemplate
		c.argsStart, c.argsEnd = rpc.ArgumentsStart, rpc.ArgumentsEnd
		if rpc.IsResponse {
			c.Method = ""
		}
	} else {
		// Servers check Mcp-Name against the body only where MCP mirrors
		// the name in it: a resources/subscribe's may name any URI. Where
		// it is missing, the call may be of any name too.
		c.Method = headerMethod
		switch {
		case hasName && jsonrpc.NameMirrored(headerMethod):
			c.Name = headerName
			if rawName != headerName {
				c.nameAsSent = rawName
			}
		case jsonrpc.HasRuleName(headerMethod):
			c.nameUnknown = true
		}
	}

	// MCP 2026-07-28: Mcp-Method and Mcp-Name identify the call so gateways
	// need not parse the body; a missing or disagreeing header is -32020.
	if parsed && c.Method != "" && isMCP(r, c.Method) {
		c.Protocol = jsonrpc.ProtocolMCP
		if headerMethod != "" && headerMethod != c.Method {
			return c, &rpcDenial{jsonrpc.CodeHeaderMismatch, "Mcp-Method header does not match the body"}
		}
		name, needsName := rpc.MirroredName()
		if hasName && headerName != name {
			return c, &rpcDenial{jsonrpc.CodeHeaderMismatch, "Mcp-Name header does not match the body"}
		}
		if headerVersion != "" && rpc.ProtocolVersion != "" && headerVersion != rpc.ProtocolVersion {
			return c, &rpcDenial{jsonrpc.CodeHeaderMismatch, "MCP-Protocol-Version header does not match the body"}
		}
		if c.ProtocolVersion >= mcpHeaderVersion {
			if headerMethod == "" {
				return c, &rpcDenial{jsonrpc.CodeHeaderMismatch, "Mcp-Method header is required"}
			}
			if needsName && !hasName {
				return c, &rpcDenial{jsonrpc.CodeHeaderMismatch, "Mcp-Name header is required"}
			}
		}
	}

	c.Protocol = classify(r, &c, parsed, req.Method)
	if c.Protocol == jsonrpc.ProtocolUnknown && resumesOutsideSession(r, req) {
		c.Protocol = jsonrpc.ProtocolMCP // the session stage's refusal, in JSON-RPC's shape
	}
	if c.Protocol == jsonrpc.ProtocolUnknown && jsonBody {
		// A body that may be JSON-RPC and that we were not given whole: its
		// call is unknown, which the rules refuse.
		c.Protocol = jsonrpc.ProtocolMCP
	}
	if c.Protocol == jsonrpc.ProtocolA2A {
		c.MCPSession = ""
	} else {
		c.ContextID, c.TaskID, c.Skill, c.Tenant = "", "", "", ""
	}
	c.task = taskMethod(c.Method)
	return c, nil
}

// hasBody reports whether req came with a body, given to us or not.
func hasBody(req *Request) bool {
	return len(req.Body) > 0 || req.BodyPartial
}

// carriesBody reports whether req has a body, even one the proxy did not
// send us: a POST (or any method but the bodiless ones, bodyMethod), or a
// request with a body, a non-zero Content-Length or a Transfer-Encoding.
func carriesBody(req *Request) bool {
	if bodyMethod(req.Method) || hasBody(req) {
		return true
	}
	if cl := req.Headers.Get("content-length"); cl != "" && cl != "0" {
		return true
	}
	return req.Headers.Get("transfer-encoding") != ""
}

// withheld reports whether req carries a body the service was not given
// whole: one cut short (BodyPartial), or none at all while the request has
// a non-zero Content-Length, a Transfer-Encoding, or is a POST (or a PUT,
// a PATCH, any method but the bodiless ones: bodyMethod) without a
// Content-Length (HTTP/2 need not send one, and forward-auth proxies drop
// it with the body). A request that says its body is empty
// (Content-Length: 0), and a GET, HEAD, DELETE, OPTIONS or TRACE without a
// length, carry none.
func withheld(req *Request) bool {
	if req.BodyPartial {
		return true
	}
	if len(req.Body) > 0 {
		return false
	}
	cl, hasLength := req.Headers["content-length"]
	switch {
	case hasLength && cl != "0":
		return true
	case req.Headers["transfer-encoding"] != "":
		return true
	}
	return !hasLength && bodyMethod(req.Method)
}

// bodyMethod reports whether a request of method may carry a body its
// proxy need not announce: every method but GET, HEAD, DELETE, OPTIONS
// and TRACE, whose bodies have no meaning (RFC 9110 section 9.3). An
// upstream that runs JSON-RPC whatever the method (a handler on every
// method) acts on a PUT's call as on a POST's, so a PUT is no safer.
func bodyMethod(method string) bool {
	switch method { // as proxies send them, without folding (every check asks)
	case "POST":
		return true
	case "GET", "HEAD", "DELETE", "OPTIONS", "TRACE":
		return false
	}
	for _, m := range [...]string{"GET", "HEAD", "DELETE", "OPTIONS", "TRACE"} {
		if strings.EqualFold(method, m) {
			return false
		}
	}
	return true
}

// encoded reports whether req's body is labelled with a content coding
// (RFC 9110 section 8.4) other than identity: gzip, deflate, br, zstd or
// any other, or a list of them.
func encoded(req *Request) bool {
	ce, ok := req.Headers["content-encoding"]
	if !ok {
		return false
	}
	ce = strings.Trim(ce, " \t")
	return ce != "" && !strings.EqualFold(ce, "identity")
}

// UTF8Charset reports whether a content type leaves the body UTF-8: it
// names no charset, or UTF-8.
func UTF8Charset(contentType string) bool {
	if !containsFold(contentType, "charset") {
		return true
	}
	_, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	switch strings.ToLower(params["charset"]) {
	case "", "utf-8", "utf8":
		return true
	}
	return false
}

// containsFold reports whether s contains the lower-case ASCII word sub,
// in any case, without allocating. A window of len(sub) bytes holding a
// multi-byte rune has fewer runes than sub and never folds onto it, so
// only a window starting with sub's first letter in either case can match:
// the others are passed over without calling EqualFold.
func containsFold(s, sub string) bool {
	if sub == "" {
		return true
	}
	first := sub[0]
	for i := 0; i+len(sub) <= len(s); i++ {
		if c := s[i]; (c == first || c|0x20 == first && 'a' <= first && first <= 'z') && strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}

// protocolHeaders are the headers only MCP and A2A clients send.
var protocolHeaders = []string{
	"mcp-session-id", "mcp-protocol-version", "mcp-method", "mcp-name",
	"a2a-version", "a2a-extensions", "x-a2a-extensions",
}

// mayBeJSONRPC reports whether some upstream may read req's body as a
// JSON-RPC message: it looks like JSON (first significant byte '{' or '[',
// even after a byte order mark or in UTF-16), its content type says JSON,
// or it carries an MCP or A2A header.
func mayBeJSONRPC(req *Request) bool {
	if jsonrpc.LooksLikeJSON(req.Body) {
		return true
	}
	if req.Headers.Mentions("content-type", "json") {
		return true
	}
	for _, name := range protocolHeaders {
		if _, ok := req.Headers[name]; ok {
			return true
		}
	}
	return false
}

func isMCP(r *Route, method string) bool {
	return r.protocol == jsonrpc.ProtocolMCP || (r.protocol != jsonrpc.ProtocolA2A && jsonrpc.ProtocolOf(method) != jsonrpc.ProtocolA2A)
}

// classify names the protocol of a call: the route's when it declares one,
// else by the method's name, else by what the request carries.
func classify(r *Route, c *Call, parsed bool, httpMethod string) jsonrpc.Protocol {
	if r.protocol == jsonrpc.ProtocolMCP || r.protocol == jsonrpc.ProtocolA2A {
		if httpMethod != "POST" && c.Method == "" && c.MCPSession == "" && c.ProtocolVersion == "" {
			return jsonrpc.ProtocolUnknown // not a JSON-RPC request (e.g. the A2A agent card, an SSE GET without session)
		}
		return r.protocol
	}
	if p := jsonrpc.ProtocolOf(c.Method); p != jsonrpc.ProtocolUnknown {
		return p
	}
	switch {
	case c.ContextID != "":
		return jsonrpc.ProtocolA2A
	case parsed, c.MCPSession != "", c.ProtocolVersion != "", c.Method != "":
		return jsonrpc.ProtocolMCP
	}
	return jsonrpc.ProtocolUnknown
}

// jsonRPC reports whether denials of this call are answered as JSON-RPC
// error responses.
func (c *Call) jsonRPC() bool { return c.Protocol != jsonrpc.ProtocolUnknown }

func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// metaBearer extracts a token from "Bearer x" or a bare token.
func metaBearer(v string) string {
	v = strings.TrimSpace(v)
	if len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
		return strings.TrimSpace(v[7:])
	}
	return v
}
