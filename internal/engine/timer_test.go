package engine

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestTimerHeap drives the heap with random pushes, removals and
// reschedules, checks after each that every entry is where its timer says
// and that no child comes before its parent, and at the end that the
// timers come off the top in (when, order) order.
func TestTimerHeap(t *testing.T) {
	for _, n := range []int{1, 2, 5, 17, 300} {
		rng := rand.New(rand.NewPCG(uint64(n), 7))
		var h timerHeap
		var all []*timer
		var seq uint64
		set := func(tm *timer) {
			seq++
			tm.when, tm.seq = rng.Int64N(50), seq
		}
		for step := range 20 * n {
			switch op := rng.IntN(4); {
			case op <= 1 || len(h) == 0:
				tm := &timer{kind: timerKind(rng.IntN(4)), idx: -1}
				set(tm)
				h.push(tm)
				all = append(all, tm)
			case op == 2:
				h.remove(h[rng.IntN(len(h))].t)
			default:
				tm := h[rng.IntN(len(h))].t
				set(tm)
				h.fix(tm.idx)
			}
			if err := checkHeap(h); err != "" {
				t.Fatalf("n=%d step %d: %s", n, step, err)
			}
		}
		var want []*timer
		for _, tm := range all {
			if tm.idx >= 0 {
				want = append(want, tm)
			}
		}
		slices.SortFunc(want, compareTimers)
		for i, w := range want {
			got := h.top()
			if got != w {
				t.Fatalf("n=%d pop %d: when %d order %x, want when %d order %x", n, i, got.when, got.order(), w.when, w.order())
			}
			h.remove(got)
		}
		if len(h) != 0 {
			t.Fatalf("n=%d: %d entries left", n, len(h))
		}
	}
}

// checkHeap reports the first broken invariant of h, or "".
func checkHeap(h timerHeap) string {
	for i := range h {
		e := &h[i]
		switch {
		case e.t.idx != i:
			return "entry's timer records another position"
		case e.when != e.t.when || e.order != e.t.order():
			return "entry's copy of its timer's order is stale"
		case i > 0 && e.before(&h[(i-1)/4]):
			return "entry before its parent"
		}
	}
	return ""
}
