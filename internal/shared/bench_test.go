package shared

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// roundTrips counts what a client sends to Redis: each command or pipeline
// is one round trip.
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.n.Add(1)
		return next(ctx, cmd)
	}
}

func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r.n.Add(1)
		return next(ctx, cmds)
	}
}

// localBindings stands in for the caller's in-process tier (internal/session
// in the service): a map behind a mutex.
type localBindings struct {
	mu sync.Mutex
	m  map[string]string
}

func newLocalBindings() *localBindings { return &localBindings{m: make(map[string]string)} }

func (l *localBindings) lookup(key string) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	owner, ok := l.m[key]
	return owner, ok
}

func (l *localBindings) bind(key, subject string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.m[key] = subject
}

// tieredBind is how a caller layers the tiers: the local store first, this
// package only on a local miss.
func tieredBind(ctx context.Context, local *localBindings, s *Store, key, subject string) (bool, error) {
	if owner, ok := local.lookup(key); ok {
		return owner == subject, nil
	}
	_, owned, err := s.Bind(ctx, key, subject, time.Minute, 0)
	if err != nil {
		return false, err
	}
	if owned {
		local.bind(key, subject)
	}
	return owned, nil
}

// BenchmarkTieredBind shows what the Redis tier adds to a session binding
// check: nothing on a local hit (0 round trips), one round trip on a local
// miss. roundtrips/op is counted, not estimated.
func BenchmarkTieredBind(b *testing.B) {
	r := sharedRedis(b)
	s := newStore(b, r.Addr, func(c *Config, _ *Options) { c.OpTimeout = time.Second })
	var rt roundTrips
	s.rdb.AddHook(&rt)
	ctx := context.Background()

	b.Run("local-hit", func(b *testing.B) {
		local := newLocalBindings()
		key := "files\x00hit"
		if ok, err := tieredBind(ctx, local, s, key, "alice"); !ok || err != nil {
			b.Fatal(ok, err)
		}
		rt.n.Store(0)
		b.ReportAllocs()
		for b.Loop() {
			if ok, err := tieredBind(ctx, local, s, key, "alice"); !ok || err != nil {
				b.Fatal(ok, err)
			}
		}
		b.ReportMetric(float64(rt.n.Load())/float64(b.N), "roundtrips/op")
	})
	b.Run("local-miss", func(b *testing.B) {
		// Each iteration a new session, as on the first call of a session
		// or on a replica that has not seen it: the local tier misses.
		local := newLocalBindings()
		run := strconv.FormatInt(time.Now().UnixNano(), 36)
		if _, err := tieredBind(ctx, local, s, "warm-up"+run, "alice"); err != nil {
			b.Fatal(err) // loads the script, so EVALSHA finds it below
		}
		keys := make([]string, 0, 1<<16)
		for i := range cap(keys) {
			keys = append(keys, fmt.Sprint("files\x00", run, "-", i))
		}
		rt.n.Store(0)
		i := 0
		b.ReportAllocs()
		for b.Loop() {
			if ok, err := tieredBind(ctx, local, s, keys[i%len(keys)], "alice"); err != nil {
				b.Fatal(ok, err)
			}
			i++
		}
		b.ReportMetric(float64(rt.n.Load())/float64(b.N), "roundtrips/op")
	})
}

// BenchmarkBind is one shared binding check: the round trip a local miss
// costs (an owner extending an existing binding, the common case).
func BenchmarkBind(b *testing.B) {
	r := sharedRedis(b)
	s := newStore(b, r.Addr, func(c *Config, _ *Options) { c.OpTimeout = time.Second })
	ctx := context.Background()
	key := "files\x00bench"
	if _, _, err := s.Bind(ctx, key, "alice", time.Minute, 0); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, ok, err := s.Bind(ctx, key, "alice", time.Minute, 0); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}

// BenchmarkGetToken is a shared exchanged-token hit: one GET and opening
// the sealed value.
func BenchmarkGetToken(b *testing.B) {
	r := sharedRedis(b)
	s := newStore(b, r.Addr, func(c *Config, _ *Options) { c.OpTimeout = time.Second })
	ctx := context.Background()
	token := make([]byte, 900) // a typical JWT
	if err := s.PutToken(ctx, "bench", Owner{Subject: "alice", Session: "s"}, token, time.Minute); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, ok, err := s.GetToken(ctx, "bench"); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}

// BenchmarkSeal and BenchmarkOpen are the encryption's share of PutToken
// and GetToken.
func BenchmarkSeal(b *testing.B) {
	s, err := newSealer(testKey, nil)
	if err != nil {
		b.Fatal(err)
	}
	token := make([]byte, 900)
	b.ReportAllocs()
	for b.Loop() {
		s.seal(token, "extauthz:token:0123456789abcdef")
	}
}

func BenchmarkOpen(b *testing.B) {
	s, err := newSealer(testKey, nil)
	if err != nil {
		b.Fatal(err)
	}
	sealed := s.seal(make([]byte, 900), "extauthz:token:0123456789abcdef")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.open(sealed, "extauthz:token:0123456789abcdef"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBindBounded is a bounded binding the subject wins (two round
// trips: the binding, then the subject's index) and reports what a binding
// costs in Redis memory (redis-bytes/binding: its key and its index entry,
// from INFO memory around 10,000 new bindings of 1,000 users).
func BenchmarkBindBounded(b *testing.B) {
	r := sharedRedis(b)
	s := newStore(b, r.Addr, func(c *Config, _ *Options) { c.OpTimeout = time.Second })
	raw := rawClient(b, r.Addr)
	ctx := context.Background()
	used := func() float64 {
		info, err := raw.Info(ctx, "memory").Result()
		if err != nil {
			b.Fatal(err)
		}
		for _, line := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
				n, _ := strconv.ParseFloat(v, 64)
				return n
			}
		}
		b.Fatal("no used_memory in INFO")
		return 0
	}
	const n = 10_000
	before := used()
	for i := range n {
		if _, ok, err := s.Bind(ctx, fmt.Sprintf("mcp\x00%032x", i), fmt.Sprintf("hs:user-%04d", i%1000), time.Hour, 16); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
	perBinding := (used() - before) / n
	b.ReportAllocs()
	for b.Loop() {
		if _, ok, err := s.Bind(ctx, "mcp\x00bench", "hs:alice", time.Minute, 16); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
	b.ReportMetric(perBinding, "redis-bytes/binding")
}
