package loadtest

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// nearestRank is the exact quantile the histogram approximates.
func nearestRank(sorted []time.Duration, q float64) time.Duration {
	rank := int(float64(len(sorted))*q + 0.999999999)
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

func TestHistogramQuantiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	uniform := make([]time.Duration, 10_000)
	for i := range uniform {
		uniform[i] = time.Duration(i+1) * time.Microsecond
	}
	lognormal := make([]time.Duration, 50_000)
	for i := range lognormal {
		// Most around 300µs, a long tail into tens of milliseconds.
		lognormal[i] = time.Duration(300e3 * (1 + rng.ExpFloat64()*rng.ExpFloat64()*4))
	}
	bimodal := make([]time.Duration, 0, 1000)
	for range 989 {
		bimodal = append(bimodal, time.Millisecond)
	}
	for range 11 {
		bimodal = append(bimodal, 100*time.Millisecond)
	}
	small := []time.Duration{3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5}
	huge := []time.Duration{time.Millisecond, 3 * time.Hour, 2 * time.Millisecond}

	tests := []struct {
		name   string
		values []time.Duration
	}{
		{"uniform 1us to 10ms", uniform},
		{"long tail", lognormal},
		{"bimodal: p99 in the slow mode", bimodal},
		{"single value", []time.Duration{417 * time.Microsecond}},
		{"exact below 128ns", small},
		{"beyond the last bucket", huge},
		{"negative counts as zero", []time.Duration{-5, 0, 10}},
	}
	quantiles := []float64{0, 0.5, 0.9, 0.99, 0.999, 1}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h Histogram
			for _, v := range tt.values {
				h.Record(v)
			}
			sorted := slices.Clone(tt.values)
			for i := range sorted {
				sorted[i] = max(sorted[i], 0)
			}
			slices.Sort(sorted)
			if got := h.Count(); got != uint64(len(sorted)) {
				t.Fatalf("Count = %d, want %d", got, len(sorted))
			}
			if h.Max() != sorted[len(sorted)-1] || h.minimum() != sorted[0] {
				t.Errorf("Min, Max = %v, %v, want %v, %v", h.minimum(), h.Max(), sorted[0], sorted[len(sorted)-1])
			}
			for _, q := range quantiles {
				want := nearestRank(sorted, q)
				got := h.Quantile(q)
				// Never below the truth, at most one bucket width (1/128) above.
				if got < want || got > want+want/subCount {
					t.Errorf("Quantile(%v) = %v, want %v (+%v at most)", q, got, want, want/subCount)
				}
			}
		})
	}
}

func TestHistogramEmpty(t *testing.T) {
	var h Histogram
	for _, q := range []float64{0, 0.5, 1} {
		if got := h.Quantile(q); got != 0 {
			t.Errorf("Quantile(%v) of nothing = %v, want 0", q, got)
		}
	}
	if h.Mean() != 0 || h.Max() != 0 || h.Count() != 0 {
		t.Errorf("empty histogram: mean %v max %v count %d", h.Mean(), h.Max(), h.Count())
	}
}

func TestHistogramMerge(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var all, a, b, empty Histogram
	for i := range 20_000 {
		v := time.Duration(rng.Int64N(int64(50 * time.Millisecond)))
		all.Record(v)
		if i%3 == 0 {
			a.Record(v)
		} else {
			b.Record(v)
		}
	}
	var merged Histogram
	merged.Merge(&empty)
	merged.Merge(&a)
	merged.Merge(&b)
	merged.Merge(&empty)
	if merged != all {
		t.Fatalf("merging parts differs from recording all: count %d vs %d, p99 %v vs %v",
			merged.Count(), all.Count(), merged.Quantile(0.99), all.Quantile(0.99))
	}
	if merged.Mean() == 0 || merged.minimum() > merged.Quantile(0.5) {
		t.Errorf("merged mean %v min %v p50 %v", merged.Mean(), merged.minimum(), merged.Quantile(0.5))
	}
}

// FuzzBucket checks the bucket arithmetic: every value lands in a bucket
// whose edges contain it, no wider than 1/128 of the value, and buckets are
// in value order.
func FuzzBucket(f *testing.F) {
	for _, v := range []uint64{0, 1, 127, 128, 129, 255, 256, 1000, 1 << 20, 1<<40 - 1, 1 << 40, 1<<64 - 1} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v uint64) {
		i := bucketOf(v)
		if i < 0 || i >= numBuckets {
			t.Fatalf("bucketOf(%d) = %d, out of range", v, i)
		}
		lo, hi := bucketLow(i), bucketHigh(i)
		if v < lo || v > hi {
			t.Fatalf("bucketOf(%d) = %d with edges [%d, %d]", v, i, lo, hi)
		}
		if i < numBuckets-1 && hi-lo > v/subCount {
			t.Fatalf("bucket %d of %d is %d wide, more than 1/%d", i, v, hi-lo+1, subCount)
		}
		if v > 0 && bucketOf(v-1) > i {
			t.Fatalf("bucketOf(%d) = %d > bucketOf(%d) = %d", v-1, bucketOf(v-1), v, i)
		}
	})
}

func BenchmarkHistogramRecord(b *testing.B) {
	h := new(Histogram)
	b.ReportAllocs()
	d := 300 * time.Microsecond
	for b.Loop() {
		h.Record(d)
		d += 37
	}
}

// minimum is the smallest value recorded, exactly.
func (h *Histogram) minimum() time.Duration { return time.Duration(h.min) }
