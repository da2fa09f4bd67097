package httpauthz

import (
	"cmp"
	"context"
	"log/slog"
	"net/http"
	"net/netip"
	"net/textproto"
	"strings"
	"sync"
	"time"

	"github.com/extauthz/extauthz/internal/check"
)

// RemoveHeader is the response header of an allowed check that lists, comma
// separated, the owned headers to strip from the upstream request. It is
// Envoy's name, so that http_service removes them by itself; other proxies
// strip them through their configuration (see the package documentation).
const RemoveHeader = "X-Envoy-Auth-Headers-To-Remove"

// DefaultMaxBodyBytes bounds the request body read when the proxy sends one.
const DefaultMaxBodyBytes = 1 << 20

// Options configure the handler. The zero value serves every convention to
// loopback proxies.
type Options struct {
	// Convention is the proxy's way of describing the original request;
	// Auto accepts all of them.
	Convention Convention
	// TrustedProxies are the peers whose forwarding headers describe the
	// original request; nil means loopback only, an empty list nobody.
	// From any other peer the request is taken as itself.
	TrustedProxies []netip.Prefix
	// PathPrefix is the http_service path_prefix Envoy puts in front of the
	// original path; it is stripped from requests that are not described
	// by forwarding headers.
	PathPrefix string
	// MaxBodyBytes bounds the body read from proxies that send it (Envoy
	// with_request_body, Traefik forwardBody); a longer body is cut and
	// marked partial, which the pipeline never trusts. 0 means
	// DefaultMaxBodyBytes; negative never reads the body.
	MaxBodyBytes int64
	// Logger receives the handler's own refusals; the pipeline logs its
	// decisions. nil discards.
	Logger *slog.Logger
	// Now is the clock of the answer store; nil means time.Now.
	Now func() time.Time
	// MaxAnswers and AnswerTTL bound the answers waiting for the proxy to
	// fetch them (Nginx and Forwarded conventions); 0 means
	// DefaultMaxAnswers and DefaultAnswerTTL.
	MaxAnswers int
	AnswerTTL  time.Duration
}

type handler struct {
	// pipeline is concrete, not an interface, so that the request built on
	// the stack for it stays there.
	pipeline       *check.Pipeline
	convention     Convention
	trustedProxies []netip.Prefix
	pathPrefix     string
	maxBody        int64
	log            *slog.Logger
	names          canonicalNames
	// answers keeps refused checks' full answers for the proxy to fetch;
	// nil with the Envoy and Auto conventions (see serveAnswer).
	answers *answerStore
}

// NewHandler returns the forward-auth handler deciding with p. Every path
// and method is a check: mount it on a listener of its own.
func NewHandler(p *check.Pipeline, o Options) http.Handler {
	h := &handler{
		pipeline:       p,
		convention:     o.Convention,
		trustedProxies: o.TrustedProxies,
		pathPrefix:     strings.TrimSuffix(o.PathPrefix, "/"),
		maxBody:        o.MaxBodyBytes,
		log:            o.Logger,
	}
	if h.pathPrefix != "" && h.pathPrefix[0] != '/' {
		h.pathPrefix = "/" + h.pathPrefix
	}
	if h.trustedProxies == nil {
		h.trustedProxies = loopback
	}
	if h.maxBody == 0 {
		h.maxBody = DefaultMaxBodyBytes
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	h.names.m = make(map[string]string)
	if h.convention == Nginx || h.convention == Forwarded {
		// Only the named conventions: their checks never come at the
		// authorization request's own path, so AnswerPath cannot be a
		// client's path. Envoy's (and Auto's, which may be Envoy's) are the
		// client's own.
		now := o.Now
		if now == nil {
			now = time.Now
		}
		h.answers = newAnswerStore(cmp.Or(o.MaxAnswers, DefaultMaxAnswers), cmp.Or(o.AnswerTTL, DefaultAnswerTTL), now)
	}
	return h
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	trusted := h.trusted(r.RemoteAddr)
	if h.answers != nil && trusted {
		if id, ok := strings.CutPrefix(r.URL.Path, AnswerPath); ok {
			h.serveAnswer(w, id)
			return
		}
	}
	o, bad := h.originalRequest(r, trusted)
	if bad != "" {
		h.refuse(r.Context(), w, r, bad, trusted)
		return
	}
	in := check.Request{
		Method:    o.method,
		Scheme:    o.scheme,
		Host:      o.host,
		Path:      o.uri,
		Protocol:  r.Proto,
		RequestID: r.Header.Get("X-Request-Id"),
	}
	in.Headers, in.UnderscoreNames, in.Repeated = headerMap(r.Header)
	h.describePeer(&in, r, trusted)
	if o.forwarded && r.URL.RawQuery != "" {
		if route, _ := routeParam(r.URL.RawQuery); route != "" {
			if clientNamesRoute(r.URL.RawQuery, o.uri) {
				// This route may be the client's choice, not the proxy's.
				h.refuse(r.Context(), w, r, "the original request's query names a route: only the proxy's check URL may", trusted)
				return
			}
			in.ContextExtensions = map[string]string{"route": route}
		}
	}
	if in.Headers["content-length"] == "0" {
		// The length of the proxy's own request, which carries no body: it
		// says nothing of the client's (which forward-auth proxies do not
		// send without forwardBody), so it must not read as "empty".
		delete(in.Headers, "content-length")
	}
	if h.maxBody > 0 && r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
		in.Body, in.BodyPartial = readBody(r.Body, r.ContentLength, h.maxBody)
	}
	if trusted && !o.forwarded && h.convention != Nginx && h.convention != Forwarded &&
		in.Headers["x-envoy-auth-partial-body"] == "true" {
		// Only Envoy sets it, and only on its own authorization request;
		// elsewhere it is a client's header.
		in.BodyPartial = true
	}
	v := h.pipeline.Check(r.Context(), &in)
	h.write(w, &v, o.direct, trusted)
}

// write answers the proxy: 200 with the upstream headers to allow, the
// verdict's status, headers and body to deny. A refusal is never 2xx, since
// every forward-auth proxy takes a 2xx for an allow: a direct answer
// (protected resource metadata, an elicitation) goes out as 403, and the
// proxy fetches the real one by AnswerHeader. Only a request made to the
// service itself (direct) gets a direct answer as it is.
func (h *handler) write(w http.ResponseWriter, v *check.Verdict, direct, trusted bool) {
	hdr := w.Header()
	if v.Outcome.Allow() {
		h.setUpstream(hdr, v)
		w.WriteHeader(http.StatusOK)
		return
	}
	status := v.Status()
	offered := !direct && h.offerAnswer(hdr, status, v.ResponseHeaders, v.Body, trusted)
	if status < 400 && !direct {
		status = http.StatusForbidden
	}
	for _, rh := range v.ResponseHeaders {
		if offered && h.convention == Nginx && rh.Name == "www-authenticate" {
			// nginx copies the challenge of a 401 to the client itself,
			// next to the fetched answer's: it travels in the answer only.
			continue
		}
		hdr[h.names.canonical(rh.Name)] = []string{rh.Value}
	}
	w.WriteHeader(status)
	_, _ = w.Write(v.Body)
}

// offerAnswer keeps a refusal's full answer for the proxy to fetch and
// names it in AnswerHeader (Nginx and Forwarded conventions, trusted
// proxies only).
func (h *handler) offerAnswer(hdr http.Header, status int, headers []check.Header, body []byte, trusted bool) bool {
	if h.answers == nil || !trusted {
		return false
	}
	hdr[AnswerHeader] = []string{h.answers.put(&answer{status: status, headers: headers, body: body})}
	return true
}

// rendering is a grant's upstream headers in net/http's form, built once
// per cached grant: canonical names and one-element value slices shared by
// every response of the grant (net/http only reads them).
type rendering struct {
	keys []string
	vals [][]string
}

func (h *handler) renderGrant(g *check.Grant) *rendering {
	hs := g.Headers()
	r := &rendering{keys: make([]string, len(hs)), vals: make([][]string, len(hs))}
	for i, x := range hs {
		r.keys[i] = h.names.canonical(x.Name)
		r.vals[i] = []string{x.Value}
	}
	return r
}

// setUpstream puts the verdict's upstream mutations in the response: every
// header to set, and RemoveHeader listing those to strip.
func (h *handler) setUpstream(hdr http.Header, v *check.Verdict) {
	set := v.Set
	if g := v.Grant; g != nil && v.Outcome == check.Allowed {
		// The grant's headers always come first (check.Grant.Headers).
		r := check.Rendered(v, h.renderGrant)
		if len(r.keys) <= len(set) {
			for i, k := range r.keys {
				hdr[k] = r.vals[i]
			}
			set = set[len(r.keys):]
		}
	}
	n := len(set)
	if len(v.Remove) > 0 {
		n++
	}
	if n == 0 {
		return
	}
	// One backing array for every per-request value.
	vals := make([]string, n)
	for i, s := range set {
		vals[i] = s.Value
		hdr[h.names.canonical(s.Name)] = vals[i : i+1 : i+1]
	}
	if len(v.Remove) > 0 {
		vals[n-1] = strings.Join(v.Remove, ", ")
		hdr[RemoveHeader] = vals[n-1 : n : n]
	}
}

// refuse answers a forward-auth request that cannot be checked.
func (h *handler) refuse(ctx context.Context, w http.ResponseWriter, r *http.Request, why badRequest, trusted bool) {
	h.log.LogAttrs(ctx, slog.LevelInfo, "denied",
		slog.String("outcome", check.Malformed.String()), slog.Int("status", http.StatusBadRequest),
		slog.String("reason", string(why)), slog.String("peer", r.RemoteAddr),
		slog.String("request_id", r.Header.Get("X-Request-Id")))
	hdr := w.Header()
	body := refusalBody(why)
	h.offerAnswer(hdr, http.StatusBadRequest, refusalHeaders, body, trusted)
	hdr["Content-Type"] = []string{"application/json"}
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write(body)
}

var refusalHeaders = []check.Header{{Name: "content-type", Value: "application/json"}}

// refusalBody is the JSON of a refusal, in the shape of the pipeline's
// denials. The reasons are fixed strings without quotes.
func refusalBody(why badRequest) []byte {
	return []byte(`{"error":"invalid_request","error_description":"` + string(why) + `","status":400}`)
}

// canonicalNames memoizes canonical forms of the verdict's header names.
// They come from the configuration, so the set is small; the bound is a
// guard, not a working limit.
type canonicalNames struct {
	mu sync.RWMutex
	m  map[string]string
}

const maxCanonicalNames = 1024

func (c *canonicalNames) canonical(name string) string {
	c.mu.RLock()
	k, ok := c.m[name]
	c.mu.RUnlock()
	if ok {
		return k
	}
	k = textproto.CanonicalMIMEHeaderKey(name)
	c.mu.Lock()
	if len(c.m) < maxCanonicalNames {
		c.m[name] = k
	}
	c.mu.Unlock()
	return k
}

// describePeer fills in what the request says of where it came from: the
// peer asking (the proxy), the client's address and the client's
// certificate, the last two a trusted proxy's word only.
func (h *handler) describePeer(in *check.Request, r *http.Request, trusted bool) {
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		in.PeerAddr = ap.Addr()
		if a := clientAddress(r.Header, in.PeerAddr, trusted); a.IsValid() {
			in.SourceAddress = a.String()
		}
	}
	setClientCert(in, trusted)
}

// setClientCert takes the client certificate a trusted proxy reports in
// X-Forwarded-Client-Cert: Envoy's and Istio's XFCC, and the shipped nginx
// and Caddy files, which overwrite any copy the client sent
// (docs/forward-auth.md); only its last element counts
// (peer.ThumbprintXFCC, when a bound token asks). From a peer that is not
// a trusted proxy the header is anyone's, and nothing is read: a bound
// token is then refused.
func setClientCert(in *check.Request, trusted bool) {
	if trusted {
		in.ClientCert, in.ClientCertForm = in.Headers["x-forwarded-client-cert"], check.CertXFCC
	}
}

// clientAddress is the address of the client the proxy serves: the last
// X-Forwarded-For entry, which a trusted proxy appended (Traefik and Caddy
// set the address they saw, the documented nginx files too), or the peer
// itself when it is not a trusted proxy. Entries before the last are the
// client's own claim and never read. A trusted proxy that names no address
// leaves it unknown (the zero Addr): its own address is not the client's,
// and would pass a rule meant for internal clients.
func clientAddress(h http.Header, peer netip.Addr, trusted bool) netip.Addr {
	if !trusted {
		return peer
	}
	xff := h.Values("X-Forwarded-For")
	if len(xff) == 0 {
		return netip.Addr{}
	}
	last := xff[len(xff)-1]
	if i := strings.LastIndexByte(last, ','); i >= 0 {
		last = last[i+1:]
	}
	last = strings.TrimSpace(last)
	if a, err := netip.ParseAddr(last); err == nil {
		return a.Unmap()
	}
	if ap, err := netip.ParseAddrPort(last); err == nil {
		return ap.Addr().Unmap()
	}
	return netip.Addr{}
}
