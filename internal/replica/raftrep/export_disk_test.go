package raftrep

import (
	"path/filepath"

	"github.com/latchd/latch/internal/vfs"
	"github.com/latchd/latch/internal/wal"
)

// SetExitHalted replaces what ends a node that a disk error halted, and
// returns a function that puts it back.
func SetExitHalted(f func(msg string)) (restore func()) {
	old := exitHalted
	exitHalted = f
	return func() { exitHalted = old }
}

// ClearHaltOn is ClearHalt on another file system.
var ClearHaltOn = clearHalt

// OpenLogOn is OpenLog on another file system.
func OpenLogOn(fsys vfs.FS, dir string) (*LogStore, error) {
	l, err := wal.Open(filepath.Join(dir, logDir), wal.Options{FS: fsys})
	if err != nil {
		return nil, err
	}
	return &LogStore{log: l}, nil
}
