// Package check holds the history of a Jepsen-style run of latch and the
// checkers that judge it: a linearizability check of every lock's history
// with porcupine against a lock model (exclusive, shared and semaphore
// modes, fencing tokens, outcomes that are unknown, holds that their lease
// ends), a direct count of
// holds that overlap where the lock's mode forbids it (double grants), the
// fenced register's check (no acknowledged write lost or overtaken, tokens
// that only grow), all-or-nothing multi-key grants and waiters that never
// ended.
//
// The package runs nothing: it takes what the workloads recorded, so its
// checkers are tested on histories written by hand.
package check

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"
)

// Kind is what an operation did.
type Kind string

// Kinds of operations.
const (
	// Acquire asks for Keys in Mode (with Limit for a semaphore).
	Acquire Kind = "acquire"
	// Release gives Keys back.
	Release Kind = "release"
	// Lost: the holder learned at Call that the server may release its
	// hold of Keys from then on (a v3 client's Lock.Done closed: its
	// session or lease may end). It is not a request; its end is unknown.
	Lost Kind = "lost"
	// Extend renews the lease of Owner's hold of Keys (a Redis client's
	// compare-and-pexpire) to Lease from when it is applied: OK when the
	// owner held the key, Fail when it did not. Who holds the key does
	// not change.
	Extend Kind = "extend"
	// Read and Write are the fenced register's operations, with Token.
	Read  Kind = "read"
	Write Kind = "write"
)

// Outcome is how an operation ended.
type Outcome string

// Outcomes.
const (
	// OK: granted, released, read or written.
	OK Outcome = "ok"
	// Busy: the lock was not granted because it was held (try-once, or
	// the wait ran out). Nothing was taken.
	Busy Outcome = "busy"
	// Fail: the server answered that it did nothing: a release of a lock
	// it says is not held, a register operation refused as stale.
	Fail Outcome = "fail"
	// Unknown: no answer (connection lost, timeout, an error that does not
	// say whether the request was applied). It may have taken effect at
	// any time from its Call on, or never.
	Unknown Outcome = "unknown"
)

// Mode is a lock's mode.
type Mode string

// Modes.
const (
	Exclusive Mode = "exclusive"
	Shared    Mode = "shared"
)

// Op is one operation of a run, as a worker saw it. Times are nanoseconds
// since the run's start on the harness's monotonic clock.
type Op struct {
	Index  int    `json:"index"`
	Worker int    `json:"worker"`
	Owner  string `json:"owner"` // the session (lock owner) it acted for
	Proto  string `json:"proto"` // v3, v2, memcache, redis
	Node   string `json:"node,omitempty"`
	Kind   Kind   `json:"kind"`

	Keys   []string `json:"keys,omitempty"`
	Mode   Mode     `json:"mode,omitempty"`
	Limit  uint32   `json:"limit,omitempty"`
	Tokens []uint64 `json:"tokens,omitempty"` // of a granted Acquire, aligned with Keys; none over v2 and memcached

	// Watched: the holder watches its hold and records Lost before the
	// server may end it (the v3 client), so the hold is confirmed until
	// its release is sent whatever the answer. An unwatched hold
	// (connection-bound: v2, memcached) is confirmed only by a release
	// answered OK.
	Watched bool `json:"watched,omitempty"`
	// Busy answers of an exclusive single-key request say that the key
	// was held; Strict marks the requests for which they do (FIFO
	// queues make it untrue for shared and multi-key requests).
	Strict bool `json:"strict,omitempty"`
	// Lease, of an Acquire or an Extend, in nanoseconds: the hold it asks
	// for ends by this lease, counted from when the server applies the
	// request, unless its owner releases it first; nothing else ends it
	// (a Redis lock, owned by its value: no session, no connection). The
	// server applies the request after its Call, and its clock does not
	// run faster than the harness's, so the hold lasts at least until
	// Call plus Lease (the newest Extend answered OK sets it anew); the
	// checker confirms the hold until then and lets the server end it at
	// any time after (Locks). An Extend whose outcome is unknown may have
	// set it too: the earlier of the two bounds is kept.
	Lease int64 `json:"lease,omitempty"`

	Token uint64 `json:"token,omitempty"` // register operations
	Value []int  `json:"value,omitempty"` // Read: what was read; Write: what was written
	Add   int    `json:"add,omitempty"`   // Write: the value this write appended

	Call    int64   `json:"call"`
	Return  int64   `json:"return"` // meaningless when Outcome is Unknown
	Outcome Outcome `json:"outcome"`
	Err     string  `json:"err,omitempty"`
	// Stuck: a request that was not answered in its time bound, which
	// covers every wait it asked for (a waiter that never ended).
	Stuck bool `json:"stuck,omitempty"`
}

// History is the operations of a run, recorded by many workers at once.
type History struct {
	start time.Time
	mu    sync.Mutex
	ops   []Op
}

// NewHistory starts a history whose clock starts now.
func NewHistory() *History { return &History{start: time.Now()} }

// Now is the history's clock.
func (h *History) Now() int64 { return int64(time.Since(h.start)) }

// Add records op, numbering it.
func (h *History) Add(op Op) {
	h.mu.Lock()
	defer h.mu.Unlock()
	op.Index = len(h.ops)
	h.ops = append(h.ops, op)
}

// Ops returns the operations recorded so far, in the order of their Call.
func (h *History) Ops() []Op {
	h.mu.Lock()
	ops := slices.Clone(h.ops)
	h.mu.Unlock()
	slices.SortStableFunc(ops, func(a, b Op) int { return cmp.Compare(a.Call, b.Call) })
	return ops
}

// WriteJSON writes v as indented JSON to path.
func WriteJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		return fmt.Errorf("check: encoding %s: %w", path, err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("check: %w", err)
	}
	return nil
}
