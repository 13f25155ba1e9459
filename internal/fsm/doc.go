// Package fsm owns latch's replicated state and the commands that change
// it: the lock table (internal/engine), the memcached item cache
// (internal/cache), the ZooKeeper data tree (internal/znode) and the Redis
// front end's sorted sets (internal/zset values, keyed beside the owned
// locks: zsets.go) together, as one State.
//
// Every change is a Command: a flat value naming its Op and the fields that
// Op reads, stamped by its proposer with the instant it happens (At), the
// proposer's identity (Origin, unique per process incarnation) and a
// sequence number (Seq). Apply is deterministic: it never reads a clock,
// only At, and replicas that apply the same commands in the same order
// hold the same state, give the same results and report the same events.
// A command whose (Origin, Seq) was already applied is a resend and is
// answered ErrDuplicate without being applied again. A command on a
// session's behalf carries the session's generation as its proposer's
// connection knows it (Gen; OpEndSession's Token), which OpResume raises
// when the session moves to another connection: one of an older
// generation, proposed on the old connection before the move and applied
// after it, is answered ErrSuperseded and changes nothing.
//
// A memcached lock lives in both parts of the state, in the lock table (it
// excludes every protocol's lockers) and as the item's lock mark (the item
// never expires, is never evicted, survives flush_all, refuses others'
// writes); every command changes both together: lock, unlock, the
// holder's delete and replace-and-unlock, unlock-all, an operator's
// force-release, the end of a session and the lapse of its TTL.
//
// Results are never shipped: each replica computes them. Reads are not
// commands: a proposer reads the state directly (Engine, Cache), which
// changes nothing replicated (see internal/cache on what a get may
// change). Eviction and expiry are the proposer's decisions, applied as
// OpItemEvict commands: applying a write never evicts.
//
// Commands and batches have a versioned binary encoding (AppendCommand,
// AppendBatch, DecodeBatch) for a log to carry, whose older version,
// without generations, still decodes and applies as it did (codec.go);
// the whole state has a versioned snapshot (AppendSnapshot, Restore), from
// which a replica continues exactly as the state it was taken from.
//
// A State is not safe for concurrent use: its driver (internal/node, under
// the replicator's lock) serialises calls.
package fsm
