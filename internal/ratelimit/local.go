package ratelimit

import (
	"hash/maphash"
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// shards splits the local buckets so that concurrent checks rarely wait
// on one another's lock.
const shards = 16

// idleSweep is how many of a shard's least recently used buckets one new
// key looks at for being rested.
const idleSweep = 2

// fullSweep is how many of a full shard's least recently used buckets a
// new key looks at, for one that is rested, before it is refused: the
// live ones it passes are moved to the front, so that the next new key
// looks at others.
const fullSweep = 16

// localKey is a bucket's key: the limit's id, which comes from the
// configuration, and a fixed-size hash of the request's key. The request's
// key is never held: a tool name is whatever the caller sent, and a table
// of them would grow with every long name an attacker makes up.
type localKey struct {
	id  string
	sum [2]uint64
}

// ownerKey is the subject of a subject_tool limit, whose buckets of
// distinct tools are counted: the limit's id and a hash of the subject.
type ownerKey struct {
	id  string
	sum uint64
}

type bucket struct {
	tat int64
	// shared is the Redis key of the bucket's counter, named at the first
	// count that needed it.
	shared string
	// owner is the hash of the subject (ownerKey.sum) of a subject_tool
	// limit's bucket, 0 for other limits' buckets; with its lowest bit
	// clear, the bucket is the subject's catch-all, which the subject's
	// tool count does not include (see ownerSum).
	owner uint64
}

// isRest reports whether b is a subject's catch-all.
func (b *bucket) isRest() bool { return b.owner&1 == 0 }

// owned is what a shard holds of one subject under a subject_tool limit:
// how many of its tools have a bucket of their own, and whether its
// catch-all bucket exists.
type owned struct {
	tools int
	rest  bool
}

// shard is one lock's part of the local buckets. A subject_tool limit's
// buckets of one subject all live in one shard (chosen by the subject),
// so that their count is kept under the same lock.
type shard struct {
	mu     sync.Mutex
	size   int
	lru    *simplelru.LRU[localKey, *bucket]
	owners map[ownerKey]owned
}

// local is the in-process limiter: GCRA buckets in bounded LRUs that never
// forget a live bucket (one whose next request would not get a full
// burst) to make room; a new key finding its shard full of live buckets is
// refused.
type local struct {
	seeds    [3]maphash.Seed
	maxTools int
	shards   [shards]shard
}

func newLocal(maxKeys, maxTools int) *local {
	l := &local{seeds: [3]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed(), maphash.MakeSeed()}, maxTools: maxTools}
	per := max(maxKeys/shards, 1)
	for i := range l.shards {
		s := &l.shards[i]
		// The LRU is one larger than the shard holds: take refuses a new key
		// at size, so the LRU itself never evicts.
		s.size = per
		s.lru, _ = simplelru.NewLRU[localKey, *bucket](per+1, nil) // size > 0: no error
		s.owners = make(map[ownerKey]owned)
	}
	return l
}

// key hashes a request's key with two independent seeds: 128 bits, so
// that two keys sharing a bucket is not a thing to plan for, and seeded
// per process, so that no caller can aim for it.
func (l *local) key(lim *Limit, key Key) localKey {
	return localKey{id: lim.ID, sum: [2]uint64{maphash.Comparable(l.seeds[0], key), maphash.Comparable(l.seeds[1], key)}}
}

// ownerSum is the hash of a subject_tool key's subject, with its two
// lowest bits set: it is never 0 (a bucket of another limit), and neither
// is the catch-all's mark, the sum with its lowest bit cleared.
func (l *local) ownerSum(key Key) uint64 {
	return maphash.String(l.seeds[2], key.Value) | 3
}

// taken is one local decision.
type taken struct {
	allowed bool
	retry   int64
	// shared is the bucket's Redis key: the catch-all's for a tool counted
	// there; named anew (not remembered) when full.
	shared string
	// full: the key has no bucket and its shard is full of live ones, so
	// it was refused without being counted.
	full bool
}

// take decides one request at now (nanoseconds). With name, it also
// returns the bucket's Redis key, naming it on the bucket's first use.
//
// A subject_tool limit gives each subject at most maxTools tools with
// buckets of their own at a time; the subject's further tools share its
// catch-all bucket (the key without a tool) until some of the first rest,
// so that one caller naming tools cannot fill the table.
func (l *local) take(lim *Limit, key Key, now int64, name func(*Limit, Key) string) taken {
	k := l.key(lim, key)
	var own uint64
	var s *shard
	if lim.Kind == KindSubjectTool {
		own = l.ownerSum(key)
		s = &l.shards[(own>>2)%shards] // above the two bits ownerSum sets
	} else {
		s = &l.shards[k.sum[0]%shards]
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.lru.Get(k)
	if !ok {
		var retry int64
		if b, key, retry = l.add(s, lim, key, k, own, now); b == nil {
			t := taken{retry: retry, full: true}
			if name != nil {
				t.shared = name(lim, key)
			}
			return t
		}
	}
	if name != nil && b.shared == "" {
		b.shared = name(lim, key)
	}
	next, allowed, retry := gcra(b.tat, now, lim.interval(), lim.burst())
	b.tat = next
	return taken{allowed: allowed, retry: retry, shared: b.shared}
}

// add makes the bucket of a key that has none, and returns it with the key
// it counts under (the subject's catch-all for a tool beyond maxTools).
// With its shard full of live buckets it returns nil and how long until
// the soonest of those it looked at rests.
func (l *local) add(s *shard, lim *Limit, key Key, k localKey, own uint64, now int64) (*bucket, Key, int64) {
	s.dropRested(now, idleSweep)
	var o ownerKey
	var ow owned
	tool := own != 0 && key.Qualifier != ""
	if own != 0 {
		o = ownerKey{id: lim.ID, sum: own}
		ow = s.owners[o]
	}
	b := &bucket{tat: now}
	switch {
	case tool && ow.tools >= l.maxTools:
		key.Qualifier = ""
		k = l.key(lim, key)
		if r, ok := s.lru.Get(k); ok {
			return r, key, 0
		}
	case tool && ow.rest:
		// A tool counted on its own again starts where the catch-all it
		// was counted in stands: forgetting what it spent there must not
		// give it a fresh burst.
		if r, ok := s.lru.Peek(l.key(lim, Key{Value: key.Value})); ok {
			b.tat = max(b.tat, r.tat)
		}
	}
	if s.lru.Len() >= s.size {
		if retry, ok := s.makeRoom(now); !ok {
			return nil, key, retry
		}
		if own != 0 {
			ow = s.owners[o] // making room may have dropped one of the subject's
		}
	}
	s.lru.Add(k, b)
	if own != 0 {
		b.owner = own
		if key.Qualifier == "" {
			b.owner, ow.rest = own&^1, true
		} else {
			ow.tools++
		}
		s.owners[o] = ow
	}
	return b, key, 0
}

// makeRoom drops a rested bucket among the fullSweep least recently used,
// moving the live ones it passes to the front. It reports false when all
// were live, with how long until the soonest of them rests.
func (s *shard) makeRoom(now int64) (int64, bool) {
	soonest := int64(-1)
	for range fullSweep {
		k, b, ok := s.lru.GetOldest()
		if !ok {
			return 0, true
		}
		if b.tat <= now {
			s.remove(k, b)
			return 0, true
		}
		if wait := b.tat - now; soonest < 0 || wait < soonest {
			soonest = wait
		}
		s.lru.Get(k)
	}
	return soonest, false
}

// dropRested forgets up to n least recently used buckets that are rested:
// a bucket whose theoretical arrival time has passed decides exactly as a
// new one, so forgetting it changes no decision, and the table holds
// only keys that are still being limited.
func (s *shard) dropRested(now int64, n int) {
	for range n {
		k, b, ok := s.lru.GetOldest()
		if !ok || b.tat > now {
			return
		}
		s.remove(k, b)
	}
}

// remove forgets a bucket and its place in its subject's count.
func (s *shard) remove(k localKey, b *bucket) {
	s.lru.Remove(k)
	if b.owner == 0 {
		return
	}
	o := ownerKey{id: k.id, sum: b.owner | 1}
	ow := s.owners[o]
	if b.isRest() {
		ow.rest = false
	} else {
		ow.tools--
	}
	if ow.tools <= 0 && !ow.rest {
		delete(s.owners, o)
		return
	}
	s.owners[o] = ow
}

// len is the number of keys held.
func (l *local) len() int {
	n := 0
	for i := range l.shards {
		l.shards[i].mu.Lock()
		n += l.shards[i].lru.Len()
		l.shards[i].mu.Unlock()
	}
	return n
}
