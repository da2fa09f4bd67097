package httpauthz

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	"github.com/extauthz/extauthz/internal/canon"
	"github.com/extauthz/extauthz/internal/check"
)

// Convention names the headers a proxy describes the original request in.
type Convention uint8

const (
	// Auto reads every convention below. A forward-auth request that
	// describes the original request in more than one way must describe the
	// same request, else it is refused: a client could add the headers of the
	// convention its proxy does not set, and pick the request that is checked.
	Auto Convention = iota
	// Nginx is nginx auth_request and ingress-nginx: X-Original-Method,
	// X-Original-URI or X-Original-URL; the host from X-Forwarded-Host, else
	// the X-Original-URL host, else Host.
	Nginx
	// Forwarded is Traefik ForwardAuth and Caddy forward_auth:
	// X-Forwarded-Method, X-Forwarded-Uri, X-Forwarded-Host and
	// X-Forwarded-Proto.
	Forwarded
	// Envoy is Envoy's ext_authz http_service: the authorization request is
	// the original request, with Options.PathPrefix in front of its path.
	// Forwarding headers are never read for the method, host or path.
	Envoy
)

var conventionNames = [...]string{Auto: "auto", Nginx: "nginx", Forwarded: "forwarded", Envoy: "envoy"}

func (c Convention) String() string {
	if int(c) < len(conventionNames) {
		return conventionNames[c]
	}
	return fmt.Sprintf("Convention(%d)", c)
}

// ParseConvention reads a convention by name: auto, nginx, forwarded (or its
// aliases traefik and caddy), envoy.
func ParseConvention(s string) (Convention, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "auto":
		return Auto, nil
	case "nginx":
		return Nginx, nil
	case "forwarded", "traefik", "caddy":
		return Forwarded, nil
	case "envoy":
		return Envoy, nil
	}
	return Auto, fmt.Errorf("unknown forward-auth convention %q: want auto, nginx, forwarded (traefik, caddy) or envoy", s)
}

// ParseTrustedProxies reads a comma-separated list of CIDR prefixes or
// single addresses, as a command-line flag gives it.
func ParseTrustedProxies(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	var errs []error
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if p, err := netip.ParsePrefix(f); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			errs = append(errs, fmt.Errorf("trusted proxy %q is neither an address nor a CIDR prefix", f))
			continue
		}
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, errors.Join(errs...)
}

// loopback is the default set of trusted proxies.
var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// trusted reports whether the peer at remoteAddr ("ip:port") may describe
// the original request in forwarding headers. A peer that is not an IP
// address (a Unix socket) is not trusted.
func (h *handler) trusted(remoteAddr string) bool {
	ap, err := netip.ParseAddrPort(remoteAddr)
	if err != nil {
		return false
	}
	ip := ap.Addr().Unmap()
	for _, p := range h.trustedProxies {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// metadataPath is where RFC 9728 protected resource metadata is served.
const metadataPath = "/.well-known/oauth-protected-resource"

// Forwarding headers, canonical.
const (
	hForwardedMethod = "X-Forwarded-Method"
	hForwardedURI    = "X-Forwarded-Uri"
	hForwardedHost   = "X-Forwarded-Host"
	hForwardedProto  = "X-Forwarded-Proto"
	hForwardedPort   = "X-Forwarded-Port"
	hOriginalMethod  = "X-Original-Method"
	hOriginalURI     = "X-Original-Uri"
	hOriginalURL     = "X-Original-Url"
)

// badRequest is a forward-auth request that cannot be checked; it is
// answered 400 with the message.
type badRequest string

// original is the request the proxy asks about.
type original struct {
	method, scheme, host, uri string
	// forwarded says forwarding headers described it; the authorization
	// request's own URL is then ours (it may name the route).
	forwarded bool
	// direct says the request was made to the service itself, not asked
	// about by a proxy: with Options.PathPrefix set (Envoy http_service), a
	// request outside it. Only direct requests get a direct answer (the
	// protected resource metadata) as a 200.
	direct bool
}

// originalRequest reconstructs the original request from the authorization
// request r.
func (h *handler) originalRequest(r *http.Request, trusted bool) (original, badRequest) {
	o := original{method: r.Method, host: r.Host, uri: r.URL.RequestURI(), scheme: "http"}
	if r.TLS != nil {
		o.scheme = "https"
	}
	if trusted {
		if p := firstElement(r.Header.Get(hForwardedProto)); p != "" {
			o.scheme = strings.ToLower(p)
		}
	}
	if !trusted && (h.convention == Nginx || h.convention == Forwarded) && h.convention.describes(r.Header) {
		// These proxies never ask about the authorization request itself:
		// this is one missing from Options.TrustedProxies, and taking its
		// check as the request itself would decide every request on the
		// route of the check's own path.
		return original{}, "forwarding headers from a peer that is not a trusted proxy"
	}
	if trusted && h.convention != Envoy {
		fo, found, bad := h.fromHeaders(r.Header, o)
		if bad != "" {
			return original{}, bad
		}
		switch {
		case found:
			o = fo
		case h.convention != Auto && strings.HasPrefix(o.uri, metadataPath):
			// The proxies of these conventions describe every check in
			// headers: this is a request for the protected resource
			// metadata routed to the service itself (Traefik).
			o.direct = true
		case h.convention != Auto:
			return original{}, badRequest(h.convention.requiredHeader() + " is required")
		}
	}
	if !o.forwarded {
		// The request itself (Envoy http_service, or a direct request to
		// the service): only the path prefix is ours.
		if !o.direct {
			o.direct = h.pathPrefix != ""
		}
		if rest, ok := strings.CutPrefix(o.uri, h.pathPrefix); ok && h.pathPrefix != "" {
			switch {
			case rest == "" || rest[0] == '?':
				o.uri, o.direct = "/"+rest, false
			case rest[0] == '/':
				o.uri, o.direct = rest, false
			}
		}
	}
	if bad := o.validate(); bad != "" {
		return original{}, bad
	}
	return o, ""
}

// describes reports whether hdr has the header the convention's proxies
// describe the original request's URI in.
func (c Convention) describes(hdr http.Header) bool {
	if c == Nginx {
		return len(hdr[hOriginalURI]) > 0 || len(hdr[hOriginalURL]) > 0
	}
	return len(hdr[hForwardedURI]) > 0
}

func (c Convention) requiredHeader() string {
	if c == Nginx {
		return "X-Original-URI (or X-Original-URL)"
	}
	return hForwardedURI
}

// fromHeaders reads the forwarding headers of the configured convention.
// found is false when none describes the request's URI. A method header
// counts only with the URI header of its own convention, so that a client's
// stray X-Forwarded-Method cannot stand in for the method nginx keeps.
func (h *handler) fromHeaders(hdr http.Header, base original) (o original, found bool, bad badRequest) {
	var fURI, fMethod, nURI, nMethod, urlScheme, urlHost string
	if h.convention == Auto || h.convention == Forwarded {
		if fURI, bad = single(hdr, hForwardedURI); bad != "" {
			return o, false, bad
		}
		if fURI != "" {
			if fMethod, bad = single(hdr, hForwardedMethod); bad != "" {
				return o, false, bad
			}
			if fMethod == "" {
				fMethod = base.method
			}
		}
	}
	if h.convention == Auto || h.convention == Nginx {
		var oURI, oURL, urlURI string
		if oURI, bad = single(hdr, hOriginalURI); bad != "" {
			return o, false, bad
		}
		if oURL, bad = single(hdr, hOriginalURL); bad != "" {
			return o, false, bad
		}
		if oURL != "" {
			var ok bool
			if urlScheme, urlHost, urlURI, ok = splitURL(oURL); !ok {
				return o, false, "X-Original-URL is not an absolute http(s) URL"
			}
		}
		var ok bool
		if nURI, ok = agree(oURI, urlURI); !ok {
			return o, false, "the forwarding headers name different URIs"
		}
		if nURI != "" {
			if nMethod, bad = single(hdr, hOriginalMethod); bad != "" {
				return o, false, bad
			}
			if nMethod == "" {
				// nginx's auth subrequest keeps the original method.
				nMethod = base.method
			}
		}
	}

	uri, ok := agree(fURI, nURI)
	if !ok {
		return o, false, "the forwarding headers name different URIs"
	}
	if uri == "" {
		return o, false, ""
	}
	method, ok := agree(fMethod, nMethod)
	if !ok {
		return o, false, "the forwarding headers name different methods"
	}
	// One host, whole: the proxies set X-Forwarded-Host to the Host they
	// serve, and nginx and Caddy accept a client's Host with a comma in it
	// and pass it on as it is. Its first element is not the host nginx
	// chose a server for nor the one the upstream reads; canon.Host refuses
	// it.
	fHost, bad := single(hdr, hForwardedHost)
	if bad != "" {
		return o, false, bad
	}
	host, ok := agree(fHost, urlHost)
	if !ok {
		return o, false, "the forwarding headers name different hosts"
	}
	o = base
	o.forwarded = true
	o.uri, o.method = uri, method
	if host != "" {
		o.host = host
	}

	if urlScheme != "" && hdr.Get(hForwardedProto) == "" {
		o.scheme = urlScheme
	}
	if port := firstElement(hdr.Get(hForwardedPort)); port != "" && h.convention != Nginx {
		// Traefik (and the documented Caddy set-up) set it; nginx does
		// not, so behind nginx it would be a client's.
		// The challenge's metadata URL must keep the port.
		if o.host, bad = withPort(o.host, port, o.scheme); bad != "" {
			return original{}, false, bad
		}
	}
	return o, true, ""
}

// withPort adds port to host unless host has one already (the proxy's own
// Host or X-Forwarded-Host wins) or the port is the scheme's default.
func withPort(host, port, scheme string) (string, badRequest) {
	if port == "" || len(port) > 5 || strings.Trim(port, "0123456789") != "" {
		return "", "X-Forwarded-Port is not a port number"
	}
	if _, _, err := net.SplitHostPort(host); err == nil || host == "" {
		return host, ""
	}
	if strings.Count(host, ":") > 0 && !strings.HasPrefix(host, "[") {
		return "", "the original host is malformed"
	}
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		return host, ""
	}
	return host + ":" + port, ""
}

// single returns the one value of a header; repeated values must be equal
// (a client's copy next to the proxy's is a forgery).
func single(hdr http.Header, key string) (string, badRequest) {
	vs := hdr[key]
	switch len(vs) {
	case 0:
		return "", ""
	case 1:
		return strings.TrimSpace(vs[0]), ""
	}
	for _, v := range vs[1:] {
		if strings.TrimSpace(v) != strings.TrimSpace(vs[0]) {
			return "", badRequest(key + " is repeated with different values")
		}
	}
	return strings.TrimSpace(vs[0]), ""
}

// agree returns the first non-empty value; every other non-empty value must
// be the same.
func agree(vals ...string) (string, bool) {
	var v string
	for _, x := range vals {
		switch {
		case x == "":
		case v == "":
			v = x
		case x != v:
			return "", false
		}
	}
	return v, true
}

// firstElement is the first entry of a comma-separated forwarding list (the
// proxy nearest the client wrote it).
func firstElement(v string) string {
	if i := strings.IndexByte(v, ','); i >= 0 {
		v = v[:i]
	}
	return strings.TrimSpace(v)
}

// splitURL splits an absolute http(s) URL into scheme, host and request
// URI, keeping the URI as sent so that it compares equal to X-Original-URI.
func splitURL(s string) (scheme, host, uri string, ok bool) {
	scheme, rest, found := strings.Cut(s, "://")
	if !found {
		return "", "", "", false
	}
	scheme = strings.ToLower(scheme)
	if scheme != "http" && scheme != "https" {
		return "", "", "", false
	}
	i := strings.IndexAny(rest, "/?")
	switch {
	case i < 0:
		host, uri = rest, "/"
	case rest[i] == '?':
		host, uri = rest[:i], "/"+rest[i:]
	default:
		host, uri = rest[:i], rest[i:]
	}
	if host == "" || strings.ContainsAny(host, "@#") {
		return "", "", "", false
	}
	return scheme, host, uri, true
}

// validate refuses what no proxy sends and what could make the checked
// request differ from the one the upstream serves.
func (o *original) validate() badRequest {
	if !isToken(o.method) {
		return "the original method is malformed"
	}
	// One canonical form for every front end (internal/canon): what the
	// pipeline would refuse is refused here already, with the reason.
	if _, err := canon.Host(o.host); err != nil {
		return badRequest("the original host is malformed: " + err.Error())
	}
	if _, _, err := canon.Target(o.uri); err != nil {
		return badRequest(err.Error())
	}
	if o.scheme != "http" && o.scheme != "https" {
		o.scheme = "https"
	}
	return ""
}

// isToken reports whether s is a non-empty RFC 9110 token (a method).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// routeParam returns the "route" query parameter of the authorization
// request's own URL (forward-auth only: e.g. nginx
// "proxy_pass http://extauthz/check?route=files"), like Envoy's
// context_extensions, and whether the query has one ("" when its value is
// not valid percent-encoding).
func routeParam(rawQuery string) (string, bool) {
	for rawQuery != "" {
		var kv string
		kv, rawQuery, _ = strings.Cut(rawQuery, "&")
		if v, ok := strings.CutPrefix(kv, "route="); ok {
			u, err := url.QueryUnescape(v)
			if err != nil {
				return "", true
			}
			return u, true
		}
	}
	return "", false
}

// clientNamesRoute reports whether the route parameter of the check URL's
// query may be the client's: the original request's query names a route
// and the check URL carries that query (Caddy's forward_auth keeps the
// client's query on the check URL unless its check URI sets one). A proxy
// that sets the check URL itself (nginx proxy_pass .../check?route=files)
// names its route whatever the client's query says.
func clientNamesRoute(checkQuery, originalURI string) bool {
	_, q, ok := strings.Cut(originalURI, "?")
	if !ok {
		return false
	}
	_, named := routeParam(q)
	return named && strings.Contains(checkQuery, q)
}

// headerMap converts the request headers to the pipeline's form: lower-case
// names, repeated values joined with ","; underscores says a name holds
// "_" (check.Request.UnderscoreNames: Caddy and Traefik pass them on).
func headerMap(hdr http.Header) (m check.Headers, underscores bool, repeated []string) {
	m = make(check.Headers, len(hdr))
	for k, vs := range hdr {
		lk, ok := lowerNames[k]
		if !ok {
			lk = strings.ToLower(k)
			underscores = underscores || strings.IndexByte(lk, '_') >= 0
		}
		switch len(vs) {
		case 0:
		case 1:
			m[lk] = vs[0]
		default:
			sep := ","
			if lk == "cookie" {
				sep = "; " // as Envoy and HTTP/2 join cookies
			}
			m[lk] = strings.Join(vs, sep)
			repeated = append(repeated, lk)
		}
	}
	return m, underscores, repeated
}

// lowerNames are the lower-case forms of the headers forward-auth requests
// usually carry, so that converting them does not allocate.
var lowerNames = func() map[string]string {
	names := []string{
		"accept", "accept-encoding", "accept-language", "authorization", "cache-control", "connection",
		"content-length", "content-type", "cookie", "forwarded", "origin", "referer", "user-agent",
		"traceparent", "tracestate", "baggage", "x-request-id", "x-real-ip", "x-forwarded-for",
		"x-forwarded-method", "x-forwarded-uri", "x-forwarded-host", "x-forwarded-proto", "x-forwarded-port",
		"x-forwarded-prefix", "x-forwarded-server", "x-original-method", "x-original-uri", "x-original-url",
		"x-envoy-auth-partial-body", "x-envoy-expected-rq-timeout-ms", "x-envoy-internal", "x-forwarded-client-cert",
		"mcp-session-id", "mcp-protocol-version", "mcp-method", "mcp-name", "last-event-id",
		"a2a-version", "a2a-extensions", "x-a2a-extensions",
		"x-user-id", "x-session-id", "x-root-context-id", "x-parent-context-id", "x-lineage-depth",
		"x-actor-chain", "x-lineage-token", "x-kagent-root-context-id", "x-kagent-parent-context-id",
	}
	m := make(map[string]string, len(names))
	for _, n := range names {
		m[http.CanonicalHeaderKey(n)] = n
	}
	return m
}()

// readBody reads at most limit bytes of the body; partial says there was
// more (or the read failed) and the body must not be trusted. Memory follows
// the bytes that arrived, never the announced length: a client that
// announces a large body and trickles it pins only what it sent.
func readBody(body io.Reader, contentLength, limit int64) (b []byte, partial bool) {
	want := limit + 1 // room to see that the body is longer than limit
	if contentLength >= 0 && contentLength < limit {
		want = contentLength + 1 // room to see EOF without growing
	}
	b = make([]byte, 0, min(want, 4<<10))
	for {
		if len(b) == cap(b) {
			b = slices.Grow(b, int(max(min(int64(cap(b)), want-int64(len(b))), 1)))
		}
		n, err := body.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if int64(len(b)) > limit {
			return b[:limit], true
		}
		if err == io.EOF {
			return b, false
		}
		if err != nil {
			return b, true
		}
	}
}
