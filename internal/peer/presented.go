package peer

import (
	"net/netip"
	"strings"

	"github.com/extauthz/extauthz/internal/cache"
)

// Presented is the workload identity one request presents: the source
// principal, or an X-Forwarded-Client-Cert header and the address it came
// from. A request is read once and the value handed to every peer policy
// of its route, so that the header is parsed, the SPIFFE ID read and the
// memo key hashed once per request, however many policies look.
//
// It is not safe for concurrent use; a request's checks are sequential.
type Presented struct {
	scope     string
	principal string
	remote    netip.Addr
	header    string
	xfcc      bool // read from header: the proxy must be trusted

	read bool
	raw  string // the SPIFFE ID as presented
	hash string // the certificate hash from the header, hex
	err  error  // why there is no usable identity, once read

	// id is raw parsed, only when a policy has no claims for it in its
	// memo: a remembered identity is not parsed again.
	parsed bool
	id     ID
	idErr  error

	keyed bool
	key   cache.Key
}

// Present is what a request presents: its source principal when it has
// one or remote is not valid (ext_authz), else the header remote sent
// (forward-auth behind a proxy). scope is mixed into Key: a caller that
// caches per route passes the route's key prefix and uses Key for its
// own cache too.
func Present(scope, principal string, remote netip.Addr, header string) Presented {
	pr := Presented{scope: scope, principal: principal}
	if principal == "" && remote.IsValid() {
		pr.xfcc, pr.remote, pr.header = true, remote, header
	}
	return pr
}

// ID is the SPIFFE ID presented as it was presented, "" when there is
// none or it could not be read.
func (pr *Presented) ID() string {
	pr.readOnce()
	return pr.raw
}

// Hash is the certificate hash the proxy reported (hex), "" without one.
func (pr *Presented) Hash() string {
	pr.readOnce()
	return pr.hash
}

// Key names the identity and its certificate within the scope: what
// policies remember claims under, and what a caller may cache under.
func (pr *Presented) Key() cache.Key {
	if !pr.keyed {
		pr.readOnce()
		pr.key, pr.keyed = cache.NewKey(pr.scope, "\x00peer", pr.raw, pr.hash), true
	}
	return pr.key
}

// readOnce parses the header (the last element, the nearest proxy's), the
// first time it is asked.
func (pr *Presented) readOnce() {
	if pr.read {
		return
	}
	pr.read = true
	if !pr.xfcc {
		pr.raw = pr.principal
		if pr.raw == "" {
			pr.err = ErrNoIdentity
			return
		}
	} else {
		pr.raw, pr.hash, pr.err = fromHeader(pr.header)
	}
}

// spiffeID is the presented SPIFFE ID parsed, once.
func (pr *Presented) spiffeID() (ID, error) {
	if !pr.parsed {
		pr.parsed = true
		if pr.id, pr.idErr = ParseID(pr.raw); pr.idErr != nil {
			pr.idErr = ErrMalformed
		}
	}
	return pr.id, pr.idErr
}

// fromHeader is the SPIFFE ID and certificate hash of the last element of
// an X-Forwarded-Client-Cert header.
func fromHeader(header string) (id, hash string, err error) {
	els, err := ParseXFCC(header)
	if err != nil {
		return "", "", ErrMalformed
	}
	el := &els[len(els)-1]
	n := 0
	for _, u := range el.URI {
		if strings.HasPrefix(u, "spiffe:") {
			id = u
			n++
		}
	}
	// An X.509-SVID has exactly one URI SAN; two SPIFFE IDs are ambiguous.
	switch n {
	case 0:
		return "", "", ErrNoIdentity
	case 1:
		return id, el.Hash, nil
	}
	return "", "", ErrMalformed
}
