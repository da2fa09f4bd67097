package check

import (
	"context"
	"fmt"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

// TestMemosBounded: only the last grants to get memos, as many as the ring
// has slots, keep them; an older grant loses them and gets new ones (and a
// slot) on its next use.
func TestMemosBounded(t *testing.T) {
	const memoSlots = 64
	ring := newMemoRing(memoSlots)
	grants := make([]*Grant, memoSlots+10)
	for i := range grants {
		grants[i] = NewGrant(Identity{Subject: "u"})
		if got := rendered(ring, grants[i], func(*Grant) int { return i }); got != i {
			t.Fatalf("grant %d rendered %d", i, got)
		}
	}
	held := 0
	for _, g := range grants {
		if g.memos.Load() != nil {
			held++
		}
	}
	if held != memoSlots {
		t.Fatalf("%d grants hold memos, want %d", held, memoSlots)
	}
	if grants[0].memos.Load() != nil {
		t.Fatal("the oldest grant kept its memos")
	}
	// Its next use builds them again, and keeps them.
	if got := rendered(ring, grants[0], func(*Grant) int { return -1 }); got != -1 {
		t.Fatalf("rebuilt rendering %d", got)
	}
	if got := rendered(ring, grants[0], func(*Grant) int { return -2 }); got != -1 {
		t.Fatalf("second use rebuilt instead of reusing: %d", got)
	}
	// A grant that lost its memos and got new ones keeps the new ones when
	// its old slot is taken.
	for i := range memoSlots - 1 {
		rendered(ring, NewGrant(Identity{}), func(*Grant) int { return i })
	}
	if grants[0].memos.Load() == nil {
		t.Fatal("memos dropped before their own slot came round")
	}
}

// TestMemoSlotsFollowCache: a pipeline's grants hold memos in a ring of its
// own, sized from its verdict cache's bound (one grant in 32, at least
// 1,024, at most 8,192).
func TestMemoSlotsFollowCache(t *testing.T) {
	tests := []struct {
		name       string
		maxEntries int
		want       int
	}{
		{"small cache, the floor", 1_000, 1_024},
		{"default cache", 100_000, 3_125},
		{"at the ceiling", 262_144, 8_192},
		{"a million", 1_000_000, 8_192},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := memoSlotsFor(tt.maxEntries); got != tt.want {
				t.Fatalf("memoSlotsFor(%d) = %d, want %d", tt.maxEntries, got, tt.want)
			}
			pl := newPipeline(t, shapeDoc+fmt.Sprintf("cache: {max_entries: %d}\n", tt.maxEntries), Deps{}, Options{})
			if got := len(pl.memos.slots); got != tt.want {
				t.Fatalf("pipeline of a %d-entry cache has %d memo slots, want %d", tt.maxEntries, got, tt.want)
			}
		})
	}
}

// TestMemosPerPipeline: a pipeline's verdicts memoize in its own ring, so
// that another pipeline's grants (the next one, after a reload; another
// front end's) never take its slots, and a verdict no check returned
// memoizes nothing.
func TestMemosPerPipeline(t *testing.T) {
	a, mint := pipelineFor(t, shapeDoc)
	b, _ := pipelineFor(t, shapeDoc)
	check := func(pl *Pipeline, i int) Verdict {
		t.Helper()
		v := pl.Check(context.Background(), agentReq(Headers{"authorization": "Bearer " + mint(jwt.MapClaims{"sub": fmt.Sprintf("user-%d", i), "department": "eng"})}))
		if v.Grant == nil {
			t.Fatalf("no grant: %v %s", v.Outcome, v.Description)
		}
		return v
	}
	kept := check(a, 0)
	if got := Rendered(&kept, func(*Grant) int { return 1 }); got != 1 {
		t.Fatalf("rendered %d", got)
	}
	// More of b's grants than a's ring holds take memos in b.
	for i := range len(a.memos.slots) + 1 {
		v := check(b, i+1)
		Rendered(&v, func(*Grant) int { return 2 })
	}
	if got := Rendered(&kept, func(*Grant) int { return 3 }); got != 1 {
		t.Fatalf("another pipeline's grants took a's memo: rendered %d, want the memoized 1", got)
	}
	explained := Verdict{Grant: NewGrant(Identity{Subject: "u"})}
	for want := range 3 {
		if got := Rendered(&explained, func(*Grant) int { return want }); got != want {
			t.Fatalf("a verdict of no check rendered %d, want a fresh %d", got, want)
		}
	}
	if explained.Grant.memos.Load() != nil {
		t.Fatal("a verdict of no check gave its grant memos")
	}
}
