package check

import (
	"errors"
	"fmt"

	"github.com/extauthz/extauthz/internal/jwtauth"
	"github.com/extauthz/extauthz/internal/peer"
)

// peerIdentity takes the caller's workload identity, the mTLS source
// principal Envoy reports, on routes that list peer issuers
// (docs/credentials.md). On a route that lists only peer issuers the
// workload is the caller: its grant is made (and cached by principal) here,
// and the credential and identity stages have nothing left to do. On a
// route that also lists token issuers both are required: the workload must
// be accepted here and the token is verified after.
func (e *evaluation) peerIdentity() *denial {
	c := e.p.verifier
	if len(c.peers) == 0 {
		return nil
	}
	r := e.route
	var claims *jwtauth.Claims
	err := peer.ErrNoIdentity
	peers, tokens := 0, false
	// Read once for every peer issuer of the route; its key, scoped to the
	// route, is also the grant's cache key below.
	pr := peer.Present(r.keyPrefix, e.req.SourcePrincipal, e.req.PeerAddr, e.req.Headers.Get("x-forwarded-client-cert"))
	for _, n := range r.issuers {
		pol := c.peers[n]
		if pol == nil {
			tokens = true
			continue
		}
		peers++
		if claims == nil {
			var perr error
			if claims, perr = pol.Accept(&pr); perr != nil {
				claims, err = nil, perr
			}
		}
	}
	if peers == 0 {
		return nil
	}
	if claims == nil {
		c.observe("peer", "denied")
		return &denial{outcome: InvalidToken, desc: err.Error()}
	}
	e.rec.add("peer", func() string {
		return fmt.Sprintf("workload %s (issuer %s, kind peer)", claims.Raw["spiffe_id"], claims.IssuerName)
	})
	if tokens {
		// The user's token is verified next; the workload acts for the
		// user: it becomes the outermost actor of the grant (act), and the
		// grant is cached per token and workload.
		e.actor, _ = claims.Raw["spiffe_id"].(string)
		return nil
	}
	key := pr.Key()
	var found cached
	entry, hit := e.lookup(key, &found)
	if !hit {
		entry = &cached{outcome: Allowed, routeKey: r.keyPrefix}
		g, gerr := e.p.newGrant(r, claims)
		if gerr != nil {
			var ce *claimError
			if !errors.As(gerr, &ce) {
				return &denial{outcome: InvalidToken, desc: "peer identity cannot be used here"}
			}
			return &denial{outcome: InvalidToken, desc: gerr.Error()}
		}
		entry.grant = g
		e.pl.state.accepted(g)
		c.observe("peer", "ok")
		if !e.st.readOnly {
			e.pl.remember(e.p, key, entry, e.now)
		}
	}
	g := entry.grant
	if g == nil {
		return &denial{outcome: entry.outcome, desc: entry.description}
	}
	e.hit = hit // a refusal below came from the cache too, as identify's does
	if d := e.pl.state.admit(g, "peer identity"); d != nil {
		return d
	}
	e.grant = g
	e.v = Verdict{Outcome: Allowed, Route: r.Name, Grant: g, CacheHit: hit, Set: g.set, Remove: g.remove}
	return nil
}

// withActor returns c with actor as the outermost actor (RFC 8693 act),
// the token's own act nested inside. c's claims may be shared: they are
// copied into the result's Raw, which then stands for them.
func withActor(c *jwtauth.Claims, actor string) *jwtauth.Claims {
	out := *c
	all := c.All()
	out.Raw = make(map[string]any, len(all)+1)
	for k, v := range all {
		out.Raw[k] = v
	}
	act := map[string]any{"sub": actor}
	if v, _ := c.Claim("act"); v != nil {
		if inner, ok := v.(map[string]any); ok {
			act["act"] = inner
		}
	}
	out.Raw["act"] = act
	return &out
}
