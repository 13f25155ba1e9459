// Package wal owns a write-ahead log on disk: an append-only sequence of
// records numbered consecutively, kept in segment files, each append made
// durable by one fdatasync. Records leave it only at its ends: from the
// head once they are no longer needed (a snapshot holds their effect) and
// from the tail when they are overridden (a Raft follower's entries that
// the leader never committed). The package knows nothing of what the
// records mean; package raftrep keeps Raft's log in it.
//
// # Why not bbolt
//
// A bbolt transaction syncs twice (its pages, then its meta page), and a
// Raft commit waits for the leader's write, then a follower's, in series:
// four syncs per commit. This log syncs once per append, which halves the
// commit latency on disks where a sync costs a few hundred microseconds
// (docs/benchmarks.md).
//
// # On disk
//
// A log is a directory of segments, each named for the index of its first
// record (20 decimal digits, then ".seg"). A segment is a sequence of
// frames:
//
//	size     uint32, little endian: the payload's length, at least 1
//	checksum uint32, little endian: CRC-32C (Castagnoli) of the payload
//	payload  size bytes
//
// then zeros: a segment's file is written with zeros a megabyte ahead of
// its frames, so that the sync of an append writes only data, not the
// file's new size. Only the last segment is written to; once it holds
// Options.SegmentSize bytes, the next append starts a new one.
//
// Open reads each segment's frames up to the first that is cut short or
// fails its checksum; only zeros may follow. An append is acknowledged
// only after its frames are synced, so a crash can leave something else
// only at the end of the last segment: the append it interrupted, which
// Open cuts off. A disk writes a sector whole or not at all, so such a
// frame runs past the end of the file, or has the bytes it holds in some
// sector all zeros (the zeros written ahead, where that sector never
// reached the disk). A bad frame of any other kind, or anywhere else, is
// damage to records that were acknowledged, and Open refuses the log
// rather than lose them.
//
// Removing records from the head deletes the segments that hold only
// older records, oldest first, each deletion synced before the next, so
// that a crash leaves a contiguous log; the records before the new head
// in the segment that remains come back after a restart, which is
// harmless, as they are older than the head. Removing records from the
// tail deletes later segments, newest first and each synced, then
// truncates the one that holds the new last record and syncs it: no
// removed record comes back.
package wal
