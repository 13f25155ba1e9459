//go:build unix

package raftrep

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// lockFile is the data directory's lock, held by the process that owns it.
const lockFile = "lock"

// lockDir takes dir's lock, so that a second process given the same data
// directory fails at once, naming the first, rather than write the same
// log or wait forever on bbolt's lock of raft.db. The lock is an flock(2)
// on dir/lock, which holds the owner's pid; the kernel drops it when the
// owner exits, however it exits, so a stale file never keeps a node out.
// Closing the returned file releases it.
func lockDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, lockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("raftrep: lock data dir: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("raftrep: data dir %s is in use by another process%s", dir, pidNote(holder))
		}
		return nil, fmt.Errorf("raftrep: lock data dir %s: %w", dir, err)
	}
	err = f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt(strconv.AppendInt(nil, int64(os.Getpid()), 10), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("raftrep: lock data dir %s: %w", dir, err)
	}
	return f, nil
}

// pidNote names the holder's pid, read from the lock file, if it is one.
func pidNote(holder []byte) string {
	pid, err := strconv.Atoi(string(bytes.TrimSpace(holder)))
	if err != nil || pid <= 0 {
		return ""
	}
	return fmt.Sprintf(" (pid %d)", pid)
}
