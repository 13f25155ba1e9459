// Package bench is the load generator behind "latch bench". It speaks the
// memcached text and binary protocols (to latch, yrmcds or memcached) and
// latch's dlock protocol, and measures a server rather than itself: every
// connection is one goroutine that writes a batch of pipelined requests with
// one write, then reads and validates the replies from a buffered reader,
// with no allocation per request.
//
// Workloads (Config.Workload):
//
//   - cycle: each connection locks and unlocks keys of its own. memcached
//     text and binary use yrmcds's lock extension (recipe "lock": the item is
//     set first, since a lock needs it), or, for plain memcached, "add" with
//     an exptime then "delete" (recipe "add"); dlock uses Lock and Unlock.
//   - handoff: every connection contends for one key. dlock waits in the
//     server; the memcached recipes poll as their clients do, retrying a
//     refused lock after Config.PollInterval and asking again at once after
//     their own release (taking the key straight back is a regrant,
//     counted apart). Reports hand-offs per second, the hand-off
//     latency (from one connection's unlock being sent to another's grant
//     being received, on one in-process monotonic clock), the wait, the
//     fairness (grants per connection, min and max) and the wasted polls.
//   - getset: a get/set mix (9:1 by default) of 100-byte values over a
//     pre-populated key space.
//   - hold: takes and holds Config.Locks locks spread over the connections,
//     and reports the server's memory per lock, sampled from its admin
//     endpoint (Go heap after a GC) and/or /proc/<pid>/status (VmRSS).
//   - idle: opens the connections, makes one request on each and reports
//     the server's memory per connection.
//
// Config.Addr may list several servers (a cluster's nodes), comma-separated:
// the connections are spread over them round-robin.
//
// With Config.ServerPID (and Config.ServerPIDs, a cluster's other nodes,
// whose CPU time is added), a timed workload (cycle, handoff, getset) also
// reports the server's CPU time over the measured time, from
// /proc/<pid>/stat, per op and per request (Result.ServerCPU; Linux only).
//
// Every reply is validated: an unexpected reply is counted as an error,
// with a sample of its text, and never as an operation. Latencies are per
// request, from the write of its batch to the read of its reply, kept in a
// log-linear histogram (Histogram) with under 0.4% relative error.
package bench
