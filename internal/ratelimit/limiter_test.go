package ratelimit

import (
	"context"
	"fmt"
	"math"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/extauthz/extauthz/internal/testing/redistest"
)

// clock is a settable clock for the tests.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestRates: a steady stream of requests faster than the limit gets the
// burst and then the configured rate, within 5%, over a bounded run on
// an injected clock.
func TestRates(t *testing.T) {
	tests := []struct {
		name     string
		lim      Limit
		step     time.Duration // between two requests
		duration time.Duration
	}{
		{"100/s burst 10, offered 1000/s", Limit{Requests: 100, Per: time.Second, Burst: 10}, time.Millisecond, 10 * time.Second},
		{"5/min burst 1, offered 1/s", Limit{Requests: 5, Per: time.Minute, Burst: 1}, time.Second, time.Hour},
		{"3/s default burst, offered 10/s", Limit{Requests: 3, Per: time.Second}, 100 * time.Millisecond, time.Minute},
		{"1000/h burst 50, offered 1/s", Limit{Requests: 1000, Per: time.Hour, Burst: 50}, time.Second, 2 * time.Hour},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newClock()
			l := New(Options{Clock: c.Now})
			tc.lim.ID, tc.lim.Kind = "r/limits[0]", KindSubject
			n := int(tc.duration / tc.step)
			allowed := 0
			for range n {
				if l.Allow(context.Background(), &tc.lim, Key{Value: "iss|alice"}).Allowed {
					allowed++
				}
				c.Add(tc.step)
			}
			want := float64(tc.lim.burst()) + float64(tc.lim.Requests)*tc.duration.Seconds()/tc.lim.Per.Seconds()
			if math.Abs(float64(allowed)-want) > 0.05*want {
				t.Errorf("allowed %d of %d, want %.0f ±5%%", allowed, n, want)
			}
		})
	}
}

// TestBurst: a rested key gets exactly its burst at once, then waits the
// interval one request costs, and a denial says how long.
func TestBurst(t *testing.T) {
	c := newClock()
	l := New(Options{Clock: c.Now})
	lim := Limit{ID: "r/0", Kind: KindSubjectTool, Requests: 10, Per: time.Second, Burst: 5}
	got := 0
	for range 50 {
		if l.Allow(context.Background(), &lim, Key{Value: "alice", Qualifier: "search"}).Allowed {
			got++
		}
	}
	if got != 5 {
		t.Errorf("burst allowed %d, want 5", got)
	}
	d := l.Allow(context.Background(), &lim, Key{Value: "alice", Qualifier: "search"})
	if d.Allowed || d.RetryAfter != 100*time.Millisecond {
		t.Errorf("denial %+v, want retry after 100ms", d)
	}
	c.Add(100 * time.Millisecond)
	if !l.Allow(context.Background(), &lim, Key{Value: "alice", Qualifier: "search"}).Allowed {
		t.Error("no request allowed one interval later")
	}
	if !l.Allow(context.Background(), &lim, Key{Value: "bob", Qualifier: "search"}).Allowed {
		t.Error("another key shares alice's bucket")
	}
	other := lim
	other.ID = "r/1"
	if !l.Allow(context.Background(), &other, Key{Value: "alice", Qualifier: "search"}).Allowed {
		t.Error("another limit shares the bucket")
	}
}

// TestReloadKeepsCounts: a limit rebuilt with the same id (a config
// reload) keeps its buckets.
func TestReloadKeepsCounts(t *testing.T) {
	c := newClock()
	l := New(Options{Clock: c.Now})
	a := &Limit{ID: "r/0", Kind: KindClient, Requests: 1, Per: time.Minute}
	l.Allow(context.Background(), a, Key{Value: "app"})
	b := &Limit{ID: "r/0", Kind: KindClient, Requests: 1, Per: time.Minute}
	if l.Allow(context.Background(), b, Key{Value: "app"}).Allowed {
		t.Error("a reloaded limit forgot its count")
	}
}

// TestKeysBounded: an attacker minting fresh conversation roots grows the
// local state only to MaxKeys.
func TestKeysBounded(t *testing.T) {
	l := New(Options{MaxKeys: 160})
	lim := Limit{ID: "r/0", Kind: KindRoot, Requests: 1, Per: time.Hour}
	for i := range 5000 {
		l.Allow(context.Background(), &lim, Key{Value: fmt.Sprint("root-", i)})
	}
	if n := l.Keys(); n > 160 {
		t.Errorf("%d keys held, want at most 160", n)
	}
}

// TestLongToolNamesHoldNoMemory: a caller sending a new 10 KB tool name
// on every call grows the local state by a fixed size per key, not by
// the names it made up.
func TestLongToolNamesHoldNoMemory(t *testing.T) {
	const keys, nameLen = 1000, 10_000
	l := New(Options{MaxKeys: keys})
	lim := Limit{ID: "r/0", Kind: KindSubjectTool, Requests: 1, Per: time.Hour}
	before := heapInUse()
	for i := range 2 * keys {
		tool := fmt.Sprintf("%d-%s", i, strings.Repeat("x", nameLen))
		l.Allow(context.Background(), &lim, Key{Value: "iss|mallory", Qualifier: tool})
	}
	grown := int64(heapInUse()) - int64(before)
	// Holding the names would take keys×nameLen = 10 MB; a bucket is
	// well under 200 bytes.
	if limit := int64(keys * 1000); grown > limit {
		t.Errorf("the heap grew by %d bytes for %d keys, want at most %d", grown, l.Keys(), limit)
	}
	runtime.KeepAlive(l)
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestRestedKeysForgotten: keys that are rested are dropped when new ones
// come, long before the table is full, and forgetting them changes no
// decision.
func TestRestedKeysForgotten(t *testing.T) {
	c := newClock()
	l := New(Options{Clock: c.Now})
	lim := Limit{ID: "r/0", Kind: KindRoot, Requests: 1, Per: time.Second}
	for i := range 1000 {
		l.Allow(context.Background(), &lim, Key{Value: fmt.Sprint("old-", i)})
	}
	c.Add(2 * time.Second)
	for i := range 1000 {
		l.Allow(context.Background(), &lim, Key{Value: fmt.Sprint("new-", i)})
	}
	// Keeping every key would hold 2000.
	if n := l.Keys(); n >= 1500 {
		t.Errorf("%d keys held after the first 1000 rested, want the rested ones dropped", n)
	}
	for i := range 1000 {
		if !l.Allow(context.Background(), &lim, Key{Value: fmt.Sprint("old-", i)}).Allowed {
			t.Fatalf("rested key old-%d denied", i)
		}
		if l.Allow(context.Background(), &lim, Key{Value: fmt.Sprint("new-", i)}).Allowed {
			t.Fatalf("key new-%d allowed twice in its second", i)
		}
	}
}

// TestKeyPartsApart: the value and the tool are counted as a pair, not as
// their concatenation.
func TestKeyPartsApart(t *testing.T) {
	l := New(Options{})
	lim := Limit{ID: "r/0", Kind: KindSubjectTool, Requests: 1, Per: time.Hour}
	if !l.Allow(context.Background(), &lim, Key{Value: "iss|a", Qualifier: "bc"}).Allowed {
		t.Fatal("first call denied")
	}
	if !l.Allow(context.Background(), &lim, Key{Value: "iss|ab", Qualifier: "c"}).Allowed {
		t.Error("another subject's call shared the first one's bucket")
	}
}

// TestRedisKeyStable: the shared counter's name is the one every release
// has used, so that replicas of two releases share their counts.
func TestRedisKeyStable(t *testing.T) {
	l := New(Options{})
	lim := Limit{ID: "tools/limits[0]", Kind: KindSubjectTool}
	got := l.redisKey(&lim, Key{Value: "iss|alice", Qualifier: "search"})
	// sha256("iss|alice\x00search"), its first 16 bytes in hex.
	if want := "extauthz:ratelimit:tools/limits[0]:5313f33687809cff6f02f95ea0ddf16c"; got != want {
		t.Errorf("redisKey = %q, want %q", got, want)
	}
}

// TestParseKind: every kind reads back from its name; no other name is
// a kind.
func TestParseKind(t *testing.T) {
	for _, k := range []Kind{KindSubject, KindSubjectTool, KindClient, KindRoot, KindPrincipal} {
		if got, ok := ParseKind(k.String()); !ok || got != k {
			t.Errorf("ParseKind(%q) = %v, %v", k, got, ok)
		}
	}
	if _, ok := ParseKind("unknown"); ok {
		t.Error(`ParseKind("unknown") succeeded`)
	}
}

// allow is l.Allow, also saying whether the shared counter decided: with
// Redis configured, every decision made on the replica's own buckets is
// counted as a fallback.
func allow(ctx context.Context, l *Limiter, lim *Limit, key Key) (Decision, bool) {
	before := l.Fallbacks()
	d := l.Allow(ctx, lim, key)
	return d, l.shared != nil && l.Fallbacks() == before
}

func redisClient(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestSharedBudget: two replicas sharing one redis-server enforce one
// budget between them: a rested key gets the burst once, not per replica.
func TestSharedBudget(t *testing.T) {
	srv := redistest.Start(t)
	a := New(Options{Redis: redisClient(t, srv.Addr), Timeout: time.Second})
	b := New(Options{Redis: redisClient(t, srv.Addr), Timeout: time.Second})
	lim := Limit{ID: "r/0", Kind: KindSubject, Requests: 10, Per: time.Hour, Burst: 10}
	allowed := 0
	for i := range 40 {
		l := a
		if i%2 == 1 {
			l = b
		}
		d, shared := allow(context.Background(), l, &lim, Key{Value: "iss|alice"})
		if !shared {
			t.Fatalf("request %d decided locally", i)
		}
		if d.Allowed {
			allowed++
		} else if d.RetryAfter <= 0 {
			t.Errorf("request %d denied without a retry time", i)
		}
	}
	if allowed != 10 {
		t.Errorf("two replicas allowed %d, want the one budget of 10", allowed)
	}
	if a.RedisErrors()+b.RedisErrors() != 0 {
		t.Error("redis errors counted")
	}
}

// TestCancelledCallerKeepsSharedCounts: a caller that already hung up
// is still counted in Redis, and does not make the replica fall back to
// its local counts for everybody else.
func TestCancelledCallerKeepsSharedCounts(t *testing.T) {
	srv := redistest.Start(t)
	l := New(Options{Redis: redisClient(t, srv.Addr), Timeout: time.Second})
	lim := Limit{ID: "r/0", Kind: KindSubject, Requests: 10, Per: time.Hour, Burst: 10}
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if _, shared := allow(gone, l, &lim, Key{Value: "iss|mallory"}); !shared {
		t.Fatal("a cancelled caller was decided locally")
	}
	if _, shared := allow(context.Background(), l, &lim, Key{Value: "iss|alice"}); !shared {
		t.Fatal("after a cancelled caller, the next is decided locally")
	}
	if l.RedisErrors() != 0 || l.Fallbacks() != 0 {
		t.Errorf("redis errors %d, fallbacks %d: a hang-up is not a Redis failure", l.RedisErrors(), l.Fallbacks())
	}
}

// TestRedisKilled: redis-server dies mid-run. Every call still answers;
// decisions move to the local buckets, which still limit (never
// unlimited), and the failure is counted.
func TestRedisKilled(t *testing.T) {
	srv := redistest.Start(t)
	c := newClock()
	l := New(Options{Clock: c.Now, Redis: redisClient(t, srv.Addr), Timeout: time.Second, Backoff: time.Minute})
	lim := Limit{ID: "r/0", Kind: KindSubject, Requests: 10, Per: time.Hour, Burst: 10}
	for range 4 {
		if d, shared := allow(context.Background(), l, &lim, Key{Value: "iss|alice"}); !shared || !d.Allowed {
			t.Fatalf("before the kill: %+v, shared %v", d, shared)
		}
	}
	srv.Kill()
	allowed := 0
	for i := range 40 {
		d, shared := allow(context.Background(), l, &lim, Key{Value: "iss|alice"})
		if shared {
			t.Fatalf("request %d after the kill decided by redis", i)
		}
		if d.Allowed {
			allowed++
		}
	}
	// The local bucket counted the 4 requests made while Redis decided.
	if allowed != 6 {
		t.Errorf("after the kill %d allowed, want the local bucket's remaining 6", allowed)
	}
	if l.RedisErrors() != 1 || l.Fallbacks() != 40 {
		t.Errorf("redis errors %d, fallbacks %d; want 1 and 40 (skipped during the backoff)", l.RedisErrors(), l.Fallbacks())
	}
	// After the backoff, Redis is tried again and, restarted, decides.
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	c.Add(time.Minute)
	if d, shared := allow(context.Background(), l, &lim, Key{Value: "iss|bob"}); !shared || !d.Allowed {
		t.Errorf("after the restart and the backoff: %+v, shared %v", d, shared)
	}
}

// TestRedisSlow: a Redis that accepts connections and never answers costs
// each call at most the timeout, then the local bucket decides.
func TestRedisSlow(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never answered
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	}()
	c := newClock()
	l := New(Options{Clock: c.Now, Redis: redisClient(t, ln.Addr().String()), Timeout: 50 * time.Millisecond})
	lim := Limit{ID: "r/0", Kind: KindPrincipal, Requests: 1, Per: time.Hour, Burst: 2}
	var got []bool
	for range 5 {
		d, shared := allow(context.Background(), l, &lim, Key{Value: "spiffe://corp/agent"})
		if shared {
			t.Fatal("a silent redis decided")
		}
		got = append(got, d.Allowed)
	}
	if fmt.Sprint(got) != "[true true false false false]" {
		t.Errorf("local decisions %v, want the burst of 2 then denials", got)
	}
	if l.RedisErrors() != 1 {
		t.Errorf("%d redis errors, want 1 (then skipped for the backoff)", l.RedisErrors())
	}
}

// TestConcurrent exercises the shards under -race.
func TestConcurrent(t *testing.T) {
	l := New(Options{})
	lim := Limit{ID: "r/0", Kind: KindSubject, Requests: 1000, Per: time.Hour, Burst: 1000}
	var wg sync.WaitGroup
	var mu sync.Mutex
	allowed := 0
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				if l.Allow(context.Background(), &lim, Key{Value: fmt.Sprint("user-", i%3)}).Allowed {
					mu.Lock()
					allowed++
					mu.Unlock()
				}
			}
			_ = g
		})
	}
	wg.Wait()
	if allowed != 3000 {
		t.Errorf("allowed %d, want 3 keys × 1000", allowed)
	}
}

func BenchmarkAllowLocal(b *testing.B) {
	l := New(Options{})
	lim := Limit{ID: "tools/limits[0]", Kind: KindSubject, Requests: 1 << 30, Per: time.Second}
	b.ReportAllocs()
	for b.Loop() {
		l.Allow(context.Background(), &lim, Key{Value: "issuer|alice"})
	}
}

// BenchmarkAllowLocalTool: a subject_tool limit, as a tools/call counts
// it, with a tool name of ordinary length.
func BenchmarkAllowLocalTool(b *testing.B) {
	l := New(Options{})
	lim := Limit{ID: "tools/limits[0]", Kind: KindSubjectTool, Requests: 1 << 30, Per: time.Second}
	b.ReportAllocs()
	for b.Loop() {
		l.Allow(context.Background(), &lim, Key{Value: "issuer|alice", Qualifier: "search_documents"})
	}
}

// BenchmarkAllowLocalFreshTools: every call names a new tool, as a
// caller flooding the table would.
func BenchmarkAllowLocalFreshTools(b *testing.B) {
	l := New(Options{MaxKeys: 1000})
	lim := Limit{ID: "tools/limits[0]", Kind: KindSubjectTool, Requests: 1 << 30, Per: time.Second}
	names := make([]string, 4096)
	for i := range names {
		names[i] = fmt.Sprintf("tool-%d-%0200d", i, i)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		l.Allow(context.Background(), &lim, Key{Value: "issuer|alice", Qualifier: names[i%len(names)]})
		i++
	}
}

// BenchmarkRedisKey: naming the shared counter, once per limit per check.
func BenchmarkRedisKey(b *testing.B) {
	l := New(Options{})
	lim := Limit{ID: "tools/limits[0]", Kind: KindSubjectTool, Requests: 1, Per: time.Second}
	b.ReportAllocs()
	for b.Loop() {
		_ = l.redisKey(&lim, Key{Value: "https://issuer.example|alice", Qualifier: "search_documents"})
	}
}

// BenchmarkCountNamed: what a check with Redis costs this replica before
// the Redis call: the local count and the shared counter's name.
func BenchmarkCountNamed(b *testing.B) {
	l := New(Options{})
	lim := Limit{ID: "tools/limits[0]", Kind: KindSubjectTool, Requests: 1 << 30, Per: time.Second}
	key := Key{Value: "https://issuer.example|alice", Qualifier: "search_documents"}
	b.ReportAllocs()
	for b.Loop() {
		l.local.take(&lim, key, 1, l.name)
	}
}
