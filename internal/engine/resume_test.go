package engine

import (
	"errors"
	"testing"
	"time"

	"github.com/latchd/latch"
)

// TestResume: resuming a session aborts its waiting requests (the queue
// moves on), restarts its TTL and keeps its holds.
func TestResume(t *testing.T) {
	h := newHarness(t)
	s := h.open(SessionOptions{TTL: 10 * time.Second})
	other := h.open()
	third := h.open()
	h.grant(s, req("held"))
	h.grant(other, req("busy"))
	w := h.queue(s, withWait(req("busy"), time.Minute))
	w3 := h.queue(third, withWait(req("busy"), time.Minute))
	h.advance(9 * time.Second)
	evs, err := h.e.Resume(h.now, s)
	if err != nil {
		t.Fatal(err)
	}
	h.wantEvents(evs, ev{Kind: EventAborted, Waiter: w, Session: s, At: h.now})
	h.wantEvents(h.release(other, "busy"), granted(w3, third, h.now))
	h.wantEvents(h.advance(9 * time.Second)) // the TTL restarted at the resume
	h.wantHolders("held", s)
	if _, err := h.e.Resume(h.now, 999); !errors.Is(err, latch.ErrNoSession) {
		t.Fatalf("Resume of no session: %v", err)
	}
}
