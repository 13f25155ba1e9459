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

// StoredVote returns the term and the candidate of the last vote that the
// data dir dir on fsys holds (0 and "" for none).
func StoredVote(fsys vfs.FS, dir string) (term uint64, cand string, err error) {
	s, err := openStable(fsys, filepath.Join(dir, stableFile))
	if err != nil {
		return 0, "", err
	}
	term, err = s.GetUint64([]byte("LastVoteTerm"))
	if err != nil && err.Error() != "not found" {
		return 0, "", err
	}
	c, err := s.Get([]byte("LastVoteCand"))
	if err != nil && err.Error() != "not found" {
		return 0, "", err
	}
	return term, string(c), nil
}
