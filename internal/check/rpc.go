package check

import (
	"strings"

	"github.com/extauthz/extauthz/internal/jsonrpc"
)

// Protocols a call is classified as.
const (
	ProtoHTTP = "http"
	ProtoMCP  = "mcp"
	ProtoA2A  = "a2a"
)

// Call is what the JSON-RPC step learned about the request: the call it
// makes and the conversation it belongs to. The zero Call means a request
// that is not (known to be) JSON-RPC.
type Call struct {
	Protocol string // ProtoMCP, ProtoA2A, or "" when not JSON-RPC
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
	// metaToken is a bearer token found in params._meta (opt-in per route).
	metaToken string
	// taskRefs are every task id the call names (params.taskId, params.id,
	// params.message.taskId): an upstream reads one of them (tasks.go).
	taskRefs [3]string
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
func readCall(r *Route, req *Request) (Call, *rpcDenial) {
	var c Call
	if r.protocol == ProtoHTTP {
		return c, nil
	}
	// Denials before classification still answer in JSON-RPC's shape on
	// routes that declare their protocol.
	c.Protocol = r.protocol
	h := req.Headers
	c.MCPSession = h.Get("mcp-session-id")
	c.ProtocolVersion = h.Get("mcp-protocol-version")
	headerMethod := h.Get("mcp-method")
	rawName, hasName := h["mcp-name"]
	var headerName string
	if hasName {
		var err error
		if headerName, err = jsonrpc.DecodeMcpName(rawName); err != nil {
			c.Protocol = ProtoMCP
			return c, &rpcDenial{jsonrpc.CodeHeaderMismatch, "Mcp-Name header is malformed"}
		}
	}

	var rpc jsonrpc.Request
	parsed := false
	if req.Method == "POST" && len(req.Body) > 0 && !req.BodyPartial {
		var err error
		rpc, err = jsonrpc.Parse(req.Body)
		switch {
		case err == nil:
			parsed = true
		case r.protocol == ProtoMCP || r.protocol == ProtoA2A:
			code, msg := jsonrpc.CodeFor(err)
			return c, &rpcDenial{code, msg}
		}
		// On an auto route a body that is not JSON-RPC is simply not ours
		// to understand.
	}

	if parsed {
		c.Body = true
		c.ID = rpc.ID
		c.Method = rpc.Method
		c.Name, _ = rpc.MirroredName()
		if c.Name == "" {
			c.Name = firstNonEmpty(rpc.Name, rpc.URI)
		}
		if rpc.ProtocolVersion != "" {
			c.ProtocolVersion = rpc.ProtocolVersion
		}
		c.ElicitationURL = rpc.ElicitationURL
		c.ContextID = rpc.ContextID
		c.TaskID = firstNonEmpty(rpc.TaskID, rpc.ParamsID)
		c.metaToken = rpc.MetaAuthorization
		c.taskRefs = [3]string{rpc.ParamsTaskID, rpc.ParamsID, rpc.TaskID}
		if rpc.IsResponse {
			c.Method = ""
		}
	} else {
		c.Method, c.Name = headerMethod, headerName
	}

	// MCP 2026-07-28: Mcp-Method and Mcp-Name identify the call so gateways
	// need not parse the body; a missing or disagreeing header is -32020.
	if parsed && c.Method != "" && isMCP(r, c.Method) {
		c.Protocol = ProtoMCP
		if headerMethod != "" && headerMethod != c.Method {
			return c, &rpcDenial{jsonrpc.CodeHeaderMismatch, "Mcp-Method header does not match the body"}
		}
		name, needsName := rpc.MirroredName()
		if hasName && headerName != name {
			return c, &rpcDenial{jsonrpc.CodeHeaderMismatch, "Mcp-Name header does not match the body"}
		}
		if hv := h.Get("mcp-protocol-version"); hv != "" && rpc.ProtocolVersion != "" && hv != rpc.ProtocolVersion {
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
	if c.Protocol == ProtoA2A {
		c.MCPSession = ""
	} else {
		c.ContextID, c.TaskID = "", ""
	}
	return c, nil
}

func isMCP(r *Route, method string) bool {
	return r.protocol == ProtoMCP || (r.protocol != ProtoA2A && jsonrpc.ProtocolOf(method) != jsonrpc.ProtocolA2A)
}

// classify names the protocol of a call: the route's when it declares one,
// else by the method's name, else by what the request carries.
func classify(r *Route, c *Call, parsed bool, httpMethod string) string {
	if r.protocol == ProtoMCP || r.protocol == ProtoA2A {
		if httpMethod != "POST" && c.Method == "" && c.MCPSession == "" && c.ProtocolVersion == "" {
			return "" // not a JSON-RPC request (e.g. the A2A agent card, an SSE GET without session)
		}
		return r.protocol
	}
	switch jsonrpc.ProtocolOf(c.Method) {
	case jsonrpc.ProtocolA2A:
		return ProtoA2A
	case jsonrpc.ProtocolMCP:
		return ProtoMCP
	}
	switch {
	case c.ContextID != "":
		return ProtoA2A
	case parsed, c.MCPSession != "", c.ProtocolVersion != "", c.Method != "":
		return ProtoMCP
	}
	return ""
}

// jsonRPC reports whether denials of this call are answered as JSON-RPC
// error responses.
func (c *Call) jsonRPC() bool { return c.Protocol != "" }

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
