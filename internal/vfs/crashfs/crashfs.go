package crashfs

import (
	"errors"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/latchd/latch/internal/vfs"
)

// FS is an in-memory file system that can crash; see the package doc. The
// zero value is not ready to use: call New. Its methods are safe for
// concurrent use.
type FS struct {
	mu     sync.Mutex
	root   *inode
	gen    uint64 // bumped by Kill and PowerLoss: files of an older one are dead
	ops    int    // operations so far
	fault  Fault
	groups []*group          // the unsynced entry changes, oldest first
	seq    int               // the last group's seq
	locks  map[string]uint64 // held locks (Lock), by name, with the gen that took them
}

var _ vfs.FS = (*FS)(nil)

// New returns an empty FS: a root directory and nothing in it.
func New() *FS {
	return &FS{root: newDir(0o755)}
}

// inode is a file or a directory.
type inode struct {
	mode fs.FileMode

	// A directory's current entries, its durable ones, and the names
	// whose entry changed since it was last synced, each with the group
	// of changes it is made durable (or lost) with.
	ents  map[string]*inode
	dents map[string]*inode
	pend  map[string]*group
	// A directory's current place, for the entries above it.
	up   *inode
	name string

	// A file's contents; see file.go.
	data    []byte
	durable []byte
	sec     []sector
	dirty   []int
}

func newDir(perm fs.FileMode) *inode {
	return &inode{
		mode:  fs.ModeDir | perm&fs.ModePerm,
		ents:  map[string]*inode{},
		dents: map[string]*inode{},
		pend:  map[string]*group{},
	}
}

func (n *inode) isDir() bool { return n.mode.IsDir() }

// entKey names one entry of one directory.
type entKey struct {
	dir  *inode
	name string
}

// group is a set of entry changes made durable together (by a SyncDir of
// any of their directories) and kept or lost together by a power loss;
// see the package doc for which changes share one.
type group struct {
	seq     int // order of creation, so that a power loss is deterministic
	keys    []entKey
	dead    bool // merged into another group, or synced
	dirMove bool // holds a rename of a directory
}

// Ops returns the number of operations the FS has run (or failed by its
// Fault): the Seq of the last.
func (fsys *FS) Ops() int {
	fsys.mu.Lock()
	defer fsys.mu.Unlock()
	return fsys.ops
}

// SetFault makes f decide, before each later operation, whether it fails;
// nil removes the Fault.
func (fsys *FS) SetFault(f Fault) {
	fsys.mu.Lock()
	defer fsys.mu.Unlock()
	fsys.fault = f
}

// begin counts an operation and asks the Fault whether it fails. The
// caller holds fsys.mu.
func (fsys *FS) begin(ev Event) error {
	fsys.ops++
	ev.Seq = fsys.ops
	if fsys.fault == nil {
		return nil
	}
	return fsys.fault(ev)
}

func pathErr(op Op, name string, err error) error {
	return &fs.PathError{Op: op.String(), Path: name, Err: err}
}

// clean returns name as a path from the root.
func clean(name string) string {
	return path.Clean("/" + filepath.ToSlash(name))
}

// lookup returns the inode at p, a cleaned path.
func (fsys *FS) lookup(p string) (*inode, error) {
	n := fsys.root
	if p == "/" {
		return n, nil
	}
	for _, el := range strings.Split(p[1:], "/") {
		if !n.isDir() {
			return nil, syscall.ENOTDIR
		}
		c, ok := n.ents[el]
		if !ok {
			return nil, syscall.ENOENT
		}
		n = c
	}
	return n, nil
}

// parent returns the directory that holds p, a cleaned path other than
// the root, and p's last element.
func (fsys *FS) parent(p string) (*inode, string, error) {
	dir, base := path.Split(p)
	d, err := fsys.lookup(path.Clean(dir))
	if err != nil {
		return nil, "", err
	}
	if !d.isDir() {
		return nil, "", syscall.ENOTDIR
	}
	return d, base, nil
}

// OpenFile opens the file name with the os package's flags O_RDONLY,
// O_WRONLY, O_RDWR, O_CREATE, O_EXCL and O_TRUNC; any other flag fails
// (errors.ErrUnsupported), and so does a directory (syscall.EISDIR). A
// created file's entry is durable after SyncDir of its directory.
func (fsys *FS) OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error) {
	const known = os.O_RDONLY | os.O_WRONLY | os.O_RDWR | os.O_CREATE | os.O_EXCL | os.O_TRUNC
	op := OpOpen
	if flag&os.O_CREATE != 0 {
		op = OpCreate
	}
	fsys.mu.Lock()
	defer fsys.mu.Unlock()
	if err := fsys.begin(Event{Op: op, Name: name}); err != nil {
		return nil, pathErr(op, name, err)
	}
	if flag&^known != 0 {
		return nil, pathErr(op, name, errUnsupportedFlag)
	}
	p := clean(name)
	if p == "/" {
		return nil, pathErr(op, name, syscall.EISDIR)
	}
	dir, base, err := fsys.parent(p)
	if err != nil {
		return nil, pathErr(op, name, err)
	}
	n, ok := dir.ents[base]
	switch {
	case ok && flag&(os.O_CREATE|os.O_EXCL) == os.O_CREATE|os.O_EXCL:
		return nil, pathErr(op, name, syscall.EEXIST)
	case !ok && flag&os.O_CREATE == 0:
		return nil, pathErr(op, name, syscall.ENOENT)
	case !ok:
		n = &inode{mode: perm & fs.ModePerm}
		dir.ents[base] = n
		fsys.touch(entKey{dir, base})
	}
	if n.isDir() {
		return nil, pathErr(op, name, syscall.EISDIR)
	}
	if flag&os.O_TRUNC != 0 {
		n.truncate(0)
	}
	acc := flag & (os.O_WRONLY | os.O_RDWR)
	return &file{
		fs:    fsys,
		n:     n,
		name:  name,
		gen:   fsys.gen,
		read:  acc != os.O_WRONLY,
		write: acc != os.O_RDONLY,
	}, nil
}

// Remove removes the file or empty directory name. Its removal is durable
// after SyncDir of its directory; until then a power loss may bring it
// back, with its durable contents.
func (fsys *FS) Remove(name string) error {
	fsys.mu.Lock()
	defer fsys.mu.Unlock()
	if err := fsys.begin(Event{Op: OpRemove, Name: name}); err != nil {
		return pathErr(OpRemove, name, err)
	}
	p := clean(name)
	if p == "/" {
		return pathErr(OpRemove, name, syscall.EBUSY)
	}
	dir, base, err := fsys.parent(p)
	if err != nil {
		return pathErr(OpRemove, name, err)
	}
	n, ok := dir.ents[base]
	if !ok {
		return pathErr(OpRemove, name, syscall.ENOENT)
	}
	if n.isDir() && len(n.ents) > 0 {
		return pathErr(OpRemove, name, syscall.ENOTEMPTY)
	}
	delete(dir.ents, base)
	fsys.touch(entKey{dir, base})
	return nil
}

// Rename renames oldpath to newpath as os.Rename does on Linux, replacing
// a file, or an empty directory, at newpath. The two entries are made
// durable together, by SyncDir of either directory, and a power loss
// keeps both changes or neither.
func (fsys *FS) Rename(oldpath, newpath string) error {
	fsys.mu.Lock()
	defer fsys.mu.Unlock()
	fail := func(err error) error {
		return &os.LinkError{Op: OpRename.String(), Old: oldpath, New: newpath, Err: err}
	}
	if err := fsys.begin(Event{Op: OpRename, Name: oldpath, NewName: newpath}); err != nil {
		return fail(err)
	}
	op, np := clean(oldpath), clean(newpath)
	if op == "/" || np == "/" {
		return fail(syscall.EBUSY)
	}
	odir, obase, err := fsys.parent(op)
	if err != nil {
		return fail(err)
	}
	n, ok := odir.ents[obase]
	if !ok {
		return fail(syscall.ENOENT)
	}
	ndir, nbase, err := fsys.parent(np)
	if err != nil {
		return fail(err)
	}
	if n.isDir() && strings.HasPrefix(np, op+"/") {
		return fail(syscall.EINVAL)
	}
	if t, ok := ndir.ents[nbase]; ok {
		switch {
		case t == n:
			return nil // the same name, or two links to one file
		case n.isDir() && !t.isDir():
			return fail(syscall.ENOTDIR)
		case n.isDir() && len(t.ents) > 0:
			return fail(syscall.ENOTEMPTY)
		case !n.isDir() && t.isDir():
			return fail(syscall.EISDIR)
		}
	}
	delete(odir.ents, obase)
	ndir.ents[nbase] = n
	keys := []entKey{{odir, obase}, {ndir, nbase}}
	// The directories above the destination whose own entries are not
	// durable: the move is kept only with them.
	for d := ndir; d.up != nil; d = d.up {
		if d.up.pend[d.name] != nil {
			keys = append(keys, entKey{d.up, d.name})
		}
	}
	g := fsys.touch(keys...)
	if n.isDir() {
		n.up, n.name = ndir, nbase
		g.dirMove = true
		for _, o := range fsys.groups {
			if o.dirMove && !o.dead && o != g {
				g = fsys.merge(g, o)
			}
		}
	}
	return nil
}

// Mkdir creates the directory name; its parent must exist. Its entry is
// durable after SyncDir of its parent.
func (fsys *FS) Mkdir(name string, perm fs.FileMode) error {
	fsys.mu.Lock()
	defer fsys.mu.Unlock()
	if err := fsys.begin(Event{Op: OpMkdir, Name: name}); err != nil {
		return pathErr(OpMkdir, name, err)
	}
	p := clean(name)
	if p == "/" {
		return pathErr(OpMkdir, name, syscall.EEXIST)
	}
	dir, base, err := fsys.parent(p)
	if err != nil {
		return pathErr(OpMkdir, name, err)
	}
	if _, ok := dir.ents[base]; ok {
		return pathErr(OpMkdir, name, syscall.EEXIST)
	}
	n := newDir(perm)
	n.up, n.name = dir, base
	dir.ents[base] = n
	fsys.touch(entKey{dir, base})
	return nil
}

// ReadDir returns the names in directory name, sorted.
func (fsys *FS) ReadDir(name string) ([]string, error) {
	fsys.mu.Lock()
	defer fsys.mu.Unlock()
	if err := fsys.begin(Event{Op: OpReadDir, Name: name}); err != nil {
		return nil, pathErr(OpReadDir, name, err)
	}
	d, err := fsys.lookup(clean(name))
	if err != nil {
		return nil, pathErr(OpReadDir, name, err)
	}
	if !d.isDir() {
		return nil, pathErr(OpReadDir, name, syscall.ENOTDIR)
	}
	return slices.Sorted(maps.Keys(d.ents)), nil
}

// Stat describes the file or directory name as it is now. Its ModTime is
// the zero time: the model has no clock.
func (fsys *FS) Stat(name string) (fs.FileInfo, error) {
	fsys.mu.Lock()
	defer fsys.mu.Unlock()
	if err := fsys.begin(Event{Op: OpStat, Name: name}); err != nil {
		return nil, pathErr(OpStat, name, err)
	}
	p := clean(name)
	n, err := fsys.lookup(p)
	if err != nil {
		return nil, pathErr(OpStat, name, err)
	}
	return fileInfo{name: path.Base(p), size: int64(len(n.data)), mode: n.mode}, nil
}

// SyncDir makes the changed entries of directory name durable, with the
// changes tied to them (see the package doc). It does not sync the files
// the entries name.
func (fsys *FS) SyncDir(name string) error {
	fsys.mu.Lock()
	defer fsys.mu.Unlock()
	if err := fsys.begin(Event{Op: OpSyncDir, Name: name}); err != nil {
		return pathErr(OpSyncDir, name, err)
	}
	d, err := fsys.lookup(clean(name))
	if err != nil {
		return pathErr(OpSyncDir, name, err)
	}
	if !d.isDir() {
		return pathErr(OpSyncDir, name, syscall.ENOTDIR)
	}
	fsys.syncDir(d)
	fsys.groups = slices.DeleteFunc(fsys.groups, func(g *group) bool { return g.dead })
	return nil
}

// SyncAll makes everything under directory name durable: the contents
// and sizes of its files, and the entries of its directories. If it
// fails, it marks the dirty sectors of those files lost, as a failed
// File.Sync does.
func (fsys *FS) SyncAll(name string) error {
	fsys.mu.Lock()
	defer fsys.mu.Unlock()
	ferr := fsys.begin(Event{Op: OpSyncAll, Name: name})
	d, err := fsys.lookup(clean(name))
	if err == nil && !d.isDir() {
		err = syscall.ENOTDIR
	}
	if err != nil {
		if ferr != nil {
			err = ferr
		}
		return pathErr(OpSyncAll, name, err)
	}
	var walk func(d *inode)
	walk = func(d *inode) {
		if ferr == nil {
			fsys.syncDir(d)
		}
		for _, n := range d.ents {
			switch {
			case n.isDir():
				walk(n)
			case ferr != nil:
				if !errors.Is(ferr, ErrKilled) {
					n.failSync()
				}
			default:
				n.sync()
			}
		}
	}
	walk(d)
	fsys.groups = slices.DeleteFunc(fsys.groups, func(g *group) bool { return g.dead })
	if ferr != nil {
		return pathErr(OpSyncAll, name, ferr)
	}
	return nil
}

// touch records changes of the entries keys, tying them, and the changes
// they are already tied to, into one group, which it returns.
func (fsys *FS) touch(keys ...entKey) *group {
	var g *group
	for _, k := range keys {
		if kg := k.dir.pend[k.name]; kg != nil {
			g = fsys.merge(g, kg)
		}
	}
	if g == nil {
		fsys.seq++
		g = &group{seq: fsys.seq}
		fsys.groups = append(fsys.groups, g)
	}
	for _, k := range keys {
		if k.dir.pend[k.name] != g {
			k.dir.pend[k.name] = g
			g.keys = append(g.keys, k)
		}
	}
	return g
}

// merge returns a group that holds the changes of a and b; the other one
// is dead. Either may be nil.
func (fsys *FS) merge(a, b *group) *group {
	switch {
	case a == nil:
		return b
	case b == nil || a == b:
		return a
	}
	if b.seq < a.seq {
		a, b = b, a
	}
	for _, k := range b.keys {
		k.dir.pend[k.name] = a
	}
	a.keys = append(a.keys, b.keys...)
	a.dirMove = a.dirMove || b.dirMove
	b.keys, b.dead = nil, true
	return a
}

// syncDir makes the changes of d's entries durable, with the changes tied
// to them. The caller drops the dead groups from fsys.groups.
func (fsys *FS) syncDir(d *inode) {
	for _, g := range d.pend {
		if g.dead {
			continue
		}
		for _, k := range g.keys {
			if c, ok := k.dir.ents[k.name]; ok {
				k.dir.dents[k.name] = c
			} else {
				delete(k.dir.dents, k.name)
			}
			delete(k.dir.pend, k.name)
		}
		g.keys, g.dead = nil, true
	}
}

// fileInfo is what Stat returns.
type fileInfo struct {
	name string
	size int64
	mode fs.FileMode
}

func (fi fileInfo) Name() string       { return fi.name }
func (fi fileInfo) Size() int64        { return fi.size }
func (fi fileInfo) Mode() fs.FileMode  { return fi.mode }
func (fi fileInfo) ModTime() time.Time { return time.Time{} }
func (fi fileInfo) IsDir() bool        { return fi.mode.IsDir() }
func (fi fileInfo) Sys() any           { return nil }
