package lineage

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// TrustConfig says whose inbound lineage headers a route keeps.
type TrustConfig struct {
	// All trusts every authenticated caller (the built-in default).
	All bool
	// Issuers are configured issuer names whose tokens are workload tokens.
	Issuers []string
	// ClientIDs are token azp / client_id values of trusted workloads.
	ClientIDs []string
	// Principals are mTLS peer identities (SPIFFE ids in a mesh): exact, or
	// a prefix glob ending in "/*" such as "spiffe://td/ns/agents/*", or "*"
	// for any peer that presented a certificate.
	Principals []string
}

// Trust decides whether a caller's inbound lineage headers are kept. It is
// compiled once from a TrustConfig and safe for concurrent use. A nil *Trust
// trusts only tokens with an act claim.
type Trust struct {
	all          bool
	issuers      []string
	clientIDs    []string
	exact        []string
	prefixes     []string // each ends in "/"
	anyPrincipal bool
}

// Caller is what the pipeline knows of who sent the request.
type Caller struct {
	IssuerName string // the configured name of the token's issuer
	ClientID   string // azp, else client_id
	HasAct     bool   // the verified token carries an RFC 8693 act claim
	Principal  string // the mTLS peer's identity; "" without mTLS
}

// NewTrust compiles c. Empty entries and globs other than a trailing "/*"
// are errors.
func NewTrust(c TrustConfig) (*Trust, error) {
	t := &Trust{all: c.All}
	var errs []error
	for _, s := range c.Issuers {
		if s == "" {
			errs = append(errs, errors.New("trusted issuer name is empty"))
			continue
		}
		t.issuers = append(t.issuers, s)
	}
	for _, s := range c.ClientIDs {
		if s == "" {
			errs = append(errs, errors.New("trusted client id is empty"))
			continue
		}
		t.clientIDs = append(t.clientIDs, s)
	}
	for _, p := range c.Principals {
		switch {
		case p == "*":
			t.anyPrincipal = true
		case p == "":
			errs = append(errs, errors.New("trusted principal is empty"))
		case strings.HasSuffix(p, "/*") && !strings.Contains(p[:len(p)-1], "*"):
			t.prefixes = append(t.prefixes, p[:len(p)-1])
		case strings.Contains(p, "*"):
			errs = append(errs, fmt.Errorf("trusted principal %q: a wildcard may only end the pattern as \"/*\"", p))
		default:
			t.exact = append(t.exact, p)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return t, nil
}

// Trusted reports whether c's inbound lineage is kept: everyone when the
// route trusts all callers; otherwise tokens with an act claim (the token
// itself vouches for the delegation), tokens from a trusted issuer or client,
// and allow-listed mTLS peers.
func (t *Trust) Trusted(c Caller) bool {
	if c.HasAct {
		return true
	}
	if t == nil {
		return false
	}
	if t.all {
		return true
	}
	if c.IssuerName != "" && slices.Contains(t.issuers, c.IssuerName) {
		return true
	}
	if c.ClientID != "" && slices.Contains(t.clientIDs, c.ClientID) {
		return true
	}
	if c.Principal == "" {
		return false
	}
	if t.anyPrincipal || slices.Contains(t.exact, c.Principal) {
		return true
	}
	for _, p := range t.prefixes {
		// The glob needs at least one character after the slash.
		if len(c.Principal) > len(p) && strings.HasPrefix(c.Principal, p) {
			return true
		}
	}
	return false
}
