package check

import "sync/atomic"

// A grant's memos (its rendered response pieces, its last lineage headers,
// its last exchanged-token headers, its last tools token) make a repeated check cost one
// allocation, but together they weigh several times the grant. Only grants
// in use keep them: memoSlots bounds how many grants hold memos at once; a
// grant that gets memos takes a slot, dropping the memos of the grant that
// took its slot longest ago. A grant that lost its memos builds them again
// on its next use (no signature check, a few microseconds), so the bound
// costs time only when more than memoSlots grants are used in turn.
const memoSlots = 8192

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

// memoRing is the slots, taken in turn.
var memoRing struct {
	next  atomic.Uint64
	slots [memoSlots]atomic.Pointer[grantMemos]
}

// memo returns g's memos for reading (empty ones when it has none).
func (g *Grant) memo() *grantMemos {
	if m := g.memos.Load(); m != nil {
		return m
	}
	return &noMemos
}

// memoForWrite returns g's memos, giving it some (and a slot) when it has
// none.
func (g *Grant) memoForWrite() *grantMemos {
	for {
		if m := g.memos.Load(); m != nil {
			return m
		}
		m := &grantMemos{owner: g}
		if g.memos.CompareAndSwap(nil, m) {
			i := memoRing.next.Add(1) % memoSlots
			if old := memoRing.slots[i].Swap(m); old != nil {
				// Only if they are still its current ones.
				old.owner.memos.CompareAndSwap(old, nil)
			}
			return m
		}
	}
}
