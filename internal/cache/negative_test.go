package cache

import (
	"fmt"
	"testing"
	"time"
)

func TestNegative(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	c, err := NewNegative(2, clock)
	if err != nil {
		t.Fatal(err)
	}
	a, b, d := NewKey("r", "a"), NewKey("r", "b"), NewKey("r", "d")
	c.Add(a, Refusal{Reason: "bad signature", Kind: 3}, now.Add(5*time.Second))
	if r, ok := c.Get(a); !ok || r.Reason != "bad signature" || r.Kind != 3 {
		t.Fatalf("get: %+v %v", r, ok)
	}
	c.Add(b, Refusal{Reason: "expired", Kind: 3}, now.Add(time.Minute))
	c.Add(d, Refusal{Reason: "expired", Kind: 3}, now.Add(time.Minute))
	if _, ok := c.Get(a); ok {
		t.Fatal("the oldest refusal survived past the bound")
	}
	if s := c.Stats(); s.Size != 2 || s.Evictions != 1 {
		t.Fatalf("stats %+v", s)
	}
	now = now.Add(time.Minute)
	if _, ok := c.Get(b); ok {
		t.Fatal("an expired refusal was returned")
	}
	c.Add(a, Refusal{Reason: "x"}, now) // already due: not stored
	if _, ok := c.Get(a); ok {
		t.Fatal("a refusal due now was stored")
	}
	// The caller's instant decides, not the cache's clock.
	c.AddAt(a, Refusal{Reason: "x"}, now.Add(time.Second), now.Add(time.Second))
	if _, ok := c.Get(a); ok {
		t.Fatal("AddAt stored a refusal due at its instant")
	}
	c.AddAt(a, Refusal{Reason: "x"}, now.Add(2*time.Second), now.Add(-time.Minute))
	if _, ok := c.PeekAt(a, now.Add(2*time.Second)); ok {
		t.Fatal("PeekAt at the deadline found the refusal")
	}
	if _, ok := c.GetAt(a, now.Add(time.Second)); !ok {
		t.Fatal("GetAt before the deadline missed")
	}
	if _, ok := c.GetAt(a, now.Add(2*time.Second)); ok {
		t.Fatal("GetAt at the deadline found the refusal")
	}
}

// TestNegativeReasonsBounded: distinct reasons past the table's bound are
// not cached rather than grow the table.
func TestNegativeReasonsBounded(t *testing.T) {
	c, err := NewNegative(10*maxReasons, nil)
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Now().Add(time.Minute)
	for i := range maxReasons + 10 {
		c.Add(NewKey(fmt.Sprint(i)), Refusal{Reason: fmt.Sprint("reason ", i)}, exp)
	}
	if got := c.Stats().Size; got != maxReasons {
		t.Fatalf("cached %d refusals, want %d", got, maxReasons)
	}
	if len(c.reasons) != maxReasons {
		t.Fatalf("reasons table holds %d", len(c.reasons))
	}
	c.Add(NewKey("old reason"), Refusal{Reason: "reason 1"}, exp)
	if r, ok := c.Get(NewKey("old reason")); !ok || r.Reason != "reason 1" {
		t.Fatalf("a known reason is still cached: %+v %v", r, ok)
	}
}
