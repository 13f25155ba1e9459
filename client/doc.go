// Package client is the Go client of latch: it takes locks from a latch
// server over dlock protocol version 3 (docs/protocol.md).
//
//	c, err := client.Dial(ctx, "127.0.0.1:11212")
//	...
//	defer c.Close()
//	l, err := c.Lock(ctx, []string{"invoice/42"}, client.Wait(10*time.Second))
//	...
//	defer l.Unlock(ctx)
//	store.Write(l.Token(), ...) // fenced by the lock's token
//
// # Sessions
//
// A Client is one connection and one session of the server. Every lock it
// takes is held by that session: a lock without a lease is released when
// the session ends, a leased lock (Lease) when its lease ends. The server
// sees the locks of one Client as one owner, so one Client cannot hold a
// key twice: a request for a key that another Lock of the same Client holds
// or waits for fails with latch.ErrAlreadyHeld. Goroutines that must
// exclude each other through latch use a Client each.
//
// Requests do not queue behind each other on the connection: a Client can
// wait for many locks at once, and its keepalives pass while it waits.
//
// # Keepalive and lock loss
//
// The session has a TTL (SessionTTL): the server ends it, releasing its
// locks, when no keepalive has reached it for that long, even if the
// connection looks open (a network partition, a paused process). The Client
// sends a keepalive three times in every TTL minus the safety margin, and
// remembers when it sent the newest keepalive the server answered: call
// that instant A. The server received that keepalive after A, so it cannot
// end the session by its TTL before A + TTL on its own clock.
//
// When no keepalive sent after A has been answered by A + TTL - margin, by
// the Client's clock, the Client gives the session up: the Done channel of
// every Lock closes, every waiting request fails with an error wrapping
// latch.ErrSessionEnded, and the connection is closed at A + TTL (closing it
// earlier would make the server release the locks at once). A lease is
// watched the same way, from the send time of the request that set it,
// with a margin of at most a quarter of the lease.
//
// So Done closes at least the margin before the server could grant a lock
// to someone else because its session or lease lapsed, provided the two
// clocks advance at rates that differ by less than margin/TTL, and the
// Client's process is not paused for longer than what is left of the
// margin. A server that closes the connection of a live session (it shut
// down, or closed it after its idle timeout, which must not be shorter
// than the session TTL) has released its locks already: Done closes as
// soon as the Client learns that the session ended. An operator's
// force-release through the admin API is not noticed at all.
//
// # Clusters and resuming
//
// Dial takes several addresses, separated by commas: the servers of a
// cluster. It opens the session on the first server that takes it,
// passing over those it cannot reach and those that answer Unavailable
// or ShuttingDown. When the connection breaks, the Client resumes its
// session on the next server that answers (or the same one, restarted
// with its data dir), within the TTL: the session lives in the cluster's
// replicated state, so its locks stay held, and Done does not close.
// Requests in flight when the connection broke fail with ErrConnectionLost
// and may be retried; the keys of a Lock or Unlock that was in flight are
// given back once the session is resumed. If no server takes the session
// back before the keepalive watch gives it up, or one answers that it
// ended, the Client stops as above.
//
// A server that stops answering without closing the connection (a stopped
// process, a partition that drops packets) is treated the same way: when
// no keepalive sent after A has been answered by A + 2(TTL - margin)/3
// (two keepalive intervals, half the TTL with the default margin), the
// Client gives the connection up as silent and resumes the session
// elsewhere, which leaves it (TTL - margin)/3 to do so. It keeps that
// connection open until the session has been resumed on another one (or
// until it gives the session up): a server that is only slow, and alive,
// would end the session if it saw the connection close first. The session
// of a Client always has a TTL, so every connection is watched this way;
// before the session is open, Dial's timeout bounds the wait.
//
// A server that answers Unavailable (a cluster node that cannot reach a
// majority of its cluster, or one shutting down, as in a rolling restart:
// it cannot keep the session alive, but the session lives on in the
// cluster until its TTL lapses) is given up at once, as a silent one is,
// connection kept open, and the session resumed on the next server: Done
// does not close. The request so answered fails with an error wrapping
// latch.ErrUnavailable and ErrConnectionLost: its outcome is unknown (a
// Lock may be granted in the session later), and the keys of a Lock or
// Unlock are given back once the session is resumed, as for a request in
// flight when a connection broke.
// Fencing tokens (Lock.Token) cover what these assumptions do not.
//
// # Errors
//
// Errors wrap the latch errors the server answered, so errors.Is works as
// with an in-process latch.Service: latch.ErrWouldBlock (TryLock) and
// latch.ErrTimeout (Wait) as a *latch.BusyError naming the busy keys,
// latch.ErrCanceled with the context's error, latch.ErrNotHeld,
// latch.ErrInvalidKey, latch.ErrUnavailable (with ErrConnectionLost), and
// so on; *StatusError carries the wire status.
package client
