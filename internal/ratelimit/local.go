package ratelimit

import (
	"hash/maphash"
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// shards splits the local buckets so that concurrent checks rarely wait
// on one another's lock.
const shards = 16

// localKey is a bucket's key: comparable without building a string, so a
// known key costs no allocation.
type localKey struct {
	id  string
	key Key
}

type bucket struct{ tat int64 }

// local is the in-process limiter: GCRA buckets in bounded LRUs.
type local struct {
	seed   maphash.Seed
	shards [shards]struct {
		mu  sync.Mutex
		lru *simplelru.LRU[localKey, *bucket]
	}
}

func newLocal(maxKeys int) *local {
	l := &local{seed: maphash.MakeSeed()}
	per := max(maxKeys/shards, 1)
	for i := range l.shards {
		l.shards[i].lru, _ = simplelru.NewLRU[localKey, *bucket](per, nil) // size > 0: no error
	}
	return l
}

// take decides one request at now (nanoseconds).
func (l *local) take(lim *Limit, key Key, now int64) (bool, int64) {
	k := localKey{lim.ID, key}
	s := &l.shards[maphash.Comparable(l.seed, k)%shards]
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.lru.Get(k)
	if !ok {
		b = &bucket{tat: now}
		s.lru.Add(k, b)
	}
	next, allowed, retry := gcra(b.tat, now, lim.interval(), lim.burst())
	b.tat = next
	return allowed, retry
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
