package check

import (
	"time"

	"github.com/extauthz/extauthz/internal/cache"
)

// The verdict cache holds grants; refusals (a bad signature, an expired
// token) live in a cache of their own with its own bound, so that a flood
// of distinct invalid tokens pushes out only other refusals, never a valid
// caller's grant. A refusal entry is small: the reason is shared
// (cache.Negative).

// refusalsSize bounds the refusals: a quarter of the grants' bound, at
// least a thousand.
func refusalsSize(cacheSize int) int { return max(cacheSize/4, 1000) }

// lookup finds the cached verdict for key at the check's instant now, a
// grant or a refusal, and returns it in dst (the caller's, so that a hit
// allocates nothing).
func (pl *Pipeline) lookup(key cache.Key, dst *cached, now time.Time) (*cached, bool) {
	if g, ok := pl.cache.GetAt(key, now); ok {
		*dst = cached{grant: g, outcome: Allowed, routeKey: g.routeKey}
		return dst, true
	}
	if r, ok := pl.refusals.GetAt(key, now); ok {
		*dst = cached{outcome: Outcome(r.Kind), description: r.Reason}
		return dst, true
	}
	return nil, false
}

// peek is lookup without side effects, for Explain.
func (pl *Pipeline) peek(key cache.Key, dst *cached, now time.Time) (*cached, bool) {
	if g, ok := pl.cache.PeekAt(key, now); ok {
		*dst = cached{grant: g, outcome: Allowed, routeKey: g.routeKey}
		return dst, true
	}
	if r, ok := pl.refusals.PeekAt(key, now); ok {
		*dst = cached{outcome: Outcome(r.Kind), description: r.Reason}
		return dst, true
	}
	return nil, false
}

// remember caches a verification's result until the token expires, or a
// refusal for the negative TTL from the check's instant now.
func (pl *Pipeline) remember(p *Policy, key cache.Key, e *cached, now time.Time) {
	if e.grant != nil {
		// The grant names its route's key itself (newGrant): its shape may
		// be shared and is never written.
		pl.cache.AddAt(key, e.grant, e.grant.Expires(), now)
		return
	}
	pl.refusals.AddAt(key, cache.Refusal{Reason: e.description, Kind: uint8(e.outcome)}, now.Add(p.negativeTTL), now)
}

// cacheStats adds up both caches: a lookup that finds neither is one miss.
func (pl *Pipeline) cacheStats() cache.Stats {
	g, r := pl.cache.Stats(), pl.refusals.Stats()
	return cache.Stats{Hits: g.Hits + r.Hits, Misses: r.Misses, Evictions: g.Evictions + r.Evictions, Size: g.Size + r.Size}
}
