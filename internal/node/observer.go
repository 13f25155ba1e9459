package node

import (
	"time"

	"github.com/latchd/latch"
)

// Observer hears what happens in a Node, for metrics. Its methods are
// called with the node's mutex held, on the hot path: they must be quick,
// must not block, and must not call the Node. Embed NopObserver to
// implement only some of them (and to keep compiling when methods are
// added).
type Observer interface {
	// Granted: a request naming keys keys was granted, after waiting
	// waited (0 when granted at once).
	Granted(keys int, waited time.Duration)
	// Released: a session released keys keys (Release, ReleaseAll), or an
	// operator force-released a key with that many holders.
	Released(keys int)
	// TimedOut: a waiting request naming keys keys reached its deadline.
	TimedOut(keys int)
	// Canceled: a waiting request was cancelled by its caller's context.
	Canceled()
	// LeaseExpired: a leased hold on key ended.
	LeaseExpired(key string)
	// SessionExpired: a session's TTL lapsed.
	SessionExpired(id latch.SessionID)
}

// NopObserver implements Observer and does nothing.
type NopObserver struct{}

func (NopObserver) Granted(int, time.Duration)     {}
func (NopObserver) Released(int)                   {}
func (NopObserver) TimedOut(int)                   {}
func (NopObserver) Canceled()                      {}
func (NopObserver) LeaseExpired(string)            {}
func (NopObserver) SessionExpired(latch.SessionID) {}
