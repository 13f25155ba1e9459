// Package runlock implements latch run: flock(1) across machines. It takes
// a lock from a latch server, runs a command while holding it, and releases
// it when the command exits.
//
// Run dials the server (package client), takes the keys, exclusive or
// shared, at once (-n), within a wait (-w) or whenever they free, and
// starts the command with LATCH_TOKEN (the lock's fencing token, in
// decimal) and LATCH_KEYS (the keys, separated by spaces) added to its
// environment and the standard streams inherited. The command leads a
// process group of its own; when latch run's standard input is the
// terminal and latch run is in its foreground, that group gets the
// terminal, as a shell's foreground job does. SIGINT, SIGTERM, SIGHUP and
// SIGQUIT sent to latch run are forwarded to the group. While the command
// runs, the client keeps the session alive and Run renews a lease (Lease)
// three times per lease. When the command exits, Run unlocks and returns
// its status.
//
// # Lock loss
//
// If the lock may be lost while the command runs, Run stops the command:
// SIGTERM to its process group, then SIGKILL to the group once KillAfter
// has passed (at once when the group is empty before), and returns
// ExitError. The aim is that no process of the group runs once the server
// could grant the lock to someone else. With T the session TTL, K the
// kill-after and A the send time of the newest keepalive the server
// answered:
//
//   - the server cannot end the session by its TTL before A + T by its own
//     clock, since it received that keepalive after A;
//   - the client gives the lock up (Lock.Done) at A + T - margin by its
//     clock, where Run sets the margin to K + T/5;
//   - Run sends SIGKILL at most K later, at A + T - T/5.
//
// So the group is killed T/5 before the server could expire the session,
// if the clocks of the two machines advance at rates that differ by less
// than 20%, and latch run is not paused (stopped, swapped out, its machine
// suspended) for longer than T/5 at the wrong moment: 2s with the default
// T of 10s. A lease is handled the same way, from the send time of its
// last renewal, with the same margin; a lease must therefore be at least
// 4 margins long.
//
// A connection that breaks, or whose server answers no keepalive for two
// keepalive intervals (until A + 2(T - margin)/3: about 0.47T with the
// default kill-after), does not lose the lock by itself: the client
// resumes the session on a server of Addr, and A moves on once one takes
// it back. A lock request that such a failover took (waiting, or sent
// with -n) is sent again once the session has moved, within what is left
// of the wait: its keys are not held until then (see lockRetrying).
//
// What the guarantee does not cover: a server that ends the session itself
// closes the connection at the same time (a crash, a shutdown, an
// operator ending the session, an idle timeout shorter than T, which the
// default 60s is not for the default T of 10s); Run then stops the command
// at once, but the server has released the lock already. A server that
// restarts forgets every lock: restart it no sooner than T after it died.
// An operator's force-release is not noticed at all. The fencing token
// (LATCH_TOKEN) is the remedy for these: pass it to the resource the lock
// protects.
//
// # Exit status
//
// Run returns the command's exit status, or 128 plus the number of the
// signal that killed it; Config.ConflictCode (default ExitConflict, 1)
// when the keys were busy with -n or stayed busy for -w; 128 plus the
// signal's number when SIGINT, SIGTERM, SIGHUP or SIGQUIT arrived while
// waiting for the lock; ExitNotFound (127) or ExitCannotRun (126) when the
// command could not be started; and ExitError (125) when latch run itself
// failed: the server could not be reached or refused the request, or the
// lock was lost while the command ran.
package runlock
