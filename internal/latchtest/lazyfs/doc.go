// Package lazyfs is a FUSE file system for crash tests: a passthrough over
// a backing directory that remembers what was not synced, and can lose it
// the way a machine that loses power does.
//
// Every write and directory operation goes to the backing directory at
// once (reads, mmap and locks are the backing file's and the kernel's), and
// the file system keeps an undo record of each until a sync makes it
// durable:
//   - a write, truncate or hole punched into a file keeps the synced bytes
//     of each 512-byte sector it changes, and the file's synced size, until
//     fsync or fdatasync of that file;
//   - a create, mkdir, unlink, rmdir or rename keeps its inverse (a removed
//     entry is moved into a trash directory beside the backing directory,
//     a replaced one is linked there) until fsync of every directory whose
//     entries it changed.
//
// FS.Crash unmounts, applies the undo records (all of them, newest first,
// or, torn, a random subset: each sector kept or not, the metadata
// operations up to a random point), and mounts again: afterwards the tree
// is what a disk that honours fsync, and nothing more, could hold after a
// power loss. Its caller must have ended every process that used the mount
// first, as a power loss does. A process killed during a sync waits for
// the file system's answer, so that the sync would complete: FS.Cut,
// before the kill, fails every change from then on, the sync in progress
// included. Options.SyncDelay makes a sync take the time a disk's flush
// does, during which what it would make durable is not yet.
//
// What it cannot see: syncfs(2) on a FUSE mount does not reach the file
// system (the kernel sends FUSE_SYNCFS only to virtiofs), so it syncs
// nothing here, as if the program had not called it; a program that relies
// on syncfs alone loses data under lazyfs that a real disk would keep
// (latch's vfs.FS.SyncAll fsyncs each file and directory after its
// syncfs, and so works here). The
// disk's own cache is not modelled: what was synced is kept. Chmod, chown,
// times and extended attributes are passed through untracked; hard links,
// symbolic links, device nodes, O_TMPFILE and copy_file_range are refused.
// flock(2) and POSIX locks are the kernel's own, local to the mount.
//
// The process that serves a mount must not map its files into memory: a
// page fault on the mount is not a system call, the Go runtime cannot stop
// the goroutine that takes it, and a garbage collection then waits for a
// fault that waits for the server's stopped goroutines. Reading and writing
// through system calls is safe; a program that maps its files (bbolt)
// runs in another process.
//
// Linux only; mounting needs root (the mount is made directly, without
// fusermount).
package lazyfs
