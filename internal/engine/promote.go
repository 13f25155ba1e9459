package engine

import (
	"slices"
	"time"
)

// Promote moves every session TTL deadline and every lease end that falls
// before now+grace to now+grace, and returns what bringing the table up to
// now ended first. A new leader calls it before anything else, so that the
// time no leader could hear a keepalive or a renewal never ends a session or
// a lease by itself: a failover never shortens either. Waiter deadlines and
// lock-delays are left alone.
//
// The moved timers keep their relative order: they are rescheduled in the
// order they would have fired, so replicas whose heaps are laid out
// differently (one restored from a snapshot) still agree.
func (e *Engine) Promote(now int64, grace time.Duration) []Event {
	e.begin(now)
	until := addTime(e.now, max(grace, 0))
	var due []*timer
	for _, ent := range e.timers {
		if t := ent.t; (t.kind == timerLease || t.kind == timerSession) && t.when < until {
			due = append(due, t)
		}
	}
	slices.SortFunc(due, compareTimers)
	for _, t := range due {
		e.schedule(t, until)
	}
	return e.events
}
