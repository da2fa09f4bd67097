package cache

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// model is the reference LRU the slab cache is checked against: a list,
// most recent first.
type model struct {
	size    int
	keys    []Key
	vals    map[Key]int
	expires map[Key]time.Time
}

func (m *model) touch(k Key) {
	i := slices.Index(m.keys, k)
	m.keys = slices.Delete(m.keys, i, i+1)
	m.keys = slices.Insert(m.keys, 0, k)
}

func (m *model) drop(k Key) {
	if i := slices.Index(m.keys, k); i >= 0 {
		m.keys = slices.Delete(m.keys, i, i+1)
		delete(m.vals, k)
		delete(m.expires, k)
	}
}

func (m *model) get(k Key, now time.Time) (int, bool) {
	v, ok := m.vals[k]
	if !ok {
		return 0, false
	}
	if !now.Before(m.expires[k]) {
		m.drop(k)
		return 0, false
	}
	m.touch(k)
	return v, true
}

func (m *model) add(k Key, v int, exp, now time.Time) {
	if !exp.After(now) {
		return
	}
	if _, ok := m.vals[k]; ok {
		m.vals[k], m.expires[k] = v, exp
		m.touch(k)
		return
	}
	if len(m.keys) >= m.size {
		m.drop(m.keys[len(m.keys)-1])
	}
	m.keys = slices.Insert(m.keys, 0, k)
	m.vals[k], m.expires[k] = v, exp
}

// TestCacheAgainstModel runs random operations on the cache and on the
// reference model and compares every answer. The table is up to three
// quarters full, so probe runs are long and deletions shift entries.
func TestCacheAgainstModel(t *testing.T) {
	tests := []struct {
		name        string
		size, keys  int
		ops, resize int
		hashBits    uint32 // the hash bits kept: few make keys share hashes
	}{
		{name: "below a slab", size: 7, keys: 40, ops: 20_000, resize: 0},
		{name: "several slabs", size: 2100, keys: 2600, ops: 25_000, resize: 0},
		{name: "grows past its first slab", size: 5, keys: 1500, ops: 20_000, resize: 1200},
		{name: "shrinks", size: 1200, keys: 1500, ops: 20_000, resize: 10},
		{name: "keys sharing hashes", size: 300, keys: 400, ops: 20_000, resize: 0, hashBits: 0x7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.hashBits != 0 {
				defer func(b uint32) { hashBits = b }(hashBits)
				hashBits = tt.hashBits
			}
			rng := rand.New(rand.NewPCG(1, uint64(tt.size)))
			start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			clk := &fakeClock{t: start}
			c, err := New[int](tt.size, clk.now)
			if err != nil {
				t.Fatal(err)
			}
			m := &model{size: tt.size, vals: map[Key]int{}, expires: map[Key]time.Time{}}
			key := func() Key {
				var k Key
				i := rng.IntN(tt.keys)
				k[0], k[8], k[9] = byte(i/4), byte(i), byte(i>>8)
				return k
			}
			for op := range tt.ops {
				if op == tt.ops/2 && tt.resize > 0 {
					c.Resize(tt.resize)
					m.size = tt.resize
					for len(m.keys) > m.size {
						m.drop(m.keys[len(m.keys)-1])
					}
				}
				k := key()
				switch rng.IntN(10) {
				case 0, 1, 2, 3:
					got, ok := c.Get(k)
					want, wantOK := m.get(k, clk.t)
					if got != want || ok != wantOK {
						t.Fatalf("op %d: Get = %d, %v; want %d, %v", op, got, ok, want, wantOK)
					}
				case 4, 5, 6, 7:
					exp := clk.t.Add(time.Duration(rng.IntN(100)-5) * time.Second)
					c.Add(k, op, exp)
					m.add(k, op, exp, clk.t)
				case 8:
					c.Remove(k)
					m.drop(k)
				case 9:
					clk.t = clk.t.Add(time.Second)
				}
				if c.Len() != len(m.keys) {
					t.Fatalf("op %d: Len = %d, want %d", op, c.Len(), len(m.keys))
				}
			}
			// Every entry the model holds is found, in the same order of
			// recency (checked through which ones a shrink keeps).
			for _, k := range m.keys {
				if _, ok := c.Peek(k); !ok && clk.t.Before(m.expires[k]) {
					t.Fatalf("entry %x lost", k[:10])
				}
			}
			keep := min(len(m.keys), 3)
			c.Resize(max(keep, 1))
			for i, k := range m.keys {
				_, ok := c.Peek(k)
				if want := i < keep && clk.t.Before(m.expires[k]); ok != want {
					t.Fatalf("after shrinking to %d: entry %d of recency present = %v", keep, i, ok)
				}
			}
		})
	}
}

// TestRemoveFuncAndPurge: RemoveFunc drops exactly the matching entries and
// frees their slots for new ones; Purge empties the cache for reuse.
func TestRemoveFuncAndPurge(t *testing.T) {
	c, err := New[int](2000, nil)
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Now().Add(time.Hour)
	for i := range 2000 {
		c.Add(NewKey(string(rune(i))), i, exp)
	}
	if n := c.RemoveFunc(func(v int) bool { return v%2 == 0 }); n != 1000 {
		t.Fatalf("removed %d, want 1000", n)
	}
	for i := range 2000 {
		if _, ok := c.Peek(NewKey(string(rune(i)))); ok != (i%2 == 1) {
			t.Fatalf("entry %d present = %v", i, ok)
		}
	}
	for i := range 1000 {
		c.Add(NewKey("new", string(rune(i))), i, exp)
	}
	if c.Len() != 2000 || c.used != 2000 {
		t.Fatalf("Len %d, slots used %d: freed slots not reused", c.Len(), c.used)
	}
	c.Purge()
	if c.Len() != 0 {
		t.Fatal("purge left entries")
	}
	c.Add(NewKey("a"), 1, exp)
	if v, ok := c.Get(NewKey("a")); !ok || v != 1 {
		t.Fatal("cache unusable after purge")
	}
}

func TestNewRejectsBadSizes(t *testing.T) {
	for _, n := range []int{0, -1, MaxSize + 1} {
		if _, err := New[int](n, nil); err == nil {
			t.Errorf("New(%d) accepted", n)
		}
	}
}

// TestConcurrentUse: checks, fills and removals from several goroutines
// at once (run with -race) leave a consistent cache.
func TestConcurrentUse(t *testing.T) {
	c, err := New[int](500, nil)
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Now().Add(time.Hour)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 5000 {
				k := NewKey(strconv.Itoa((i * (g + 1)) % 800))
				switch i % 4 {
				case 0, 1:
					c.Add(k, i, exp)
				case 2:
					if v, ok := c.Get(k); ok && v < 0 {
						t.Error("negative value")
					}
				case 3:
					c.Remove(k)
				}
			}
		}()
	}
	wg.Wait()
	n := 0
	for i := range 800 {
		if _, ok := c.Peek(NewKey(strconv.Itoa(i))); ok {
			n++
		}
	}
	if n != c.Len() || n > 500 {
		t.Fatalf("%d entries found, Len %d", n, c.Len())
	}
}

// TestGroundKeysSpread: keys that agree in their leading bytes (what
// grinding inputs for one table position would produce) still land in
// short probe runs.
func TestGroundKeysSpread(t *testing.T) {
	c, err := New[int](4000, nil)
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Now().Add(time.Hour)
	for i := range 3000 {
		var k Key // the first 16 bytes are all zero
		k[16], k[17] = byte(i), byte(i>>8)
		c.Add(k, i, exp)
	}
	mask := uint64(len(c.table) - 1)
	longest := uint64(0)
	for i, p := range c.table {
		if p != 0 {
			h := c.hash(&c.at(p.ref()).key)
			if p.hash() != h {
				t.Fatalf("position %d holds hash %#x for a key of hash %#x", i, p.hash(), h)
			}
			longest = max(longest, (uint64(i)-home(h, mask))&mask)
		}
	}
	if longest > 200 {
		t.Fatalf("an entry sits %d positions past its home", longest)
	}
}
