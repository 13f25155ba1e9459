// Package node implements latch.Service over the lock engine: it is what
// moves around the deterministic lock table of internal/engine.
//
// A Node owns
//
//   - the clock: every engine call gets now = the start time (UnixNano) plus
//     the monotonic time elapsed since, so engine instants are wall-clock
//     nanoseconds that never run backwards;
//   - the mutex that serialises every engine call;
//   - sessions as the front ends see them (latch.Session): their options
//     (protocol and peer, for the admin view) and a Done channel closed
//     exactly once when the session ends for any reason;
//   - parked callers: a request the engine queues is registered under its
//     engine.WaiterID and its goroutine blocks on a one-slot channel until the
//     engine reports its end (granted, timed out, aborted) or its context is
//     done;
//   - one timer for every engine deadline (leases, session TTLs, lock-delays,
//     wait deadlines), re-armed after each engine call to the engine's next
//     deadline.
//
// A Node starts no goroutine of its own. The uncontended path (a request
// granted at once, a release) locks the mutex, calls the engine, dispatches
// the engine's events to parked callers without blocking, re-arms the timer
// if the next deadline moved, and unlocks: no channel, no central goroutine,
// no allocation beyond what the engine needs.
//
// Events the engine reports are dispatched under the mutex, in order:
//
//   - granted: the parked caller is woken with its Grant;
//   - timed out: woken with a *latch.BusyError wrapping latch.ErrTimeout;
//   - aborted (its session ended): woken with latch.ErrSessionEnded, or
//     latch.ErrShutdown while the node shuts down;
//   - session expired (TTL): the session is marked ended and its Done channel
//     closed;
//   - lease expired: logged at debug level and passed to the Observer.
//
// Config.Observer, when set, hears about sessions, grants, timeouts,
// cancellations and every hold that ends (with its hold time and why it
// ended, from engine.Engine.Drops), for metrics. It is called under the
// mutex, with the session's protocol as a small number it chose when the
// session opened, so that a metrics implementation can count in slices
// without locking or allocating; the one exception, HandedOff, is called by
// a woken caller without the mutex. WithStats reads the lock table's counts
// under the mutex, and with them whatever the Observer keeps.
package node
