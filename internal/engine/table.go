package engine

import (
	"time"

	"github.com/latchd/latch"
)

// key is one entry of the lock table: its holders, its FIFO queue and its
// lock-delay. A key exists while it is held, waited for, or delayed.
type key struct {
	name  string
	holds *hold   // holders, newest first
	qhead *qentry // queue; qhead.prev is the tail

	nholds  int32
	limit   uint32
	qexcl   uint16     // exclusive waiters in the queue
	qshared uint16     // shared waiters in the queue (with qexcl, at most maxQueue)
	mode    latch.Mode // of the holders, meaningful while nholds > 0
	dirty   bool       // in Engine.dirty, waiting for its queue to be served
	delayed bool       // under lock-delay; the timer is in Engine.delays

	// h0 is the key's first hold, kept inline so that an uncontended lock
	// costs one object. It is free when h0.k is nil.
	h0 hold
}

// empty reports whether the key can leave the table.
func (k *key) empty() bool {
	return k.nholds == 0 && k.qhead == nil && !k.delayed
}

// nshared counts the shared holders and shared waiters, who must agree on
// the key's limit.
func (k *key) nshared() int32 {
	n := int32(k.qshared)
	if k.mode == latch.Shared {
		n += k.nholds
	}
	return n
}

// queued returns how many requests wait on k; 0 when k is nil (absent
// from the table).
func (k *key) queued() int {
	if k == nil {
		return 0
	}
	return int(k.qexcl) + int(k.qshared)
}

// hold is one holder of one key. It sits in two lists: the key's holders and
// its session's holds.
type hold struct {
	k        *key
	s        *session // nil once a leased hold's session has ended
	token    latch.Token
	acquired int64
	lease    *timer // nil without a lease
	// An owned hold (owned.go) is owned by the value owner, not by a
	// session.
	owner string
	owned bool

	kprev, knext *hold
	sprev, snext *hold
}

// session owns holds and waiters.
type session struct {
	id        latch.SessionID
	opened    int64
	ttl       time.Duration
	lockDelay time.Duration
	expiry    *timer // nil without a TTL

	holds   *hold
	nholds  int
	waiters *waiter
	nwait   int
}

// waiter is one queued request. It has an entry in the queue of every key
// it names.
type waiter struct {
	id       WaiterID
	s        *session
	mode     latch.Mode
	limit    uint32
	relock   latch.Relock
	lease    time.Duration
	since    int64
	deadline *timer // nil when waiting forever
	entries  []qentry
	ready    bool // found grantable by serve, about to be granted

	sprev, snext *waiter
}

// qentry is a waiter's place in one key's queue. The queue is linked
// through next from head to tail, and through prev circularly: the head's
// prev is the tail, so a key needs no tail pointer.
type qentry struct {
	w          *waiter
	k          *key
	prev, next *qentry
}

// linkHold adds h to the holders of its key and to its session's holds.
func linkHold(h *hold) {
	k := h.k
	h.kprev, h.knext = nil, k.holds
	if k.holds != nil {
		k.holds.kprev = h
	}
	k.holds = h
	k.nholds++
	if s := h.s; s != nil {
		h.sprev, h.snext = nil, s.holds
		if s.holds != nil {
			s.holds.sprev = h
		}
		s.holds = h
		s.nholds++
	}
}

// unlinkFromKey removes h from its key's holders.
func unlinkFromKey(h *hold) {
	k := h.k
	if h.kprev != nil {
		h.kprev.knext = h.knext
	} else {
		k.holds = h.knext
	}
	if h.knext != nil {
		h.knext.kprev = h.kprev
	}
	h.kprev, h.knext = nil, nil
	k.nholds--
}

// unlinkFromSession removes h from its session's holds and detaches it.
func unlinkFromSession(h *hold) {
	s := h.s
	if s == nil {
		return
	}
	if h.sprev != nil {
		h.sprev.snext = h.snext
	} else {
		s.holds = h.snext
	}
	if h.snext != nil {
		h.snext.sprev = h.sprev
	}
	h.sprev, h.snext = nil, nil
	h.s = nil
	s.nholds--
}

// holdOf returns s's hold on k, or nil.
func (k *key) holdOf(s *session) *hold {
	for h := k.holds; h != nil; h = h.knext {
		if h.s == s {
			return h
		}
	}
	return nil
}

// enqueue appends e to its key's queue.
func enqueue(e *qentry) {
	k := e.k
	e.next = nil
	if head := k.qhead; head == nil {
		k.qhead, e.prev = e, e
	} else {
		tail := head.prev
		tail.next, e.prev, head.prev = e, tail, e
	}
	if e.w.mode == latch.Exclusive {
		k.qexcl++
	} else {
		k.qshared++
	}
}

// dequeue removes e from its key's queue.
func dequeue(e *qentry) {
	k := e.k
	switch {
	case e == k.qhead:
		k.qhead = e.next
		if e.next != nil {
			e.next.prev = e.prev
		}
	case e.next == nil: // the tail
		e.prev.next = nil
		k.qhead.prev = e.prev
	default:
		e.prev.next = e.next
		e.next.prev = e.prev
	}
	e.prev, e.next = nil, nil
	if e.w.mode == latch.Exclusive {
		k.qexcl--
	} else {
		k.qshared--
	}
}

// linkWaiter adds w to its session's waiters.
func linkWaiter(w *waiter) {
	s := w.s
	w.sprev, w.snext = nil, s.waiters
	if s.waiters != nil {
		s.waiters.sprev = w
	}
	s.waiters = w
	s.nwait++
}

// unlinkWaiter removes w from its session's waiters.
func unlinkWaiter(w *waiter) {
	s := w.s
	if w.sprev != nil {
		w.sprev.snext = w.snext
	} else {
		s.waiters = w.snext
	}
	if w.snext != nil {
		w.snext.sprev = w.sprev
	}
	w.sprev, w.snext = nil, nil
	s.nwait--
}
