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

// localKey is a bucket's key: the limit's id, which comes from the
// configuration, and a fixed-size hash of the request's key. The request's
// key is never held: a tool name is whatever the caller sent, and a table
// of them would grow with every long name an attacker makes up.
type localKey struct {
	id  string
	sum [2]uint64
}

type bucket struct {
	tat int64
	// shared is the Redis key of the bucket's counter, named at the first
	// count that needed it.
	shared string
}

// local is the in-process limiter: GCRA buckets in bounded LRUs.
type local struct {
	seeds  [2]maphash.Seed
	shards [shards]struct {
		mu  sync.Mutex
		lru *simplelru.LRU[localKey, *bucket]
	}
}

func newLocal(maxKeys int) *local {
	l := &local{seeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}}
	per := max(maxKeys/shards, 1)
	for i := range l.shards {
		l.shards[i].lru, _ = simplelru.NewLRU[localKey, *bucket](per, nil) // size > 0: no error
	}
	return l
}

// key hashes a request's key with two independent seeds: 128 bits, so
// that two keys sharing a bucket is not a thing to plan for, and seeded
// per process, so that no caller can aim for it.
func (l *local) key(lim *Limit, key Key) localKey {
	return localKey{id: lim.ID, sum: [2]uint64{maphash.Comparable(l.seeds[0], key), maphash.Comparable(l.seeds[1], key)}}
}

// take decides one request at now (nanoseconds). With name, it also
// returns the bucket's Redis key, naming it on the bucket's first use.
func (l *local) take(lim *Limit, key Key, now int64, name func(*Limit, Key) string) (bool, int64, string) {
	k := l.key(lim, key)
	s := &l.shards[k.sum[0]%shards]
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.lru.Get(k)
	if !ok {
		dropRested(s.lru, now)
		b = &bucket{tat: now}
		s.lru.Add(k, b)
	}
	if name != nil && b.shared == "" {
		b.shared = name(lim, key)
	}
	next, allowed, retry := gcra(b.tat, now, lim.interval(), lim.burst())
	b.tat = next
	return allowed, retry, b.shared
}

// dropRested forgets least recently used buckets that are rested: a
// bucket whose theoretical arrival time has passed decides exactly as a
// new one, so forgetting it changes no decision, and the table holds
// only keys that are still being limited.
func dropRested(lru *simplelru.LRU[localKey, *bucket], now int64) {
	for range idleSweep {
		_, b, ok := lru.GetOldest()
		if !ok || b.tat > now {
			return
		}
		lru.RemoveOldest()
	}
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
