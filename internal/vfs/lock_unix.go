//go:build unix

package vfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// lock takes an flock(2) on name, which then holds the owner's pid; the
// kernel drops it when the owner exits, however it exits, so a stale file
// never keeps anyone out.
func lock(name string) (io.Closer, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(name)
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w%s", ErrLocked, pidNote(holder))
		}
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	err = f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt(strconv.AppendInt(nil, int64(os.Getpid()), 10), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", name, err)
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
