package crashfs

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"syscall"
)

// Kill models the death of the process: everything written stays, and
// every file open now is closed under its holder (ErrCrashed).
func (fsys *FS) Kill() {
	fsys.mu.Lock()
	defer fsys.mu.Unlock()
	fsys.gen++
}

// PowerLoss replaces the FS's state with what a power loss leaves (see
// CrashClone), and closes every file open now, as Kill does. The Fault
// and the count of operations stay.
func (fsys *FS) PowerLoss(rng *rand.Rand, keep float64) {
	fsys.mu.Lock()
	defer fsys.mu.Unlock()
	fsys.root = fsys.crash(rng, keep)
	fsys.groups = nil
	fsys.gen++
}

// CrashClone returns a new FS holding what a power loss would leave of
// this one now, which it leaves as it is: the durable state, and, with
// probability keep each, the unsynced sectors, sizes and entry changes
// (see the package doc). keep 0 leaves exactly the durable state; keep 1
// leaves everything but the sectors a failed sync lost. rng draws which,
// in an order fixed by the state, so that one seed gives one result; it
// may be nil if keep is 0 or 1. The new FS has no Fault, and has counted
// no operations.
func (fsys *FS) CrashClone(rng *rand.Rand, keep float64) *FS {
	fsys.mu.Lock()
	defer fsys.mu.Unlock()
	return &FS{root: fsys.crash(rng, keep)}
}

// crash returns the root of the tree a power loss leaves. It draws
// first for each group of entry changes, oldest first, then for each file
// as it meets it in a walk of the new tree, names in order: its size,
// then its dirty sectors, first to last. The caller holds fsys.mu.
func (fsys *FS) crash(rng *rand.Rand, keep float64) *inode {
	coin := func() bool {
		switch {
		case keep <= 0:
			return false
		case keep >= 1:
			return true
		}
		return rng.Float64() < keep
	}
	kept := map[entKey]bool{}
	for _, g := range fsys.groups {
		if !g.dead && coin() {
			for _, k := range g.keys {
				kept[k] = true
			}
		}
	}
	seen := map[*inode]*inode{}
	var walk func(d, up *inode, name string) *inode
	walk = func(d, up *inode, name string) *inode {
		nd := newDir(d.mode)
		nd.up, nd.name = up, name
		seen[d] = nd
		ents := maps.Clone(d.dents)
		for name := range d.pend {
			if !kept[entKey{d, name}] {
				continue
			}
			if c, ok := d.ents[name]; ok {
				ents[name] = c
			} else {
				delete(ents, name)
			}
		}
		for _, name := range slices.Sorted(maps.Keys(ents)) {
			c := ents[name]
			nc, ok := seen[c]
			switch {
			case ok && c.isDir():
				// The ties between renames of directories rule
				// this out.
				panic(fmt.Sprintf("crashfs: a power loss leaves directory %q in two places", name))
			case ok:
			case c.isDir():
				nc = walk(c, nd, name)
			default:
				nc = c.crashed(coin)
				seen[c] = nc
			}
			nd.ents[name] = nc
			nd.dents[name] = nc
		}
		return nd
	}
	return walk(fsys.root, nil, "")
}

// crashed returns the file a power loss leaves of n.
func (n *inode) crashed(coin func() bool) *inode {
	size := len(n.durable)
	if len(n.data) != size && coin() {
		size = len(n.data)
	}
	b := make([]byte, size)
	copy(b, n.durable)
	for _, s := range slices.Sorted(slices.Values(n.dirty)) {
		lo := s * SectorSize
		if lo >= size || !coin() {
			continue
		}
		hi := min(lo+SectorSize, size)
		clear(b[lo:hi])
		if lo < len(n.data) {
			copy(b[lo:hi], n.data[lo:min(hi, len(n.data))])
		}
	}
	return &inode{mode: n.mode, data: b, durable: slices.Clone(b)}
}

// FlipBit inverts bit (0 is the lowest) of the byte at off in file name,
// in its current and its durable contents alike, as damage on the medium
// would. It fails if off is past the end of both.
func (fsys *FS) FlipBit(name string, off int64, bit uint) error {
	return fsys.damage(name, off, func(b []byte, off int) {
		b[off] ^= 1 << (bit % 8)
	})
}

// ZeroSector zeroes the sector of file name that holds off, in its
// current and its durable contents alike, as a sector the disk lost
// would. It fails if that sector is past the end of both.
func (fsys *FS) ZeroSector(name string, off int64) error {
	if off >= 0 {
		off = off / SectorSize * SectorSize
	}
	return fsys.damage(name, off, func(b []byte, lo int) {
		clear(b[lo:min(lo+SectorSize, len(b))])
	})
}

// damage applies f at off to n's current and durable contents, each that
// reaches past off.
func (fsys *FS) damage(name string, off int64, f func(b []byte, off int)) error {
	fsys.mu.Lock()
	defer fsys.mu.Unlock()
	n, err := fsys.lookup(clean(name))
	if err == nil && n.isDir() {
		err = syscall.EISDIR
	}
	if err != nil {
		return fmt.Errorf("crashfs: damage %s: %w", name, err)
	}
	if off < 0 || (off >= int64(len(n.data)) && off >= int64(len(n.durable))) {
		return fmt.Errorf("crashfs: damage %s at %d: past its end (%d bytes, %d durable)", name, off, len(n.data), len(n.durable))
	}
	for _, b := range [][]byte{n.data, n.durable} {
		if off < int64(len(b)) {
			f(b, int(off))
		}
	}
	return nil
}

// ErrPowerCut is the error of every operation of an FS that Cuts cut.
var ErrPowerCut = errors.New("crashfs: the power was cut")

// Cuts runs a workload with its power cut before each of its file
// operations in turn. It runs run once on a new FS to count the
// operations, then, for each k from 1 to that count plus one, on a new FS
// whose every operation from the k-th on fails with ErrPowerCut (a failed
// sync's sectors are lost, as after a failed sync), and calls after with
// k, the count and that FS, from which after takes the states a power
// loss there can leave (CrashClone).
func Cuts(run func(fsys *FS), after func(k, ops int, fsys *FS)) {
	counted := New()
	run(counted)
	ops := counted.Ops()
	for k := 1; k <= ops+1; k++ {
		fsys := New()
		fsys.SetFault(func(ev Event) error {
			if ev.Seq >= k {
				return ErrPowerCut
			}
			return nil
		})
		run(fsys)
		after(k, ops, fsys)
	}
}
