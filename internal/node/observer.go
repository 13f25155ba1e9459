package node

import (
	"math"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/engine"
)

// Observer hears what happens in a Node, for metrics. Its methods, except
// HandedOff, are called with the node's mutex held, on the hot path: they
// must be quick, must not block, must not allocate, and must not call the
// Node. State an Observer keeps is therefore guarded by the node's mutex;
// read it inside Node.WithStats. Embed NopObserver to implement only some of
// the methods (and to keep compiling when methods are added).
//
// Events name the protocol of the session they concern by the number
// SessionOpened returned for it (proto), so that an Observer can keep its
// counters in a slice instead of looking names up on every call.
type Observer interface {
	// SessionOpened: a session of the named protocol
	// (latch.SessionOptions.Protocol, possibly empty) is opening. It
	// returns the proto that the node passes for the session's events
	// from then on: a small positive number (NoProto, 0, is taken), the
	// same for the same name.
	SessionOpened(protocol string) (proto int)
	// SessionEnded: a session ended: closed, ended by an operator, its TTL
	// lapsed, or the node shut down.
	SessionEnded(proto int)
	// SessionExpired: a session's TTL lapsed (SessionEnded follows).
	SessionExpired(proto int)

	// Granted: a request naming keys keys was granted, after waiting
	// waited (0 when granted at once).
	Granted(proto, keys int, waited time.Duration)
	// TimedOut: a waiting request naming keys keys reached its deadline.
	TimedOut(proto, keys int)
	// Canceled: a waiting request was cancelled by its caller's context.
	Canceled(proto int)
	// Released: holds ended, one Drop each, in the order the lock table
	// removed them: Tag is the proto of the holder's session (NoProto for
	// a lease that outlived it, OwnedProto for an owned hold, which has
	// no session), At-Acquired how long it was held (engine
	// instants are nanoseconds), Cause why it ended. One call reports all
	// the holds one operation ended; drops is valid only during the call.
	Released(drops []Drop)

	// HandedOff: a caller whose request waited in a queue has resumed with
	// its grant, latency after the release (or expiry, or forced release)
	// that let the request be granted. Unlike the other methods it is
	// called without the node's mutex, by the caller's goroutine, so it
	// must be safe for concurrent use.
	HandedOff(latency time.Duration)
}

// NoProto is the proto of a hold whose session had ended: a lease that
// outlived its session. SessionOpened never returns it.
const NoProto = 0

// OwnedProto is the proto of the events of owned locks (Node.Owned), which
// belong to no session: their grants and the ends of their holds. Their
// protocol is OwnedProtocol. SessionOpened never returns it.
const OwnedProto = math.MaxInt32

// Drop describes a hold that ended; see Observer.Released. It holds no
// pointer, so that recording it costs no write barrier.
type Drop struct {
	Session  latch.SessionID // 0 for a lease whose session had ended
	Tag      uint32          // the proto of the holder's session; NoProto without one, OwnedProto for an owned hold
	Acquired int64           // when the hold was granted
	At       int64           // when it ended
	Cause    ReleaseCause
}

// ReleaseCause says why a hold ended: Drop.Cause.
type ReleaseCause = engine.DropCause

// The ReleaseCause values.
const (
	// ReleasedByClient: the holder released it (Release, ReleaseAll).
	ReleasedByClient = engine.DropReleased
	// ReleasedSessionEnded: its session ended (closed, ended by an
	// operator, TTL lapsed, node shut down) and the hold had no lease.
	ReleasedSessionEnded = engine.DropSessionEnded
	// ReleasedLeaseExpired: its lease ended.
	ReleasedLeaseExpired = engine.DropLeaseExpired
	// ReleasedForced: an operator force-released the key.
	ReleasedForced = engine.DropForced

	// NumReleaseCauses bounds the ReleaseCause values, for arrays indexed
	// by cause (index 0 is unused).
	NumReleaseCauses = int(engine.DropForced) + 1
)

// NopObserver implements Observer and does nothing.
type NopObserver struct{}

func (NopObserver) SessionOpened(string) int        { return 1 }
func (NopObserver) SessionEnded(int)                {}
func (NopObserver) SessionExpired(int)              {}
func (NopObserver) Granted(int, int, time.Duration) {}
func (NopObserver) TimedOut(int, int)               {}
func (NopObserver) Canceled(int)                    {}
func (NopObserver) Released([]Drop)                 {}
func (NopObserver) HandedOff(time.Duration)         {}

var _ Observer = NopObserver{}

// Stats are counts of a Node's lock table and of its ZooKeeper data tree.
type Stats struct {
	Keys     int         // keys held, waited for, or under lock-delay
	Holds    int         // (key, holder) pairs: a shared key held twice counts 2
	Waiters  int         // queued requests
	Sessions int         // live sessions, the ZooKeeper ones included
	Token    latch.Token // the last fencing token granted

	// The data tree's: ZooKeeper sessions (each is one of Sessions too),
	// znodes (the root and the built-in /zookeeper ones included),
	// ephemeral znodes, and the zxid of its last change.
	ZSessions  int
	Znodes     int
	Ephemerals int
	Zxid       int64
}
