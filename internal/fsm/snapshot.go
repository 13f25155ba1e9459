package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/cache"
	"github.com/latchd/latch/internal/engine"
	"github.com/latchd/latch/internal/znode"
	"github.com/latchd/latch/internal/zset"
)

// SnapshotVersion is the format of AppendSnapshot: a version byte; the
// replicated clock (State.Now) as a varint; the last Seq applied per Origin
// (a uvarint count, then pairs of uvarints in Origin order); the nodes that
// own sessions (a uvarint count, then per node in name order: its name as a
// uvarint length and bytes, its last heartbeat as a varint, a uvarint count
// of sessions and each session id as the uvarint difference from the one
// before, ascending); the generations of resumed sessions (a uvarint
// count, then pairs of uvarints, session and generation, in session order);
// then the lock table's, the item cache's and the ZooKeeper data tree's own
// snapshots, each prefixed with its length as a uvarint; then the sorted
// sets, prefixed with their length as a uvarint: the last version given
// (uvarint), a uvarint count of keys, then per key in key order its name
// (uvarint length and bytes), version (uvarint), expiry (varint, 0:
// none), a uvarint count of members and each member in ascending order
// as its score (IEEE 754 bits, 8 bytes little-endian) and its bytes
// (uvarint length and bytes).
const SnapshotVersion = 4

// ErrSnapshot is wrapped by the errors of Restore.
var ErrSnapshot = errors.New("fsm: bad snapshot")

// AppendSnapshot appends the whole state to dst. Equal states (the same
// commands applied from the same state) give identical bytes.
func (s *State) AppendSnapshot(dst []byte) []byte {
	dst = s.appendHead(dst)
	dst = appendPart(dst, s.eng.AppendSnapshot)
	dst = appendPart(dst, s.cache.AppendSnapshot)
	dst = appendPart(dst, s.tree.AppendSnapshot)
	return appendPart(dst, s.z.appendTo)
}

// appendHead appends the part of the snapshot before the lock table's.
func (s *State) appendHead(dst []byte) []byte {
	dst = append(dst, SnapshotVersion)
	dst = binary.AppendVarint(dst, s.now)
	origins := make([]uint64, 0, len(s.seqs)+1)
	for o := range s.seqs {
		origins = append(origins, o)
	}
	if s.lastOrigin != 0 || s.lastSeq != 0 {
		origins = append(origins, s.lastOrigin)
	}
	slices.Sort(origins)
	dst = binary.AppendUvarint(dst, uint64(len(origins)))
	for _, o := range origins {
		seq := s.seqs[o]
		if o == s.lastOrigin {
			seq = s.lastSeq
		}
		dst = binary.AppendUvarint(dst, o)
		dst = binary.AppendUvarint(dst, seq)
	}
	dst = s.owners.appendTo(dst)
	ids := slices.Sorted(maps.Keys(s.gens))
	dst = binary.AppendUvarint(dst, uint64(len(ids)))
	for _, id := range ids {
		dst = binary.AppendUvarint(dst, uint64(id))
		dst = binary.AppendUvarint(dst, s.gens[id])
	}
	return dst
}

// A Capture is the snapshot of a State (AppendSnapshot's bytes) as it was
// at one instant, State.Capture's, written without stopping the commands
// applied after it for the encoding of the whole lock table: at the
// capture, the state encodes all but the lock table (the clock, the last
// sequence numbers, the owners and generations of sessions, the item
// cache) and captures the lock table (engine.Capture); Step encodes the
// lock table a few entries at a time, between the commands that change
// it; AppendTo writes the snapshot.
//
// Capture, Step and Close are called as Apply is, under the lock of the
// node that applies commands to the state; AppendTo, once Step has
// reported the capture complete, needs no lock. A Capture of a state that
// Restore has since replaced goes on alike: that state no longer changes.
type Capture struct {
	head  []byte // the part before the lock table
	eng   *engine.Capture
	cache []byte   // the item cache's snapshot
	tree  []byte   // the data tree's
	zsets zcapture // the sorted sets, copied on write
}

// Capture captures the state at this instant for a snapshot. Its cost
// grows with the origins, owned and resumed sessions, cached items and
// sorted-set keys (each set is cloned, copy on write: its members are
// encoded by AppendTo), not with the locks, waiters and sessions of the
// lock table. One capture
// is open at a time (engine.Engine.Capture); the caller closes the one it
// gets (Close) when done with it.
func (s *State) Capture() *Capture {
	return &Capture{head: s.appendHead(nil), eng: s.eng.Capture(), cache: s.cache.AppendSnapshot(nil), tree: s.tree.AppendSnapshot(nil), zsets: s.z.capture()}
}

// Step encodes up to n more entries of the lock table and reports whether
// the capture is complete (engine.Capture.Step).
func (c *Capture) Step(n int) bool { return c.eng.Step(n) }

// Close stops the capture; one closed before it is complete is given up.
func (c *Capture) Close() { c.eng.Close() }

// GivenUp reports whether the capture was closed, by Close or by a later
// capture, before it was complete.
func (c *Capture) GivenUp() bool { return c.eng.GivenUp() }

// AppendTo appends the snapshot that AppendSnapshot would have appended at
// the instant of the capture. It panics unless Step has reported the
// capture complete.
func (c *Capture) AppendTo(dst []byte) []byte {
	dst = append(dst, c.head...)
	dst = appendPart(dst, c.eng.AppendTo)
	dst = appendPart(dst, func(b []byte) []byte { return append(b, c.cache...) })
	dst = appendPart(dst, func(b []byte) []byte { return append(b, c.tree...) })
	return appendPart(dst, c.zsets.appendTo)
}

// appendTo appends the owner table as SnapshotVersion lays it out.
func (o *owners) appendTo(dst []byte) []byte {
	names := make([]string, 0, len(o.nodes))
	for name := range o.nodes {
		names = append(names, name)
	}
	slices.Sort(names)
	dst = binary.AppendUvarint(dst, uint64(len(names)))
	for _, name := range names {
		n := o.nodes[name]
		dst = binary.AppendUvarint(dst, uint64(len(name)))
		dst = append(dst, name...)
		dst = binary.AppendVarint(dst, n.alive)
		dst = binary.AppendUvarint(dst, uint64(len(n.sessions)))
		var prev latch.SessionID
		for _, id := range n.sessions {
			dst = binary.AppendUvarint(dst, uint64(id-prev))
			prev = id
		}
	}
	return dst
}

// restoreOwners reads the owner table from the front of b.
func restoreOwners(b []byte) (owners, []byte, error) {
	o := newOwners()
	n, b, err := uvarint(b)
	if err != nil {
		return o, nil, err
	}
	if n > uint64(len(b))/3 {
		return o, nil, fmt.Errorf("fsm: restore: %d owners in %d bytes: %w", n, len(b), ErrSnapshot)
	}
	prevName := ""
	for i := range n {
		var name []byte
		if name, b, err = bytesPart(b); err != nil {
			return o, nil, err
		}
		if i > 0 && string(name) <= prevName || len(name) == 0 {
			return o, nil, fmt.Errorf("fsm: restore: owners out of order: %w", ErrSnapshot)
		}
		prevName = string(name)
		rec := o.get(prevName)
		if rec.alive, b, err = varint(b); err != nil {
			return o, nil, err
		}
		var count uint64
		if count, b, err = uvarint(b); err != nil {
			return o, nil, err
		}
		if count > uint64(len(b)) {
			return o, nil, fmt.Errorf("fsm: restore: %d sessions in %d bytes: %w", count, len(b), ErrSnapshot)
		}
		var id latch.SessionID
		for j := range count {
			var d uint64
			if d, b, err = uvarint(b); err != nil {
				return o, nil, err
			}
			if d == 0 && j > 0 || d == 0 && id == 0 {
				return o, nil, fmt.Errorf("fsm: restore: owned sessions out of order: %w", ErrSnapshot)
			}
			id += latch.SessionID(d)
			if _, dup := o.of[id]; dup {
				return o, nil, fmt.Errorf("fsm: restore: session %d owned twice: %w", id, ErrSnapshot)
			}
			rec.sessions = append(rec.sessions, id)
			o.of[id] = prevName
		}
	}
	return o, b, nil
}

// appendPart appends a length-prefixed part written by write.
func appendPart(dst []byte, write func([]byte) []byte) []byte {
	part := write(nil)
	dst = binary.AppendUvarint(dst, uint64(len(part)))
	return append(dst, part...)
}

// Restore returns the state that AppendSnapshot wrote into snap, configured
// by cfg. It rejects malformed input with an error wrapping ErrSnapshot
// (or the part's own restore error).
func Restore(cfg Config, snap []byte) (*State, error) {
	if len(snap) == 0 || snap[0] != SnapshotVersion {
		return nil, fmt.Errorf("fsm: restore: unknown version: %w", ErrSnapshot)
	}
	b := snap[1:]
	now, b, err := varint(b)
	if err != nil {
		return nil, err
	}
	n, b, err := uvarint(b)
	if err != nil {
		return nil, err
	}
	if n > uint64(len(b))/2 {
		return nil, fmt.Errorf("fsm: restore: %d origins in %d bytes: %w", n, len(b), ErrSnapshot)
	}
	st := &State{seqs: make(map[uint64]uint64, n), now: now, cfg: cfg}
	var prev uint64
	for i := range n {
		var o, seq uint64
		if o, b, err = uvarint(b); err != nil {
			return nil, err
		}
		if seq, b, err = uvarint(b); err != nil {
			return nil, err
		}
		if o == 0 && seq == 0 || i > 0 && o <= prev {
			return nil, fmt.Errorf("fsm: restore: origins out of order: %w", ErrSnapshot)
		}
		prev = o
		st.seqs[o] = seq
	}
	if st.owners, b, err = restoreOwners(b); err != nil {
		return nil, err
	}
	var ngens uint64
	if ngens, b, err = uvarint(b); err != nil {
		return nil, err
	}
	if ngens > uint64(len(b))/2 {
		return nil, fmt.Errorf("fsm: restore: %d generations in %d bytes: %w", ngens, len(b), ErrSnapshot)
	}
	st.gens = make(map[latch.SessionID]uint64, ngens)
	var prevID uint64
	for i := range ngens {
		var id, gen uint64
		if id, b, err = uvarint(b); err != nil {
			return nil, err
		}
		if gen, b, err = uvarint(b); err != nil {
			return nil, err
		}
		if i > 0 && id <= prevID || id == 0 || gen == 0 {
			return nil, fmt.Errorf("fsm: restore: generations out of order: %w", ErrSnapshot)
		}
		prevID = id
		st.gens[latch.SessionID(id)] = gen
	}
	var part []byte
	if part, b, err = bytesPart(b); err != nil {
		return nil, err
	}
	if st.eng, err = engine.Restore(cfg.Engine, part); err != nil {
		return nil, fmt.Errorf("fsm: restore: %w", err)
	}
	for id := range st.owners.of {
		if _, ok := st.eng.Session(id); !ok {
			return nil, fmt.Errorf("fsm: restore: owned session %d not in the lock table: %w", id, ErrSnapshot)
		}
	}
	for id := range st.gens {
		if _, ok := st.eng.Session(id); !ok {
			return nil, fmt.Errorf("fsm: restore: resumed session %d not in the lock table: %w", id, ErrSnapshot)
		}
	}
	if part, b, err = bytesPart(b); err != nil {
		return nil, err
	}
	if st.cache, err = cache.Restore(cfg.Cache, part); err != nil {
		return nil, fmt.Errorf("fsm: restore: %w", err)
	}
	if part, b, err = bytesPart(b); err != nil {
		return nil, err
	}
	if st.tree, err = znode.Restore(cfg.ZNode, part); err != nil {
		return nil, fmt.Errorf("fsm: restore: %w", err)
	}
	for _, zs := range st.tree.Sessions() {
		if _, ok := st.eng.Session(latch.SessionID(zs.ID)); !ok {
			return nil, fmt.Errorf("fsm: restore: ZooKeeper session %d not in the lock table: %w", zs.ID, ErrSnapshot)
		}
	}
	if part, b, err = bytesPart(b); err != nil {
		return nil, err
	}
	if st.z, err = restoreZsets(part); err != nil {
		return nil, err
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("fsm: restore: %d trailing bytes: %w", len(b), ErrSnapshot)
	}
	return st, nil
}

// uvarint reads a uvarint in its shortest form, the only one the encoder
// writes: a snapshot restores only from the bytes it encodes back to.
func uvarint(b []byte) (uint64, []byte, error) {
	v, n := binary.Uvarint(b)
	if err := shortest(b, n); err != nil {
		return 0, nil, err
	}
	return v, b[n:], nil
}

// varint reads a varint in its shortest form (see uvarint).
func varint(b []byte) (int64, []byte, error) {
	v, n := binary.Varint(b)
	if err := shortest(b, n); err != nil {
		return 0, nil, err
	}
	return v, b[n:], nil
}

// shortest checks the n bytes of b that binary.Uvarint or binary.Varint
// read: a whole varint, with no trailing zero group (a longer form of the
// same value).
func shortest(b []byte, n int) error {
	if n <= 0 {
		return fmt.Errorf("fsm: restore: bad varint: %w", ErrSnapshot)
	}
	if n > 1 && b[n-1] == 0 {
		return fmt.Errorf("fsm: restore: varint not in its shortest form: %w", ErrSnapshot)
	}
	return nil
}

func bytesPart(b []byte) (part, rest []byte, err error) {
	n, b, err := uvarint(b)
	if err != nil {
		return nil, nil, err
	}
	if n > uint64(len(b)) {
		return nil, nil, fmt.Errorf("fsm: restore: part of %d bytes in %d: %w", n, len(b), ErrSnapshot)
	}
	return b[:n], b[n:], nil
}

// appendTo appends the sorted sets as SnapshotVersion lays them out.
func (z *zsets) appendTo(dst []byte) []byte {
	dst = binary.AppendUvarint(dst, z.ver)
	names := slices.Sorted(maps.Keys(z.keys))
	dst = binary.AppendUvarint(dst, uint64(len(names)))
	for _, name := range names {
		dst = appendZKey(dst, name, z.keys[name])
	}
	return dst
}

// appendZKey appends one sorted-set key as SnapshotVersion lays it out.
func appendZKey(dst []byte, name string, k *zkey) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(name)))
	dst = append(dst, name...)
	dst = binary.AppendUvarint(dst, k.ver)
	dst = binary.AppendVarint(dst, k.expires)
	return appendPairs(dst, k.set.Pairs())
}

// zcapture is the sorted sets at one instant: each key's set is a clone
// (copy on write), so that it can be encoded after the state has changed,
// and without its lock.
type zcapture struct {
	ver  uint64
	keys []zcaptured // in name order
}

type zcaptured struct {
	name string
	zkey
}

// capture captures z, cloning its sets.
func (z *zsets) capture() zcapture {
	c := zcapture{ver: z.ver, keys: make([]zcaptured, 0, len(z.keys))}
	for _, name := range slices.Sorted(maps.Keys(z.keys)) {
		k := z.keys[name]
		c.keys = append(c.keys, zcaptured{name, zkey{set: k.set.Clone(), expires: k.expires, ver: k.ver}})
	}
	return c
}

// appendTo appends the captured sets as zsets.appendTo would have at the
// capture.
func (c *zcapture) appendTo(dst []byte) []byte {
	dst = binary.AppendUvarint(dst, c.ver)
	dst = binary.AppendUvarint(dst, uint64(len(c.keys)))
	for i := range c.keys {
		dst = appendZKey(dst, c.keys[i].name, &c.keys[i].zkey)
	}
	return dst
}

// restoreZsets reads the sorted sets that appendTo wrote into b, all of
// b: keys in order, none empty, members in order, no NaN, no version
// above the last one given.
func restoreZsets(b []byte) (zsets, error) {
	z := newZsets()
	bad := func(what string) (zsets, error) {
		return newZsets(), fmt.Errorf("fsm: restore: sorted sets: %s: %w", what, ErrSnapshot)
	}
	var err error
	if z.ver, b, err = uvarint(b); err != nil {
		return z, err
	}
	var n uint64
	if n, b, err = uvarint(b); err != nil {
		return z, err
	}
	if n > uint64(len(b))/13 {
		return bad(fmt.Sprintf("%d keys in %d bytes", n, len(b)))
	}
	prev := ""
	for i := range n {
		var name []byte
		if name, b, err = bytesPart(b); err != nil {
			return z, err
		}
		if i > 0 && string(name) <= prev || len(name) == 0 {
			return bad("keys out of order")
		}
		prev = string(name)
		k := &zkey{}
		if k.ver, b, err = uvarint(b); err != nil {
			return z, err
		}
		if k.expires, b, err = varint(b); err != nil {
			return z, err
		}
		if k.ver == 0 || k.ver > z.ver {
			return bad(fmt.Sprintf("key %q of version %d, last %d", prev, k.ver, z.ver))
		}
		var count uint64
		if count, b, err = uvarint(b); err != nil {
			return z, err
		}
		if count == 0 || count > uint64(len(b))/9 {
			return bad(fmt.Sprintf("key %q of %d members in %d bytes", prev, count, len(b)))
		}
		ps := make([]zset.Pair, count)
		for j := range ps {
			if len(b) < 8 {
				return bad("truncated score")
			}
			ps[j].Score = math.Float64frombits(binary.LittleEndian.Uint64(b))
			var m []byte
			if m, b, err = bytesPart(b[8:]); err != nil {
				return z, err
			}
			ps[j].Member = string(m)
			if math.IsNaN(ps[j].Score) || j > 0 && !(ps[j-1].Score < ps[j].Score || ps[j-1].Score == ps[j].Score && ps[j-1].Member < ps[j].Member) {
				return bad(fmt.Sprintf("key %q: members out of order", prev))
			}
		}
		if k.set, err = zset.New(ps...); err != nil {
			return bad(err.Error())
		}
		z.keys[prev] = k
		if k.expires != 0 {
			z.volatile[prev] = struct{}{}
		}
		z.members += len(ps)
	}
	if len(b) != 0 {
		return bad(fmt.Sprintf("%d trailing bytes", len(b)))
	}
	return z, nil
}
