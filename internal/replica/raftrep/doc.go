// Package raftrep is the replica.Replicator of a durable node and of a
// cluster node: it carries the node's batches of commands through
// hashicorp/raft (its only importer in latch), with its log in a
// write-ahead log of latch's own (package wal: one fdatasync per append,
// where bbolt takes two), its few stable values (term, vote) in one
// checksummed file written whole (stable.go), and snapshots in
// checksummed files (snapstore.go), all through the file-system seam
// vfs.FS, so that the power-loss tests cover every byte a node writes
// (disk.go opens a data dir); or all in memory, for tests.
//
// # Batching
//
// The node proposes a batch under its lock; Propose encodes it into the
// outbox and returns. One sender goroutine moves batches on: on the
// leader it packs every batch waiting (its own and those other nodes
// forwarded) into one log entry, stamps it, and hands it to Raft, one
// entry in flight at a time, so that the next entry fills while one
// commits (a second in flight cost 10-15% of the throughput and as much
// more CPU per request on this repository's test machine:
// docs/benchmarks-history.md). When the last entry answered several clients'
// requests, the next waits a little for their next ones (gather.go), so
// that a closed loop of clients shares entries rather than taking turns.
// On a follower the sender writes its batches to the leader over a
// forward connection.
//
// A follower learns that an entry committed from the leader's next
// AppendEntries, which Raft sends with the next entry, after the follower
// has stored it, or else a CommitTimeout after the last one. So that a
// follower's clients wait for neither, a leader that applied an entry
// sends the other nodes a commit notice at once: that same empty
// AppendEntries, which costs no sync (notice.go). Raft's CommitTimeout is
// then only a fallback, at Raft's default of 50 ms.
//
// # Time
//
// An entry carries the leader's stamp, and every command in it is applied
// at that instant, on every replica. A node that becomes leader waits
// until every earlier entry is applied (Barrier), resumes the clock from
// the last stamp applied (the time without a leader is not counted), and
// proposes fsm.OpPromote first, which extends every session and lease by
// the grace period, before it stamps anything else. Raft may answer the
// barrier, or the OpPromote, after that leadership ended (a barrier
// committed in time answers once the log is applied): each change of
// leadership starts an epoch, and what a promotion sets, and the entries
// the leader packs, count only in the epoch they were started in.
//
// # Exactly once
//
// A batch stays in the node's outbox until the node applies it (its
// commands are matched by origin and sequence number). When the leader
// changes, or a batch is not applied within two election timeouts, the
// node sends what is left again, in order; the state applies each command
// once (fsm.ErrDuplicate).
//
// # One port
//
// Mux shares the Raft address between Raft's transport and forwarding:
// the first byte of a connection says which. Forward connections carry
// batches (a stream of length-prefixed batches) or one membership request
// (AddVoter, RemoveServer, leadership transfer), which a follower sends to
// the leader.
package raftrep
