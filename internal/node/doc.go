// Package node implements latch.Service, and the memcached front end's item
// service, over the replicated state of internal/fsm: it is what moves
// around the deterministic lock table and item cache.
//
// Every change to the state is a command (fsm.Command) that the node
// proposes through its replica.Replicator; the replicator has it applied
// to the state in log order, and the node acts on each applied command's
// result and events. Nothing else changes the state: reads (admin views,
// stats, gets) read it as it is, and what time causes is proposed too.
//
// A Node owns
//
//   - the proposer's duties: every command is stamped with now = the start
//     time (UnixNano) plus the monotonic time elapsed since, this node's
//     origin and its next sequence number; the first command seeds the
//     fencing-token counter (OpSeed); one timer, armed after each applied
//     batch for the lock table's next deadline (leases, session TTLs,
//     lock-delays, wait deadlines), proposes OpTick; a write to items that
//     would not fit is preceded, in its batch, by the evictions the cache's
//     LRU order plans (OpItemEvict), and SweepItems proposes the eviction of
//     expired items;
//   - the mutex under which commands are proposed and applied (the
//     replicator's StateMachine lock);
//   - sessions as the front ends see them (latch.Session): their options
//     (protocol and peer, for the admin view), the Observer's number for
//     their protocol, and a Done channel closed exactly once when the
//     session ends for any reason;
//   - parked callers: a request that may wait is registered (Node.parked)
//     before its OpAcquire is proposed; the apply that queues it moves it
//     under its lock-table id, matched by the command's sequence number, so
//     that a later command's grant always finds it. The caller of Acquire
//     blocks on a one-slot channel until its end (granted, timed out,
//     aborted) or until its context is done; AcquireFunc's callback is
//     called once mu is released.
//
// A cluster node (Config.Replicator set) applies from its replicator's
// goroutine: a caller waits for its command's result without the mutex,
// AcquireFunc ends are reported from a goroutine of the node's own, and a
// heartbeat keeps the node's connection-bound sessions alive (cluster.go).
// Node.Execution names the two: latch.Inline with replica.Local,
// latch.Replicated with a replicator, fixed by New; the node's own code
// that depends on it reads that one field.
//
// With replica.Local, a Node starts no goroutine of its own, and the
// uncontended path (a request granted at once, a release) locks the
// mutex, stamps one command, applies it in process without encoding,
// dispatches the lock table's events to parked callers without blocking,
// re-arms the timer if the next deadline moved, and unlocks: no channel,
// no central goroutine, no allocation beyond what the lock table needs.
//
// Events are dispatched under the mutex, in order:
//
//   - granted: the parked caller is woken with its Grant;
//   - timed out: woken with a *latch.BusyError wrapping latch.ErrTimeout;
//   - aborted (its session ended): woken with latch.ErrSessionEnded, or
//     latch.ErrShutdown while the node shuts down;
//   - session expired (TTL): the session is marked ended and its Done channel
//     closed;
//   - lease expired: logged at debug level and passed to the Observer.
//
// Events about requests and sessions that are not this node's (another
// replica's) are not acted on.
//
// A front end may hear of every key that an applied command changed
// (WatchKeys: the Redis front end's client-side caching), under the
// mutex, with the client that proposed the command when it was this
// node; the lock table records them only while someone listens.
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
