package check

import (
	"net/netip"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/extauthz/extauthz/internal/peer"
)

// Request is what the pipeline needs to know about one HTTP request, taken
// from whatever front end received it (Envoy's CheckRequest, an HTTP
// forward-auth call). It is plain data: the pipeline never sees Envoy types.
type Request struct {
	Method   string
	Scheme   string
	Host     string // :authority, possibly with a port
	Path     string // with the query string
	Protocol string
	Headers  Headers
	// Body is the request body when the front end was given it; BodyPartial
	// says it was cut short and must not be trusted.
	Body        []byte
	BodyPartial bool
	// UnderscoreNames says a header name holds "_", as the front end
	// noted while it read the names anyway (Caddy and Traefik pass such
	// names on, and Envoy unless headers_with_underscores_action drops
	// them), so that the pipeline reads the names only then
	// (underscoreHeader).
	UnderscoreNames bool
	// Repeated names the headers the proxy sent more than once, where the
	// front end can tell (a header list, not a map Envoy already merged):
	// a rule reading one of them by name sees its values joined, while
	// the upstream may read any one of them (repeatedRuleHeader). Nil on
	// nearly every request.
	Repeated []string
	// ClientCertForm says how ClientCert spells the client certificate
	// (beside BodyPartial, in its padding: a Request is allocated per
	// check).
	ClientCertForm CertForm
	// ContextExtensions are Envoy's per-route check settings; "route" names
	// the route directly.
	ContextExtensions map[string]string
	// SourcePrincipal is the mTLS peer identity (a SPIFFE id in a mesh).
	SourcePrincipal string
	// SourceAddress is the peer's IP address as the front end saw it (for
	// rule expressions), "" when it does not say.
	SourceAddress string
	// PeerAddr is the address the check came from on the HTTP front end
	// (the proxy asking): an X-Forwarded-Client-Cert is believed only from
	// the addresses a peer issuer trusts. Zero on ext_authz.
	PeerAddr netip.Addr
	// ClientCert is the client's TLS certificate as the front end learned
	// it, in ClientCertForm: Envoy's source.certificate, ext_proc's
	// certificate digest, or a trusted proxy's X-Forwarded-Client-Cert.
	// It is hashed (ClientCertThumbprint) only when a certificate-bound
	// token asks: under a mesh nearly every request presents one, and
	// nearly no check needs it. "" presents none.
	ClientCert string
	RequestID  string
}

// CertForm is how Request.ClientCert spells the certificate.
type CertForm uint8

const (
	CertPEM  CertForm = iota // URL-encoded PEM (Envoy's source.certificate)
	CertHex                  // SHA-256 in hex (ext_proc's connection.sha256_peer_certificate_digest)
	CertXFCC                 // a whole X-Forwarded-Client-Cert header of a trusted proxy
)

// ClientCertThumbprint is the client certificate's x5t#S256 (RFC 8705:
// SHA-256 of the DER, base64url), "" when there is none or it cannot be
// read exactly.
func (r *Request) ClientCertThumbprint() string {
	switch r.ClientCertForm {
	case CertHex:
		return peer.ThumbprintHex(r.ClientCert)
	case CertXFCC:
		return peer.ThumbprintXFCC(r.ClientCert)
	}
	return peer.ThumbprintPEM(r.ClientCert)
}

// Headers are the request headers with lower-case names; repeated headers
// joined with ",".
type Headers map[string]string

// Get returns the value of the lower-case header name.
func (h Headers) Get(name string) string { return h[name] }

// Mentions reports whether the value of the lower-case header name holds
// word, a lower-case ASCII word, in any case ("Text/Event-Stream"),
// without allocating.
func (h Headers) Mentions(name, word string) bool { return containsFold(h[name], word) }

// AddHeader adds one entry of a proxy's header list to r.Headers
// (Headers.Add) and notes what the pipeline reads of the names: a name
// holding "_" (UnderscoreNames) and a name already there (Repeated). Every
// front end that receives a header list (ext_authz's raw header map,
// ext_proc's headers) reads it through AddHeader, so that they see one
// request alike.
func (r *Request) AddHeader(key, value string) {
	name, repeated := r.Headers.Add(key, value)
	if repeated && !slices.Contains(r.Repeated, name) {
		r.Repeated = append(r.Repeated, name)
	}
	r.UnderscoreNames = r.UnderscoreNames || strings.IndexByte(key, '_') >= 0
}

// Add adds one entry of a proxy's header list as Envoy merges a header
// map: the name lower-cased, a repeated header joined to the earlier value
// with "," ("; " for Cookie, RFC 6265 section 5.4), invalid UTF-8 replaced
// by "!" but in Mcp-Session-Id. It returns the lower-case name and whether
// the header was there already (Request.AddHeader).
func (h Headers) Add(key, value string) (name string, repeated bool) {
	k := strings.ToLower(key)
	// A session id keeps its bytes: as "!" it would pass as the visible
	// ASCII id it must be, and be bound, while the upstream reads the raw
	// bytes as another session; kept, it is refused (ambiguousHeader), as
	// the forward-auth front end refuses it.
	if k != hMCPSession && !utf8.ValidString(value) {
		value = strings.ToValidUTF8(value, "!")
	}
	if prev, ok := h[k]; ok {
		sep := ","
		if k == "cookie" {
			sep = "; "
		}
		value = prev + sep + value
		repeated = true
	}
	h[k] = value
	return k, repeated
}
