package bench

import (
	"math"
	"math/bits"
	"time"
)

// Histogram layout: values below 2^subBits have a bucket each; above, every
// power-of-two range [2^k, 2^(k+1)) is split into halfCount linear buckets,
// so a bucket is at most 1/halfCount of its values wide.
const (
	subBits   = 8
	subCount  = 1 << subBits
	halfCount = subCount / 2
	nBuckets  = (64-subBits)*halfCount + subCount
)

// Histogram counts non-negative durations, in nanoseconds, in log-linear
// buckets (the layout of HdrHistogram with 2-3 significant digits): a
// quantile is reported within 0.4% of the true value. Recording is a few
// instructions and never allocates. The zero value is empty and ready; a
// Histogram is not safe for concurrent use (give each goroutine its own and
// Merge them).
type Histogram struct {
	counts   [nBuckets]uint64
	n        uint64
	sum      float64
	min, max int64
}

// bucket returns the bucket of v.
func bucket(v uint64) int {
	m := bits.Len64(v) - subBits
	if m <= 0 {
		return int(v)
	}
	return m*halfCount + int(v>>m)
}

// bucketRange returns the lowest value of bucket i and its width.
func bucketRange(i int) (lo, width uint64) {
	if i < subCount {
		return uint64(i), 1
	}
	m := i/halfCount - 1
	sub := uint64(i - m*halfCount)
	return sub << m, 1 << m
}

// Record adds one value; a negative one counts as 0.
func (h *Histogram) Record(d time.Duration) {
	v := max(int64(d), 0)
	h.counts[bucket(uint64(v))]++
	if h.n == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.n++
	h.sum += float64(v)
}

// Merge adds every value of o to h.
func (h *Histogram) Merge(o *Histogram) {
	if o.n == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.n += o.n
	h.sum += o.sum
}

// Reset empties h.
func (h *Histogram) Reset() { *h = Histogram{} }

// Count returns the number of values recorded.
func (h *Histogram) Count() uint64 { return h.n }

// Max returns the largest value recorded, exactly.
func (h *Histogram) Max() time.Duration { return time.Duration(h.max) }

// Min returns the smallest value recorded, exactly.
func (h *Histogram) Min() time.Duration { return time.Duration(h.min) }

// Mean returns the mean of the values recorded.
func (h *Histogram) Mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(math.Round(h.sum / float64(h.n)))
}

// Quantile returns the value below or at which a fraction q (0 to 1) of the
// values lie: the middle of its bucket, clamped to the exact minimum and
// maximum; q 0 and 1 are the exact minimum and maximum. It returns 0 for an
// empty histogram.
func (h *Histogram) Quantile(q float64) time.Duration {
	switch {
	case h.n == 0:
		return 0
	case q <= 0:
		return time.Duration(h.min)
	case q >= 1:
		return time.Duration(h.max)
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			lo, w := bucketRange(i)
			v := int64(lo + w/2)
			return time.Duration(min(max(v, h.min), h.max))
		}
	}
	return time.Duration(h.max)
}
