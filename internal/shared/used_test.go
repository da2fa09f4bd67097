package shared

import (
	"crypto/sha256"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestFirstUseAcrossStores: a one-time value given to two replicas at once
// is accepted by exactly one of them, is remembered for its ttl and no
// longer, and is stored under its digest alone.
func TestFirstUseAcrossStores(t *testing.T) {
	r := sharedRedis(t)
	patient := func(c *Config, _ *Options) { c.OpTimeout = 5 * time.Second }
	stores := []*Store{newStore(t, r.Addr, patient), newStore(t, r.Addr, patient)}
	key := sha256.Sum256([]byte("proof key and jti"))
	var (
		wg    sync.WaitGroup
		first atomic.Int32
	)
	for i := range 40 {
		wg.Go(func() {
			ok, err := stores[i%2].FirstUse(t.Context(), key, time.Minute)
			if err != nil {
				t.Errorf("FirstUse: %v", err)
			}
			if ok {
				first.Add(1)
			}
		})
	}
	wg.Wait()
	if n := first.Load(); n != 1 {
		t.Fatalf("%d replicas took the value as unused, want exactly 1", n)
	}
	raw := rawClient(t, r.Addr)
	keys, err := raw.Keys(t.Context(), stores[0].pUsed+"*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("keys %v, %v; want one", keys, err)
	}
	if ttl := raw.PTTL(t.Context(), keys[0]).Val(); ttl <= 0 || ttl > time.Minute {
		t.Fatalf("PTTL %v, want the ttl asked for", ttl)
	}

	short := sha256.Sum256([]byte("short-lived"))
	if ok, err := stores[0].FirstUse(t.Context(), short, 150*time.Millisecond); !ok || err != nil {
		t.Fatalf("first use = %v, %v", ok, err)
	}
	if !eventually(300, func() bool { ok, err := stores[1].FirstUse(t.Context(), short, time.Minute); return ok && err == nil }) {
		t.Fatal("a value was remembered past its ttl")
	}
}

// TestFirstUseRedisDown: an unreachable Redis is an error, never a first
// use.
func TestFirstUseRedisDown(t *testing.T) {
	s := newStore(t, "127.0.0.1:1", nil)
	ok, err := s.FirstUse(t.Context(), sha256.Sum256([]byte("x")), time.Minute)
	if ok || err == nil {
		t.Fatalf("FirstUse = %v, %v; want an error", ok, err)
	}
}
