// Package peer takes a caller's identity from its mTLS workload
// certificate: the SPIFFE ID Envoy reports as the connection's source
// principal (ext_authz, under Istio or any SPIFFE mesh), or, on the HTTP
// front end, the X-Forwarded-Client-Cert header a trusted proxy sets.
//
// A Policy accepts SPIFFE IDs of an allow-list of trust domains whose path
// matches one of its patterns, and maps the ID to a subject with a
// template, e.g. "spiffe://cluster.local/ns/agents/sa/billing" to
// "agents/billing". The result is *jwtauth.Claims, so everything
// downstream treats a workload like a verified token's subject.
//
// X-Forwarded-Client-Cert is believed only from the proxies listed as
// trusted (by address): any client can send the header, and only a proxy
// that sanitizes it (Envoy's forward_client_cert_details SANITIZE_SET or
// APPEND_FORWARD) makes it mean anything. The last element is the one the
// nearest proxy added, so it is the one read.
//
// A request's identity is read once into a Presented value and handed to
// each policy of its route: the header is parsed and the identity hashed
// once per request, not once per policy.
//
// The package also spells what a proxy says about the client certificate
// (a URL-encoded PEM, a hex SHA-256, an X-Forwarded-Client-Cert header) as
// RFC 8705's x5t#S256, for certificate-bound tokens: ThumbprintPEM,
// ThumbprintHex and ThumbprintXFCC (x5t.go), shared by every front end so
// that they read a certificate alike.
package peer

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"text/template"
	"time"

	"github.com/extauthz/extauthz/internal/cache"
	"github.com/extauthz/extauthz/internal/jwtauth"
)

// Denials; their texts are safe to show the client.
var (
	ErrNoIdentity     = errors.New("no peer identity")
	ErrMalformed      = errors.New("peer identity is malformed")
	ErrTrustDomain    = errors.New("peer trust domain is not accepted")
	ErrPath           = errors.New("peer identity is not accepted")
	ErrUntrustedProxy = errors.New("client certificate header from an untrusted peer")
)

// DefaultCacheTTL caps Claims.ExpiresAt of a peer identity.
const DefaultCacheTTL = time.Minute

// maxSubject bounds a rendered subject.
const maxSubject = 512

// Config is one peer issuer.
type Config struct {
	// Name is the configured issuer's name.
	Name string
	// TrustDomains are the accepted trust domains (required).
	TrustDomains []string
	// Paths are the accepted path patterns ("/ns/agents/sa/*",
	// "/ns/agents/**"); empty accepts every path.
	Paths []string
	// Subject is a text/template of the subject, with .ID (the SPIFFE ID),
	// .TrustDomain, .Path (without its leading '/') and .Segments; default
	// "{{.ID}}". For Istio's /ns/NS/sa/SA, "{{index .Segments 1}}/{{index
	// .Segments 3}}" gives NS/SA.
	Subject string
	// XFCCFrom are the addresses of the proxies whose
	// X-Forwarded-Client-Cert is believed; empty believes none.
	XFCCFrom []netip.Prefix
	// CacheTTL caps Claims.ExpiresAt (default 1m).
	CacheTTL time.Duration
}

// Policy checks peer identities. It is immutable and safe for concurrent
// use.
type Policy struct {
	name    string
	domains []string
	paths   []pattern
	subject *template.Template
	xfcc    []netip.Prefix
	ttl     time.Duration
	now     func() time.Time
	// memo keeps the claims of the identities seen lately: a mesh has few
	// workloads, and rendering the template is the costly part.
	memo *cache.Cache[*jwtauth.Claims]
}

// memoSize bounds the identities remembered.
const memoSize = 1024

// New checks cfg. now is the clock (nil: time.Now).
func New(cfg Config, now func() time.Time) (*Policy, error) {
	if now == nil {
		now = time.Now
	}
	var errs []error
	if cfg.Name == "" {
		errs = append(errs, errors.New("a name is required"))
	}
	if len(cfg.TrustDomains) == 0 {
		errs = append(errs, errors.New("at least one trust domain is required"))
	}
	for _, td := range cfg.TrustDomains {
		if id, err := ParseID("spiffe://" + td); err != nil || id.Path != "" {
			errs = append(errs, fmt.Errorf("trust domain %q is not a SPIFFE trust domain (lower-case letters, digits, '.', '-', '_')", td))
		}
	}
	p := &Policy{name: cfg.Name, domains: cfg.TrustDomains, xfcc: cfg.XFCCFrom, ttl: cfg.CacheTTL, now: now}
	for _, s := range cfg.Paths {
		pt, err := parsePattern(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("path %q: %w", s, err))
		}
		p.paths = append(p.paths, pt)
	}
	src := cfg.Subject
	if src == "" {
		src = "{{.ID}}"
	}
	t, err := template.New("subject").Parse(src)
	if err != nil {
		errs = append(errs, fmt.Errorf("subject template: %w", err))
	} else {
		p.subject = t
		// Render a sample so that a template naming an unknown field fails
		// now rather than on every request.
		sample := subjectData{ID: "spiffe://example.org/a/b/c/d/e/f/g/h", TrustDomain: "example.org", Path: "a/b/c/d/e/f/g/h", Segments: strings.Split("a/b/c/d/e/f/g/h", "/")}
		if err := t.Execute(&strings.Builder{}, sample); err != nil {
			errs = append(errs, fmt.Errorf("subject template: %w", err))
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("peer: issuer %q: %w", cfg.Name, errors.Join(errs...))
	}
	if p.ttl <= 0 {
		p.ttl = DefaultCacheTTL
	}
	if p.memo, err = cache.New[*jwtauth.Claims](memoSize, now); err != nil {
		return nil, err
	}
	return p, nil
}

// Name is the configured issuer's name.
func (p *Policy) Name() string { return p.name }

// subjectData is what the subject template sees.
type subjectData struct {
	ID          string
	TrustDomain string
	Path        string
	Segments    []string
}

var errRender = errors.New("peer identity does not fit the subject template")

func (p *Policy) render(id ID) (string, error) {
	var b strings.Builder
	d := subjectData{ID: id.String(), TrustDomain: id.TrustDomain, Path: strings.TrimPrefix(id.Path, "/"), Segments: id.Segments()}
	if err := p.subject.Execute(&b, d); err != nil {
		return "", errRender
	}
	s := b.String()
	if s == "" || len(s) > maxSubject || strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return "", errRender
	}
	return s, nil
}

// Accept checks what a request presented. A header counts only from a
// proxy p trusts, and is parsed (once for all policies) only then. The
// claims are shared and must not be modified.
func (p *Policy) Accept(pr *Presented) (*jwtauth.Claims, error) {
	if pr.xfcc {
		if pr.header == "" {
			return nil, ErrNoIdentity
		}
		if !p.TrustsProxy(pr.remote) {
			return nil, ErrUntrustedProxy
		}
	}
	pr.readOnce()
	if pr.err != nil {
		return nil, pr.err
	}
	k := pr.Key()
	if c, ok := p.memo.Get(k); ok {
		return c, nil
	}
	id, err := pr.spiffeID()
	if err != nil {
		return nil, err
	}
	c, err := p.claims(id, pr.hash)
	if err == nil {
		p.memo.Add(k, c, c.ExpiresAt)
	}
	return c, err
}

// TrustsProxy reports whether remote may send X-Forwarded-Client-Cert.
func (p *Policy) TrustsProxy(remote netip.Addr) bool {
	remote = remote.Unmap()
	for _, pf := range p.xfcc {
		if pf.Contains(remote) {
			return true
		}
	}
	return false
}

// claims are the claims of id (with hash, the certificate's, from a
// header), when p accepts it.
func (p *Policy) claims(id ID, hash string) (*jwtauth.Claims, error) {
	if !slices.Contains(p.domains, id.TrustDomain) {
		return nil, ErrTrustDomain
	}
	if len(p.paths) > 0 {
		segs := id.Segments()
		if !slices.ContainsFunc(p.paths, func(pt pattern) bool { return pt.match(segs) }) {
			return nil, ErrPath
		}
	}
	sub, err := p.render(id)
	if err != nil {
		return nil, ErrPath
	}
	raw := map[string]any{
		"sub":          sub,
		"spiffe_id":    id.String(),
		"trust_domain": id.TrustDomain,
		"client_id":    id.String(),
	}
	if hash != "" {
		raw["x5t_s256_hex"] = hash
	}
	return &jwtauth.Claims{
		IssuerName: p.name,
		Issuer:     "spiffe://" + id.TrustDomain,
		Subject:    sub,
		ExpiresAt:  p.now().Add(p.ttl),
		Raw:        raw,
	}, nil
}
