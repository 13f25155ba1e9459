// Package vfs owns the seam between latch and the file system: the small
// set of file operations that the Raft log (package wal) and the Raft
// replicator's own files use, the operating system's implementation of
// it, and the few helpers built only on it (a file written whole or not
// at all, a directory created durably).
//
// The seam exists so that what latch writes can be proven to survive a
// power loss: package vfs/crashfs implements the same FS in memory, keeps
// what was synced apart from what was only written, and can lose the
// unsynced part the way a machine that loses power does.
//
// # Durability contract
//
// An implementation promises what a POSIX file system on Linux promises,
// no more:
//   - data written to a file is durable once File.Sync or File.Datasync
//     of that file returns nil (Datasync also makes a new size durable);
//   - a directory entry created, renamed or removed is durable once
//     SyncDir of the directory that holds it returns nil;
//   - after a failed Sync or Datasync nothing is known of the data
//     written since the last successful one, even if a later sync
//     succeeds (the pages may have been marked clean and dropped).
package vfs
