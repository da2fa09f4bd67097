package check

import "sync/atomic"

// A grant's memos (its rendered response pieces, its last lineage headers,
// its last exchanged-token headers, its last tools token) make a repeated
// check cost one allocation, but together they weigh several times the
// grant. Only grants in use keep them: a pipeline's memoRing bounds how
// many of its grants hold memos at once; a grant that gets memos takes a
// slot, dropping the memos of the grant that took it longest ago. A grant
// that lost its memos builds them again on its next use (no signature
// check, a few microseconds), so the bound costs time only when more grants
// than it holds are used in turn.
//
// The bound follows the verdict cache's (memoSlotsFor), so that memos stay
// a small share of what the cache holds at any size, and the ring is the
// pipeline's own, so that it goes with its pipeline.

// memoSlotsFor is how many grants of a verdict cache of maxEntries hold
// memos: one in 32, at least 1,024 and at most 8,192. A memo weighs some
// 2-3 KB; at 100,000 cached grants (the default) that is about 90 bytes a
// grant, and the 3,125 grants it allows in use at once are more than one
// replica's concurrent users.
func memoSlotsFor(maxEntries int) int { return min(max(maxEntries/32, 1024), 8192) }

// memoRing is the slots, taken in turn.
type memoRing struct {
	next  atomic.Uint64
	slots []atomic.Pointer[grantMemos]
}

func newMemoRing(slots int) *memoRing {
	return &memoRing{slots: make([]atomic.Pointer[grantMemos], slots)}
}

// grantMemos are a grant's memos.
type grantMemos struct {
	owner *Grant
	// rendered memoizes a front end's rendering of the grant, so that a
	// cache hit does not rebuild the same response pieces every time.
	rendered atomic.Pointer[any]
	// lineage memoizes the headers of the last lineage derived for the
	// grant: a conversation's requests repeat it.
	lineage atomic.Pointer[lineageMemo]
	// exchanged memoizes the headers carrying the last exchanged token.
	exchanged atomic.Pointer[exchangeMemo]
	// tools memoizes the last signed tools token and its headers.
	tools atomic.Pointer[toolsMemo]
}

// grantHeaders is the HeadersID of a grant's own headers; memos take theirs
// from memoIDs, so no two memos' headers share a name.
const grantHeaders = 1

var memoIDs atomic.Uint64

func init() { memoIDs.Store(grantHeaders) }

// nextMemoID names a new memo's headers.
func nextMemoID() uint64 { return memoIDs.Add(1) }

// noMemos is what a grant without memos reads: always empty.
var noMemos grantMemos

// memo returns g's memos for reading (empty ones when it has none).
func (g *Grant) memo() *grantMemos {
	if m := g.memos.Load(); m != nil {
		return m
	}
	return &noMemos
}

// memoForWrite returns g's memos, giving it some (and a slot of ring)
// when it has none.
func (g *Grant) memoForWrite(ring *memoRing) *grantMemos {
	for {
		if m := g.memos.Load(); m != nil {
			return m
		}
		m := &grantMemos{owner: g}
		if g.memos.CompareAndSwap(nil, m) {
			i := ring.next.Add(1) % uint64(len(ring.slots))
			if old := ring.slots[i].Swap(m); old != nil {
				// Only if they are still its current ones.
				old.owner.memos.CompareAndSwap(old, nil)
			}
			return m
		}
	}
}
