package bench

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestBucketLayout(t *testing.T) {
	// Buckets tile the values: each starts where the one before ends.
	var next uint64
	for i := range nBuckets {
		lo, w := bucketRange(i)
		if lo != next {
			t.Fatalf("bucket %d starts at %d, want %d", i, lo, next)
		}
		if got := bucket(lo); got != i {
			t.Fatalf("bucket(%d) = %d, want %d", lo, got, i)
		}
		if got := bucket(lo + w - 1); got != i {
			t.Fatalf("bucket(%d) = %d, want %d", lo+w-1, got, i)
		}
		if i >= subCount && w*halfCount > lo {
			t.Fatalf("bucket %d: width %d is more than 1/%d of %d", i, w, halfCount, lo)
		}
		next = lo + w
	}
	if next != 0 { // wrapped around 2^64: the last bucket ends at the top
		t.Fatalf("the buckets end at %d, want 2^64", next)
	}
}

func TestHistogramQuantiles(t *testing.T) {
	tests := []struct {
		name   string
		values []time.Duration
		q      float64
		want   time.Duration
	}{
		{"empty", nil, 0.5, 0},
		{"one value", []time.Duration{42 * time.Microsecond}, 0.99, 42 * time.Microsecond},
		{"exact below 256ns", []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 0.5, 5},
		{"max is exact", []time.Duration{1, 2, 3, time.Second}, 1, time.Second},
		{"min is exact", []time.Duration{time.Millisecond, 2 * time.Millisecond}, 0, time.Millisecond},
		{"negative counts as 0", []time.Duration{-5, -1}, 0.5, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h Histogram
			for _, v := range tt.values {
				h.Record(v)
			}
			if got := h.Quantile(tt.q); got != tt.want {
				t.Errorf("Quantile(%v) = %v, want %v", tt.q, got, tt.want)
			}
		})
	}
}

// TestHistogramAccuracy compares quantiles with those of the sorted values.
func TestHistogramAccuracy(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var h, a, b Histogram
	vals := make([]time.Duration, 100000)
	for i := range vals {
		// Log-uniform from 100ns to 100ms.
		v := time.Duration(100 * math.Pow(10, r.Float64()*6))
		vals[i] = v
		h.Record(v)
		if i%2 == 0 {
			a.Record(v)
		} else {
			b.Record(v)
		}
	}
	a.Merge(&b)
	slices.Sort(vals)
	for _, q := range []float64{0.01, 0.5, 0.9, 0.99, 0.999} {
		exact := vals[int(q*float64(len(vals)))-1]
		for name, hh := range map[string]*Histogram{"direct": &h, "merged": &a} {
			got := hh.Quantile(q)
			if err := float64(got-exact) / float64(exact); err > 0.004 || err < -0.004 {
				t.Errorf("%s: Quantile(%v) = %v, exact %v: error %.3f%%", name, q, got, exact, 100*err)
			}
		}
	}
	if a.Count() != h.Count() || a.Max() != h.Max() || a.Min() != h.Min() || a.Mean() != h.Mean() {
		t.Errorf("merged: count %d max %v min %v mean %v; direct: %d %v %v %v",
			a.Count(), a.Max(), a.Min(), a.Mean(), h.Count(), h.Max(), h.Min(), h.Mean())
	}
}

func TestHistogramRecordDoesNotAllocate(t *testing.T) {
	var h Histogram
	if n := testing.AllocsPerRun(100, func() { h.Record(time.Microsecond) }); n != 0 {
		t.Errorf("Record allocates %v times", n)
	}
}

func BenchmarkHistogramRecord(b *testing.B) {
	var h Histogram
	for i := 0; b.Loop(); i++ {
		h.Record(time.Duration(i))
	}
}
