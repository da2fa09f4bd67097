package check

import (
	"fmt"
	"strings"

	"github.com/extauthz/extauthz/internal/canon"
	"github.com/extauthz/extauthz/internal/jsonrpc"
)

// canonicalRequest rewrites the request's host and path to their canonical
// forms (internal/canon) before anything is matched on them, or refuses a
// request that has none: routes, public paths and discovery documents are
// decided on the one reading every upstream shares.
func canonicalRequest(req *Request) *denial {
	host, err := canon.Host(req.Host)
	if err != nil {
		return &denial{outcome: Malformed, desc: err.Error(), rpcCode: jsonrpc.CodeInvalidRequest}
	}
	path, _, err := canon.Target(req.Path)
	if err != nil {
		return &denial{outcome: Malformed, desc: err.Error(), rpcCode: jsonrpc.CodeInvalidRequest}
	}
	req.Host = host
	// Only the hex case of escapes can change: rare, and only then a copy.
	if i := strings.IndexByte(req.Path, '?'); i >= 0 {
		if req.Path[:i] != path {
			req.Path = path + req.Path[i:]
		}
	} else if req.Path != path {
		req.Path = path
	}
	return nil
}

// canonicalCall replaces the resource URI of a resource call, and those a
// subscription subscribes to, by their canonical form, which the rules
// match; a URI without one, or a resource call without a URI, is refused.
func canonicalCall(call *Call) *denial {
	if call.completedTemplate != "" {
		return canonicalTemplate(call)
	}
	for i, uri := range call.subscribedURIs {
		u, err := canon.URI(uri)
		if err != nil {
			return &denial{outcome: Malformed, desc: "a subscribed resource URI: " + err.Error(), rpcCode: jsonrpc.CodeInvalidParams}
		}
		call.subscribedURIs[i] = u
	}
	if !jsonrpc.IsURIMethod(call.Method) || call.nameUnknown {
		return nil
	}
	if call.Name == "" {
		return &denial{outcome: Malformed, desc: "the resource URI is missing", rpcCode: jsonrpc.CodeInvalidParams}
	}
	u, err := canon.URI(call.Name)
	if err != nil {
		return &denial{outcome: Malformed, desc: err.Error(), rpcCode: jsonrpc.CodeInvalidParams}
	}
	call.Name = u
	return nil
}

// canonicalTemplate reads the URIs a completed resource template (RFC
// 6570) expands to, for matching resource rules. A template without an
// expression is one URI, canonicalised as a resource call's (refused
// without a canonical form). Every expansion of another starts with its
// text before the first expression; that prefix is kept when it is
// canonical as written, so that canonicalising an expansion leaves it in
// place. When it is not ("FILE:///", or "https://host", whose expansions'
// host may go on), the template may expand to any URI.
func canonicalTemplate(call *Call) *denial {
	t := call.completedTemplate
	i := strings.IndexByte(t, '{')
	if i < 0 {
		u, err := canon.URI(t)
		if err != nil {
			return &denial{outcome: Malformed, desc: "the completed resource template: " + err.Error(), rpcCode: jsonrpc.CodeInvalidParams}
		}
		call.templateURIs, call.templateExact = u, true
		return nil
	}
	if u, err := canon.URI(t[:i]); err == nil && u == t[:i] {
		call.templateURIs = u
	}
	return nil
}

// compileURIPatterns canonicalises the name globs of every rule that can
// apply to a resource method, the way canonicalCall canonicalises the URIs
// they are matched against; a URI pattern with no canonical form is a
// configuration error.
func compileURIPatterns(rules []rule) error {
	for i := range rules {
		r := &rules[i]
		if len(r.names) == 0 || !r.appliesToURIs() {
			continue
		}
		r.uriNames = make([]string, len(r.names))
		for j, n := range r.names {
			c, _, err := canon.URIPattern(n)
			if err != nil {
				return fmt.Errorf("%s: names: %q: %w", r.name, n, err)
			}
			r.uriNames[j] = c
		}
	}
	return nil
}

func (r *rule) appliesToURIs() bool {
	if len(r.methods) == 0 {
		return true
	}
	for _, md := range jsonrpc.Methods {
		if md.Protocol == jsonrpc.ProtocolMCP && jsonrpc.IsURIMethod(md.Name) && anyGlob(r.methods, md.Name) {
			return true
		}
	}
	return false
}

// earlyCall is what a denial made before the JSON-RPC step (no canonical
// path, an ambiguous header) knows of the call, so that a JSON-RPC client
// still gets a JSON-RPC error with its request id: nil when the request
// does not look like JSON-RPC.
func earlyCall(req *Request) *Call {
	if len(req.Body) > 0 && !req.BodyPartial {
		if rpc, err := jsonrpc.Parse(req.Body); err == nil {
			c := &Call{Protocol: jsonrpc.ProtocolMCP, ID: rpc.ID, Method: rpc.Method}
			if jsonrpc.ProtocolOf(rpc.Method) == jsonrpc.ProtocolA2A {
				c.Protocol = jsonrpc.ProtocolA2A
			}
			return c
		}
	}
	if looksLikeCall(req) {
		return &Call{Protocol: jsonrpc.ProtocolMCP}
	}
	return nil
}

// looksLikeCall reports whether a request carries (or claims to carry) a
// JSON-RPC call: a body some upstream may read as JSON (jsonrpc.LooksLikeJSON:
// after a byte order mark, in UTF-16 or UTF-32, behind a comment), a
// compressed body (which an inflating upstream may read as one), or an MCP
// call header.
func looksLikeCall(req *Request) bool {
	if jsonrpc.LooksLikeJSON(req.Body) || hasBody(req) && encoded(req) {
		return true
	}
	h := req.Headers
	return h["mcp-method"] != "" || h["mcp-session-id"] != "" || h["mcp-name"] != ""
}

// checkRoutePaths refuses a route whose path prefix or public paths are not
// canonical: requests are matched in canonical form, so such a path could
// never match, or match another request than the one meant.
func checkRoutePaths(prefix string, public []string) error {
	paths := make([]string, 0, len(public)+1)
	if prefix != "" {
		paths = append(paths, prefix)
	}
	for _, pp := range public {
		if pp = strings.TrimSuffix(pp, "*"); pp != "" {
			paths = append(paths, pp)
		}
	}
	for _, pp := range paths {
		c, err := canon.Path(pp)
		if err != nil {
			return fmt.Errorf("path %q: %w", pp, err)
		}
		if c != pp {
			return fmt.Errorf("path %q is not canonical: write %q", pp, c)
		}
	}
	return nil
}
