//go:build linux

package lazyfs

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// sectorSize is the unit a disk writes whole or not at all.
const sectorSize = 512

// fileUndo is what a file lost since its last sync: the synced bytes of
// every sector changed since, and its synced size. It holds its own
// descriptor of the file, so that the file (and so its inode number, the
// key it is found by) lives until the undo is applied or dropped, wherever
// its names went meanwhile.
type fileUndo struct {
	f          *os.File
	syncedSize int64
	// saved holds, for each sector below syncedSize changed since the
	// sync, its synced bytes (fewer than sectorSize in the sector that
	// holds syncedSize).
	saved map[int64][]byte
	// written holds the sectors at or past syncedSize written since the
	// sync: a torn crash keeps or zeroes each.
	written map[int64]bool
}

// newFileUndo starts the undo record of the file open as fd, whose
// contents are all synced so far. It opens the file again, to read and
// write, through /proc/self/fd (fd may be write-only).
func newFileUndo(fd int) (*fileUndo, error) {
	f, err := os.OpenFile("/proc/self/fd/"+strconv.Itoa(fd), os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("lazyfs: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lazyfs: %w", err)
	}
	return &fileUndo{f: f, syncedSize: fi.Size(), saved: map[int64][]byte{}, written: map[int64]bool{}}, nil
}

// change records that [off, off+n) is about to change: it saves the
// synced bytes of the sectors there not saved yet.
func (u *fileUndo) change(off, n int64) error {
	if n <= 0 {
		return nil
	}
	for s := off / sectorSize; s <= (off+n-1)/sectorSize; s++ {
		start := s * sectorSize
		if start >= u.syncedSize {
			u.written[s] = true
			continue
		}
		if (s+1)*sectorSize > u.syncedSize {
			u.written[s] = true // its part past syncedSize
		}
		if _, ok := u.saved[s]; ok {
			continue
		}
		b := make([]byte, min(sectorSize, u.syncedSize-start))
		if _, err := u.f.ReadAt(b, start); err != nil {
			return fmt.Errorf("lazyfs: save sector %d: %w", s, err)
		}
		u.saved[s] = b
	}
	return nil
}

// truncate records that the file is about to be cut or extended to size.
func (u *fileUndo) truncate(size int64) error {
	fi, err := u.f.Stat()
	if err != nil {
		return fmt.Errorf("lazyfs: %w", err)
	}
	if size < fi.Size() {
		// The bytes past size go; those past the synced size were
		// unsynced, and a later extension reads zeros there.
		if err := u.change(size, min(fi.Size(), u.syncedSize)-size); err != nil {
			return err
		}
		for s := range u.written {
			if s*sectorSize >= size {
				delete(u.written, s)
			}
		}
	}
	return nil
}

// undo puts the file back as it was synced. With rng, the crash is torn:
// the file keeps its current size or its synced one, and each sector
// changed since the sync keeps its new bytes or gets its old ones (zeros
// past the synced size) back, at random.
func (u *fileUndo) undo(rng *rand.Rand) error {
	defer u.f.Close()
	fi, err := u.f.Stat()
	if err != nil {
		return fmt.Errorf("lazyfs: %w", err)
	}
	cur := fi.Size()
	size := u.syncedSize
	if rng != nil && rng.IntN(2) == 0 {
		size = cur
	}
	if err := u.f.Truncate(size); err != nil {
		return fmt.Errorf("lazyfs: undo: %w", err)
	}
	for s, b := range u.saved {
		start := s * sectorSize
		if start >= size {
			continue
		}
		// A sector cut off by a truncate is never "kept": a torn
		// crash keeps only what was written.
		if rng != nil && start < cur && rng.IntN(2) == 0 {
			continue
		}
		if _, err := u.f.WriteAt(b[:min(int64(len(b)), size-start)], start); err != nil {
			return fmt.Errorf("lazyfs: undo: %w", err)
		}
	}
	var zeros [sectorSize]byte
	for s := range u.written {
		// The sector's part past the synced size.
		start := max(s*sectorSize, u.syncedSize)
		end := min((s+1)*sectorSize, size)
		if start >= end || rng != nil && rng.IntN(2) == 0 {
			continue
		}
		if _, err := u.f.WriteAt(zeros[:end-start], start); err != nil {
			return fmt.Errorf("lazyfs: undo: %w", err)
		}
	}
	return nil
}

// opKind is a kind of directory operation.
type opKind int

const (
	opCreate opKind = iota // a file created at path
	opMkdir                // a directory created at path
	opRemove               // the entry at path moved to trash (unlink, rmdir)
	opRename               // path renamed to newPath; a replaced newPath linked at trash
)

// dirOp is a directory operation not yet durable, with what undoes it.
// Paths are relative to the backing directory, as they were when it ran.
type dirOp struct {
	kind          opKind
	path, newPath string
	// trash is where a removed or replaced entry went ("": none).
	trash string
	// replacedDir: the rename replaced an empty directory at newPath,
	// of this mode.
	replacedDir  bool
	replacedMode fs.FileMode
	// dirs are the inode numbers of the directories whose entries it
	// changed and that were not synced since.
	dirs map[uint64]bool
}

func (op *dirOp) String() string {
	switch op.kind {
	case opCreate:
		return "create " + op.path
	case opMkdir:
		return "mkdir " + op.path
	case opRemove:
		return "remove " + op.path
	}
	return "rename " + op.path + " " + op.newPath
}

// undo undoes op in the backing directory root. An operation whose
// entries a later, durable one changed may no longer apply: it does what
// still can, and reports nothing else.
func (op *dirOp) undo(root string) error {
	p := filepath.Join(root, op.path)
	switch op.kind {
	case opCreate:
		return ignoreMissing(os.Remove(p))
	case opMkdir:
		return os.RemoveAll(p)
	case opRemove:
		return ignoreMissing(renameNoReplace(op.trash, p))
	case opRename:
		np := filepath.Join(root, op.newPath)
		if err := ignoreMissing(renameNoReplace(np, p)); err != nil {
			return err
		}
		if op.trash != "" {
			return ignoreMissing(renameNoReplace(op.trash, np))
		}
		if op.replacedDir {
			return ignoreMissing(os.Mkdir(np, op.replacedMode))
		}
	}
	return nil
}

// renameNoReplace renames from to to unless to exists.
func renameNoReplace(from, to string) error {
	if err := unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE); err != nil {
		return &os.LinkError{Op: "rename", Old: from, New: to, Err: err}
	}
	return nil
}

// ignoreMissing drops an error that says an entry is missing or already
// there: what a later durable operation can leave.
func ignoreMissing(err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrExist) {
		return nil
	}
	return err
}
