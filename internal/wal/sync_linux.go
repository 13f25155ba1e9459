package wal

import (
	"os"
	"syscall"
)

// datasync flushes f's data, and the metadata needed to read it back (its
// size), but not its times: one device flush where fsync may take two.
func datasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}
