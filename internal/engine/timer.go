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

func (t *timer) before(u *timer) bool {
	if t.when != u.when {
		return t.when < u.when
	}
	if c, d := t.class(), u.class(); c != d {
		return c < d
	}
	return t.seq < u.seq
}

// timerHeap is a binary min-heap of timers that supports removal and
// rescheduling in O(log n).
type timerHeap []*timer

func (h *timerHeap) push(t *timer) {
	t.idx = len(*h)
	*h = append(*h, t)
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
	(*h)[last] = nil
	*h = (*h)[:last]
	t.idx = -1
	if i != last {
		h.fix(i)
	}
}

// fix restores the heap order after the timer at i changed.
func (h *timerHeap) fix(i int) {
	if !h.down(i) {
		h.up(i)
	}
}

func (h timerHeap) top() *timer {
	if len(h) == 0 {
		return nil
	}
	return h[0]
}

func (h timerHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx = i
	h[j].idx = j
}

func (h timerHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h[i].before(h[p]) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h timerHeap) down(i int) bool {
	start, n := i, len(h)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && h[r].before(h[l]) {
			m = r
		}
		if !h[m].before(h[i]) {
			break
		}
		h.swap(i, m)
		i = m
	}
	return i > start
}
