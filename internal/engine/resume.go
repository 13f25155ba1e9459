package engine

import (
	"fmt"

	"github.com/latchd/latch"
)

// Resume hands session id over to a new connection (a client that lost
// its server and reached another): its waiting requests are aborted,
// since the client that made them had them fail with the connection, and
// its TTL restarts. Its holds are untouched. It fails with
// latch.ErrNoSession for a session that does not exist.
func (e *Engine) Resume(now int64, id latch.SessionID) ([]Event, error) {
	e.begin(now)
	s := e.sessions[id]
	if s == nil {
		return e.events, fmt.Errorf("resume session %d: %w", id, latch.ErrNoSession)
	}
	for s.waiters != nil {
		w := s.waiters
		e.emit(Event{Kind: EventAborted, Waiter: w.id, Session: s.id})
		e.removeWaiter(w)
	}
	if s.expiry != nil {
		e.schedule(s.expiry, addTime(e.now, s.ttl))
	}
	e.serve()
	return e.events, nil
}
