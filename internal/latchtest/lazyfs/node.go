//go:build linux

package lazyfs

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// node is a file or directory of a mount: go-fuse's loopback node, with
// every change recorded for undo first, and refused once the mount is
// dead.
type node struct {
	*fs.LoopbackNode
	m *mount
}

var (
	_ fs.NodeWrapChilder    = (*node)(nil)
	_ fs.NodeCreater        = (*node)(nil)
	_ fs.NodeOpener         = (*node)(nil)
	_ fs.NodeOpendirHandler = (*node)(nil)
	_ fs.NodeWriter         = (*node)(nil)
	_ fs.NodeWritever       = (*node)(nil)
	_ fs.NodeFsyncer        = (*node)(nil)
	_ fs.NodeSetattrer      = (*node)(nil)
	_ fs.NodeAllocater      = (*node)(nil)
	_ fs.NodeMkdirer        = (*node)(nil)
	_ fs.NodeUnlinker       = (*node)(nil)
	_ fs.NodeRmdirer        = (*node)(nil)
	_ fs.NodeRenamer        = (*node)(nil)
)

// WrapChild makes every node of the tree a lazyfs node.
func (n *node) WrapChild(ctx context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	return &node{LoopbackNode: ops.(*fs.LoopbackNode), m: n.m}
}

// ino is n's inode number, the backing file's.
func (n *node) ino() uint64 { return n.StableAttr().Ino }

// rel is n's path relative to the backing directory.
func (n *node) rel() string { return n.Path(nil) }

// path is n's path in the backing directory.
func (n *node) path() string { return filepath.Join(n.m.fs.backing, n.rel()) }

// lock locks the FS for a change through n, or reports the mount dead.
func (n *node) lock() syscall.Errno {
	n.m.fs.mu.Lock()
	if n.m.dead {
		n.m.fs.mu.Unlock()
		return syscall.EIO
	}
	return 0
}

func (n *node) unlock() { n.m.fs.mu.Unlock() }

// file is an open file of a mount.
type file struct {
	*fs.LoopbackFile
}

// fd is f's descriptor of the backing file.
func (f *file) fd() int {
	fd, _ := f.LoopbackFile.PassthroughFd()
	return fd
}

// PassthroughFd hides the backing file from the kernel: every write must
// come through Write.
func (f *file) PassthroughFd() (int, bool) { return 0, false }

func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	if errno := n.lock(); errno != 0 {
		return nil, nil, 0, errno
	}
	defer n.unlock()
	// The kernel creates only a name it does not know of.
	ch, fh, fl, errno := n.LoopbackNode.Create(ctx, name, (flags|syscall.O_EXCL)&^syscall.O_TRUNC, mode, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	n.m.fs.record(&dirOp{kind: opCreate, path: filepath.Join(n.rel(), name)}, n.ino())
	return ch, &file{fh.(*fs.LoopbackFile)}, fl, 0
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	trunc := flags&syscall.O_TRUNC != 0
	if trunc {
		// The kernel truncates with Setattr; not seen so far.
		if errno := n.lock(); errno != 0 {
			return nil, 0, errno
		}
		defer n.unlock()
	}
	fh, fl, errno := n.LoopbackNode.Open(ctx, flags&^syscall.O_TRUNC)
	if errno != 0 {
		return nil, 0, errno
	}
	f := &file{fh.(*fs.LoopbackFile)}
	if trunc {
		if errno := n.truncate(f.fd(), 0); errno != 0 {
			f.Release(ctx)
			return nil, 0, errno
		}
	}
	return f, fl, 0
}

// truncate truncates n, open as fd, to size. Guarded by mu.
func (n *node) truncate(fd int, size int64) syscall.Errno {
	u, err := n.m.fs.fileUndo(n.ino(), fd)
	if err == nil {
		err = u.truncate(size)
	}
	if err == nil {
		err = syscall.Ftruncate(fd, size)
	}
	return fs.ToErrno(err)
}

func (n *node) Write(ctx context.Context, fh fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	if errno := n.lock(); errno != 0 {
		return 0, errno
	}
	defer n.unlock()
	fd := fh.(*file).fd()
	u, err := n.m.fs.fileUndo(n.ino(), fd)
	if err == nil {
		err = u.change(off, int64(len(data)))
	}
	if err != nil {
		return 0, fs.ToErrno(err)
	}
	w, err := syscall.Pwrite(fd, data, off)
	return uint32(w), fs.ToErrno(err)
}

func (n *node) Writev(ctx context.Context, fh fs.FileHandle, data [][]byte, off int64) (uint32, syscall.Errno) {
	var b []byte
	for _, d := range data {
		b = append(b, d...)
	}
	return n.Write(ctx, fh, b, off)
}

// Fsync syncs a file (fsync and fdatasync alike), after the sync delay. A
// directory's comes to its handle's Fsyncdir.
func (n *node) Fsync(ctx context.Context, fh fs.FileHandle, flags uint32) syscall.Errno {
	time.Sleep(n.m.fs.opts.SyncDelay)
	if errno := n.lock(); errno != 0 {
		return errno
	}
	defer n.unlock()
	n.m.fs.syncFile(n.ino())
	return 0
}

func (n *node) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if errno := n.lock(); errno != 0 {
		return errno
	}
	defer n.unlock()
	if size, ok := in.GetSize(); ok {
		var fd int
		if f, ok := fh.(*file); ok {
			fd = f.fd()
		} else {
			bf, err := os.OpenFile(n.path(), os.O_RDWR, 0)
			if err != nil {
				return fs.ToErrno(err)
			}
			defer bf.Close()
			fd = int(bf.Fd())
		}
		if errno := n.truncate(fd, int64(size)); errno != 0 {
			return errno
		}
	}
	return n.LoopbackNode.Setattr(ctx, fh, in, out)
}

func (n *node) Allocate(ctx context.Context, fh fs.FileHandle, off uint64, size uint64, mode uint32) syscall.Errno {
	if mode&^(unix.FALLOC_FL_KEEP_SIZE|unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_ZERO_RANGE) != 0 {
		return syscall.EOPNOTSUPP
	}
	if errno := n.lock(); errno != 0 {
		return errno
	}
	defer n.unlock()
	f := fh.(*file)
	if mode&(unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_ZERO_RANGE) != 0 {
		u, err := n.m.fs.fileUndo(n.ino(), f.fd())
		if err == nil {
			err = u.change(int64(off), int64(size))
		}
		if err != nil {
			return fs.ToErrno(err)
		}
	} else if mode&unix.FALLOC_FL_KEEP_SIZE == 0 {
		// Only the size changes: the undo record keeps the old one.
		if _, err := n.m.fs.fileUndo(n.ino(), f.fd()); err != nil {
			return fs.ToErrno(err)
		}
	}
	return f.Allocate(ctx, off, size, mode)
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if errno := n.lock(); errno != 0 {
		return nil, errno
	}
	defer n.unlock()
	ch, errno := n.LoopbackNode.Mkdir(ctx, name, mode, out)
	if errno == 0 {
		n.m.fs.record(&dirOp{kind: opMkdir, path: filepath.Join(n.rel(), name)}, n.ino())
	}
	return ch, errno
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	return n.remove(name, false)
}

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	return n.remove(name, true)
}

// remove unlinks or rmdirs name by moving it into the trash.
func (n *node) remove(name string, dir bool) syscall.Errno {
	if errno := n.lock(); errno != 0 {
		return errno
	}
	defer n.unlock()
	p := filepath.Join(n.path(), name)
	fi, err := os.Lstat(p)
	if err != nil {
		return fs.ToErrno(err)
	}
	switch {
	case dir && !fi.IsDir():
		return syscall.ENOTDIR
	case !dir && fi.IsDir():
		return syscall.EISDIR
	case dir:
		names, err := os.ReadDir(p)
		if err != nil {
			return fs.ToErrno(err)
		}
		if len(names) > 0 {
			return syscall.ENOTEMPTY
		}
	}
	trash := n.m.fs.trashName()
	if err := os.Rename(p, trash); err != nil {
		return fs.ToErrno(err)
	}
	n.m.fs.record(&dirOp{kind: opRemove, path: filepath.Join(n.rel(), name), trash: trash}, n.ino())
	return 0
}

func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	np, ok := newParent.(*node)
	if !ok {
		return syscall.EXDEV
	}
	if flags&^unix.RENAME_NOREPLACE != 0 {
		return syscall.EINVAL // RENAME_EXCHANGE, RENAME_WHITEOUT
	}
	if errno := n.lock(); errno != 0 {
		return errno
	}
	defer n.unlock()
	op := &dirOp{kind: opRename, path: filepath.Join(n.rel(), name), newPath: filepath.Join(np.rel(), newName)}
	if op.path == op.newPath {
		return 0
	}
	root := n.m.fs.backing
	from, to := filepath.Join(root, op.path), filepath.Join(root, op.newPath)
	if flags&unix.RENAME_NOREPLACE != 0 {
		if err := renameNoReplace(from, to); err != nil {
			return fs.ToErrno(err)
		}
		n.m.fs.record(op, n.ino(), np.ino())
		return 0
	}
	if fi, err := os.Lstat(to); err == nil {
		if fi.IsDir() {
			op.replacedDir, op.replacedMode = true, fi.Mode().Perm()
		} else {
			op.trash = n.m.fs.trashName()
			if err := os.Link(to, op.trash); err != nil {
				return fs.ToErrno(err)
			}
		}
	}
	if err := os.Rename(from, to); err != nil {
		if op.trash != "" {
			os.Remove(op.trash)
		}
		return fs.ToErrno(err)
	}
	n.m.fs.record(op, n.ino(), np.ino())
	return 0
}

// Link, Symlink, Mknod, Tmpfile and CopyFileRange are refused: lazyfs
// would not undo them.

func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.EPERM
}

func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.EPERM
}

func (n *node) Mknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.EPERM
}

func (n *node) Tmpfile(ctx context.Context, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EOPNOTSUPP
}

func (n *node) CopyFileRange(ctx context.Context, fhIn fs.FileHandle, offIn uint64, out *fs.Inode, fhOut fs.FileHandle, offOut uint64, len uint64, flags uint64) (uint32, syscall.Errno) {
	return 0, syscall.ENOSYS
}

func (n *node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	return syscall.EOPNOTSUPP
}

func (n *node) Removexattr(ctx context.Context, attr string) syscall.Errno {
	return syscall.EOPNOTSUPP
}

func (n *node) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	h, fl, errno := n.LoopbackNode.OpendirHandle(ctx, flags)
	if errno != 0 {
		return nil, 0, errno
	}
	return &dir{inner: h, n: n}, fl, 0
}

// dir is an open directory: the loopback's, whose fsync makes its entries
// durable here.
type dir struct {
	inner fs.FileHandle
	n     *node
}

func (d *dir) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	return d.inner.(fs.FileReaddirenter).Readdirent(ctx)
}

func (d *dir) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	return d.inner.(fs.FileSeekdirer).Seekdir(ctx, off)
}

func (d *dir) Releasedir(ctx context.Context, flags uint32) {
	d.inner.(fs.FileReleasedirer).Releasedir(ctx, flags)
}

func (d *dir) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno {
	time.Sleep(d.n.m.fs.opts.SyncDelay)
	if errno := d.n.lock(); errno != 0 {
		return errno
	}
	defer d.n.unlock()
	return fs.ToErrno(d.n.m.fs.syncDir(d.n.ino()))
}
