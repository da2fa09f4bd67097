package check

import "testing"

// TestMemosBounded: only the last memoSlots grants to get memos keep them;
// an older grant loses them and gets new ones (and a slot) on its next use.
func TestMemosBounded(t *testing.T) {
	grants := make([]*Grant, memoSlots+10)
	for i := range grants {
		grants[i] = NewGrant(Identity{Subject: "u"})
		if got := Rendered(grants[i], func(*Grant) int { return i }); got != i {
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
	if got := Rendered(grants[0], func(*Grant) int { return -1 }); got != -1 {
		t.Fatalf("rebuilt rendering %d", got)
	}
	if got := Rendered(grants[0], func(*Grant) int { return -2 }); got != -1 {
		t.Fatalf("second use rebuilt instead of reusing: %d", got)
	}
	// A grant that lost its memos and got new ones keeps the new ones when
	// its old slot is taken.
	for i := range memoSlots - 1 {
		Rendered(NewGrant(Identity{}), func(*Grant) int { return i })
	}
	if grants[0].memos.Load() == nil {
		t.Fatal("memos dropped before their own slot came round")
	}
}
