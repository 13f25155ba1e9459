package crashfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"slices"
	"syscall"
)

// SectorSize is the unit a power loss keeps or loses whole.
const SectorSize = 512

// maxSize bounds a file, so that a bad offset fails instead of taking the
// machine's memory.
const maxSize = 1 << 32

// sector is the state of one sector of a file.
type sector uint8

const (
	synced sector = iota // its current bytes are durable
	dirty                // changed since the last sync
	lost                 // changed, then a sync failed: see the package doc
)

// A file's contents are data (current) and durable. sec[i] is the state
// of sector i, synced if i is past its end, and dirty lists the sectors
// in state dirty. A synced sector holds the same bytes in both, reading
// zeros past the end of either; every change of data or of its size marks
// the sectors it touches dirty, so that this holds.

// markDirty marks the sectors that hold bytes lo to hi dirty.
func (n *inode) markDirty(lo, hi int) {
	for s := lo / SectorSize; s*SectorSize < hi; s++ {
		if s >= len(n.sec) {
			n.sec = append(n.sec, make([]sector, s+1-len(n.sec))...)
		}
		if n.sec[s] != dirty {
			n.sec[s] = dirty
			n.dirty = append(n.dirty, s)
		}
	}
}

// resize returns b cut or grown to n bytes, the new ones zeros.
func resize(b []byte, n int) []byte {
	if n <= len(b) {
		return b[:n]
	}
	old := len(b)
	b = slices.Grow(b, n-old)[:n]
	clear(b[old:])
	return b
}

func (n *inode) write(p []byte, off int) {
	if len(p) == 0 {
		return // as pwrite(2): nothing written, nothing grown
	}
	old := len(n.data)
	if end := off + len(p); end > old {
		n.data = resize(n.data, end)
	}
	copy(n.data[off:], p)
	n.markDirty(min(off, old), off+len(p))
}

func (n *inode) truncate(size int) {
	old := len(n.data)
	n.data = resize(n.data, size)
	n.markDirty(min(old, size), max(old, size))
}

// sync makes the current size, and the dirty sectors, durable.
func (n *inode) sync() {
	n.durable = resize(n.durable, len(n.data))
	for _, s := range n.dirty {
		n.sec[s] = synced
		lo := s * SectorSize
		if lo < len(n.data) {
			hi := min(lo+SectorSize, len(n.data))
			copy(n.durable[lo:hi], n.data[lo:hi])
		}
	}
	n.dirty = n.dirty[:0]
	n.sec = n.sec[:min(len(n.sec), (len(n.data)+SectorSize-1)/SectorSize)]
}

// failSync marks the dirty sectors lost.
func (n *inode) failSync() {
	for _, s := range n.dirty {
		n.sec[s] = lost
	}
	n.dirty = n.dirty[:0]
}

// file is an open file of an FS.
type file struct {
	fs          *FS
	n           *inode
	name        string
	gen         uint64
	read, write bool
	closed      bool
}

// live fails if f is closed, or was opened before a crash. The caller
// holds f.fs.mu.
func (f *file) live(op string) error {
	switch {
	case f.closed:
		return &fs.PathError{Op: op, Path: f.name, Err: os.ErrClosed}
	case f.gen != f.fs.gen:
		return &fs.PathError{Op: op, Path: f.name, Err: ErrCrashed}
	}
	return nil
}

// begin checks that f may still be used, then counts the operation and
// asks the Fault whether it fails; it returns the Fault's error as it is.
// The caller holds f.fs.mu.
func (f *file) begin(ev Event) (ferr, err error) {
	if err := f.live(ev.Op.String()); err != nil {
		return nil, err
	}
	ev.Name = f.name
	return f.fs.begin(ev), nil
}

// enter is begin for the operations that a Fault fails whole.
func (f *file) enter(ev Event) error {
	ferr, err := f.begin(ev)
	if err != nil {
		return err
	}
	if ferr != nil {
		return pathErr(ev.Op, f.name, ferr)
	}
	return nil
}

func (f *file) Name() string { return f.name }

// ReadAt reads as os.File.ReadAt does: fewer bytes than len(p) come with
// io.EOF.
func (f *file) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.enter(Event{Op: OpReadAt, Off: off, Len: len(p)}); err != nil {
		return 0, err
	}
	switch {
	case !f.read:
		return 0, pathErr(OpReadAt, f.name, syscall.EBADF)
	case off < 0:
		return 0, pathErr(OpReadAt, f.name, syscall.EINVAL)
	case off >= int64(len(f.n.data)):
		return 0, io.EOF
	}
	k := copy(p, f.n.data[off:])
	if k < len(p) {
		return k, io.EOF
	}
	return k, nil
}

// WriteAt writes as os.File.WriteAt does; a write past the end extends
// the file, with zeros up to off. A Fault that returns a *ShortWrite
// makes it write part of p, then fail.
func (f *file) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	ferr, err := f.begin(Event{Op: OpWriteAt, Off: off, Len: len(p)})
	if err != nil {
		return 0, err
	}
	want := len(p)
	var short *ShortWrite
	if errors.As(ferr, &short) {
		want = max(0, min(short.N, len(p)))
	} else if ferr != nil {
		return 0, pathErr(OpWriteAt, f.name, ferr)
	}
	switch {
	case !f.write:
		return 0, pathErr(OpWriteAt, f.name, syscall.EBADF)
	case off < 0:
		return 0, pathErr(OpWriteAt, f.name, syscall.EINVAL)
	case off+int64(want) > maxSize:
		return 0, pathErr(OpWriteAt, f.name, syscall.EFBIG)
	}
	f.n.write(p[:want], int(off))
	if ferr != nil {
		return want, pathErr(OpWriteAt, f.name, ferr)
	}
	return want, nil
}

// Size returns the file's current size.
func (f *file) Size() (int64, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.enter(Event{Op: OpSize}); err != nil {
		return 0, err
	}
	return int64(len(f.n.data)), nil
}

// Truncate changes the file's size; a file it grows reads zeros past its
// old end.
func (f *file) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.enter(Event{Op: OpTruncate, Off: size}); err != nil {
		return err
	}
	switch {
	case !f.write || size < 0:
		return pathErr(OpTruncate, f.name, syscall.EINVAL)
	case size > maxSize:
		return pathErr(OpTruncate, f.name, syscall.EFBIG)
	}
	f.n.truncate(int(size))
	return nil
}

// Sync makes the file's contents and size durable; if its Fault fails it,
// it marks the dirty sectors lost (see the package doc).
func (f *file) Sync() error { return f.sync(OpSync) }

// Datasync is Sync: the model has no times.
func (f *file) Datasync() error { return f.sync(OpDatasync) }

func (f *file) sync(op Op) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	ferr, err := f.begin(Event{Op: op})
	if err != nil {
		return err
	}
	if ferr != nil {
		if !errors.Is(ferr, ErrKilled) {
			f.n.failSync()
		}
		return pathErr(op, f.name, ferr)
	}
	f.n.sync()
	return nil
}

// Close closes the file; it fails if the file is closed already, or was
// opened before a crash.
func (f *file) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.live("close"); err != nil {
		return err
	}
	f.closed = true
	return nil
}
