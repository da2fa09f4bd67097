package exchange

import (
	"slices"
	"sync"

	"github.com/extauthz/extauthz/internal/cache"
)

// DefaultCachePerSubject bounds one user's cached exchanges (at most a
// quarter of the cache, see perSubjectBound).
const DefaultCachePerSubject = 100

// perSubjectBound is the bound of one user's entries in a cache of size:
// n when positive, else DefaultCachePerSubject, never more than a quarter
// of the cache, so that no one user's entries can fill it.
func perSubjectBound(n, size int) int {
	if n <= 0 {
		n = DefaultCachePerSubject
	}
	return max(1, min(n, size/4))
}

// owners bounds the entries one user holds in the cache, as package elicit
// bounds a user's pending elicitations: a user's new entry beyond the bound
// replaces that user's own oldest, never anybody else's. The key includes
// the client-chosen MCP session, so without it one user making up session
// ids would push every other user's exchanged tokens out of the LRU.
//
// The cache drops entries (LRU, expiry) without telling the index, so a
// user's keys are checked against the cache (live) when the user adds one,
// and every user's when the index holds twice as many keys as the cache
// can: the index never holds more than that.
type owners struct {
	max, size int
	live      func(cache.Key) bool

	mu    sync.Mutex
	users map[string][]cache.Key // oldest first
	n     int                    // keys held, over all users
}

func newOwners(perSubject, size int, live func(cache.Key) bool) *owners {
	return &owners{max: perSubjectBound(perSubject, size), size: size, live: live, users: make(map[string][]cache.Key)}
}

// add records k as subject's newest entry and returns the keys of the
// user's own to drop from the cache to stay within the bound.
func (o *owners) add(subject string, k cache.Key) (drop []cache.Key) {
	o.mu.Lock()
	defer o.mu.Unlock()
	keys := o.users[subject]
	n := len(keys)
	keys = slices.DeleteFunc(keys, func(x cache.Key) bool { return x == k || !o.live(x) })
	if over := len(keys) + 1 - o.max; over > 0 {
		drop = slices.Clone(keys[:over])
		keys = slices.Delete(keys, 0, over)
	}
	o.users[subject] = append(keys, k)
	o.n += len(keys) + 1 - n
	if o.n > 2*o.size {
		o.sweep()
	}
	return drop
}

// sweep forgets the keys that left the cache. o.mu is held.
func (o *owners) sweep() {
	o.n = 0
	for s, keys := range o.users {
		keys = slices.DeleteFunc(keys, func(x cache.Key) bool { return !o.live(x) })
		if len(keys) == 0 {
			delete(o.users, s)
			continue
		}
		o.users[s] = keys
		o.n += len(keys)
	}
}
