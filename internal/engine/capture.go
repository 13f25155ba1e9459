package engine

import (
	"cmp"
	"encoding/binary"
	"math"
	"reflect"
	"slices"
	"strings"

	"github.com/latchd/latch"
)

// A Capture is a snapshot of the engine (AppendSnapshot's bytes) as it was
// at one instant, Engine.Capture's, encoded in steps between the calls that
// change the engine afterwards, so that its driver need not stop them for
// the whole encoding of a large table.
//
// It works by copy-on-write of the encoded records: while a capture is
// open, the first change of a session, key (with its holds) or queued
// request that existed at the instant of the capture first encodes its
// record as it was; Step encodes the records of the others, which have
// not changed, from the live table. A session's list of holds is encoded
// a part at a time too; if the session changes half way, the rest of its
// list is encoded then. Sessions and waiters made after the capture are
// told by their IDs, which grow; keys by a set of the keys made since.
// Step ranges over the engine's maps a few entries at a time with
// reflect.MapIter, the one way to resume a range over a map that changes
// between the steps. The sorting of the records and the writing of the
// snapshot (AppendTo) need not the engine at all.
//
// A Capture is not safe for concurrent use, and neither are its engine and
// it together: Engine.Capture, Step and Close are called as the engine's
// methods are, under the lock of whoever drives it, so that they are
// ordered with its calls. AppendTo, once Step has reported the capture
// complete, touches only the capture's own records and may run while
// the engine serves calls.
type Capture struct {
	e *Engine
	// open is set while the engine reports its changes to the capture
	// (Engine.capture is this capture).
	open bool
	// done is set once every record is encoded.
	done bool

	head        []byte // version to timer sequence
	lastSession latch.SessionID
	lastWaiter  WaiterID

	// The live maps, ranged over a few entries at a time; nil once
	// drained.
	sessionsLeft *cursor[*session]
	keysLeft     *cursor[*key]
	waitersLeft  *cursor[*waiter]

	// freshKeys holds the keys made since the capture, which it must not
	// encode; savedKeys and savedWaiters those whose record was encoded
	// at their first change, before it; savedSessions the sessions whose
	// record was begun, by Step or at their first change. A key or waiter
	// encoded by Step and changed later is encoded twice, alike, and
	// appendTo keeps one.
	freshKeys     map[*key]struct{}
	savedKeys     map[*key]struct{}
	savedSessions map[*session]struct{}
	savedWaiters  map[*waiter]struct{}

	// partial is the session whose list of holds Step is encoding, into
	// its record partialRec, up to the hold next (nil when none is).
	partial    *session
	partialRec *record
	next       *hold

	// The records, in the order they were encoded, and their bytes. Both
	// grow a chunk at a time, so that no step copies what the ones before
	// encoded.
	bufs     chunks[byte]
	sessions chunks[record]
	keys     chunks[keyRecord]
	waiters  chunks[record]
}

// record is one session or waiter encoded: its bytes
// (bufs.chunk[chunk][off:end]) and the keys it names, by name.
type record struct {
	id              uint64   // the session's or waiter's
	names           []string // the session's holds or the waiter's queues
	chunk, off, end int
}

// keyRecord is one key encoded, with its holds, in
// bufs.chunk[chunk][off:end]; lean, as there is one per lock.
type keyRecord struct {
	name            string
	chunk, off, end uint32
}

// chunks is a list that grows a chunk at a time, each twice the one
// before up to maxChunk elements: append never copies the chunks before
// it, as a slice's append may copy all it holds.
type chunks[T any] struct {
	chunk [][]T
}

// The lengths of the first and the largest chunks of chunks.
const (
	minChunk = 16
	maxChunk = 4096
)

// last returns the last chunk, a new one if the last is full. An append
// past a chunk's capacity copies that chunk alone; chunks of elements
// appended one at a time never are, and pointers to them stay.
func (c *chunks[T]) last() *[]T {
	n := len(c.chunk)
	if n == 0 {
		c.chunk = append(c.chunk, make([]T, 0, minChunk))
	} else if l := c.chunk[n-1]; len(l) >= min(cap(l), maxChunk) {
		c.chunk = append(c.chunk, make([]T, 0, min(2*len(l), maxChunk)))
	}
	return &c.chunk[len(c.chunk)-1]
}

func (c *chunks[T]) append(v T) { l := c.last(); *l = append(*l, v) }

// all returns the elements in one slice.
func (c *chunks[T]) all() []T { return slices.Concat(c.chunk...) }

// Capture captures the engine's state at this instant, in constant time,
// for a snapshot that Step then encodes between the engine's calls. One
// capture is open at a time: Capture closes the one before, if still
// open. The caller closes the capture it gets (Close) when it is done
// with it or gives it up.
func (e *Engine) Capture() *Capture {
	if e.capture != nil {
		e.capture.Close()
	}
	c := e.newCapture()
	c.open = true
	c.freshKeys = make(map[*key]struct{})
	c.savedKeys = make(map[*key]struct{})
	c.savedSessions = make(map[*session]struct{})
	c.savedWaiters = make(map[*waiter]struct{})
	c.sessionsLeft = newCursor(e.sessions)
	c.keysLeft = newCursor(e.keys)
	c.waitersLeft = newCursor(e.waiters)
	e.capture = c
	return c
}

// newCapture returns a capture of the engine's counters, with no record
// yet and not open.
func (e *Engine) newCapture() *Capture {
	c := &Capture{e: e, lastSession: e.lastSession, lastWaiter: e.lastWaiter}
	c.head = append(c.head, snapshotVersion)
	c.head = binary.AppendVarint(c.head, e.now)
	c.head = binary.AppendUvarint(c.head, uint64(e.token))
	c.head = binary.AppendUvarint(c.head, uint64(e.lastSession))
	c.head = binary.AppendUvarint(c.head, uint64(e.lastWaiter))
	c.head = binary.AppendUvarint(c.head, e.timerSeq)
	return c
}

// Step encodes the records of up to n more entries (sessions, keys, queued
// requests) of the captured state, and reports whether they are all
// encoded; once they are, the capture is closed and AppendTo may write
// it. Called as the engine's methods are.
func (c *Capture) Step(n int) bool {
	if !c.open {
		return c.done
	}
	for n > 0 && (c.partial != nil || c.sessionsLeft != nil) {
		if c.partial == nil {
			s, ok := c.sessionsLeft.next()
			if !ok {
				c.sessionsLeft = nil
				break
			}
			n--
			if s.id > c.lastSession || has(c.savedSessions, s) {
				continue
			}
			c.savedSessions[s] = struct{}{}
			c.partial, c.partialRec, c.next = s, c.beginSession(s), s.holds
		}
		c.next, n = c.partialRec.addHolds(c.next, n)
		if c.next == nil {
			c.partial, c.partialRec = nil, nil
		}
	}
	for ; n > 0 && c.keysLeft != nil; n-- {
		k, ok := c.keysLeft.next()
		if !ok {
			c.keysLeft = nil
			break
		}
		// A key recycled since is fresh; one recycled and not yet
		// reused was saved when it left.
		if !has(c.freshKeys, k) && !has(c.savedKeys, k) {
			c.addKey(k.name, k)
			n -= int(k.nholds) // a shared key's holds
		}
	}
	for ; n > 0 && c.waitersLeft != nil; n-- {
		w, ok := c.waitersLeft.next()
		if !ok {
			c.waitersLeft = nil
			break
		}
		// A waiter recycled since has a newer ID; one recycled and not
		// yet reused was saved when it left.
		if w.id <= c.lastWaiter && !has(c.savedWaiters, w) {
			c.addWaiter(w)
		}
	}
	if c.sessionsLeft == nil && c.keysLeft == nil && c.waitersLeft == nil {
		c.done = true
		c.Close()
	}
	return c.done
}

// Close stops the capture: the engine no longer reports its changes to
// it. A capture closed before Step reported it complete is given up.
// Called as the engine's methods are; a second Close does nothing.
func (c *Capture) Close() {
	if !c.open {
		return
	}
	c.open = false
	c.sessionsLeft, c.keysLeft, c.waitersLeft = nil, nil, nil
	c.partial, c.partialRec, c.next = nil, nil, nil
	c.freshKeys, c.savedKeys, c.savedSessions, c.savedWaiters = nil, nil, nil, nil
	if c.e.capture == c {
		c.e.capture = nil
	}
}

// GivenUp reports whether the capture was closed before it was complete
// (Close, or a later Engine.Capture): Step will never complete it.
func (c *Capture) GivenUp() bool { return !c.open && !c.done }

// AppendTo appends the snapshot that AppendSnapshot would have appended at
// the instant of the capture. It panics unless Step has reported the
// capture complete. It does not touch the engine.
func (c *Capture) AppendTo(dst []byte) []byte {
	if !c.done {
		panic("engine: Capture.AppendTo before Step completed it")
	}
	return c.appendTo(dst)
}

// cursor ranges over the values of a map a few at a time, with the
// changes to the map between them, as a range loop whose body changes the
// map does (reflect.MapIter): an entry is reached once at most, one
// removed before it is reached is not, and one added may or may not be.
// A map that is replaced (peakmap.Rebuild) is still ranged over, as it was
// when replaced.
type cursor[V any] struct {
	it *reflect.MapIter
	v  reflect.Value // where the value reached is set, without allocating
}

func newCursor[K comparable, V any](m map[K]V) *cursor[V] {
	return &cursor[V]{it: reflect.ValueOf(m).MapRange(), v: reflect.New(reflect.TypeFor[V]()).Elem()}
}

// next returns the next value, or false when the map has no more.
func (c *cursor[V]) next() (V, bool) {
	if !c.it.Next() {
		var zero V
		return zero, false
	}
	c.v.SetIterValue(c.it)
	return c.v.Interface().(V), true
}

func has[K comparable](m map[K]struct{}, k K) bool {
	_, ok := m[k]
	return ok
}

// The engine's calls report their changes through the methods below
// before they make them. Each costs a nil check while no capture is open.

// changeKey is called before k or its holds change (holders, tokens,
// leases, owners, mode, limit, lock-delay) or k leaves the table.
func (e *Engine) changeKey(k *key) {
	if e.recordChanged {
		if n := len(e.changed); n == 0 || e.changed[n-1] != k.name {
			e.changed = append(e.changed, k.name)
		}
	}
	if c := e.capture; c != nil && !has(c.freshKeys, k) && !has(c.savedKeys, k) {
		c.savedKeys[k] = struct{}{}
		c.addKey(k.name, k)
	}
}

// changeSession is called before s or its list of holds changes, or s
// ends.
func (e *Engine) changeSession(s *session) {
	c := e.capture
	switch {
	case c == nil || s.id > c.lastSession:
	case s == c.partial:
		c.partialRec.addHolds(c.next, math.MaxInt)
		c.partial, c.partialRec, c.next = nil, nil, nil
	case !has(c.savedSessions, s):
		c.savedSessions[s] = struct{}{}
		c.beginSession(s).addHolds(s.holds, math.MaxInt)
	}
}

// changeWaiter is called before w's deadline changes or w leaves the
// table.
func (e *Engine) changeWaiter(w *waiter) {
	if c := e.capture; c != nil && w.id <= c.lastWaiter && !has(c.savedWaiters, w) {
		c.savedWaiters[w] = struct{}{}
		c.addWaiter(w)
	}
}

// madeKey is called when k joins the table.
func (e *Engine) madeKey(k *key) {
	if c := e.capture; c != nil {
		c.freshKeys[k] = struct{}{}
	}
}

// changeTimer is called before t is set, moved or dropped.
func (e *Engine) changeTimer(t *timer) {
	if e.capture == nil {
		return
	}
	switch t.kind {
	case timerLease:
		e.changeKey(t.hold.k)
	case timerSession:
		e.changeSession(t.sess)
	case timerDelay:
		e.changeKey(t.key)
	case timerDeadline:
		e.changeWaiter(t.wait)
	}
}

// addSession encodes s's record whole (for AppendSnapshot).
func (c *Capture) addSession(s *session) {
	c.beginSession(s).addHolds(s.holds, math.MaxInt)
}

// beginSession encodes s's entry in the sessions section and returns its
// record, to which addHolds adds the keys of its holds.
func (c *Capture) beginSession(s *session) *record {
	buf := c.bufs.last()
	r := record{id: uint64(s.id), chunk: len(c.bufs.chunk) - 1, off: len(*buf)}
	*buf = binary.AppendUvarint(*buf, uint64(s.id))
	*buf = binary.AppendVarint(*buf, s.opened)
	*buf = binary.AppendVarint(*buf, int64(s.ttl))
	*buf = binary.AppendVarint(*buf, int64(s.lockDelay))
	*buf = appendTimer(*buf, s.expiry)
	r.end = len(*buf)
	r.names = make([]string, 0, s.nholds)
	c.sessions.append(r)
	l := c.sessions.chunk[len(c.sessions.chunk)-1]
	return &l[len(l)-1]
}

// addHolds adds the keys of up to n holds of a session's list, from h on,
// to the session's record r (for the held keys section). It returns the
// hold it stopped at (nil at the end of the list) and what is left of n.
func (r *record) addHolds(h *hold, n int) (*hold, int) {
	for ; n > 0 && h != nil; n-- {
		r.names = append(r.names, h.k.name)
		h = h.snext
	}
	return h, n
}

// addKey encodes the record of k, named name: the key and its holds.
func (c *Capture) addKey(name string, k *key) {
	e := c.e
	buf := c.bufs.last()
	r := keyRecord{name: name, chunk: uint32(len(c.bufs.chunk) - 1), off: uint32(len(*buf))}
	dst := *buf
	dst = binary.AppendUvarint(dst, uint64(len(name)))
	dst = append(dst, name...)
	dst = append(dst, byte(k.mode))
	dst = binary.AppendUvarint(dst, uint64(k.limit))
	dst = appendTimer(dst, e.delays[k])
	dst = binary.AppendUvarint(dst, uint64(k.nholds))
	for h := k.holds; h != nil; h = h.knext {
		var sid latch.SessionID
		if h.s != nil {
			sid = h.s.id
		}
		dst = binary.AppendUvarint(dst, uint64(sid))
		dst = binary.AppendUvarint(dst, uint64(h.token))
		dst = binary.AppendVarint(dst, h.acquired)
		dst = appendTimer(dst, h.lease)
		if h.owned {
			dst = append(dst, 1)
			dst = binary.AppendUvarint(dst, uint64(len(h.owner)))
			dst = append(dst, h.owner...)
		} else {
			dst = append(dst, 0)
		}
	}
	*buf = dst
	r.end = uint32(len(dst))
	c.keys.append(r)
}

// addWaiter encodes w's record, up to its deadline, and the keys it waits
// for, in request order.
func (c *Capture) addWaiter(w *waiter) {
	buf := c.bufs.last()
	r := record{id: uint64(w.id), chunk: len(c.bufs.chunk) - 1, off: len(*buf)}
	dst := *buf
	dst = binary.AppendUvarint(dst, uint64(w.id))
	dst = binary.AppendUvarint(dst, uint64(w.s.id))
	dst = append(dst, byte(w.mode))
	dst = binary.AppendUvarint(dst, uint64(w.limit))
	dst = append(dst, byte(w.relock))
	dst = binary.AppendVarint(dst, int64(w.lease))
	dst = binary.AppendVarint(dst, w.since)
	dst = appendTimer(dst, w.deadline)
	*buf = dst
	r.end = len(dst)
	r.names = make([]string, len(w.entries))
	for i := range w.entries {
		r.names[i] = w.entries[i].k.name
	}
	c.waiters.append(r)
}

// appendTo writes the records in the snapshot's order (see the format in
// snapshot.go): sessions and waiters by ID, keys by name, every key named
// by its index among them. An entry encoded twice (by Step, then at its
// first change) keeps one of its records, which are alike.
func (c *Capture) appendTo(dst []byte) []byte {
	byID := func(a, b record) int { return cmp.Compare(a.id, b.id) }
	byName := func(a, b keyRecord) int { return strings.Compare(a.name, b.name) }
	sessions, keys, waiters := c.sessions.all(), c.keys.all(), c.waiters.all()
	slices.SortFunc(sessions, byID)
	slices.SortFunc(keys, byName)
	keys = slices.CompactFunc(keys, func(a, b keyRecord) bool { return a.name == b.name })
	slices.SortFunc(waiters, byID)
	waiters = slices.CompactFunc(waiters, func(a, b record) bool { return a.id == b.id })
	size := len(c.head) + 3*binary.MaxVarintLen64
	for _, b := range c.bufs.chunk {
		size += len(b) // an upper bound of the records' bytes
	}
	for _, r := range waiters {
		size += binary.MaxVarintLen64 + len(r.names)*binary.MaxVarintLen32
	}
	for _, r := range sessions {
		size += binary.MaxVarintLen64 + len(r.names)*binary.MaxVarintLen32
	}
	dst = slices.Grow(dst, size)
	bytesOf := func(chunk, off, end int) []byte { return c.bufs.chunk[chunk][off:end] }
	appendIndexes := func(dst []byte, names []string) []byte {
		dst = binary.AppendUvarint(dst, uint64(len(names)))
		for _, name := range names {
			i, _ := slices.BinarySearchFunc(keys, name, func(r keyRecord, name string) int { return strings.Compare(r.name, name) })
			dst = binary.AppendUvarint(dst, uint64(i))
		}
		return dst
	}

	dst = append(dst, c.head...)
	dst = binary.AppendUvarint(dst, uint64(len(sessions)))
	for _, r := range sessions {
		dst = append(dst, bytesOf(r.chunk, r.off, r.end)...)
	}
	dst = binary.AppendUvarint(dst, uint64(len(keys)))
	for _, r := range keys {
		dst = append(dst, bytesOf(int(r.chunk), int(r.off), int(r.end))...)
	}
	dst = binary.AppendUvarint(dst, uint64(len(waiters)))
	for _, r := range waiters {
		dst = append(dst, bytesOf(r.chunk, r.off, r.end)...)
		dst = appendIndexes(dst, r.names)
	}
	for _, r := range sessions {
		dst = appendIndexes(dst, r.names)
	}
	return dst
}
