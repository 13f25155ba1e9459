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
// (docs/benchmarks-history.md).
//
// # On disk
//
// A log is a directory of segments, each named for the index of its first
// record (20 decimal digits, then ".seg"). Integers are little endian, and
// checksums CRC-32C (Castagnoli). A segment starts with its header:
//
//	0   magic    8 bytes, "latchwal"
//	8   first    uint64: the index of its first record, as in its name
//	16  version  uint32: the format's, 1
//	20  checksum uint32, of bytes 0 to 19
//
// then holds frames, one per record, each at an offset that is a multiple
// of 8:
//
//	0   checksum uint32: CRC-32C of the record's index (uint64), then
//	             bytes 4 to 15 and the payload
//	4   flags    1 byte: 1, the end mark, on the last record of an append;
//	             no other bit is set
//	5   place    3 bytes, uint24: the record's place in its append, 0 for
//	             the first (an append takes at most 2^24-1 records)
//	8   length   uint32: the payload's, 1 to MaxRecord
//	12  index    uint32: the record's index less the segment's first (an
//	             append that would need more starts a new segment)
//	16  payload  length bytes, then zeros up to a multiple of 8 (not read)
//
// then zeros: a segment's file is written with zeros a megabyte ahead of
// its frames, so that the sync of an append writes only data, not the
// file's new size. An append (Log.Append) writes all its frames in one
// write, to one segment, and syncs them (one fdatasync); it returns, and
// its records count as acknowledged, only then. Only the last segment is
// written to; once it holds Options.SegmentSize bytes, the next append
// starts a new one. A new segment is written (header and zeros) and
// synced under a temporary name (".seg.tmp"), then renamed, and the
// directory synced, so that a segment under its own name has its header on
// disk; Open deletes a temporary one a crash left. There is one format,
// this one: nothing reads another.
//
// # Opening: what a crash leaves, and what it cannot
//
// Open first syncs the directory, its parent, and each segment, before it
// reads it: a process killed between its write and its sync leaves the
// bytes in the page cache, where Open would read them, and a power loss
// after Open would take away records it reported. A sync that fails fails
// Open.
//
// It reads each segment's frames from its header on, up to the first that
// is not sound: cut short by the end of the file, not a frame header (zeros
// written ahead, say), or failing its checksum. A sound frame must hold the
// next index, and each segment must start where the one before it ends.
//
// A crash can leave unsound bytes in one place only: the sectors that the
// append it interrupted wrote, at the end of the last segment, after the
// last end mark (the zeros written ahead, or what a torn write leaves,
// garbage included). So the rule for the last segment is: the records after
// its last end mark, sound or not, and whatever follows them, are that
// append's, never acknowledged, and cut off (the file truncated at the end
// of the last end mark's frame, and synced), provided that no sound frame
// of another append lies anywhere after that end mark: neither among the
// sound frames read after it, nor at any offset, a multiple of 8, after the
// first frame that is not sound (stepping over the sound frames found
// there). The place and the index of a sound frame name its append, and
// one of another append means that the damage was there when a later
// append was acknowledged: Open refuses the log. An end mark of the
// interrupted append itself after its damage (a torn write need not reach
// the disk in order) is cut with it. Zeros alone after the last end mark
// are what was written ahead, and stay.
//
// Anything else is damage to acknowledged records, and Open refuses the log
// with an error that names the file, and the offset in it where the damage
// shows: a segment header that is not exactly that of its name; a segment
// before the last with a frame that is not sound, or anything but zeros
// after its frames, or no record, or a last record that is not an append's
// end; a sound frame with an index out of place; a segment that does not
// start where the one before it ends.
//
// What Open cannot tell from a crash, it cannot refuse: damage confined to
// the sectors the last append wrote (from the sector where it starts, which
// it shares with the append before it, and which a disk that writes a
// sector whole or not at all leaves whole) cuts the appends with bytes
// there, as the crash would. A segment lost whole at the head of the log
// looks like the log truncated there. One lost at its end does not: the
// log's directory also holds a file, "newest", that names its newest
// segment (written after a segment's creation is durable, and before the
// tail's segments are removed), and Open refuses a log whose newest
// segment is gone.
//
// # Removing records
//
// Removing records from the head deletes the segments that hold only
// older records, oldest first, each deletion synced before the next, so
// that a crash leaves a contiguous log; the records before the new head
// in the segment that remains come back after a restart, which is
// harmless, as they are older than the head.
//
// Removing records from the tail first makes the new last record an
// append's end, if it is not one (its flags and checksum rewritten in place,
// 5 bytes in one sector, and synced), so that Open keeps it; then deletes
// later segments, newest first and each synced, then truncates the one that
// holds the new last record at the end of its frame and syncs it. A crash
// midway leaves the records being removed whole after an end mark, and Open
// keeps them; once TruncateBack returns, none comes back.
package wal
