package cache

import (
	"fmt"
	"testing"
	"time"
)

func TestNegative(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	c, err := NewNegative(2)
	if err != nil {
		t.Fatal(err)
	}
	a, b, d := NewKey("r", "a"), NewKey("r", "b"), NewKey("r", "d")
	c.AddAt(a, Refusal{Reason: "bad signature", Kind: 3}, now.Add(5*time.Second), now)
	if r, ok := c.GetAt(a, now); !ok || r.Reason != "bad signature" || r.Kind != 3 {
		t.Fatalf("get: %+v %v", r, ok)
	}
	c.AddAt(b, Refusal{Reason: "expired", Kind: 3}, now.Add(time.Minute), now)
	c.AddAt(d, Refusal{Reason: "expired", Kind: 3}, now.Add(time.Minute), now)
	if _, ok := c.GetAt(a, now); ok {
		t.Fatal("the oldest refusal survived past the bound")
	}
	if s := c.Stats(); s.Size != 2 || s.Evictions != 1 {
		t.Fatalf("stats %+v", s)
	}
	now = now.Add(time.Minute)
	if _, ok := c.GetAt(b, now); ok {
		t.Fatal("an expired refusal was returned")
	}
	c.AddAt(a, Refusal{Reason: "x"}, now, now) // already due: not stored
	if _, ok := c.GetAt(a, now); ok {
		t.Fatal("a refusal due now was stored")
	}
	// The caller's instant decides.
	c.AddAt(a, Refusal{Reason: "x"}, now.Add(time.Second), now.Add(time.Second))
	if _, ok := c.GetAt(a, now); ok {
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
	c, err := NewNegative(10 * maxReasons)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	exp := now.Add(time.Minute)
	for i := range maxReasons + 10 {
		c.AddAt(NewKey(fmt.Sprint(i)), Refusal{Reason: fmt.Sprint("reason ", i)}, exp, now)
	}
	if got := c.Stats().Size; got != maxReasons {
		t.Fatalf("cached %d refusals, want %d", got, maxReasons)
	}
	if len(c.reasons) != maxReasons {
		t.Fatalf("reasons table holds %d", len(c.reasons))
	}
	c.AddAt(NewKey("old reason"), Refusal{Reason: "reason 1"}, exp, now)
	if r, ok := c.GetAt(NewKey("old reason"), now); !ok || r.Reason != "reason 1" {
		t.Fatalf("a known reason is still cached: %+v %v", r, ok)
	}
}
