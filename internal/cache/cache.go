// Package cache is the bounded, expiring in-process cache behind every
// expensive answer the service gives: verified identities, negative verdicts
// and, later, exchanged tokens.
//
// Cache is an LRU with a per-entry deadline, so an entry never outlives what
// it caches (a token's exp), and counters for hits, misses and evictions.
// Keys are fixed-size digests: the cache never holds a raw token.
//
// A replica may hold a million entries, so an entry costs as little as it
// can: entries live in slabs (arrays of a thousand), each holding its key,
// value, deadline and list links inline, found through an open-addressing
// table of slab indexes and hashes. An entry of a pointer value costs 56
// bytes plus 11 to 22 of table (a position is 8 bytes, the table between
// three eighths and three quarters full), against about 170 for a list
// element and a map slot; and the collector scans one pointer per entry in
// a few large arrays instead of following three small objects.
package cache

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
)

// Key is a SHA-256 digest. Callers hash the token together with everything
// the cached answer depends on (route, audience, ...), see NewKey.
type Key = [sha256.Size]byte

// NewKey hashes parts in order, each preceded by its length (a uvarint),
// so that no two different lists of parts make the same key, whatever
// bytes they hold: a part an attacker chooses (a token, a claim) may sit
// anywhere in the list. The parts are framed in a pooled buffer, cleared
// after use since it held a token: this runs on every check, and a buffer
// on the stack would be zeroed whole each time (2 KiB, some 150 ns, more
// than a third of hashing a typical token).
func NewKey(parts ...string) Key {
	bp := keyBuffers.Get().(*[]byte)
	b := (*bp)[:0]
	for _, p := range parts {
		b = AppendPart(b, p)
	}
	k := sha256.Sum256(b)
	clear(b)
	if cap(b) <= maxKeyBuffer {
		*bp = b[:0]
		keyBuffers.Put(bp)
	}
	return k
}

// keyBuffers hold NewKey's buffers, grown to what the parts need up to
// maxKeyBuffer (a route and a large token); a larger one is not kept.
var keyBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

const maxKeyBuffer = 16 << 10

// AppendPart appends s to b as NewKey frames a part, after its length: for
// a key hashed from a buffer of the caller's own.
func AppendPart(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// Stats is a snapshot of a cache's counters.
type Stats struct {
	Hits, Misses, Evictions uint64
	Size                    int
}

// MaxSize is the largest bound a cache accepts: entries are named by
// 32-bit indexes.
const MaxSize = 1 << 30

// slabSize is the number of entries allocated at once.
const slabSize = 1024

// Cache is an LRU of at most size entries, each valid until its own deadline.
// It is safe for concurrent use.
type Cache[V any] struct {
	now       func() time.Time
	seed      maphash.Seed
	hits      atomic.Uint64
	misses    atomic.Uint64
	evictions atomic.Uint64

	mu   sync.Mutex
	size int // the bound
	n    int // entries held
	// slabs hold the entries; an entry is named by ref, its index plus
	// one (0 is none). used is how many have ever been handed out.
	slabs [][]slot[V]
	used  int
	free  ref // entries given back, linked through next
	// head is the most recently used entry, tail the least; the list is
	// linked through prev (towards head) and next (towards tail).
	head, tail ref
	// table is an open-addressing hash table (linear probing) of
	// positions, its length a power of two at most three quarters full.
	table []position
}

type ref = uint32

// position is a table position's content: the entry's ref in the low 32
// bits (0: empty) and its key's hash in the high 32. With the hash beside
// the ref, a probe past another key's entry, a deletion's shifts and a
// rehash read the table alone: in a table of a million entries each entry
// read is a miss of the processor's caches.
type position uint64

func (p position) ref() ref     { return ref(p) }
func (p position) hash() uint32 { return uint32(p >> 32) }

type slot[V any] struct {
	key        Key
	value      V
	expires    int64 // unix nanoseconds
	prev, next ref
}

// New returns a cache holding at most size entries. now is the clock used for
// deadlines (time.Now when nil).
func New[V any](size int, now func() time.Time) (*Cache[V], error) {
	if size <= 0 || size > MaxSize {
		return nil, errors.New("cache: size must be between 1 and 2^30")
	}
	if now == nil {
		now = time.Now
	}
	return &Cache[V]{now: now, size: size, seed: maphash.MakeSeed()}, nil
}

func (c *Cache[V]) at(r ref) *slot[V] {
	i := int(r - 1)
	return &c.slabs[i/slabSize][i%slabSize]
}

// hash is k's hash, whose low bits are its first position in the table
// (home). Keys are digests, but of what callers present (an unknown API
// key is cached too): with positions taken from the key's own bits,
// somebody grinding inputs could make thousands of keys start at one
// position and every lookup walk them. A seed of this cache's own, unknown
// outside it, rules that out.
func (c *Cache[V]) hash(k *Key) uint32 { return uint32(maphash.Bytes(c.seed, k[:])) & hashBits }

// hashBits are the bits of a hash kept: all of them, but for the test
// that makes keys collide.
var hashBits = ^uint32(0)

// home is the first position of a key of hash h in a table of mask+1
// positions (at most 2^31: MaxSize entries).
func home(h uint32, mask uint64) uint64 { return uint64(h) & mask }

// find returns k's entry and its table position, 0 when absent.
func (c *Cache[V]) find(k *Key) (ref, uint64) {
	if len(c.table) == 0 {
		return 0, 0
	}
	h := c.hash(k)
	mask := uint64(len(c.table) - 1)
	for i := home(h, mask); ; i = (i + 1) & mask {
		p := c.table[i]
		if p == 0 {
			return 0, 0
		}
		if p.hash() == h && c.at(p.ref()).key == *k {
			return p.ref(), i
		}
	}
}

// Get returns the value for k if present and not expired.
func (c *Cache[V]) Get(k Key) (V, bool) { return c.GetAt(k, c.now()) }

// GetAt is Get at the instant now, for a caller that has read the clock
// already: the verdict pipeline reads it once per check, and a clock read
// costs as much as a fifth of a cache hit on some virtual machines.
func (c *Cache[V]) GetAt(k Key, now time.Time) (V, bool) {
	ns := now.UnixNano()
	c.mu.Lock()
	r, pos := c.find(&k)
	if r != 0 {
		s := c.at(r)
		if ns < s.expires {
			v := s.value
			c.toFront(r, s)
			c.mu.Unlock()
			c.hits.Add(1)
			return v, true
		}
		// Expired: drop it now so it stops taking a slot.
		c.remove(r, pos)
	}
	c.mu.Unlock()
	c.misses.Add(1)
	var zero V
	return zero, false
}

// Peek is Get without side effects: no counter moves, the entry's recency
// stays, an expired entry stays until a Get drops it (Explain reads with it).
func (c *Cache[V]) Peek(k Key) (V, bool) { return c.PeekAt(k, c.now()) }

// PeekAt is Peek at the instant now (see GetAt).
func (c *Cache[V]) PeekAt(k Key, now time.Time) (V, bool) {
	ns := now.UnixNano()
	c.mu.Lock()
	defer c.mu.Unlock()
	if r, _ := c.find(&k); r != 0 {
		if s := c.at(r); ns < s.expires {
			return s.value, true
		}
	}
	var zero V
	return zero, false
}

// Add stores v under k until expires. An entry whose deadline already passed
// is not stored.
func (c *Cache[V]) Add(k Key, v V, expires time.Time) { c.AddAt(k, v, expires, c.now()) }

// AddAt is Add at the instant now (see GetAt).
func (c *Cache[V]) AddAt(k Key, v V, expires, now time.Time) {
	if !expires.After(now) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if r, _ := c.find(&k); r != 0 {
		s := c.at(r)
		s.value, s.expires = v, expires.UnixNano()
		c.toFront(r, s)
		return
	}
	if c.n >= c.size {
		c.evictOldest()
	}
	r := c.alloc()
	s := c.at(r)
	s.key, s.value, s.expires = k, v, expires.UnixNano()
	c.insert(r, &k) // before r is on the list a rehash walks
	c.pushFront(r, s)
	c.n++
}

// alloc takes a free entry, or a new one.
func (c *Cache[V]) alloc() ref {
	if r := c.free; r != 0 {
		c.free = c.at(r).next
		return r
	}
	if last := len(c.slabs) - 1; last < 0 || c.used == last*slabSize+len(c.slabs[last]) {
		switch {
		case last >= 0 && len(c.slabs[last]) < slabSize:
			// A cache first bounded below a slab got a larger bound.
			grown := make([]slot[V], slabSize)
			copy(grown, c.slabs[last])
			c.slabs[last] = grown
		default:
			c.slabs = append(c.slabs, make([]slot[V], min(slabSize, c.size)))
		}
	}
	c.used++
	return ref(c.used)
}

// insert puts r, not yet on the list, in the table, growing the table
// first when it would be more than three quarters full.
func (c *Cache[V]) insert(r ref, k *Key) {
	if (c.n+1)*4 > len(c.table)*3 {
		c.rehash(max(16, len(c.table)*2))
	}
	place(c.table, position(c.hash(k))<<32|position(r))
}

// place puts p at the first free position from its home.
func place(table []position, p position) {
	mask := uint64(len(table) - 1)
	i := home(p.hash(), mask)
	for table[i] != 0 {
		i = (i + 1) & mask
	}
	table[i] = p
}

// rehash rebuilds the table with n positions.
func (c *Cache[V]) rehash(n int) {
	old := c.table
	c.table = make([]position, n)
	for _, p := range old {
		if p != 0 {
			place(c.table, p)
		}
	}
}

// remove drops entry r found at table position pos.
func (c *Cache[V]) remove(r ref, pos uint64) {
	s := c.at(r)
	c.unlink(s)
	var zero slot[V]
	*s = zero // let the value go
	s.next = c.free
	c.free = r
	c.n--
	c.evictions.Add(1)
	// Backward-shift deletion: move later entries of the same probe run
	// into the hole so that every entry stays reachable from its home.
	mask := uint64(len(c.table) - 1)
	hole := pos
	c.table[hole] = 0
	for j := (hole + 1) & mask; c.table[j] != 0; j = (j + 1) & mask {
		h := home(c.table[j].hash(), mask)
		// The entry at j may move to the hole unless its home lies
		// cyclically in (hole, j].
		if (j > hole && (h <= hole || h > j)) || (j < hole && h <= hole && h > j) {
			c.table[hole] = c.table[j]
			c.table[j] = 0
			hole = j
		}
	}
}

func (c *Cache[V]) evictOldest() {
	if c.tail == 0 {
		return
	}
	s := c.at(c.tail)
	r, pos := c.find(&s.key)
	c.remove(r, pos)
}

func (c *Cache[V]) unlink(s *slot[V]) {
	if s.prev != 0 {
		c.at(s.prev).next = s.next
	} else {
		c.head = s.next
	}
	if s.next != 0 {
		c.at(s.next).prev = s.prev
	} else {
		c.tail = s.prev
	}
	s.prev, s.next = 0, 0
}

func (c *Cache[V]) pushFront(r ref, s *slot[V]) {
	s.prev, s.next = 0, c.head
	if c.head != 0 {
		c.at(c.head).prev = r
	} else {
		c.tail = r
	}
	c.head = r
}

func (c *Cache[V]) toFront(r ref, s *slot[V]) {
	if c.head == r {
		return
	}
	c.unlink(s)
	c.pushFront(r, s)
}

// Remove drops k.
func (c *Cache[V]) Remove(k Key) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r, pos := c.find(&k); r != 0 {
		c.remove(r, pos)
	}
}

// RemoveFunc drops every entry whose value matches; it walks the whole cache
// under its lock and is meant for administrative invalidation, not the hot
// path. match must not call the cache.
func (c *Cache[V]) RemoveFunc(match func(V) bool) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for r := c.head; r != 0; {
		s := c.at(r)
		next := s.next
		if match(s.value) {
			_, pos := c.find(&s.key)
			c.remove(r, pos)
			n++
		}
		r = next
	}
	return n
}

// Purge drops everything.
func (c *Cache[V]) Purge() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.evictions.Add(uint64(c.n))
	c.slabs, c.table = nil, nil
	c.n, c.used, c.free, c.head, c.tail = 0, 0, 0, 0, 0
}

// Len is the number of entries, expired ones included until touched.
func (c *Cache[V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// Stats returns the counters. Evictions count entries pushed out by the size
// bound and entries removed explicitly or on expiry.
func (c *Cache[V]) Stats() Stats {
	return Stats{Hits: c.hits.Load(), Misses: c.misses.Load(), Evictions: c.evictions.Load(), Size: c.Len()}
}

// Resize changes the bound, evicting the oldest entries if it shrinks. A
// size out of range (see New) is ignored.
func (c *Cache[V]) Resize(size int) {
	if size <= 0 || size > MaxSize {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.size = size
	for c.n > size {
		c.evictOldest()
	}
}
