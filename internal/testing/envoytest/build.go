// Package envoytest stands in for Envoy's ext_authz HTTP filter in tests, so
// the gRPC contract of the service can be exercised without an Envoy binary.
//
// It owns four things:
//   - BuildCheckRequest: the CheckRequest Envoy sends for a downstream request
//     (header map after the connection manager ran, pseudo-headers, body
//     buffering, raw header encoding, peers, context extensions);
//   - ApplyOK and DeniedResponse: how Envoy applies an answer (header
//     mutation order and rules, validate_mutations, query rewriting, local
//     replies);
//   - Proxy: a front proxy on 127.0.0.1 that does both around a real gRPC
//     call, with Envoy's failure_mode_allow, status_on_error and timeout;
//   - Captures: real CheckRequests logged from Envoy, as fixtures.
//
// The behaviour follows Envoy's check_request_utils.cc, ext_authz_grpc_impl.cc
// and ext_authz.cc with validate_mutations on and the default decoder header
// mutation rules. It is stricter than Envoy where an answer would behave
// differently across Envoy versions or silently lose data: every
// HeaderValueOption in an OK answer must set append explicitly and must not
// use raw_value.
package envoytest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/extauthz/extauthz/internal/testing/testcert"
)

// Header names Envoy itself reads or writes around ext_authz.
const (
	headerPartialBody       = "x-envoy-auth-partial-body"
	headerRequestID         = "x-request-id"
	headerForwardedFor      = "x-forwarded-for"
	headerForwardedProto    = "x-forwarded-proto"
	headerEnvoyInternal     = "x-envoy-internal"
	headerFailureModeAllows = "x-envoy-auth-failure-mode-allowed"
)

// ErrPayloadTooLarge is what Envoy turns into a local 413 reply, without
// calling the authorization server: with_request_body is on, partial messages
// are not allowed and the body is larger than max_request_bytes.
var ErrPayloadTooLarge = errors.New("envoytest: request body exceeds max_request_bytes (Envoy replies 413)")

// BuildOptions mirror the ext_authz filter and connection manager settings
// that shape a CheckRequest. The zero value is a filter with default settings
// behind a connection manager with use_remote_address false.
type BuildOptions struct {
	// WithBody buffers the request body and sends it (with_request_body).
	// It needs MaxRequestBytes > 0, as Envoy's config validation does.
	WithBody bool
	// MaxRequestBytes is with_request_body.max_request_bytes.
	MaxRequestBytes int
	// AllowPartial cuts the body at MaxRequestBytes instead of rejecting it
	// with 413, and adds x-envoy-auth-partial-body: true|false.
	AllowPartial bool
	// PackAsBytes sends the body in raw_body instead of body.
	PackAsBytes bool
	// EncodeRawHeaders sends header_map (unmerged, raw bytes) instead of the
	// headers map. Entries come in Envoy's map order: pseudo-headers, the
	// client's headers, then the connection manager's. http.Header keeps no
	// wire order, so the client's headers are sorted by name.
	EncodeRawHeaders bool

	// ContextExtensions are the per-route check_settings.context_extensions.
	ContextExtensions map[string]string
	// MetadataContext and RouteMetadataContext are the metadata namespaces the
	// operator listed. Envoy always sends both messages, empty when unset.
	MetadataContext      *corev3.Metadata
	RouteMetadataContext *corev3.Metadata

	// SourcePrincipal and DestinationPrincipal are the peer's and Envoy's own
	// certificate identities under mTLS (a SPIFFE id in a mesh).
	SourcePrincipal      string
	DestinationPrincipal string
	// IncludePeerCertificate is include_peer_certificate: the client's
	// leaf certificate (r.TLS.PeerCertificates[0]) in source.certificate,
	// URL-encoded PEM as Envoy writes it; empty without one.
	IncludePeerCertificate bool
	// SourceAddress defaults to r.RemoteAddr; DestinationAddress defaults to
	// the local address of the server connection when r came from one.
	SourceAddress      netip.AddrPort
	DestinationAddress netip.AddrPort

	// XForwardedFor appends the source IP to x-forwarded-for, as a connection
	// manager with use_remote_address: true does. Such a request is also an
	// edge request: a client-sent x-request-id is replaced.
	XForwardedFor bool
	// EnvoyInternal marks the request internal (x-envoy-internal: true).
	// Without it a client-sent x-envoy-internal is removed.
	EnvoyInternal bool

	// RequestID and StreamID replace the generated x-request-id and http.id,
	// for golden files. Now is the clock for request.time (time.Now if nil).
	RequestID string
	StreamID  uint64
	Now       func() time.Time
}

// BuildCheckRequest returns the CheckRequest Envoy sends for r, with body as
// the request body Envoy buffered (nil when the request has none). Envoy
// buffers only a request that has a body and is not a WebSocket upgrade, so
// with WithBody and an empty body, or an upgrade, there are no body fields
// and no x-envoy-auth-partial-body; size is the number of bytes buffered, 0
// without a buffered body.
//
// It returns nil when Envoy would not call the server at all: the body is too
// large and partial messages are not allowed (Envoy replies 413; see
// CheckRequestFor for the error). It panics on options Envoy's config
// validation rejects (WithBody without MaxRequestBytes).
func BuildCheckRequest(r *http.Request, body []byte, opts BuildOptions) *authv3.CheckRequest {
	req, err := CheckRequestFor(r, body, opts)
	if errors.Is(err, ErrPayloadTooLarge) {
		return nil
	}
	if err != nil {
		panic(err)
	}
	return req
}

// CheckRequestFor is BuildCheckRequest with errors: ErrPayloadTooLarge when
// Envoy would answer 413 itself, or an error for invalid options.
func CheckRequestFor(r *http.Request, body []byte, opts BuildOptions) (*authv3.CheckRequest, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	d := newDownstream(r, &opts)
	return d.checkRequest(body, &opts)
}

func (o *BuildOptions) validate() error {
	if o.WithBody && o.MaxRequestBytes <= 0 {
		return fmt.Errorf("envoytest: WithBody needs MaxRequestBytes > 0, got %d", o.MaxRequestBytes)
	}
	return nil
}

// headerEntry is one entry of Envoy's header map: a lower-case key and the
// value as received, not yet sanitised.
type headerEntry struct {
	key, value string
}

// downstream is the request as the filter chain sees it when ext_authz runs:
// Envoy's header map after the connection manager mutated it, pseudo-headers
// first, then the client's headers, then the ones the connection manager
// added.
type downstream struct {
	entries                                   []headerEntry
	authority, method, path, scheme, protocol string
	source, destination                       netip.AddrPort
	streamID                                  uint64
	now                                       time.Time
	// websocket: a WebSocket upgrade, whose body ext_authz never buffers.
	websocket bool
	// certificate is source.certificate (IncludePeerCertificate).
	certificate string
}

// hopByHop are the connection-specific headers Envoy's connection manager
// removes before any filter runs (connection and upgrade survive on upgrade
// requests). te is reduced to "trailers" or removed, separately.
var hopByHop = []string{"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"}

func newDownstream(r *http.Request, opts *BuildOptions) downstream {
	d := downstream{
		authority: r.Host,
		method:    r.Method,
		path:      r.URL.RequestURI(),
		scheme:    scheme(r),
		protocol:  protocol(r),
		source:    opts.SourceAddress,
		streamID:  opts.StreamID,
	}
	if d.authority == "" {
		d.authority = r.URL.Host
	}
	if d.method == "" {
		d.method = http.MethodGet
	}
	if !d.source.IsValid() {
		d.source, _ = netip.ParseAddrPort(r.RemoteAddr)
	}
	d.destination = opts.DestinationAddress
	if !d.destination.IsValid() {
		if a, ok := r.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr); ok {
			d.destination = a.AddrPort()
		}
	}
	if d.streamID == 0 {
		d.streamID = rand.Uint64()
	}
	if opts.IncludePeerCertificate && r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		d.certificate = testcert.URLEncodedPEM(r.TLS.PeerCertificates[0].Raw)
	}
	if opts.Now != nil {
		d.now = opts.Now()
	} else {
		d.now = time.Now()
	}

	d.entries = make([]headerEntry, 0, len(r.Header)+8)
	d.entries = append(d.entries,
		headerEntry{":authority", d.authority},
		headerEntry{":path", d.path},
		headerEntry{":method", d.method},
		headerEntry{":scheme", d.scheme},
	)
	// http.Header does not keep wire order; sorted keys make the raw header
	// map deterministic. Values of one key keep their order.
	type key struct{ lower, orig string }
	keys := make([]key, 0, len(r.Header)+1)
	for k := range r.Header {
		keys = append(keys, key{strings.ToLower(k), k})
	}
	// A request built by a client carries its length outside Header; on
	// the wire it is a content-length header like any other.
	syntheticLength := r.ContentLength > 0 && r.Header.Get("Content-Length") == ""
	if syntheticLength {
		keys = append(keys, key{lower: "content-length"})
	}
	slices.SortFunc(keys, func(a, b key) int {
		if c := strings.Compare(a.lower, b.lower); c != 0 {
			return c
		}
		return strings.Compare(a.orig, b.orig)
	})
	upgrade := isUpgrade(r.Header)
	d.websocket = upgrade && strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
	for _, k := range keys {
		if k.lower == "host" || (slices.Contains(hopByHop, k.lower) && !(upgrade && (k.lower == "connection" || k.lower == "upgrade"))) {
			continue
		}
		if k.lower == "te" {
			if hasToken(strings.Join(r.Header[k.orig], ","), "trailers") {
				d.entries = append(d.entries, headerEntry{"te", "trailers"})
			}
			continue
		}
		if k.orig == "" {
			d.entries = append(d.entries, headerEntry{k.lower, strconv.FormatInt(r.ContentLength, 10)})
			continue
		}
		for _, v := range r.Header[k.orig] {
			d.entries = append(d.entries, headerEntry{k.lower, v})
		}
	}
	d.connectionManager(opts)
	return d
}

// connectionManager adds and rewrites what Envoy's HTTP connection manager
// does before the filter chain: x-forwarded-for (use_remote_address),
// x-envoy-internal, x-forwarded-proto and x-request-id.
func (d *downstream) connectionManager(opts *BuildOptions) {
	if opts.XForwardedFor && d.source.IsValid() {
		ip := d.source.Addr().Unmap().String()
		if i := d.index(headerForwardedFor); i >= 0 {
			d.entries[i].value += "," + ip
		} else {
			d.entries = append(d.entries, headerEntry{headerForwardedFor, ip})
		}
	}
	d.remove(headerEnvoyInternal)
	if opts.EnvoyInternal {
		d.entries = append(d.entries, headerEntry{headerEnvoyInternal, "true"})
	}
	d.set(headerForwardedProto, d.scheme)

	edge := opts.XForwardedFor && !opts.EnvoyInternal
	switch {
	case opts.RequestID != "":
		d.set(headerRequestID, opts.RequestID)
	case edge || d.index(headerRequestID) < 0:
		d.set(headerRequestID, newRequestID())
	}
}

func (d *downstream) index(key string) int {
	return slices.IndexFunc(d.entries, func(e headerEntry) bool { return e.key == key })
}

// set replaces the first entry of key and drops the others, or appends one.
func (d *downstream) set(key, value string) {
	i := d.index(key)
	if i < 0 {
		d.entries = append(d.entries, headerEntry{key, value})
		return
	}
	d.entries[i].value = value
	rest := slices.DeleteFunc(d.entries[i+1:], func(e headerEntry) bool { return e.key == key })
	d.entries = d.entries[:i+1+len(rest)]
}

func (d *downstream) remove(key string) {
	d.entries = slices.DeleteFunc(d.entries, func(e headerEntry) bool { return e.key == key })
}

// upstreamHeader is the header Envoy forwards upstream before ext_authz
// mutates it: every non-pseudo entry, in order.
func (d *downstream) upstreamHeader() http.Header {
	h := make(http.Header, len(d.entries))
	for _, e := range d.entries {
		if strings.HasPrefix(e.key, ":") {
			continue
		}
		h.Add(e.key, e.value)
	}
	return h
}

func (d *downstream) checkRequest(body []byte, opts *BuildOptions) (*authv3.CheckRequest, error) {
	httpReq := &authv3.AttributeContext_HttpRequest{
		Id:       strconv.FormatUint(d.streamID, 10),
		Method:   sanitizeUTF8(d.method),
		Path:     sanitizeUTF8(d.path),
		Host:     sanitizeUTF8(d.authority),
		Scheme:   d.scheme,
		Protocol: d.protocol,
	}

	// Envoy buffers only when the request has a body (no end_stream on the
	// headers); a GET under with_request_body arrives without body fields.
	// Nor does it buffer a WebSocket upgrade, whatever its method and body
	// (ext_authz.cc: isWebSocketUpgradeRequest): the check goes out with
	// the headers alone, and the body follows upstream once allowed.
	partial := ""
	if opts.WithBody && len(body) > 0 && !d.websocket {
		n := len(body)
		if n > opts.MaxRequestBytes {
			if !opts.AllowPartial {
				return nil, ErrPayloadTooLarge
			}
			n = opts.MaxRequestBytes
		}
		if opts.PackAsBytes {
			httpReq.RawBody = slices.Clone(body[:n])
		} else {
			httpReq.Body = sanitizeUTF8(string(body[:n]))
		}
		httpReq.Size = int64(n)
		partial = "false"
		if n < len(body) {
			partial = "true"
		}
	}

	if opts.EncodeRawHeaders {
		hm := &corev3.HeaderMap{Headers: make([]*corev3.HeaderValue, 0, len(d.entries)+1)}
		for _, e := range d.entries {
			if e.key == headerPartialBody {
				continue // a client copy would interfere with Envoy's own
			}
			hm.Headers = append(hm.Headers, &corev3.HeaderValue{Key: sanitizeUTF8(e.key), RawValue: []byte(e.value)})
		}
		if partial != "" {
			hm.Headers = append(hm.Headers, &corev3.HeaderValue{Key: headerPartialBody, RawValue: []byte(partial)})
		}
		httpReq.HeaderMap = hm
	} else {
		headers := make(map[string]string, len(d.entries)+1)
		for _, e := range d.entries {
			if e.key == headerPartialBody {
				continue
			}
			k, v := sanitizeUTF8(e.key), sanitizeUTF8(e.value)
			if prev, ok := headers[k]; ok {
				v = prev + "," + v
			}
			headers[k] = v
		}
		if partial != "" {
			headers[headerPartialBody] = partial
		}
		httpReq.Headers = headers
	}

	metadata := opts.MetadataContext
	if metadata == nil {
		metadata = &corev3.Metadata{}
	}
	routeMetadata := opts.RouteMetadataContext
	if routeMetadata == nil {
		routeMetadata = &corev3.Metadata{}
	}
	return &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Source:      &authv3.AttributeContext_Peer{Address: socketAddress(d.source), Principal: opts.SourcePrincipal, Certificate: d.certificate},
		Destination: &authv3.AttributeContext_Peer{Address: socketAddress(d.destination), Principal: opts.DestinationPrincipal},
		Request: &authv3.AttributeContext_Request{
			Time: timestamppb.New(d.now),
			Http: httpReq,
		},
		ContextExtensions:    opts.ContextExtensions,
		MetadataContext:      metadata,
		RouteMetadataContext: routeMetadata,
	}}, nil
}

func socketAddress(ap netip.AddrPort) *corev3.Address {
	if !ap.IsValid() {
		return nil
	}
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address:       ap.Addr().Unmap().String(),
		PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(ap.Port())},
	}}}
}

func scheme(r *http.Request) string {
	if r.TLS != nil || r.URL.Scheme == "https" {
		return "https"
	}
	return "http"
}

// protocol is Envoy's name for the downstream protocol.
func protocol(r *http.Request) string {
	switch {
	case r.ProtoMajor == 3:
		return "HTTP/3"
	case r.ProtoMajor == 2:
		return "HTTP/2"
	case r.ProtoMajor == 1 && r.ProtoMinor == 0:
		return "HTTP/1.0"
	default:
		return "HTTP/1.1"
	}
}

func isUpgrade(h http.Header) bool {
	return h.Get("Upgrade") != "" && hasToken(strings.Join(h.Values("Connection"), ","), "upgrade")
}

// hasToken reports whether the comma-separated list contains token,
// ignoring case and spaces.
func hasToken(list, token string) bool {
	for t := range strings.SplitSeq(list, ",") {
		if strings.EqualFold(strings.TrimSpace(t), token) {
			return true
		}
	}
	return false
}

// sanitizeUTF8 replaces every byte that is not part of valid UTF-8 with '!',
// one for one, as Envoy's MessageUtil::sanitizeUtf8String does.
func sanitizeUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	b := []byte(s)
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size <= 1 {
			b[i] = '!'
			i++
			continue
		}
		i += size
	}
	return string(b)
}

// newRequestID returns a random version 4 UUID, the form of Envoy's
// generated x-request-id.
func newRequestID() string {
	var b [16]byte
	hi, lo := rand.Uint64(), rand.Uint64()
	for i := range 8 {
		b[i] = byte(hi >> (56 - 8*i))
		b[8+i] = byte(lo >> (56 - 8*i))
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	const hex = "0123456789abcdef"
	out := make([]byte, 0, 36)
	for i, c := range b {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			out = append(out, '-')
		}
		out = append(out, hex[c>>4], hex[c&0x0f])
	}
	return string(out)
}
