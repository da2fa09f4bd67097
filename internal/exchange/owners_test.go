package exchange

import (
	"fmt"
	"testing"

	"github.com/extauthz/extauthz/internal/cache"
)

func TestPerSubjectBound(t *testing.T) {
	cases := []struct {
		name            string
		configured, got int
		size            int
	}{
		{"default", 0, DefaultCachePerSubject, 10_000},
		{"configured", 10, 10, 10_000},
		{"at most a quarter of the cache", 50, 25, 100},
		{"default in a small cache", 0, 4, 16},
		{"at least one", 0, 1, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := perSubjectBound(c.configured, c.size); got != c.got {
				t.Fatalf("perSubjectBound(%d, %d) = %d, want %d", c.configured, c.size, got, c.got)
			}
		})
	}
}

// TestOwnersReplaceOwnOldest: a user beyond the bound is told to drop the
// user's own oldest live keys; keys gone from the cache neither count nor
// are returned, and the index forgets them rather than grow.
func TestOwnersReplaceOwnOldest(t *testing.T) {
	key := func(s string) cache.Key { return cache.NewKey(s) }
	cases := []struct {
		name  string
		dead  []string // keys that left the cache before the last add
		adds  []string // "user/key", in order
		drops []string // what the last add drops
	}{
		{"within the bound", nil, []string{"a/1", "a/2", "a/3"}, nil},
		{"own oldest goes", nil, []string{"a/1", "a/2", "a/3", "a/4"}, []string{"a/1"}},
		{"another user's never", nil, []string{"b/1", "a/1", "a/2", "a/3", "b/2"}, nil},
		{"the same key twice counts once", nil, []string{"a/1", "a/2", "a/3", "a/3"}, nil},
		{"a key the cache dropped does not count", []string{"a/1"}, []string{"a/1", "a/2", "a/3", "a/4"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			live := map[cache.Key]bool{}
			o := newOwners(3, 100, func(k cache.Key) bool { return live[k] })
			var drops []cache.Key
			for i, a := range c.adds {
				if i == len(c.adds)-1 {
					for _, d := range c.dead {
						delete(live, key(d))
					}
				}
				user := a[:1]
				drops = o.add(user, key(a))
				live[key(a)] = true
				for _, d := range drops {
					delete(live, d)
				}
			}
			if len(drops) != len(c.drops) {
				t.Fatalf("dropped %d keys, want %v", len(drops), c.drops)
			}
			for i, d := range c.drops {
				if drops[i] != key(d) {
					t.Fatalf("dropped key %d is not %s", i, d)
				}
			}
		})
	}
}

// TestOwnersIndexBounded: users whose keys left the cache and who add no
// more are forgotten: the index holds at most twice the cache's size.
func TestOwnersIndexBounded(t *testing.T) {
	const size = 16
	live := map[cache.Key]bool{}
	o := newOwners(2, size, func(k cache.Key) bool { return live[k] })
	for i := range 10 * size {
		k := cache.NewKey(fmt.Sprint(i))
		o.add(fmt.Sprint("user-", i), k)
		live[k] = true
		delete(live, cache.NewKey(fmt.Sprint(i-size))) // the cache's LRU
		if o.n > 2*size || len(o.users) > 2*size {
			t.Fatalf("after %d users: the index holds %d keys of %d users, the cache %d", i+1, o.n, len(o.users), size)
		}
	}
}
