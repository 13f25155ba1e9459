//go:build linux

package lazyfs

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Options tune a mount.
type Options struct {
	// SyncDelay is how long an fsync or fdatasync of a file or a
	// directory takes, as a disk's flush would, before it makes anything
	// durable: what was written stays unsynced meanwhile, and a crash
	// then loses it. 0: a sync is done at once, and a crash finds
	// unsynced only what was written since the last sync was called.
	SyncDelay time.Duration
}

// FS is a lazyfs mount. Its methods are safe for concurrent use.
type FS struct {
	backing, trash, mountpoint string
	opts                       Options

	mu sync.Mutex
	m  *mount // the current mount; nil while none is
	// files holds the undo record of each file changed since its last
	// sync, by inode number; ops the directory operations not yet
	// durable, oldest first.
	files  map[uint64]*fileUndo
	ops    []*dirOp
	nTrash int // names the next entry of the trash
	closed bool
}

// mount is one mount of an FS: a crash ends it and makes another.
type mount struct {
	fs     *FS
	server *fuse.Server
	dead   bool // cut or unmounted: every change is refused. Guarded by fs.mu.
}

// Mount mounts a lazyfs over the directory backing at mountpoint, which
// must exist. Its trash is the directory backing+".trash", made or
// emptied here: the same file system as backing. What backing holds is
// taken as synced.
func Mount(backing, mountpoint string, opts Options) (*FS, error) {
	backing, err := filepath.Abs(backing)
	if err != nil {
		return nil, fmt.Errorf("lazyfs: %w", err)
	}
	f := &FS{backing: backing, trash: backing + ".trash", mountpoint: mountpoint, opts: opts, files: map[uint64]*fileUndo{}}
	if err := os.RemoveAll(f.trash); err != nil {
		return nil, fmt.Errorf("lazyfs: empty the trash: %w", err)
	}
	if err := os.Mkdir(f.trash, 0o700); err != nil {
		return nil, fmt.Errorf("lazyfs: %w", err)
	}
	if f.m, err = f.mount(); err != nil {
		return nil, err
	}
	return f, nil
}

// mount mounts a new file system over f.backing.
func (f *FS) mount() (*mount, error) {
	m := &mount{fs: f}
	lb, err := fs.NewLoopbackRoot(f.backing)
	if err != nil {
		return nil, fmt.Errorf("lazyfs: %w", err)
	}
	loop := lb.(*fs.LoopbackNode)
	root := &node{LoopbackNode: loop, m: m}
	loop.RootData.RootNode = root
	m.server, err = fs.Mount(f.mountpoint, root, &fs.Options{
		MountOptions: fuse.MountOptions{
			FsName: f.backing, Name: "lazyfs",
			// Mounted with mount(2), not fusermount: root only.
			DirectMountStrict: true,
			// Passthrough would let writes reach the backing
			// file without the file system seeing them.
			DisabledCapabilities: fuse.CAP_PASSTHROUGH,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("lazyfs: mount %s: %w", f.mountpoint, err)
	}
	return m, nil
}

// Mountpoint is where f is mounted.
func (f *FS) Mountpoint() string { return f.mountpoint }

// Cut cuts the power: from now on every change through the mount fails
// with EIO, and a sync still in progress (see Options.SyncDelay) makes
// nothing durable. A process killed in a sync cannot exit before the file
// system answers it: Cut first, then kill, then Crash, cuts the power
// during the sync. Crash does what Cut does, if it was not done.
func (f *FS) Cut() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m != nil {
		f.m.dead = true
	}
}

// Crash loses what was not synced, as a power loss would: it unmounts f,
// undoes every change not made durable (with rng, a random part of them:
// a torn crash), and mounts it again. Every process that used the mount must
// have ended: a file still open keeps the old mount busy, which is then
// detached after 5 s and answers every change through it with EIO.
func (f *FS) Crash(rng *rand.Rand) error {
	if err := f.unmount(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return fmt.Errorf("lazyfs: crash %s: closed", f.mountpoint)
	}
	var errs []error
	for ino, u := range f.files {
		errs = append(errs, u.undo(rng))
		delete(f.files, ino)
	}
	keep := 0
	if rng != nil {
		// Metadata is journalled in order: a prefix survives.
		keep = rng.IntN(len(f.ops) + 1)
	}
	for i := len(f.ops) - 1; i >= keep; i-- {
		errs = append(errs, f.ops[i].undo(f.backing))
	}
	f.ops = nil
	errs = append(errs, f.emptyTrash())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("lazyfs: crash %s: %w", f.mountpoint, err)
	}
	m, err := f.mount()
	if err != nil {
		return err
	}
	f.m = m
	return nil
}

// Close unmounts f, keeping what the backing directory holds (unsynced
// changes included), and removes its trash. A mount still busy after 5 s
// is detached. Closing a closed FS does nothing.
func (f *FS) Close() error {
	err := f.unmount()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	f.closed = true
	for ino, u := range f.files {
		u.f.Close()
		delete(f.files, ino)
	}
	f.ops = nil
	return errors.Join(err, f.emptyTrash(), os.Remove(f.trash))
}

// busyWait is how long unmount retries a busy mount before detaching it.
var busyWait = 5 * time.Second

// unmount unmounts the current mount, if any, after refusing every change
// through it. A mount still busy after busyWait is detached.
func (f *FS) unmount() error {
	f.mu.Lock()
	m := f.m
	f.m = nil
	if m != nil {
		m.dead = true
	}
	f.mu.Unlock()
	if m == nil {
		return nil
	}
	deadline := time.Now().Add(busyWait)
	for {
		// Unmount tries 5 times in about 0.2 s.
		err := m.server.Unmount()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			if derr := syscall.Unmount(f.mountpoint, syscall.MNT_DETACH); derr != nil {
				return fmt.Errorf("lazyfs: unmount %s: %w; detach: %w", f.mountpoint, err, derr)
			}
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// emptyTrash removes everything in the trash.
func (f *FS) emptyTrash() error {
	names, err := os.ReadDir(f.trash)
	if err != nil {
		return fmt.Errorf("lazyfs: %w", err)
	}
	var errs []error
	for _, e := range names {
		errs = append(errs, os.RemoveAll(filepath.Join(f.trash, e.Name())))
	}
	return errors.Join(errs...)
}

// trashName returns a new name in the trash. Guarded by mu.
func (f *FS) trashName() string {
	f.nTrash++
	return filepath.Join(f.trash, strconv.Itoa(f.nTrash))
}

// fileUndo returns the undo record of the file of inode ino, open as fd,
// starting one if it has none. Guarded by mu.
func (f *FS) fileUndo(ino uint64, fd int) (*fileUndo, error) {
	if u, ok := f.files[ino]; ok {
		return u, nil
	}
	u, err := newFileUndo(fd)
	if err != nil {
		return nil, err
	}
	f.files[ino] = u
	return u, nil
}

// syncFile makes the file of inode ino durable. Guarded by mu.
func (f *FS) syncFile(ino uint64) {
	if u, ok := f.files[ino]; ok {
		u.f.Close()
		delete(f.files, ino)
	}
}

// syncDir makes the entries of the directory of inode ino durable: every
// operation that changed them and no other directory not synced since.
// Guarded by mu.
func (f *FS) syncDir(ino uint64) error {
	var errs []error
	f.ops = slices.DeleteFunc(f.ops, func(op *dirOp) bool {
		delete(op.dirs, ino)
		if len(op.dirs) > 0 {
			return false
		}
		if op.trash != "" {
			errs = append(errs, os.RemoveAll(op.trash))
		}
		return true
	})
	return errors.Join(errs...)
}

// record records op, which changed the entries of the directories dirs.
// Guarded by mu.
func (f *FS) record(op *dirOp, dirs ...uint64) {
	op.dirs = map[uint64]bool{}
	for _, d := range dirs {
		op.dirs[d] = true
	}
	f.ops = append(f.ops, op)
}

// Unsynced describes what a crash would lose now: the files with changes
// not synced (their paths in the backing directory, or in its trash) and
// the directory operations not durable ("mkdir wal", "rename a b").
func (f *FS) Unsynced() (files, ops []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, u := range f.files {
		p, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(u.f.Fd())))
		if err != nil {
			p = "?"
		}
		if r, err := filepath.Rel(f.backing, p); err == nil && filepath.IsLocal(r) {
			p = r
		}
		files = append(files, p)
	}
	slices.Sort(files)
	for _, op := range f.ops {
		ops = append(ops, op.String())
	}
	return files, ops
}
