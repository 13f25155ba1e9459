package peakmap

import "testing"

// shrink is how callers use Due and Rebuild.
func shrink(m map[int]int, p *Peak) map[int]int {
	if p.Due(len(m)) {
		return Rebuild(m, p)
	}
	return m
}

func TestShrink(t *testing.T) {
	tests := []struct {
		name        string
		peak, after int
		wantCopy    bool
	}{
		{"small map never", MinPeak - 1, 0, false},
		{"above an eighth", 8000, 1001, false},
		{"an eighth", 8000, 1000, true},
		{"empty", 8000, 0, true},
		{"still at its peak", 8000, 8000, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := make(map[int]int)
			var p Peak
			for i := range tt.peak {
				m[i] = i
			}
			m = shrink(m, &p) // observes the peak
			copied := false
			for i := tt.peak - 1; i >= tt.after; i-- {
				delete(m, i)
				before := m
				m = shrink(m, &p)
				// A copy is a new map: a write to it does not show in the old.
				m[-1] = 0
				if _, same := before[-1]; !same {
					copied = true
				}
				delete(m, -1)
			}
			if copied != tt.wantCopy {
				t.Errorf("copied = %v, want %v", copied, tt.wantCopy)
			}
			if len(m) != tt.after {
				t.Fatalf("len = %d, want %d", len(m), tt.after)
			}
			for i := range tt.after {
				if m[i] != i {
					t.Fatalf("m[%d] = %d after shrinking", i, m[i])
				}
			}
		})
	}
}

// TestShrinkAmortized: draining a map entry by entry copies few entries
// in all.
func TestShrinkAmortized(t *testing.T) {
	const n = 1 << 16
	m := make(map[int]int, n)
	for i := range n {
		m[i] = i
	}
	var p Peak
	copies := 0
	for i := range n {
		delete(m, i)
		before := len(m)
		m2 := shrink(m, &p)
		m2[-1] = 0
		if _, ok := m[-1]; !ok {
			copies += before
		}
		delete(m2, -1)
		m = m2
	}
	if copies > n/4 {
		t.Errorf("draining %d entries copied %d, want at most %d", n, copies, n/4)
	}
}
