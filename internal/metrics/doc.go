// Package metrics owns latch's Prometheus metrics: their names, help texts,
// labels and buckets, the registry they are served from, and the cheap
// handles through which the rest of the server moves them.
//
// Four parts feed it:
//
//   - the lock service, through Observer, which implements node.Observer.
//     The node calls it under its mutex on every grant and release, so it
//     keeps plain (non-atomic) counters in slices indexed by protocol and
//     plain histogram buckets: a few increments per operation, no map
//     lookup, no allocation. The registry reads them at scrape time, inside
//     node.Node.WithStats, under the same mutex, together with the gauges
//     of the lock table (held locks, waiters, keys) and of the ZooKeeper
//     data tree (its sessions, znodes, ephemerals and zxid). Watch
//     connects the two.
//   - the front ends, through Protocol and Command handles that they look
//     up once (at start) and then move with one atomic add per event:
//     connections opened and closed, requests and errors per command
//     (the ZooKeeper front end's per op, "unknown" for the others); and
//     the ZooKeeper front end's watch count, which WatchZooKeeper reads
//     at scrape time.
//   - the server, which tells it at start what runs and its limits
//     (SetVersion, SetCommit, SetLimits), and where the memcached items' counts
//     are read (WatchItems).
//   - the Go runtime and the process, through client_golang's collectors.
//
// Snapshot returns the same numbers as plain values, for the admin API's
// JSON and its status page.
//
// # Metrics
//
// Counters, labelled by protocol (the session's latch.SessionOptions.Protocol;
// "unknown" when empty; node.OwnedProtocol, "redis", for owned locks, which
// have no session: the node reports their events as node.OwnedProto):
//
//	latch_grants_total{protocol}              requests granted
//	latch_releases_total{protocol,cause}      holds ended; cause is release, session_end,
//	                                          lease_expiry or forced (protocol "none": a lease
//	                                          that outlived its session)
//	latch_wait_timeouts_total{protocol}       waiting requests that reached their deadline
//	latch_wait_cancels_total{protocol}        waiting requests cancelled by their caller
//	latch_sessions_opened_total{protocol}     sessions opened
//	latch_session_expiries_total{protocol}    sessions whose TTL lapsed
//	latch_connections_accepted_total{protocol} connections a front end accepted and served
//	latch_connections_refused_total{protocol,reason} connections a front end turned away:
//	                                          reason max_conns (over its limit) or allow
//	                                          (from outside its allow-list)
//	latch_requests_total{protocol,command}    requests a front end served
//	latch_request_errors_total{protocol,command} requests answered with an error
//
// Gauges:
//
//	latch_held_locks                          holds: (key, holder) pairs
//	latch_locked_keys                         keys in the table (held, waited for or under lock-delay)
//	latch_waiters                             queued requests
//	latch_sessions{protocol}                  live sessions
//	latch_connections_open{protocol}          open connections
//	latch_zookeeper_sessions                  ZooKeeper sessions the data tree knows
//	latch_zookeeper_znodes                    znodes (the root and /zookeeper's included)
//	latch_zookeeper_ephemerals                ephemeral znodes
//	latch_zookeeper_zxid_epoch                the zxid's high 32 bits
//	latch_zookeeper_zxid_counter              the zxid's low 32 bits: one more per change
//	latch_zookeeper_watches                   watches set on the ZooKeeper front end
//	                                          (once WatchZooKeeper is called)
//	latch_redis_tracking_clients, latch_redis_tracked_keys
//	                                          the Redis front end's client-side caching:
//	                                          tracking connections and tracked keys
//	                                          (once WatchRedisTracking is called)
//	latch_memcache_bytes, latch_memcache_locked_bytes, latch_memcache_items
//	                                          the memcached items' memory, that of the
//	                                          locked ones, and their count (once
//	                                          WatchItems is called; with
//	                                          latch_memcache_evictions_total, a counter)
//	latch_build_info{version,commit,go_version} 1: what runs (SetVersion, SetCommit)
//	latch_limit{name,protocol}                the configured limits, each named for
//	                                          what it bounds (SetLimits); protocol is
//	                                          empty for the node's own
//
// Histograms (seconds):
//
//	latch_wait_seconds                        request to grant (0 for a request granted at once)
//	latch_hold_seconds                        grant to release, whatever ended the hold
//	latch_handoff_seconds                     release to the next holder resuming with its grant,
//	                                          for requests that waited in a queue
//
// and the go_* and process_* metrics of client_golang's collectors.
package metrics
