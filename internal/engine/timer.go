package engine

// timerKind says what a timer ends.
type timerKind uint8

const (
	timerLease    timerKind = iota // a leased hold
	timerSession                   // a session's TTL
	timerDelay                     // a key's lock-delay
	timerDeadline                  // a waiter's deadline
)

// timer is one instant the engine must act at. Expiries (leases, sessions,
// lock-delays) sort before deadlines at the same instant, so that a key
// freed at the instant a waiter gives up is still granted to it; ties within
// a class go in the order the timers were set.
type timer struct {
	when int64
	seq  uint64
	idx  int // position in the heap, -1 when not in it
	kind timerKind
	hold *hold
	sess *session
	key  *key
	wait *waiter
}

func (t *timer) class() uint8 {
	if t.kind == timerDeadline {
		return 1
	}
	return 0
}

// order is t's rank among timers due at the same instant: its class, then
// its sequence number (below 1<<63: Engine.schedule and the snapshot
// restorer keep it there).
func (t *timer) order() uint64 {
	return uint64(t.class())<<63 | t.seq
}

// entry is t's heap entry: t with a copy of its instant and order.
func (t *timer) entry() heapEntry {
	return heapEntry{when: t.when, order: t.order(), t: t}
}

// compareTimers orders timers as they fire (for slices.SortFunc): no two
// scheduled timers tie.
func compareTimers(a, b *timer) int {
	if ea, eb := a.entry(), b.entry(); ea.before(&eb) {
		return -1
	}
	return 1
}

// timerHeap is a 4-ary min-heap of timers that supports removal and
// rescheduling in O(log n). Each entry carries a copy of its timer's
// instant and order, so that sifting compares entries of the heap's own
// array, where a node's children sit side by side, and touches a timer only
// to record where it moved. In a large table the timers are out of the
// cache: a binary heap that read two of them at every level cost most of a
// lock's release, where its last entry, moved into the hole, sank to the
// bottom. With four children a level, three nodes in four are leaves, and
// a sift moves a third as far.
type timerHeap []heapEntry

type heapEntry struct {
	when  int64
	order uint64
	t     *timer
}

// before reports whether a fires before b: at an earlier instant, or at
// the same one in a lower order.
func (a *heapEntry) before(b *heapEntry) bool {
	if a.when != b.when {
		return a.when < b.when
	}
	return a.order < b.order
}

func (h *timerHeap) push(t *timer) {
	t.idx = len(*h)
	*h = append(*h, t.entry())
	h.up(t.idx)
}

func (h *timerHeap) remove(t *timer) {
	if t.idx < 0 {
		return
	}
	i, last := t.idx, len(*h)-1
	if i != last {
		h.swap(i, last)
	}
	(*h)[last] = heapEntry{}
	*h = (*h)[:last]
	t.idx = -1
	if i != last {
		h.sift(i)
	}
}

// fix restores the heap order after the timer at i was rescheduled.
func (h timerHeap) fix(i int) {
	h[i] = h[i].t.entry()
	h.sift(i)
}

// sift moves the entry at i down or up to its place.
func (h timerHeap) sift(i int) {
	if !h.down(i) {
		h.up(i)
	}
}

func (h timerHeap) top() *timer {
	if len(h) == 0 {
		return nil
	}
	return h[0].t
}

func (h timerHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].t.idx = i
	h[j].t.idx = j
}

func (h timerHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 4
		if !h[i].before(&h[p]) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h timerHeap) down(i int) bool {
	start, n := i, len(h)
	for {
		first := 4*i + 1
		if first >= n {
			break
		}
		m := first
		for c := first + 1; c < min(first+4, n); c++ {
			if h[c].before(&h[m]) {
				m = c
			}
		}
		if !h[m].before(&h[i]) {
			break
		}
		h.swap(i, m)
		i = m
	}
	return i > start
}
