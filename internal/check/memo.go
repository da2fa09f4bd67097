package check

import "sync/atomic"

// A grant's memos (its rendered response pieces, its last lineage headers,
// its last exchanged-token headers) make a repeated check cost one
// allocation, but together they weigh several times the grant. Only grants
// in use keep them: memoSlots bounds how many grants hold memos at once, and
// a grant that gets a memo takes a slot, dropping the memos of the grant that
// held it longest. A grant that lost its memos rebuilds them on its next use
// (no signature check, a few allocations), so the bound costs time only when
// more than memoSlots grants are used in turn faster than memos are rebuilt.
const memoSlots = 8192

// memoRing is the slots, taken in turn.
var memoRing struct {
	next  atomic.Uint64
	slots [memoSlots]atomic.Pointer[Grant]
}

// admitMemo gives g a memo slot unless it holds one.
func admitMemo(g *Grant) {
	if !g.memoSlot.CompareAndSwap(false, true) {
		return
	}
	i := memoRing.next.Add(1) % memoSlots
	if old := memoRing.slots[i].Swap(g); old != nil && old != g {
		old.dropMemos()
	}
}

// dropMemos frees g's memos; a later use builds them again.
func (g *Grant) dropMemos() {
	g.memoSlot.Store(false)
	g.rendered.Store(nil)
	g.lineage.Store(nil)
	g.exchanged.Store(nil)
}
