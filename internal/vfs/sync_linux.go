package vfs

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// datasync flushes f's data, and the metadata needed to read it back (its
// size), but not its times: one device flush where fsync may take two.
func datasync(f *os.File) error {
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if err != unix.EINTR {
			return err
		}
	}
}

// syncAll syncs the whole file system that holds dir with syncfs(2),
// which reports a writeback error of any file on it since Linux 5.8, then
// fsyncs every file and directory under dir: a FUSE file system never
// sees syncfs (Linux sends FUSE_SYNCFS to virtiofs alone), and one that
// models a disk, as the Jepsen test's does, would keep what syncfs synced
// as unsynced. A data dir holds a few files, and syncfs left them clean.
func syncAll(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	for {
		err := unix.Syncfs(int(d.Fd()))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("syncfs %s: %w", dir, err)
		}
		return syncTree(dir)
	}
}
