package latch

import (
	"fmt"
	"time"
)

// Mode is how a lock is held.
type Mode uint8

const (
	// Exclusive: one holder, nobody beside it.
	Exclusive Mode = iota
	// Shared: any number of shared holders, or at most Limit of them.
	Shared
)

func (m Mode) String() string {
	switch m {
	case Exclusive:
		return "exclusive"
	case Shared:
		return "shared"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// Token is a fencing token. Every grant gets one from a single counter that
// only grows, so a later holder of a key always has a larger token than an
// earlier one. Clients pass it to the resource they protect, which rejects
// writes carrying a token older than the newest it has seen.
type Token uint64

// SessionID names a session: the owner of locks. Every client connection is
// a session. IDs are never reused by a running server.
type SessionID uint64

// Relock says what happens when a session asks for a key it already holds.
type Relock uint8

const (
	// RelockReject fails the request with ErrAlreadyHeld (memcached and
	// yrmcds: locks are not re-entrant).
	RelockReject Relock = iota
	// RelockReuse grants the request: the key stays held, its lease is reset
	// to the new request's lease, and, when no other key had to be taken,
	// the existing token is returned (dlock v2 re-lock, v3 idempotent lock).
	RelockReuse
)

// Wait values for LockRequest.Wait besides a positive duration.
const (
	// NoWait tries once: the request is granted at once or fails with
	// ErrWouldBlock.
	NoWait time.Duration = 0
	// WaitForever queues the request until it is granted, cancelled, or
	// its session ends.
	WaitForever time.Duration = -1
)

// LockRequest asks for one or more keys at once. A multi-key request is
// granted all at once or not at all; while it waits it holds nothing it did
// not hold before.
type LockRequest struct {
	// Keys to lock; duplicates count once. See CheckKey.
	Keys []string
	// Mode of the lock on every key.
	Mode Mode
	// Limit caps the number of shared holders of each key (a counting
	// semaphore). 0 means no cap. Only for Shared; every holder and waiter
	// of a key must ask for the same limit.
	Limit uint32
	// Wait is NoWait, WaitForever, or how long the request may queue.
	Wait time.Duration
	// Lease, when positive, makes the grant a lease: it outlives the
	// session and ends this long after the grant unless renewed. Zero means
	// the lock is held until released or until the session ends.
	Lease time.Duration
	// Relock is the policy for keys the session already holds.
	Relock Relock
}

// Grant is a granted request.
type Grant struct {
	// Token is the fencing token of the grant, the same for every key of
	// the request.
	Token Token
	// Expires is when the lease ends; zero when the grant has no lease.
	Expires time.Time
}

// SessionOptions configure a new session.
type SessionOptions struct {
	// TTL, when positive, ends the session if it is not kept alive for
	// this long (dlock v3 sessions). Zero: the session lives until closed.
	TTL time.Duration
	// LockDelay, when positive, keeps the keys a session held unavailable
	// for this long after the session dies holding them (expired, ended by
	// an operator, or closed with its connection lost). Never applied to a
	// normal release.
	LockDelay time.Duration
	// Protocol and Peer describe the session's client, for introspection
	// (for example "memcache" and "127.0.0.1:53422").
	Protocol string
	Peer     string
	// OnEnd, when set, is called once, in a goroutine of its own, when
	// the session ends other than by its Close: an operator ended it, its
	// TTL lapsed, its server can no longer vouch for it (cluster), or the
	// service shut down. why wraps ErrShutdown in the last case,
	// ErrUnavailable for a session with a TTL that a cluster server let
	// go of (it may live on in the cluster, for its client to resume
	// elsewhere), and ErrSessionEnded in the others. A front end closes
	// the client's connection from it, rather than keep a goroutine per
	// connection waiting on Session.Done.
	OnEnd func(why error)
}
