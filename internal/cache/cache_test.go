package cache

import (
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"
	"time"
)

type fakeClock struct{ t time.Time }

func (f *fakeClock) now() time.Time { return f.t }

func TestCache(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		run     func(c *Cache[string], clk *fakeClock)
		key     string
		want    string
		wantHit bool
	}{
		{
			name:    "hit before deadline",
			run:     func(c *Cache[string], clk *fakeClock) { c.Add(NewKey("a"), "A", start.Add(time.Minute)) },
			key:     "a",
			want:    "A",
			wantHit: true,
		},
		{
			name: "miss at deadline",
			run: func(c *Cache[string], clk *fakeClock) {
				c.Add(NewKey("a"), "A", start.Add(time.Minute))
				clk.t = start.Add(time.Minute)
			},
			key: "a",
		},
		{
			name: "already expired is not stored",
			run:  func(c *Cache[string], clk *fakeClock) { c.Add(NewKey("a"), "A", start) },
			key:  "a",
		},
		{
			// The caller's instant decides, not the cache's clock: the
			// pipeline reads the clock once per check.
			name: "AddAt at an earlier instant stores",
			run: func(c *Cache[string], clk *fakeClock) {
				c.AddAt(NewKey("a"), "A", start.Add(time.Minute), start.Add(-time.Second))
				clk.t = start.Add(time.Minute - time.Nanosecond)
			},
			key:     "a",
			want:    "A",
			wantHit: true,
		},
		{
			name: "AddAt refuses what is due at its instant",
			run: func(c *Cache[string], clk *fakeClock) {
				c.AddAt(NewKey("a"), "A", start.Add(time.Minute), start.Add(time.Minute))
			},
			key: "a",
		},
		{
			name: "removed",
			run: func(c *Cache[string], clk *fakeClock) {
				c.Add(NewKey("a"), "A", start.Add(time.Minute))
				c.Remove(NewKey("a"))
			},
			key: "a",
		},
		{
			name: "remove func",
			run: func(c *Cache[string], clk *fakeClock) {
				c.Add(NewKey("a"), "A", start.Add(time.Minute))
				c.Add(NewKey("b"), "B", start.Add(time.Minute))
				if n := c.RemoveFunc(func(v string) bool { return v == "A" }); n != 1 {
					panic(fmt.Sprint("removed ", n))
				}
			},
			key: "a",
		},
		{
			name: "other entries survive remove func",
			run: func(c *Cache[string], clk *fakeClock) {
				c.Add(NewKey("a"), "A", start.Add(time.Minute))
				c.Add(NewKey("b"), "B", start.Add(time.Minute))
				c.RemoveFunc(func(v string) bool { return v == "A" })
			},
			key:     "b",
			want:    "B",
			wantHit: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := &fakeClock{t: start}
			c, err := New[string](10, clk.now)
			if err != nil {
				t.Fatal(err)
			}
			tt.run(c, clk)
			got, ok := c.Get(NewKey(tt.key))
			if ok != tt.wantHit || got != tt.want {
				t.Fatalf("Get = %q, %v; want %q, %v", got, ok, tt.want, tt.wantHit)
			}
			// GetAt at the cache's own instant answers as Get; at the
			// deadline, whatever the cache's clock says, nothing is due.
			if got, ok := c.GetAt(NewKey(tt.key), clk.t); ok != tt.wantHit || got != tt.want {
				t.Fatalf("GetAt(now) = %q, %v; want %q, %v", got, ok, tt.want, tt.wantHit)
			}
			if _, ok := c.GetAt(NewKey(tt.key), start.Add(time.Minute)); ok {
				t.Fatal("GetAt at the deadline found the entry")
			}
			if _, ok := c.PeekAt(NewKey(tt.key), start.Add(time.Minute)); ok {
				t.Fatal("PeekAt at the deadline found the entry")
			}
		})
	}
}

func TestCacheEvictsAtBound(t *testing.T) {
	c, err := New[int](3, nil)
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Now().Add(time.Hour)
	for i := range 5 {
		c.Add(NewKey(fmt.Sprint(i)), i, exp)
	}
	if c.Len() != 3 {
		t.Fatalf("Len = %d, want 3", c.Len())
	}
	if _, ok := c.Get(NewKey("0")); ok {
		t.Fatal("oldest entry survived eviction")
	}
	if v, ok := c.Get(NewKey("4")); !ok || v != 4 {
		t.Fatal("newest entry missing")
	}
	s := c.Stats()
	if s.Evictions != 2 || s.Hits != 1 || s.Misses != 1 || s.Size != 3 {
		t.Fatalf("stats = %+v", s)
	}
}

// TestNewKeyFraming: a key is the SHA-256 of each part after its length
// (a uvarint), whatever the parts' size: below, at and beyond the largest
// buffer NewKey keeps, and a short key after long ones (a reused buffer's
// earlier bytes are not hashed).
func TestNewKeyFraming(t *testing.T) {
	tests := []struct {
		name   string
		parts  []string
		framed string
	}{
		{"short", []string{"r", "abc"}, "\x01r\x03abc"},
		{"a typical token", []string{"r", strings.Repeat("t", 700)}, "\x01r\xbc\x05" + strings.Repeat("t", 700)},
		{"longer than the first buffer", []string{"r", strings.Repeat("t", 4000)}, "\x01r\xa0\x1f" + strings.Repeat("t", 4000)},
		{"longer than any kept buffer", []string{"r", strings.Repeat("t", 20000)}, "\x01r\xa0\x9c\x01" + strings.Repeat("t", 20000)},
		{"short after long", []string{"r", "abc"}, "\x01r\x03abc"},
		{"no parts", nil, ""},
		{"empty parts", []string{"", ""}, "\x00\x00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, want := NewKey(tt.parts...), sha256.Sum256([]byte(tt.framed)); got != want {
				t.Fatalf("NewKey = %x, want %x", got, want)
			}
		})
	}
}

func BenchmarkNewKey(b *testing.B) {
	tok := strings.Repeat("x", 700)
	b.ReportAllocs()
	for b.Loop() {
		NewKey("route/0123456789abcdef", tok)
	}
}

func TestNewKeySeparatesParts(t *testing.T) {
	tests := []struct {
		name string
		a, b []string
	}{
		{name: "split moved between parts", a: []string{"ab", "c"}, b: []string{"a", "bc"}},
		{name: "empty last part", a: []string{"a", ""}, b: []string{"a"}},
		{name: "empty first part", a: []string{"", "a"}, b: []string{"a", ""}},
		{name: "route and token swapped", a: []string{"route", "token"}, b: []string{"token", "route"}},
		{name: "token ending in NUL", a: []string{"route", "tok\x00"}, b: []string{"route", "tok"}},
		{name: "token holding the route", a: []string{"route\x00tok"}, b: []string{"route", "tok\x00"}},
		// A part that holds NUL before another part: the verdict key is
		// (route, token, workload), and a NUL separator would make
		// ("tok\x00w1", "") the key of ("tok", "w1\x00").
		{name: "NUL moved across a later part", a: []string{"route", "tok\x00w1", ""}, b: []string{"route", "tok", "w1\x00"}},
		{name: "NUL inside a middle part", a: []string{"route", "a\x00b", "c"}, b: []string{"route", "a", "b\x00c"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if NewKey(tc.a...) == NewKey(tc.b...) {
				t.Fatalf("NewKey(%q) == NewKey(%q)", tc.a, tc.b)
			}
		})
	}
	if a, b := NewKey("a", "b"), NewKey("a", "b"); a != b {
		t.Fatal("key is not deterministic")
	}
}

func BenchmarkGetHit(b *testing.B) {
	c, _ := New[int](1000, nil)
	k := NewKey("token", "route")
	c.Add(k, 1, time.Now().Add(time.Hour))
	b.ReportAllocs()
	for b.Loop() {
		c.Get(k)
	}
}

func ExampleCache() {
	c, _ := New[string](100, nil)
	k := NewKey("route-a", "<token digest input>")
	c.Add(k, "alice", time.Now().Add(time.Minute))
	v, ok := c.Get(k)
	fmt.Println(v, ok)
	// Output: alice true
}
