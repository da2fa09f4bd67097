package check

import (
	"iter"
	"net/url"
	"slices"
	"strings"

	"github.com/extauthz/extauthz/internal/credential"
	"github.com/extauthz/extauthz/internal/jsonrpc"
	"github.com/extauthz/extauthz/internal/lineage"
)

// Headers the service reads as one value. Envoy joins a repeated header with
// "," (and with encode_raw_headers the front end does the same), so a comma
// in one of them means two values, of which the upstream may read either:
// the request is refused rather than decided on one of them. The full table,
// with the headers that are lists by design, is in docs/security-model.md.
const (
	hAuthorization = "authorization"
	hMCPSession    = "mcp-session-id"
	hPartialBody   = "x-envoy-auth-partial-body"
	hCookie        = "cookie"
	hUpgrade       = "upgrade"
	hProtocol      = ":protocol" // HTTP/2 extended CONNECT (RFC 8441)
	hDPoP          = "dpop"
)

// errUpgrade refuses a request asking to switch protocols on a route that
// reads JSON-RPC. Envoy's ext_authz does not buffer the body of a WebSocket
// upgrade, whatever the method, yet forwards it once allowed (and an
// upgraded connection carries whatever the client sends next): the service
// would decide without the call the upstream executes. The same holds for
// HTTP/2's WebSocket, an extended CONNECT (":protocol: websocket"), which
// Envoy turns into an HTTP/1.1 upgrade upstream, and for any CONNECT. MCP
// and A2A never upgrade; a route serving WebSockets declares protocol: http.
const errUpgrade = "a protocol upgrade is refused on a JSON-RPC route: the proxy does not send its body to the service (declare protocol: http for WebSockets)"

// singleValuedHeaders are the headers every route reads as one value, by
// name, besides Authorization, Mcp-Session-Id, the partial-body flag and the
// route's own credential header, which have rules of their own.
func singleValuedHeaders(n lineage.Names) []string {
	out := []string{"mcp-method", "mcp-name", "mcp-protocol-version", "a2a-version"}
	// The actor chain is a list by design; every other lineage header is one
	// value.
	for _, name := range []string{n.Root, n.Parent, n.Depth, n.Signed} {
		if name != "" {
			out = append(out, name)
		}
	}
	return out
}

// ambiguousHeader reports the first header of req that does not have the
// one value the service reads, as a denial: a joined single-valued header,
// a session id outside visible ASCII, a partial-body flag other than "true"
// or "false", the route's credential cookie sent twice, a protocol upgrade
// on a JSON-RPC route (whose body the proxy withholds). Authorization is
// looked at only when no token can be read from it (ambiguousAuthorization):
// a token read and verified before holds no comma.
//
// Each header it checks is looked up by name, in a fixed order: the first
// found is the denial. Looking up a dozen names, most of them absent, is
// cheaper than a pass over every header, which reads every value (the
// token's too) from memory the processor's caches have not seen: on the
// wire path a cached check over 1,000 tokens took 3.55-3.77 µs so against
// 4.10-4.14 µs with such a pass as a first filter.
func (p *Policy) ambiguousHeader(r *Route, req *Request) *denial {
	h := req.Headers
	if len(req.Repeated) > 0 {
		if d := repeatedRuleHeader(r, req); d != nil {
			return d
		}
	}
	if req.UnderscoreNames {
		if d := p.underscoreHeader(r, req); d != nil {
			return d
		}
	}
	for _, name := range p.singleValued {
		if v, ok := h[name]; ok && strings.IndexByte(v, ',') >= 0 {
			return headerDenial(name + " has more than one value")
		}
	}
	if name := r.credentials.Header; name != "" {
		if v, ok := h[name]; ok && strings.IndexByte(v, ',') >= 0 {
			return headerDenial(name + " has more than one value")
		}
	}
	if v, ok := h[hMCPSession]; ok {
		// MCP: a session id is visible ASCII (0x21-0x7E); a comma is
		// visible, but here it joins two ids.
		switch {
		case strings.IndexByte(v, ',') >= 0:
			return headerDenial("mcp-session-id has more than one value")
		case !visibleASCII(v):
			return headerDenial("mcp-session-id is not visible ASCII")
		}
	}
	if v, ok := h[hPartialBody]; ok && v != "true" && v != "false" {
		return headerDenial(hPartialBody + " is neither true nor false")
	}
	if name := r.credentials.Cookie; name != "" {
		if c := h[hCookie]; c != "" && credential.MayNameCookie(c, name) && cookieCount(c, name) > 1 {
			return headerDenial("the " + name + " cookie is sent more than once")
		}
	}
	if r.protocol != jsonrpc.ProtocolHTTP && upgrades(req) {
		return headerDenial(errUpgrade)
	}
	return nil
}

// upgrades reports whether req asks to switch protocols: an HTTP/1.1
// Upgrade, an HTTP/2 extended CONNECT (its :protocol pseudo-header), or
// any other CONNECT.
func upgrades(req *Request) bool {
	_, upgrade := req.Headers[hUpgrade]
	_, protocol := req.Headers[hProtocol]
	return upgrade || protocol || req.Method == "CONNECT"
}

// ambiguousAuthorization refuses an Authorization header that holds more
// than one credential, one of them a bearer token ("Bearer a,Bearer b",
// "Basic x,Bearer t"): the upstream may read either. A bearer token never
// holds a comma, so a token that passed its syntax check cannot be one;
// the pipeline asks only when no usable token was read.
func ambiguousAuthorization(req *Request) *denial {
	v := req.Headers[hAuthorization]
	if strings.IndexByte(v, ',') >= 0 && containsFold(v, "bearer") {
		return headerDenial("authorization has more than one value")
	}
	return nil
}

// underscoreHeader refuses a header whose name, read with "_" as "-", is
// one the service reads or sets: CGI-style servers (WSGI, PHP, FastCGI
// gateways) fold X_User_Id and X-User-Id into one HTTP_X_USER_ID, so a
// client's x_user_id would reach them beside, or instead of, the
// service's x-user-id, and an mcp_session_id would name a session nobody
// bound.
func (p *Policy) underscoreHeader(r *Route, req *Request) *denial {
	for name := range req.Headers {
		if strings.IndexByte(name, '_') < 0 {
			continue
		}
		if dashed := strings.ReplaceAll(name, "_", "-"); p.meaningful(r, dashed) {
			return headerDenial(name + " spells " + dashed + " with an underscore, which some servers read as " + dashed)
		}
	}
	return nil
}

// meaningful reports whether the lower-case header name is one the
// service reads or sets on r: the headers it owns, the credential and
// protocol headers, and those the proxies speak in.
func (p *Policy) meaningful(r *Route, name string) bool {
	if slices.Contains(r.owned, name) || slices.Contains(r.credentialRemove, name) || slices.Contains(p.singleValued, name) {
		return true
	}
	switch name {
	case "authorization", "cookie", "dpop", "forwarded", "content-type", "content-length", "content-encoding",
		"transfer-encoding", "last-event-id", "accept", "host", "upgrade", "connection", "traceparent", "tracestate", "x-real-ip":
		return true
	}
	if name == r.credentials.Header { // also where the route forwards it (not in credentialRemove)
		return true
	}
	for _, prefix := range [...]string{"mcp-", "a2a-", "x-a2a-", "x-forwarded-", "x-original-", "x-envoy-", "x-extauthz-"} {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}

// repeatedRuleHeader refuses a header that a rule of r reads by name and
// the proxy sent more than once. The rule sees the values joined with ","
// (request.headers), which no comparison with one value matches, while
// the upstream may read any one of them: a rule denying x-tenant "blocked"
// would let two x-tenant: blocked through. RFC 9110 (section 5.3) allows
// repeating only a list, which listHeader names, and whose joined value is
// its meaning. Only front ends given a header list can tell (Envoy's raw
// header map, forward-auth): a header map Envoy merged looks like one value.
func repeatedRuleHeader(r *Route, req *Request) *denial {
	for _, name := range req.Repeated {
		if slices.Contains(r.ruleHeaders, name) {
			return headerDenial(name + " is sent more than once, and a rule of this route reads it as one value")
		}
	}
	return nil
}

// listHeader: a header whose value is a list by definition (RFC 9110 and
// the specifications naming them), which may be repeated, its repeats
// joined with "," meaning the same list (Cookie with "; ", RFC 6265).
func listHeader(name string) bool {
	switch name {
	case "accept", "accept-charset", "accept-encoding", "accept-language", "cache-control", "connection",
		"cookie", "forwarded", "te", "trailer", "vary", "via", "x-forwarded-for", "tracestate", "baggage",
		"if-match", "if-none-match", "allow", "content-encoding", "transfer-encoding", "upgrade", "warning":
		return true
	}
	return false
}

func headerDenial(desc string) *denial {
	return &denial{outcome: Malformed, desc: desc, rpcCode: jsonrpc.CodeInvalidRequest}
}

func cookieCount(header, name string) int {
	if header == "" {
		return 0
	}
	n := 0
	credential.CookiePairs(header, func(k, _ string) {
		if credential.CookieNamed(k, name) {
			n++
		}
	})
	return n
}

// withoutCookie is the Cookie header without the cookie name; found is
// false when it had none.
func withoutCookie(header, name string) (rest string, found bool) {
	var b strings.Builder
	credential.CookiePairs(header, func(k, pair string) {
		switch {
		case credential.CookieNamed(k, name):
			found = true
		case pair == "":
		default:
			if b.Len() > 0 {
				b.WriteString("; ")
			}
			b.WriteString(pair)
		}
	})
	return b.String(), found
}

// stripCredentialCookie takes the route's credential cookie out of the
// Cookie header upstream of a passing request, unless the route forwards
// credentials: the rest of the header is set again without it, or the
// header removed when nothing is left.
func (r *Route) stripCredentialCookie(req *Request, v *Verdict) {
	name := r.credentials.Cookie
	if name == "" || r.forwardAuthorization || !v.Outcome.Allow() {
		return
	}
	header := req.Headers[hCookie]
	if header == "" || !credential.MayNameCookie(header, name) {
		return
	}
	rest, found := withoutCookie(header, name)
	if !found {
		return
	}
	// Full slice expressions: the verdict's slices may be the grant's.
	v.HeadersID = 0
	if rest == "" {
		v.Remove = append(v.Remove[:len(v.Remove):len(v.Remove)], hCookie)
	} else {
		v.Set = append(v.Set[:len(v.Set):len(v.Set)], Header{Name: hCookie, Value: rest})
	}
}

// queryToken reports whether the query of path carries an access_token
// (RFC 6750 section 2.3), in any case of its name, percent-encoded or not,
// with "&" or ";" between parameters. The service never reads a token
// there and cannot take it off the request (no forward-auth proxy rewrites
// the query), so an upstream that does would act on a token nobody
// checked.
func queryToken(path string) bool {
	_, query, found := strings.Cut(path, "?")
	if !found || !containsFold(query, "token") && strings.IndexByte(query, '%') < 0 {
		return false
	}
	for name := range queryParams(query) {
		if strings.EqualFold(strings.TrimSpace(name), "access_token") {
			return true
		}
	}
	return false
}

// queryParams yields the parameters of a query as every reader may split
// it: at "&" or ";", each name percent-decoded where it decodes (as is
// where not), each value as sent.
func queryParams(query string) iter.Seq2[string, string] {
	return func(yield func(name, value string) bool) {
		for query != "" {
			var param string
			if i := strings.IndexAny(query, "&;"); i >= 0 {
				param, query = query[:i], query[i+1:]
			} else {
				param, query = query, ""
			}
			name, value, _ := strings.Cut(param, "=")
			if u, err := url.QueryUnescape(name); err == nil {
				name = u
			}
			if !yield(name, value) {
				return
			}
		}
	}
}

const errQueryToken = "an access_token in the query is refused: the service does not read it, and it would reach the upstream unchecked (send it in Authorization)"
