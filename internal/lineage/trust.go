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
	// ClientIDs are token azp / client_id values of trusted workloads, in
	// their issuer's subject namespace as users are ("corp:planner" with
	// several issuers): see Caller.Namespace.
	ClientIDs []string
	// Principals are mTLS peer identities (SPIFFE ids in a mesh): exact, or
	// a prefix glob ending in "/*" such as "spiffe://td/ns/agents/*", or "*"
	// for any peer that presented a certificate.
	Principals []string
	// IgnoreAct stops an act claim from making its token trusted: on a
	// route that accepts an issuer whose tokens the operator does not
	// control (a tenant's identity provider), any such token can carry
	// one. The token's own actor chain is still read from its claim.
	IgnoreAct bool
}

// Trust decides whether a caller's inbound lineage headers are kept. It is
// compiled once from a TrustConfig and safe for concurrent use. A nil *Trust
// trusts only tokens with an act claim.
type Trust struct {
	all          bool
	ignoreAct    bool
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
	// Namespace is the subject namespace of the token's issuer: a client
	// id is its issuer's name for a client, so a trusted client id is
	// written as the service writes that issuer's users, namespace first,
	// and another issuer's client of the same id is not trusted. The
	// caller leaves ClientID empty when it reads as another issuer's.
	Namespace string
	HasAct    bool   // the verified token carries an RFC 8693 act claim
	Principal string // the mTLS peer's identity; "" without mTLS
}

// NewTrust compiles c. Empty entries and globs other than a trailing "/*"
// are errors.
func NewTrust(c TrustConfig) (*Trust, error) {
	t := &Trust{all: c.All, ignoreAct: c.IgnoreAct}
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
// itself vouches for the delegation) unless IgnoreAct, tokens from a
// trusted issuer or client, and allow-listed mTLS peers.
func (t *Trust) Trusted(c Caller) bool {
	if t == nil {
		return c.HasAct
	}
	if c.HasAct && !t.ignoreAct {
		return true
	}
	if t.all {
		return true
	}
	if c.IssuerName != "" && slices.Contains(t.issuers, c.IssuerName) {
		return true
	}
	if c.ClientID != "" && InNamespace(t.clientIDs, c.Namespace, c.ClientID) {
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

// InNamespace reports whether names holds id as read in namespace
// (namespace followed by id), without building that string: the check on
// every request of whether a token's client id or act subject is one a
// configuration names.
func InNamespace(names []string, namespace, id string) bool {
	for _, n := range names {
		if len(n) == len(namespace)+len(id) && strings.HasPrefix(n, namespace) && strings.HasSuffix(n, id) {
			return true
		}
	}
	return false
}
