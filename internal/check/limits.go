package check

import (
	"fmt"
	"strings"
	"time"

	"github.com/extauthz/extauthz/internal/config"
	"github.com/extauthz/extauthz/internal/jsonrpc"
	"github.com/extauthz/extauthz/internal/ratelimit"
)

// RateLimitObserver is an optional part of Observer: counts of rate limit
// decisions by route and key kind, never by user.
type RateLimitObserver interface {
	RateLimitDecided(route, key string, limited bool)
}

// compileLimits turns configured limits into the limiter's, each with an id
// naming its place in the configuration: a reload that keeps the place
// keeps the counts.
func compileLimits(prefix string, ls []config.RateLimit) []ratelimit.Limit {
	if len(ls) == 0 {
		return nil
	}
	out := make([]ratelimit.Limit, 0, len(ls))
	for i, l := range ls {
		kind, _ := ratelimit.ParseKind(l.Key) // validated
		out = append(out, ratelimit.Limit{ID: fmt.Sprintf("%s/limits[%d]", prefix, i), Kind: kind,
			Requests: l.Requests, Per: l.Per.D(), Burst: l.Burst})
	}
	return out
}

// limits counts the request against the route's limits and those of the
// rule that allowed it, and refuses it with 429 beyond one. Explain counts
// nothing. A request whose key is empty (no client id, no lineage) is not
// counted by that limit.
func (e *evaluation) limits() *denial {
	r := e.route
	if e.grant == nil {
		return nil
	}
	if d := e.countAll(r.limits); d != nil {
		return d
	}
	if e.decidedBy > 0 {
		return e.countAll(r.rules[e.decidedBy-1].limits)
	}
	return nil
}

func (e *evaluation) countAll(ls []ratelimit.Limit) *denial {
	for i := range ls {
		if d := e.count(&ls[i]); d != nil {
			return d
		}
	}
	return nil
}

func (e *evaluation) count(l *ratelimit.Limit) *denial {
	key := e.limitKey(l.Kind)
	if key.Value == "" || (l.Kind == ratelimit.KindSubjectTool && key.Qualifier == "") {
		return nil
	}
	if e.st.readOnly {
		e.rec.add("not counted", func() string { return l.ID + ": explain counts nothing" })
		return nil
	}
	d := e.pl.limiter.Allow(e.ctx, l, key)
	if o, ok := e.observer.(RateLimitObserver); ok {
		o.RateLimitDecided(e.route.Name, l.Kind.String(), !d.Allowed)
	}
	if d.Allowed {
		return nil
	}
	e.rateLimit = l.ID
	desc := "rate limit exceeded"
	if d.Full {
		// Counts still limiting their keys are never forgotten to make room
		// (a forgotten count would start again with a full burst).
		desc = "rate limit: too many requests are being counted to count this one; retry later"
	}
	return &denial{outcome: RateLimited, desc: desc, retryAfter: max(d.RetryAfter, time.Second)}
}

// limitKey is what the request counts as under a limit of kind k.
func (e *evaluation) limitKey(k ratelimit.Kind) ratelimit.Key {
	switch k {
	case ratelimit.KindSubject:
		return ratelimit.Key{Value: e.grant.Subject}
	case ratelimit.KindSubjectTool:
		return ratelimit.Key{Value: e.grant.Subject, Qualifier: countedName(e.call.Method, e.call.Name)}
	case ratelimit.KindClient:
		// A client id names a client of its issuer: another issuer's token
		// may carry the same azp, and must not spend this client's budget.
		// The issuer's subject namespace tells them apart (issuers sharing
		// one subject space share their clients), and is "" with one
		// issuer, which keeps the key every release has counted under.
		if e.grant.ClientID == "" {
			return ratelimit.Key{}
		}
		return ratelimit.Key{Value: e.grant.ClientID, Qualifier: e.p.ident.namespaces[e.grant.Issuer]}
	case ratelimit.KindRoot:
		return ratelimit.Key{Value: e.v.Lineage.Root}
	case ratelimit.KindPrincipal:
		return ratelimit.Key{Value: e.req.SourcePrincipal}
	}
	return ratelimit.Key{}
}

// countedName is the name a subject_tool limit counts a call under: a
// resource URI without its query, which a file or object server ignores,
// so that ?x=1, ?x=2, ... read one resource on one budget, not each on its
// own.
func countedName(method, name string) string {
	if jsonrpc.IsURIMethod(method) {
		name, _, _ = strings.Cut(name, "?")
	}
	return name
}
