package cache

import (
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

// Negative is the cache of refusals: tokens that failed verification and
// will keep failing for a while (a bad signature, an expired token). It is
// bounded on its own, apart from the cache of grants, so that a flood of
// distinct invalid tokens evicts only other refusals, never a valid
// caller's grant. Its entries are small, about 110 bytes: a 16-byte key
// (half of the SHA-256 key: a collision, at odds of 2^-64 per pair, would
// only refuse a token once more), the index of its reason in a table of
// the few distinct reasons, its kind and its deadline to the second.
type Negative struct {
	lru       *lru.Cache[NegativeKey, refusal]
	hits      atomic.Uint64
	misses    atomic.Uint64
	evictions atomic.Uint64

	mu      sync.RWMutex
	reasons []string
	index   map[string]uint16
}

// maxReasons bounds the reasons table; a refusal with a new reason past it
// is not cached (the token is verified again next time).
const maxReasons = 4096

// NegativeKey is the first half of a Key.
type NegativeKey [16]byte

// Refusal is why a token is refused: a reason and a kind the caller
// defines.
type Refusal struct {
	Reason string
	Kind   uint8
}

// refusal is a Refusal as stored: 8 bytes.
type refusal struct {
	expires uint32 // unix seconds
	reason  uint16
	kind    uint8
}

// NewNegative returns a cache of at most size refusals. It has no clock of
// its own: each call takes the caller's instant, the check's one reading.
func NewNegative(size int) (*Negative, error) {
	c := &Negative{index: map[string]uint16{}}
	l, err := lru.NewWithEvict(size, func(NegativeKey, refusal) { c.evictions.Add(1) })
	if err != nil {
		return nil, err
	}
	c.lru = l
	return c, nil
}

func negativeKey(k Key) NegativeKey { return NegativeKey(k[:16]) }

// GetAt returns the refusal for k if present and not expired at now.
func (c *Negative) GetAt(k Key, now time.Time) (Refusal, bool) {
	nk := negativeKey(k)
	r, ok := c.lru.Get(nk)
	if ok && now.Unix() < int64(r.expires) {
		c.hits.Add(1)
		c.mu.RLock()
		reason := c.reasons[r.reason]
		c.mu.RUnlock()
		return Refusal{Reason: reason, Kind: r.kind}, true
	}
	if ok {
		c.lru.Remove(nk)
	}
	c.misses.Add(1)
	return Refusal{}, false
}

// PeekAt is GetAt without side effects (see Cache.Peek).
func (c *Negative) PeekAt(k Key, now time.Time) (Refusal, bool) {
	r, ok := c.lru.Peek(negativeKey(k))
	if !ok || now.Unix() >= int64(r.expires) {
		return Refusal{}, false
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return Refusal{Reason: c.reasons[r.reason], Kind: r.kind}, true
}

// AddAt stores r under k until expires (to the second), unless that is
// not after now.
func (c *Negative) AddAt(k Key, r Refusal, expires, now time.Time) {
	if !expires.After(now) || expires.Unix() > 1<<32-1 {
		return
	}
	i, ok := c.reasonIndex(r.Reason)
	if !ok {
		return
	}
	c.lru.Add(negativeKey(k), refusal{expires: uint32(expires.Unix()), reason: i, kind: r.Kind})
}

func (c *Negative) reasonIndex(reason string) (uint16, bool) {
	c.mu.RLock()
	i, ok := c.index[reason]
	c.mu.RUnlock()
	if ok {
		return i, true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if i, ok := c.index[reason]; ok {
		return i, true
	}
	if len(c.reasons) >= maxReasons {
		return 0, false
	}
	i = uint16(len(c.reasons))
	c.reasons = append(c.reasons, reason)
	c.index[reason] = i
	return i, true
}

// Purge drops everything.
func (c *Negative) Purge() { c.lru.Purge() }

// Resize changes the bound.
func (c *Negative) Resize(size int) { c.lru.Resize(size) }

// Stats returns the counters.
func (c *Negative) Stats() Stats {
	return Stats{Hits: c.hits.Load(), Misses: c.misses.Load(), Evictions: c.evictions.Load(), Size: c.lru.Len()}
}
