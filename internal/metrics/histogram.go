package metrics

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// Bounds are the upper bounds of the buckets of every latch histogram, from
// a microsecond (a hand-off inside one process) to an hour (a long hold).
var Bounds = []time.Duration{
	1 * time.Microsecond, 2500 * time.Nanosecond, 5 * time.Microsecond,
	10 * time.Microsecond, 25 * time.Microsecond, 50 * time.Microsecond,
	100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	1 * time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
	10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	1 * time.Second, 2500 * time.Millisecond, 5 * time.Second,
	10 * time.Second, 30 * time.Second, time.Minute,
	2 * time.Minute, 5 * time.Minute, 10 * time.Minute,
	30 * time.Minute, time.Hour,
}

// numBuckets counts the buckets, the last one (+Inf) included.
const numBuckets = 30

// firstBound is Bounds[0], as a constant for the inlined fast path.
const firstBound = time.Microsecond

// bucketStart[n] is the first bucket whose bound is at least the smallest
// duration of bit length n: where bucket starts looking.
var bucketStart [65]uint8

func init() {
	if len(Bounds)+1 != numBuckets || Bounds[0] != firstBound {
		panic("metrics: numBuckets or firstBound does not match Bounds")
	}
	for n := range bucketStart {
		var least uint64
		if n > 0 {
			least = 1 << (n - 1)
		}
		i := 0
		for i < len(Bounds) && uint64(Bounds[i]) < least {
			i++
		}
		bucketStart[n] = uint8(i)
	}
}

// bucket returns the index of the bucket d falls in: the first bound >= d,
// or the +Inf bucket. The bit length of d finds the first candidate; the
// bounds are so spread (at least twice apart, or nearly) that it is at most
// a step or two from the answer.
func bucket(d time.Duration) int {
	if d <= Bounds[0] {
		return 0 // most waits: granted at once
	}
	i := int(bucketStart[bits.Len64(uint64(d))])
	for i < len(Bounds) && Bounds[i] < d {
		i++
	}
	return i
}

// hist is a histogram written under an outside lock (the node's mutex) and
// read under the same lock: plain increments, no atomics.
type hist struct {
	counts [numBuckets]uint64
	sum    time.Duration
}

func (h *hist) observe(d time.Duration) {
	if d <= firstBound {
		h.counts[0]++ // inlined: most waits, granted at once
	} else {
		h.counts[bucket(d)]++
	}
	h.sum += d
}

func (h *hist) snapshot() Histogram {
	s := Histogram{Sum: h.sum, Counts: make([]uint64, numBuckets)}
	copy(s.Counts, h.counts[:])
	for _, c := range h.counts {
		s.Count += c
	}
	return s
}

// atomicHist is a histogram safe for concurrent use.
type atomicHist struct {
	counts [numBuckets]atomic.Uint64
	sum    atomic.Int64
}

func (h *atomicHist) observe(d time.Duration) {
	h.counts[bucket(d)].Add(1)
	h.sum.Add(int64(d))
}

func (h *atomicHist) snapshot() Histogram {
	s := Histogram{Sum: time.Duration(h.sum.Load()), Counts: make([]uint64, numBuckets)}
	for i := range h.counts {
		s.Counts[i] = h.counts[i].Load()
		s.Count += s.Counts[i]
	}
	return s
}

// Histogram is a snapshot of a latch histogram. Counts[i] counts the
// observations in bucket i alone (not cumulative): those above Bounds[i-1]
// and at most Bounds[i]; the last bucket has no upper bound.
type Histogram struct {
	Count  uint64
	Sum    time.Duration
	Counts []uint64 // len(Bounds)+1, or nil for an empty histogram
}

// Sub returns the observations of h that prev, an earlier snapshot of the
// same histogram, did not have.
func (h Histogram) Sub(prev Histogram) Histogram {
	d := Histogram{Count: h.Count - prev.Count, Sum: h.Sum - prev.Sum}
	if h.Counts != nil {
		d.Counts = make([]uint64, len(h.Counts))
		for i, c := range h.Counts {
			if i < len(prev.Counts) {
				c -= prev.Counts[i]
			}
			d.Counts[i] = c
		}
	}
	return d
}

// Mean returns the mean observation, 0 when there is none.
func (h Histogram) Mean() time.Duration {
	if h.Count == 0 {
		return 0
	}
	return h.Sum / time.Duration(h.Count)
}

// Quantile estimates the q-quantile (0 <= q <= 1) of the observations by
// interpolating linearly inside the bucket it falls in, as Prometheus'
// histogram_quantile does; an estimate in the +Inf bucket is the largest
// bound. It returns 0 when there is no observation.
func (h Histogram) Quantile(q float64) time.Duration {
	if h.Count == 0 || len(h.Counts) == 0 {
		return 0
	}
	rank := q * float64(h.Count)
	var seen float64
	for i, c := range h.Counts {
		if c == 0 {
			continue
		}
		if seen+float64(c) < rank {
			seen += float64(c)
			continue
		}
		if i >= len(Bounds) {
			return Bounds[len(Bounds)-1]
		}
		var lower time.Duration
		if i > 0 {
			lower = Bounds[i-1]
		}
		frac := (rank - seen) / float64(c)
		return lower + time.Duration(frac*float64(Bounds[i]-lower))
	}
	return Bounds[len(Bounds)-1]
}

// cumulative returns the buckets as Prometheus wants them: upper bound in
// seconds to the count of observations at most that bound.
func (h Histogram) cumulative() map[float64]uint64 {
	m := make(map[float64]uint64, len(Bounds))
	var acc uint64
	for i, b := range Bounds {
		if i < len(h.Counts) {
			acc += h.Counts[i]
		}
		m[b.Seconds()] = acc
	}
	return m
}
