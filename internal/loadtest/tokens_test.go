package loadtest

import (
	"fmt"
	"sync"
	"testing"
)

func tokenNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("tok%d", i)
	}
	return out
}

// draw calls src.Next n times, stopping early when it is used up.
func draw(src TokenSource, n int) []string {
	var out []string
	for range n {
		a, ok := src.Next()
		if !ok {
			break
		}
		out = append(out, a)
	}
	return out
}

func TestTokenSourcesInOrder(t *testing.T) {
	tests := []struct {
		name string
		src  TokenSource
		n    int
		want []string
	}{
		{"fixed: always the same", NewFixed("a"), 3, []string{"Bearer a", "Bearer a", "Bearer a"}},
		{"pool: round-robin, wrapping", NewPool([]string{"a", "b", "c"}), 7,
			[]string{"Bearer a", "Bearer b", "Bearer c", "Bearer a", "Bearer b", "Bearer c", "Bearer a"}},
		{"pool of one", NewPool([]string{"a"}), 2, []string{"Bearer a", "Bearer a"}},
		{"sequence: each once, then used up", NewSequence([]string{"a", "b"}), 5, []string{"Bearer a", "Bearer b"}},
		{"empty sequence", NewSequence(nil), 2, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := draw(tt.src, tt.n)
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestTokenSourcesConcurrent draws from many goroutines at once: a pool must
// hand each token out equally often, a sequence each token exactly once.
func TestTokenSourcesConcurrent(t *testing.T) {
	const callers, perCaller, distinct = 8, 500, 100
	tests := []struct {
		name      string
		src       TokenSource
		wantTotal int
		wantEach  int
	}{
		{"pool", NewPool(tokenNames(distinct)), callers * perCaller, callers * perCaller / distinct},
		{"sequence shorter than demand", NewSequence(tokenNames(distinct * 3)), distinct * 3, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			results := make([][]string, callers)
			var wg sync.WaitGroup
			for c := range callers {
				wg.Go(func() { results[c] = draw(tt.src, perCaller) })
			}
			wg.Wait()
			counts := map[string]int{}
			total := 0
			for _, r := range results {
				for _, a := range r {
					counts[a]++
					total++
				}
			}
			if total != tt.wantTotal {
				t.Errorf("handed out %d tokens, want %d", total, tt.wantTotal)
			}
			for a, n := range counts {
				if n != tt.wantEach {
					t.Errorf("%s handed out %d times, want %d", a, n, tt.wantEach)
				}
			}
		})
	}
}

func TestSequenceUsed(t *testing.T) {
	s := NewSequence(tokenNames(3))
	draw(s, 2)
	if s.used() != 2 || s.Len() != 3 {
		t.Errorf("after 2: Used %d Len %d", s.used(), s.Len())
	}
	draw(s, 5)
	if s.used() != 3 {
		t.Errorf("after exhaustion: Used %d, want 3", s.used())
	}
}

func TestNewPoolEmptyPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("NewPool(nil) did not panic")
		}
	}()
	NewPool(nil)
}

func BenchmarkPoolNext(b *testing.B) {
	p := NewPool(tokenNames(10_000))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p.Next()
		}
	})
}

// used is how many tokens have been handed out.
func (s *Sequence) used() int {
	return int(min(s.next.Load(), uint64(len(s.authorizations))))
}
