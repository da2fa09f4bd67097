package loadtest

import (
	"math"
	"math/bits"
	"time"
)

// The histogram is log-linear, like HdrHistogram: values below 2^subBits
// nanoseconds are counted exactly, and every power of two above that is cut
// into 2^subBits equal buckets, so a reported value is never more than
// 1/2^subBits (0.8%) above the true one. Values of 2^maxBits ns (about 18
// minutes) and more land in the last bucket; Max stays exact.
const (
	subBits    = 7
	subCount   = 1 << subBits
	maxBits    = 40
	numBuckets = (maxBits - subBits + 1) * subCount
)

// Histogram records latencies in fixed memory with bounded relative error.
// Recording allocates nothing. It is not safe for concurrent use: give each
// caller its own and Merge them at the end.
type Histogram struct {
	counts [numBuckets]uint64
	total  uint64
	sum    uint64
	min    uint64
	max    uint64
}

// Record adds one latency. Negative values count as zero.
func (h *Histogram) Record(d time.Duration) {
	v := uint64(max(d, 0))
	h.counts[bucketOf(v)]++
	if h.total == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.total++
	h.sum += v
}

// Merge adds every value recorded in o.
func (h *Histogram) Merge(o *Histogram) {
	if o.total == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.total == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.total += o.total
	h.sum += o.sum
}

// Count is the number of values recorded.
func (h *Histogram) Count() uint64 { return h.total }

// Max is the largest value recorded, exactly.
func (h *Histogram) Max() time.Duration { return time.Duration(h.max) }

// Mean is the average of the values recorded.
func (h *Histogram) Mean() time.Duration {
	if h.total == 0 {
		return 0
	}
	return time.Duration(h.sum / h.total)
}

// Quantile returns the value at quantile q (0.99 for p99) by nearest rank:
// the smallest recorded value that at least q of all values are at or below,
// rounded up to its bucket's upper edge (never above Max). It is 0 for an
// empty histogram.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.total == 0 {
		return 0
	}
	switch {
	case q <= 0:
		return time.Duration(h.min)
	case q >= 1:
		return time.Duration(h.max)
	}
	rank := uint64(math.Ceil(q * float64(h.total)))
	rank = max(rank, 1)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return time.Duration(min(bucketHigh(i), h.max))
		}
	}
	return time.Duration(h.max)
}

// bucketOf returns the bucket counting v.
func bucketOf(v uint64) int {
	if v < subCount {
		return int(v)
	}
	shift := bits.Len64(v) - subBits - 1
	if shift > maxBits-subBits-1 {
		return numBuckets - 1
	}
	// v>>shift has subBits+1 bits; its top bit is implied by shift.
	return (shift+1)<<subBits + int(v>>shift) - subCount
}

// bucketLow and bucketHigh are the smallest and largest value bucket i counts.
func bucketLow(i int) uint64 {
	if i < subCount {
		return uint64(i)
	}
	shift := i>>subBits - 1
	return uint64(subCount+i&(subCount-1)) << shift
}

func bucketHigh(i int) uint64 {
	if i < subCount {
		return uint64(i)
	}
	if i == numBuckets-1 {
		return math.MaxUint64
	}
	shift := i>>subBits - 1
	return bucketLow(i) + 1<<shift - 1
}
