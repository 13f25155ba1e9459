package latch

import (
	"context"
	"fmt"
	"time"
)

// Service is the lock service the front ends call. One Service holds one
// lock table, shared by every protocol: a lock taken over memcached is the
// lock a dlock client waits for. Implementations are safe for concurrent use.
type Service interface {
	// OpenSession starts a session. The caller must Close it; a front end
	// closes a connection's session when the connection ends, for any
	// reason, so that its locks are released at once.
	OpenSession(opts SessionOptions) (Session, error)

	// ResumeSession takes over session id, which has a TTL and lives on
	// (in a cluster, a client whose server died reaches another one within
	// the TTL): its holds stay, its waiting requests are withdrawn (their
	// callers had them fail with the old connection), and its TTL
	// restarts. The old connection's Close no longer ends it. It fails
	// with ErrNoSession if the session ended, and ErrInvalidRequest for a
	// session bound to its connection (no TTL).
	ResumeSession(id SessionID, opts SessionOptions) (Session, error)

	// Execution reports how the service answers the calls of its
	// sessions. It never changes during the service's life, so a front
	// end may read it once.
	Execution() Execution

	Admin
}

// Execution is how a Service answers the calls of its sessions: at once,
// or once a change has been replicated. It tells a front end what it may
// do with its connections; the answers are the same either way.
type Execution int

const (
	// Inline: a call is decided by the caller's goroutine before it
	// returns, unless its request waits in a lock queue: Acquire then
	// blocks until the request ends, and AcquireFunc returns at once and
	// answers through done when it ends. The Func calls (ReleaseFunc,
	// RenewFunc, KeepAliveFunc) call done before they return, so they
	// gain a front end nothing over the blocking methods. A front end may
	// serve connections from an event loop that many share, as long as no
	// request blocks there in a lock queue (it tries with NoWait, or waits
	// through AcquireFunc). An in-memory single node answers inline.
	Inline Execution = iota

	// Replicated: a call that changes the state (a session's start and
	// end included) returns only once its change is committed and
	// applied, which takes at least one round of replication and, without
	// a leader, may take until the service gives up; Acquire with NoWait
	// blocks as long. AcquireFunc decides nothing at once: every request
	// it accepts returns a non-zero WaitID and is answered through done, a
	// grant at once included; the Func calls answer through done, from
	// another goroutine, so that a front end can keep many requests of one
	// connection in flight. A front end must not make such a call from a
	// goroutine that other connections wait on (an event loop): each
	// would wait for the others' commits. A durable node and a cluster
	// node answer replicated.
	Replicated
)

// String returns "inline" or "replicated".
func (e Execution) String() string {
	switch e {
	case Inline:
		return "inline"
	case Replicated:
		return "replicated"
	}
	return fmt.Sprintf("Execution(%d)", int(e))
}

// Session is one client's handle on the lock table. Its methods are safe for
// concurrent use: a session may wait on several requests at once.
type Session interface {
	// ID names the session.
	ID() SessionID

	// Acquire takes every key of req, waiting as req.Wait allows. It
	// returns when the request is granted (nil error), when it can no
	// longer be (a *BusyError wrapping ErrWouldBlock or ErrTimeout), or
	// when ctx is done (ErrCanceled), the session ends (ErrSessionEnded) or
	// the service shuts down (ErrShutdown). A request that returns an error
	// holds nothing new and has left every queue.
	Acquire(ctx context.Context, req LockRequest) (Grant, error)

	// AcquireFunc is Acquire for a caller that does not block while its
	// request waits. A request decided at once (granted, refused, or
	// failed) returns its grant or error with id 0, and done is never
	// called. A request that must wait is queued and AcquireFunc returns
	// its id at once; done is then called exactly once with the request's
	// end, as Acquire would return it (granted, timed out, cancelled by
	// Cancel, session ended, service shut down), from the goroutine that
	// ended it (a release, a timer, a Close), after the service has let go
	// of its own locks, possibly before AcquireFunc has returned. done
	// must not block: a grant's answer is written from the goroutine that
	// released the lock, so a slow done delays that goroutine's client.
	//
	// A session of a Replicated service decides nothing at once: every
	// request it accepts returns a non-zero id, and done reports its
	// outcome, a grant at once included.
	AcquireFunc(req LockRequest, done func(Grant, error)) (g Grant, id WaitID, err error)

	// Cancel withdraws a request of AcquireFunc that waits: its done is
	// called with an error wrapping ErrCanceled, unless the request ended
	// first. It reports whether it withdrew the request.
	Cancel(id WaitID) bool

	// Release releases keys the session holds. It releases nothing and
	// returns an error wrapping ErrNotHeld if the session does not hold
	// one of them.
	Release(keys ...string) error

	// ReleaseFunc, RenewFunc and KeepAliveFunc are Release, Renew and
	// KeepAlive answered through a function, for a front end that keeps
	// several requests of one connection in flight on a Replicated
	// service, where a front end that waited for each call in turn would
	// have one request of a connection in flight at a time. done is
	// called exactly once with what the blocking method would return,
	// and must not block: on an Inline service from the caller's
	// goroutine before the call returns, on a Replicated one possibly
	// from another goroutine, before or after the call returns. The calls
	// of one session take effect in the order they were made.
	ReleaseFunc(keys []string, done func(error))
	RenewFunc(lease time.Duration, keys []string, done func(Grant, error))
	KeepAliveFunc(done func(error))

	// ReleaseAll releases every lock the session holds, leased ones
	// included, and returns how many keys it released.
	ReleaseAll() (int, error)

	// Renew resets the lease of keys the session holds to end lease from
	// now. A positive lease makes a plain lock a lease; zero turns a lease
	// back into a lock held until release or session end.
	Renew(lease time.Duration, keys ...string) (Grant, error)

	// KeepAlive restarts the session's TTL.
	KeepAlive() error

	// Done is closed when the session has ended, by Close or otherwise
	// (TTL lapsed, ended by an operator, service shut down), or when its
	// cluster server let go of it (see SessionOptions.OnEnd).
	Done() <-chan struct{}

	// Close ends the session: waiting requests fail with ErrSessionEnded
	// and every lock without a lease is released at once. Leased locks stay
	// until their lease ends. Close is idempotent.
	Close() error
}

// WaitID names a request that waits in the lock table (Session.AcquireFunc).
// A running service never reuses one.
type WaitID uint64

// Admin is the operator's view of the lock table.
type Admin interface {
	// Locks lists the keys that are held or waited for, in key order,
	// starting after the key after, with the given prefix, at most limit
	// of them (limit <= 0: all).
	Locks(prefix, after string, limit int) []KeyInfo
	// Lock describes one key; ok is false if it is neither held nor waited for.
	Lock(key string) (info KeyInfo, ok bool)
	// Sessions lists the live sessions in ID order.
	Sessions() []SessionInfo
	// ForceRelease releases every holder of key (no lock-delay) and returns
	// how many holders it removed.
	ForceRelease(key string) (int, error)
	// EndSession ends a session as if it had died: its waiting requests
	// fail and its non-leased locks are released (with its lock-delay);
	// a ZooKeeper session's ephemeral znodes end with it.
	EndSession(id SessionID) error
}

// KeyInfo describes one key of the lock table.
type KeyInfo struct {
	Key     string
	Mode    Mode   // mode of the current holders (meaningless when none)
	Limit   uint32 // shared limit agreed by holders and waiters, 0 = none
	Holders []HolderInfo
	Waiters []WaiterInfo // in queue order
	// DelayedUntil is when a lock-delay on the key ends; zero when none.
	DelayedUntil time.Time
}

// HolderInfo describes one holder of a key.
type HolderInfo struct {
	// Session is 0 once a leased lock's session has ended, and for a lock
	// owned by a value (Owner).
	Session  SessionID
	Protocol string
	Peer     string
	Token    Token
	Acquired time.Time
	Expires  time.Time // lease end; zero when the lock has no lease
	// Owner is the value that owns a lock held by value rather than by a
	// session (a Redis lock client's token); empty otherwise.
	Owner string
}

// WaiterInfo describes one request waiting for a key.
type WaiterInfo struct {
	Session  SessionID
	Protocol string
	Peer     string
	Mode     Mode
	Position int // requests ahead of it in the queue: 0 at the head
	Since    time.Time
	Deadline time.Time // zero when waiting forever
	Keys     int       // how many keys the request names
}

// SessionInfo describes a live session.
type SessionInfo struct {
	ID       SessionID
	Protocol string
	Peer     string
	// Node is the cluster node whose client connection the session is
	// bound to: it lives while that node does. Empty for a session with a
	// TTL and on a single node.
	Node    string
	Opened  time.Time
	TTL     time.Duration
	Expires time.Time // zero without a TTL
	Held    int       // keys held
	Waiting int       // requests waiting
	// Ephemerals are the paths of a ZooKeeper session's ephemeral znodes,
	// in path order, which end with it: empty but not nil for a
	// ZooKeeper session that has none, nil for every other session.
	Ephemerals []string
}
