// Package cache is the bounded, expiring in-process cache behind every
// expensive answer the service gives: verified identities, negative verdicts
// and, later, exchanged tokens.
//
// It wraps hashicorp/golang-lru/v2 (a mutex-guarded LRU) and adds a per-entry
// deadline, so an entry never outlives what it caches (a token's exp), and
// counters for hits, misses and evictions. Keys are fixed-size digests: the
// cache never holds a raw token.
package cache

import (
	"crypto/sha256"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

// Key is a SHA-256 digest. Callers hash the token together with everything
// the cached answer depends on (route, audience, ...), see NewKey.
type Key = [sha256.Size]byte

// NewKey hashes parts in order, each followed by a separator byte so that
// ("ab","c") and ("a","bc") differ. Parts up to a couple of kilobytes in
// all (a route and a typical token) are hashed from a stack buffer without
// allocating: this runs on every check.
func NewKey(parts ...string) Key {
	var buf [2048]byte
	n := 0
	for _, p := range parts {
		n += len(p) + 1
	}
	if n <= len(buf) {
		b := buf[:0]
		for _, p := range parts {
			b = append(b, p...)
			b = append(b, 0)
		}
		return sha256.Sum256(b)
	}
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	var k Key
	h.Sum(k[:0])
	return k
}

// Stats is a snapshot of a cache's counters.
type Stats struct {
	Hits, Misses, Evictions uint64
	Size                    int
}

// Cache is an LRU of at most size entries, each valid until its own deadline.
// It is safe for concurrent use.
type Cache[V any] struct {
	lru       *lru.Cache[Key, entry[V]]
	now       func() time.Time
	hits      atomic.Uint64
	misses    atomic.Uint64
	evictions atomic.Uint64
}

type entry[V any] struct {
	value   V
	expires int64 // unix nanoseconds
}

// New returns a cache holding at most size entries. now is the clock used for
// deadlines (time.Now when nil).
func New[V any](size int, now func() time.Time) (*Cache[V], error) {
	if now == nil {
		now = time.Now
	}
	c := &Cache[V]{now: now}
	l, err := lru.NewWithEvict(size, func(Key, entry[V]) { c.evictions.Add(1) })
	if err != nil {
		return nil, err
	}
	c.lru = l
	return c, nil
}

// Get returns the value for k if present and not expired.
func (c *Cache[V]) Get(k Key) (V, bool) {
	e, ok := c.lru.Get(k)
	if ok && c.now().UnixNano() < e.expires {
		c.hits.Add(1)
		return e.value, true
	}
	if ok {
		// Expired: drop it now so it stops taking a slot.
		c.lru.Remove(k)
	}
	c.misses.Add(1)
	var zero V
	return zero, false
}

// Peek is Get without side effects: no counter moves, the entry's recency
// stays, an expired entry stays until a Get drops it (Explain reads with it).
func (c *Cache[V]) Peek(k Key) (V, bool) {
	if e, ok := c.lru.Peek(k); ok && c.now().UnixNano() < e.expires {
		return e.value, true
	}
	var zero V
	return zero, false
}

// Add stores v under k until expires. An entry whose deadline already passed
// is not stored.
func (c *Cache[V]) Add(k Key, v V, expires time.Time) {
	if !expires.After(c.now()) {
		return
	}
	c.lru.Add(k, entry[V]{value: v, expires: expires.UnixNano()})
}

// Remove drops k.
func (c *Cache[V]) Remove(k Key) { c.lru.Remove(k) }

// RemoveFunc drops every entry whose value matches; it walks the whole cache
// and is meant for administrative invalidation, not the hot path.
func (c *Cache[V]) RemoveFunc(match func(V) bool) int {
	n := 0
	for _, k := range c.lru.Keys() {
		if e, ok := c.lru.Peek(k); ok && match(e.value) {
			if c.lru.Remove(k) {
				n++
			}
		}
	}
	return n
}

// Purge drops everything.
func (c *Cache[V]) Purge() { c.lru.Purge() }

// Len is the number of entries, expired ones included until touched.
func (c *Cache[V]) Len() int { return c.lru.Len() }

// Stats returns the counters. Evictions count entries pushed out by the size
// bound and entries removed explicitly or on expiry.
func (c *Cache[V]) Stats() Stats {
	return Stats{Hits: c.hits.Load(), Misses: c.misses.Load(), Evictions: c.evictions.Load(), Size: c.lru.Len()}
}

// Resize changes the bound, evicting the oldest entries if it shrinks.
func (c *Cache[V]) Resize(size int) { c.lru.Resize(size) }
