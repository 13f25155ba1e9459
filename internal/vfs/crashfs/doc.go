// Package crashfs owns an in-memory vfs.FS that can lose power: it keeps
// apart what was written and what was made durable, the way a machine's
// page cache and its disk are apart, and it can cut the power and keep,
// of what was not durable, a random part. Tests of the packages that
// write through package vfs (wal, raftrep) use it to prove that what they
// acknowledged survives a crash at any point.
//
// # The model
//
// A file is an inode with two contents: the current one, which reads
// see, and the durable one, which a power loss leaves for sure. Each
// 512-byte sector of a file is synced (its current bytes are durable),
// dirty (written, or zeroed by a change of size, since the last sync) or
// lost (see below). The current size and the durable size are kept apart
// too. File.Sync and File.Datasync make the dirty sectors and the current
// size durable; the model has no times, so the two are the same.
//
// A directory holds current entries (name to inode) and durable ones.
// OpenFile with O_CREATE, Mkdir, Remove and Rename change current
// entries; SyncDir makes a directory's changed entries durable. Changes
// that must not be told apart are tied together, and are made durable,
// or lost, together:
//   - the two entries of a rename, so that a crash leaves the file under
//     one of its names, never both and never neither, even when the two
//     directories differ and only one of them is synced (as on ext4,
//     whose journal makes them durable together);
//   - a rename and the unsynced entries of the directories above its
//     destination, so that a crash cannot keep the move into a directory
//     whose own entry it loses;
//   - every unsynced rename of a directory, so that no crash leaves a
//     directory inside itself.
//
// A removed file whose removal was not synced comes back after a power
// loss, with its durable contents.
//
// # Power loss and process death
//
// FS.Kill models the death of the process: what was written stays (the
// page cache outlives the process), and the files it had open are closed
// under it: their every method fails with ErrCrashed (which wraps
// os.ErrClosed).
//
// FS.CrashClone returns the state a power loss leaves, in a new FS, and
// leaves the original as it is, so that a test can try many power losses
// from one point; FS.PowerLoss does the same in place and closes the open
// files as Kill does. A power loss keeps the durable state and, with
// probability keep each and independently of one another:
//   - each dirty sector's current bytes (so one write that spans sectors
//     can be torn, some of its sectors kept and others not, but no sector
//     is ever half written);
//   - each file's current size, where it differs from its durable size;
//     a file longer than its durable contents reads zeros where its
//     sectors were not kept (as ext4 shows a file whose size reached the
//     disk and its data did not), and a file cut shorter whose size
//     was not kept reads past the cut its durable bytes, or zeros in the
//     sectors there that were kept (the cut zeroed them);
//   - each unsynced change of directory entries, the tied ones together.
//
// So keep 0 leaves exactly the durable state, and keep 1 exactly what
// Kill leaves, but for the lost sectors.
//
// # A failed sync
//
// A Sync or Datasync that fails (by a Fault) makes nothing durable, and
// marks the file's dirty sectors lost: as Linux does after a failed
// writeback, it keeps their bytes for reads, as clean pages, and does not
// write them again. So a later sync that succeeds does not make them
// durable either: a power loss takes them back to their durable bytes
// (zeros past the durable size), whatever keep is, while Kill keeps them.
// A sector written again is dirty again, and the next sync makes it
// durable whole. A failed SyncAll marks the dirty sectors of every file
// under its directory lost the same way. This is the behaviour the vfs
// durability contract warns of: after a failed sync, nothing is known of
// the data since the last successful one.
//
// # Faults and crash points
//
// FS.SetFault installs a Fault, called before every operation with its
// number (counted from 1 by FS.Ops), its kind and its name; the error it
// returns fails the operation, wrapped in an *fs.PathError (an
// *os.LinkError for Rename). A *ShortWrite error makes a WriteAt write
// part of its bytes before it fails, as a write to a full disk does. To
// crash after every operation of a workload in turn, run it once to count
// its operations, then, for each k, run it again on a new FS whose Fault
// fails every operation from the k-th on, and look at the CrashClone of
// what it left (see the example).
//
// FlipBit and ZeroSector damage a file's current and durable contents
// alike, as damage on the medium would.
//
// # Names
//
// The tree has one root, "/". A name is cleaned (path.Clean, after
// filepath.ToSlash) and taken from the root whether or not it starts
// with a slash: "a/b", "./a/b" and "/a/b" name the same file, and "." is
// the root.
package crashfs
