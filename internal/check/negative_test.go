package check

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/cache"
)

// TestInvalidTokenFloodKeepsGrants: an attacker sending many distinct
// invalid tokens fills only the refusals' own bound; every valid caller's
// grant stays cached and is answered without verification.
func TestInvalidTokenFloodKeepsGrants(t *testing.T) {
	f := newFixture(t, "cache: {max_entries: 100, negative_ttl: 5m}")
	counter := &countingVerifier{TokenVerifier: f.pl.Policy().verifier.jwt}
	f.pl.Policy().verifier.jwt = counter
	ctx := context.Background()
	check := func(tok string) Verdict {
		return f.pl.Check(ctx, agentReq(Headers{"authorization": "Bearer " + tok}))
	}
	var valid []string
	for i := range 50 {
		tok := f.hs(t, jwt.MapClaims{"sub": fmt.Sprint("user-", i)})
		if v := check(tok); v.Outcome != Allowed {
			t.Fatalf("valid token %d: %v %s", i, v.Outcome, v.Description)
		}
		valid = append(valid, tok)
	}
	// Ten times the whole cache's bound of distinct badly signed tokens.
	for i := range 1000 {
		bad := f.hs(t, jwt.MapClaims{"sub": fmt.Sprint("mallory-", i)})
		bad = bad[:len(bad)-4] + "AAAA"
		if v := check(bad); v.Outcome != InvalidToken {
			t.Fatalf("forged token %d: %v", i, v.Outcome)
		}
	}
	if got, want := f.pl.refusals.Stats().Size, refusalsSize(100); got != want {
		t.Errorf("refusals hold %d, want their bound %d", got, want)
	}
	before := counter.n.Load()
	for i, tok := range valid {
		if v := check(tok); v.Outcome != Allowed || !v.CacheHit {
			t.Fatalf("valid token %d after the flood: %v hit %v", i, v.Outcome, v.CacheHit)
		}
	}
	if n := counter.n.Load() - before; n != 0 {
		t.Fatalf("%d valid tokens were verified again: the flood evicted grants", n)
	}
	// A refusal that is still cached is answered from the cache, with its
	// reason.
	bad := f.hs(t, jwt.MapClaims{"sub": "eve"})
	bad = bad[:len(bad)-4] + "AAAA"
	first, second := check(bad), check(bad)
	if second.Outcome != InvalidToken || !second.CacheHit || second.Description != first.Description || first.Description == "" {
		t.Fatalf("cached refusal: %+v after %+v", second, first)
	}
}

// BenchmarkRefusalMemory reports the live heap per cached refusal
// (B/refusal): 100,000 distinct invalid tokens.
func BenchmarkRefusalMemory(b *testing.B) {
	const n = 100_000
	reason := "token signature is invalid"
	c, err := cache.NewNegative(n)
	if err != nil {
		b.Fatal(err)
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	now := time.Now()
	exp := now.Add(time.Minute)
	for i := range n {
		c.AddAt(cache.NewKey("route/0123456789abcdef", fmt.Sprint("bad-token-", i)), cache.Refusal{Reason: reason, Kind: uint8(InvalidToken)}, exp, now)
	}
	per := float64(int64(heap())-int64(before)) / n
	runtime.KeepAlive(c)
	k := cache.NewKey("route/0123456789abcdef", "bad-token-7")
	for b.Loop() {
		c.GetAt(k, now)
	}
	b.ReportMetric(per, "B/refusal")
}
