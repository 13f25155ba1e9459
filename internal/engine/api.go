package engine

import (
	"fmt"
	"time"

	"github.com/latchd/latch"
)

// Config configures an Engine.
type Config struct {
	// MaxKeys limits the keys of one request; 0 means no limit.
	MaxKeys int
	// MaxWaitersPerKey limits the requests queued on one key; 0 (or more
	// than MaxQueue) means MaxQueue. A request that would have to wait on
	// a key whose queue is full fails with latch.ErrTooManyWaiters,
	// changing nothing.
	MaxWaitersPerKey int
	// MaxWaiters limits the requests queued in the whole table; 0 means no
	// limit. A request that would have to wait when that many are queued
	// fails with latch.ErrTooManyWaiters, changing nothing.
	MaxWaiters int
	// RecordDrops makes the engine record the holds each call removes,
	// for Drops (metrics). Off, Drops is always empty and costs nothing.
	RecordDrops bool
}

// MaxQueue is the most requests that may wait on one key, whatever
// Config.MaxWaitersPerKey says: a key's record counts its waiters in 16
// bits, which keeps it small.
const MaxQueue = 1<<16 - 1

// WaiterID names a queued request. IDs are never reused by an Engine.
type WaiterID uint64

// SessionOptions configure a session. See latch.SessionOptions.
type SessionOptions struct {
	TTL       time.Duration
	LockDelay time.Duration
}

// Result is the outcome of an Acquire that did not fail.
type Result struct {
	// Granted is true when the request was granted at once.
	Granted bool
	// Token and Expires describe the grant (Expires is 0 without a lease).
	Token   latch.Token
	Expires int64
	// Waiter names the queued request when Granted is false. Its end is
	// reported later by an Event (Granted, TimedOut or Aborted), or the
	// driver removes it with Cancel.
	Waiter WaiterID
}

// EventKind says what an Event reports.
type EventKind uint8

const (
	// EventGranted: a queued request was granted (Waiter, Session, Token,
	// Expires).
	EventGranted EventKind = iota + 1
	// EventTimedOut: a queued request reached its deadline (Waiter,
	// Session, Keys = the keys it could not take, in request order).
	EventTimedOut
	// EventAborted: a queued request was removed because its session ended
	// (Waiter, Session).
	EventAborted
	// EventSessionExpired: a session's TTL lapsed and it ended (Session).
	EventSessionExpired
	// EventLeaseExpired: a leased hold ended (Key, Session (0 if the
	// session had ended), Token).
	EventLeaseExpired
)

func (k EventKind) String() string {
	switch k {
	case EventGranted:
		return "granted"
	case EventTimedOut:
		return "timed-out"
	case EventAborted:
		return "aborted"
	case EventSessionExpired:
		return "session-expired"
	case EventLeaseExpired:
		return "lease-expired"
	}
	return "unknown"
}

// Event reports one thing that happened inside the engine.
type Event struct {
	Kind    EventKind
	At      int64 // the instant it happened
	Waiter  WaiterID
	Session latch.SessionID
	Token   latch.Token
	Expires int64
	Key     string
	Keys    []string
}

// String formats every non-zero field of ev, so that two events format
// alike exactly when they are equal (for logs and test failures).
func (ev Event) String() string {
	s := fmt.Sprintf("@%d %v", ev.At, ev.Kind)
	if ev.Waiter != 0 {
		s += fmt.Sprintf(" w%d", ev.Waiter)
	}
	if ev.Session != 0 {
		s += fmt.Sprintf(" s%d", ev.Session)
	}
	if ev.Key != "" {
		s += fmt.Sprintf(" key=%s", ev.Key)
	}
	if ev.Token != 0 {
		s += fmt.Sprintf(" tok=%d", ev.Token)
	}
	if ev.Expires != 0 {
		s += fmt.Sprintf(" exp=%d", ev.Expires)
	}
	if ev.Keys != nil {
		s += fmt.Sprintf(" keys=%q", ev.Keys)
	}
	return s
}

// DropCause says why a hold ended.
type DropCause uint8

const (
	// DropReleased: its session released it (Release, ReleaseAll).
	DropReleased DropCause = iota + 1
	// DropSessionEnded: its session ended (EndSession, or its TTL lapsed)
	// and the hold had no lease.
	DropSessionEnded
	// DropLeaseExpired: its lease ended.
	DropLeaseExpired
	// DropForced: an operator force-released its key (ForceRelease).
	DropForced
)

func (c DropCause) String() string {
	switch c {
	case DropReleased:
		return "released"
	case DropSessionEnded:
		return "session-ended"
	case DropLeaseExpired:
		return "lease-expired"
	case DropForced:
		return "forced"
	}
	return "unknown"
}

// Drop describes a hold that a call removed from the table (see
// Engine.Drops), for metrics: how long it was held and why it ended. It
// holds no pointer, so that recording it costs no write barrier.
type Drop struct {
	Session  latch.SessionID // 0 for a lease whose session had ended, or an owned hold
	Acquired int64           // when the hold was granted
	At       int64           // when it ended
	Cause    DropCause
	Owned    bool // an owned hold (AcquireOwned): Session is 0
}

// Stats are counts of the engine's state, for metrics.
type Stats struct {
	Keys     int         // keys held, waited for, or under lock-delay
	Holds    int         // (key, holder) pairs
	Waiters  int         // queued requests
	Sessions int         // live sessions
	Token    latch.Token // the last token granted
}

// KeyState describes one key (see latch.KeyInfo). Times are engine instants.
type KeyState struct {
	Key          string
	Mode         latch.Mode
	Limit        uint32
	Holders      []HolderState
	Waiters      []WaiterState
	DelayedUntil int64
}

// HolderState describes one hold of a key.
type HolderState struct {
	Session  latch.SessionID // 0 for a lease whose session ended, or an owned hold
	Token    latch.Token
	Acquired int64
	Expires  int64
	// Owned is true for an owned hold (no session); Owner is its value.
	Owned bool
	Owner string
}

// WaiterState describes one queued request on a key.
type WaiterState struct {
	ID       WaiterID
	Session  latch.SessionID
	Mode     latch.Mode
	Limit    uint32
	Position int
	Since    int64
	Deadline int64 // 0 when waiting forever
	Keys     []string
}

// SessionState describes one live session.
type SessionState struct {
	ID        latch.SessionID
	Opened    int64
	TTL       time.Duration
	LockDelay time.Duration
	Expires   int64 // 0 without a TTL
	Held      int
	Waiting   int
}
