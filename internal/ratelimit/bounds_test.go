package ratelimit

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/extauthz/extauthz/internal/testing/redistest"
)

// TestLiveCountsKept: a caller flooding the local counts with made-up keys
// never gets a limited key's count forgotten: a subject's tools beyond
// MaxTools share one count, and a table full of keys still being limited
// refuses a new key instead of pushing one out.
func TestLiveCountsKept(t *testing.T) {
	ctx := context.Background()
	tool := Limit{ID: "r/limits[0]", Kind: KindSubjectTool, Requests: 1, Per: time.Hour}
	root := Limit{ID: "r/limits[1]", Kind: KindRoot, Requests: 1, Per: time.Hour}
	mallory := func(tool string) Key { return Key{Value: "iss|mallory", Qualifier: tool} }
	// 8 buckets a shard, 4 tools a subject apart: one subject's buckets
	// live in one shard.
	opts := func(c *clock) Options { return Options{Clock: c.Now, MaxKeys: 8 * shards, MaxTools: 4} }
	tests := []struct {
		name string
		run  func(t *testing.T, c *clock, l *Limiter)
	}{
		{"made-up tools do not free the limited tool's count", func(t *testing.T, c *clock, l *Limiter) {
			l.Allow(ctx, &tool, mallory("deploy"))
			for i := range 1000 {
				l.Allow(ctx, &tool, mallory(fmt.Sprint("junk-", i)))
				c.Add(time.Second)
			}
			if d := l.Allow(ctx, &tool, mallory("deploy")); d.Allowed {
				t.Error("deploy allowed twice within the hour after 1,000 made-up tools")
			}
			if n := l.Keys(); n > 5 {
				t.Errorf("%d buckets held for one subject, want at most MaxTools + 1 = 5", n)
			}
		}},
		{"tools beyond MaxTools share one count", func(t *testing.T, c *clock, l *Limiter) {
			for i := range 4 {
				if !l.Allow(ctx, &tool, mallory(fmt.Sprint("t", i))).Allowed {
					t.Fatalf("tool t%d, the subject's %d of 4 counted apart, denied", i, i+1)
				}
			}
			if !l.Allow(ctx, &tool, mallory("t4")).Allowed {
				t.Fatal("the first tool beyond MaxTools denied: the catch-all had a request left")
			}
			if d := l.Allow(ctx, &tool, mallory("t5")); d.Allowed || d.Full {
				t.Errorf("the second tool beyond MaxTools: %+v, want limited by the catch-all's count", d)
			}
		}},
		{"another subject's tools are counted apart", func(t *testing.T, c *clock, l *Limiter) {
			for i := range 100 {
				l.Allow(ctx, &tool, mallory(fmt.Sprint("junk-", i)))
			}
			if !l.Allow(ctx, &tool, Key{Value: "iss|alice", Qualifier: "deploy"}).Allowed {
				t.Error("alice's first deploy denied after mallory's flood")
			}
		}},
		{"a tool counted apart again starts from the catch-all's count", func(t *testing.T, c *clock, l *Limiter) {
			for i := range 4 {
				l.Allow(ctx, &tool, mallory(fmt.Sprint("junk-", i)))
			}
			c.Add(30 * time.Minute)
			if !l.Allow(ctx, &tool, mallory("deploy")).Allowed { // in the catch-all
				t.Fatal("deploy, first in the catch-all, denied")
			}
			c.Add(31 * time.Minute) // the junk tools rest, and go as deploy comes; the catch-all does not
			if d := l.Allow(ctx, &tool, mallory("deploy")); d.Allowed {
				t.Error("deploy allowed twice within the hour, moving out of the catch-all")
			}
		}},
		{"a table full of live counts refuses a new key", func(t *testing.T, c *clock, l *Limiter) {
			refused := 0
			var retry time.Duration
			for i := range 1000 {
				d := l.Allow(ctx, &root, Key{Value: fmt.Sprint("root-", i)})
				if d.Full {
					refused++
					retry = d.RetryAfter
					if d.Allowed {
						t.Fatal("a refused key was allowed")
					}
				}
				c.Add(time.Millisecond)
			}
			if refused == 0 {
				t.Fatal("1,000 keys fit in a table of 128")
			}
			if retry <= 0 || retry > time.Hour {
				t.Errorf("a full table's refusal says retry in %v, want within the hour", retry)
			}
			held := 0
			for i := range 1000 {
				d := l.Allow(ctx, &root, Key{Value: fmt.Sprint("root-", i)})
				if d.Allowed {
					t.Fatalf("root-%d allowed twice within the hour", i)
				}
				if !d.Full {
					held++
				}
			}
			if held > 8*shards {
				t.Errorf("%d keys counted, want at most the table's 128", held)
			}
		}},
		{"rested counts make room", func(t *testing.T, c *clock, l *Limiter) {
			for i := range 1000 {
				l.Allow(ctx, &root, Key{Value: fmt.Sprint("old-", i)})
			}
			c.Add(time.Hour)
			short := Limit{ID: "r/limits[2]", Kind: KindRoot, Requests: 1, Per: time.Second}
			for i := range 1000 {
				if d := l.Allow(ctx, &short, Key{Value: fmt.Sprint("new-", i)}); !d.Allowed {
					t.Fatalf("new-%d refused (%+v) with every held count rested", i, d)
				}
				c.Add(time.Second)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newClock()
			tc.run(t, c, New(opts(c)))
		})
	}
}

// TestSharedToolsBounded: with Redis, a subject's tools beyond MaxTools
// share one shared counter too, so one caller's made-up tool names do not
// grow Redis by a counter each, and the limited tool keeps its count.
func TestSharedToolsBounded(t *testing.T) {
	srv := redistest.Start(t)
	rc := redisClient(t, srv.Addr)
	ctx := context.Background()
	l := New(Options{Redis: rc, Timeout: time.Second, MaxKeys: 8 * shards, MaxTools: 4})
	lim := Limit{ID: "r/limits[0]", Kind: KindSubjectTool, Requests: 1, Per: time.Hour}
	if _, shared := allow(ctx, l, &lim, Key{Value: "iss|mallory", Qualifier: "deploy"}); !shared {
		t.Fatal("decided locally")
	}
	for i := range 200 {
		allow(ctx, l, &lim, Key{Value: "iss|mallory", Qualifier: fmt.Sprint("junk-", i)})
	}
	if d, shared := allow(ctx, l, &lim, Key{Value: "iss|mallory", Qualifier: "deploy"}); d.Allowed || !shared {
		t.Errorf("deploy again: %+v (shared %v), want limited by Redis", d, shared)
	}
	keys, err := rc.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) > 5 {
		t.Errorf("%d shared counters for one subject, want at most MaxTools + 1 = 5", len(keys))
	}
}

// TestSubjectsSpreadOverShards: the buckets of a subject_tool limit use
// every shard, so that the table holds as many subjects as it has room
// for.
func TestSubjectsSpreadOverShards(t *testing.T) {
	l := New(Options{})
	lim := Limit{ID: "r/limits[0]", Kind: KindSubjectTool, Requests: 1, Per: time.Hour}
	for i := range 1000 {
		l.Allow(context.Background(), &lim, Key{Value: fmt.Sprint("iss|user-", i), Qualifier: "deploy"})
	}
	for i := range l.local.shards {
		if n := l.local.shards[i].lru.Len(); n == 0 {
			t.Errorf("shard %d holds no bucket of 1,000 subjects", i)
		}
	}
}
