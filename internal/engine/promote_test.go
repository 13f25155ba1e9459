package engine

import (
	"testing"
	"time"

	"github.com/latchd/latch"
)

// TestPromote: a new leader's grace moves session TTLs and leases that end
// before it to its end, leaves later ones alone, and touches neither wait
// deadlines nor lock-delays.
func TestPromote(t *testing.T) {
	const grace = 4 * time.Second
	h := newHarness(t)
	short := h.open(SessionOptions{TTL: time.Second})     // ends inside the grace
	long := h.open(SessionOptions{TTL: 10 * time.Second}) // ends after it
	plain := h.open()
	h.grant(plain, withLease(req("leased"), 2*time.Second))
	h.grant(plain, withLease(req("far"), time.Minute))
	h.grant(plain, req("held"))
	w := h.queue(short, withWait(req("held"), time.Second))

	delayed := h.open(SessionOptions{LockDelay: 3 * time.Second})
	h.grant(delayed, req("delayed"))
	if _, err := h.e.EndSession(h.now, delayed); err != nil {
		t.Fatal(err)
	}

	start := h.now
	h.wantEvents(h.e.Promote(h.now, grace))

	// The waiter's deadline (1 s) is not extended; the lock-delay (3 s)
	// is not either.
	h.wantEvents(h.advance(time.Second), ev{Kind: EventTimedOut, Waiter: w, Session: short, At: start + int64(time.Second)})
	h.advance(2 * time.Second)
	other := h.open()
	h.grant(other, req("delayed"))

	// Nothing else ends before the grace is over.
	h.wantEvents(h.advance(grace - 3*time.Second - 1))
	h.wantEvents(h.advance(1),
		ev{Kind: EventSessionExpired, Session: short, At: start + int64(grace)},
		ev{Kind: EventLeaseExpired, Session: plain, Key: "leased", At: start + int64(grace)},
	)
	if st, ok := h.e.Session(long); !ok || st.Expires != start+int64(10*time.Second) {
		t.Fatalf("long session = %+v, %v; want its own deadline", st, ok)
	}
	h.wantHolders("far", plain)
}

// TestPromoteKeepsOrder: timers moved to the same instant fire in the
// order they would have fired in.
func TestPromoteKeepsOrder(t *testing.T) {
	h := newHarness(t)
	var want []ev
	var ids []latch.SessionID
	for i := range 5 {
		ids = append(ids, h.open(SessionOptions{TTL: time.Duration(5-i) * time.Millisecond}))
	}
	h.e.Promote(h.now, time.Second)
	for i := 4; i >= 0; i-- {
		want = append(want, ev{Kind: EventSessionExpired, Session: ids[i], At: h.now + int64(time.Second)})
	}
	h.wantEvents(h.advance(time.Second), want...)
}
