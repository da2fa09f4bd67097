package peer

import (
	"net/netip"

	"github.com/extauthz/extauthz/internal/jwtauth"
)

// The service reads a request once with Present and hands it to every
// policy with Accept; these two check one kind of presentation alone, for
// the tests and benchmarks of a single policy.

// FromPrincipal checks the SPIFFE ID Envoy reports as the source principal
// of an mTLS connection (ext_authz attributes.source.principal).
func (p *Policy) FromPrincipal(principal string) (*jwtauth.Claims, error) {
	pr := Present("", principal, netip.Addr{}, "")
	return p.Accept(&pr)
}

// FromXFCC checks the X-Forwarded-Client-Cert header of a request that
// came from the address remote: only from a trusted proxy, and only the
// last element (the nearest proxy's).
func (p *Policy) FromXFCC(remote netip.Addr, header string) (*jwtauth.Claims, error) {
	if header == "" {
		return nil, ErrNoIdentity
	}
	if !remote.IsValid() {
		return nil, ErrUntrustedProxy
	}
	pr := Present("", "", remote, header)
	return p.Accept(&pr)
}
