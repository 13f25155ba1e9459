// Package engine owns the lock table: holders, per-key FIFO wait queues,
// all-or-nothing multi-key grants, sessions, leases, lock-delays and the
// fencing-token counter.
//
// The engine is a deterministic state machine. It owns no goroutines, timers
// or I/O and is not safe for concurrent use: its driver (internal/node)
// serialises calls and passes the current time, in nanoseconds on a clock of
// its choosing, to every method. Time never runs backwards inside the engine;
// an earlier now is treated as the latest seen. Every method first brings the
// table up to now (expiring leases, sessions and lock-delays and timing out
// waiters whose instants are at or before now) and then does its own work.
// What happened is returned as Events, in the order it happened; the returned
// slice is owned by the engine and valid until the next call.
//
// # Rules
//
//   - A key is held by one exclusive holder or by shared holders. Shared
//     holders agree on a limit (0 = none); at most limit of them hold it.
//   - Every key has a FIFO queue. A request joins the queue of every key it
//     names in one step, so all queues agree on arrival order. A waiting
//     request holds nothing it did not already hold.
//   - A waiter W is granted, on all its keys at once, as soon as for every key
//     of W: W is compatible with the holders, and with every waiter ahead of
//     W in that key's queue (an earlier waiter counts as if it held the key).
//     Exclusive is compatible with nothing; shared is compatible with shared
//     while the count stays within the limit. So consecutive shared waiters at
//     the head are granted together, and no waiter is granted while an earlier
//     conflicting waiter on one of its keys still waits. Because the earliest
//     waiter is blocked only by holders, waiting alone never deadlocks.
//   - Requests that become grantable at the same instant are granted in
//     arrival order, so their tokens follow it.
//   - A key under lock-delay is compatible with nothing until the delay ends.
//   - Every grant takes the next token from one counter that only grows.
//   - A try-once request (latch.NoWait) that cannot be granted at once, or
//     that would have to queue behind a conflicting waiter, fails with
//     latch.ErrWouldBlock and changes nothing.
//   - A request that would have to queue when one of its keys already has
//     Config.MaxWaitersPerKey waiters (never more than MaxQueue), or the
//     table Config.MaxWaiters (0: no limit), fails with
//     latch.ErrTooManyWaiters and changes nothing.
//   - Re-lock (a session asks for a key it holds): RelockReject fails with
//     latch.ErrAlreadyHeld. RelockReuse counts the key as available if held
//     in the same mode (latch.ErrModeMismatch otherwise); when every key is
//     already held the grant returns the newest existing token and only
//     resets the leases, otherwise a new token is stamped on every key of the
//     request.
//   - A lease (positive Lease) ends the hold at grant time + Lease unless
//     renewed. Leased holds survive the end of their session.
//   - Ending a session (EndSession, or its TTL lapsing) fails its waiters
//     and releases its non-leased holds at that instant; a positive
//     LockDelay then keeps each released key unavailable for that long.
//     Release and ReleaseAll never apply lock-delay.
//   - At one instant, expiries (leases, sessions, lock-delays) happen before
//     waiter deadlines, so a waiter whose deadline equals the instant a key
//     frees is granted. Instants are processed in time order.
//
// # Snapshots
//
// Engine.AppendSnapshot encodes the whole replicated state: the time, the
// token counter, the ID and timer counters, and every session, key, hold,
// lease, lock-delay and queued request, including what decides the
// engine's next moves (the order of the holds in their lists, the sequence
// numbers that break ties between timers of one instant). The encoding is
// versioned (first byte 1) and canonical: engines in the same state produce
// the same bytes, whatever order Go iterates their maps in. Restore
// rebuilds an Engine from it that behaves exactly as the one snapshotted:
// the same calls then give the same results, events, tokens and IDs. The
// Config is process configuration and not part of a snapshot, nor are the
// events and drops of the last call. Restore rejects malformed or
// inconsistent input with an error wrapping ErrBadSnapshot. The token
// counter is seeded once per state with Engine.SeedToken, so that tokens
// keep growing across in-memory restarts.
//
// Engine.Capture takes the same snapshot at one instant without encoding
// it then: its driver encodes it a step at a time between the calls that
// change the table (Capture.Step), and writes it out without the engine
// (Capture.AppendTo). Until it is complete, the first change of an entry
// the capture has not encoded yet encodes it first, as it was.
package engine
