package engine

import (
	"cmp"
	"encoding/binary"
	"iter"
	"maps"
	"math"
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
// list is encoded then. Sessions and waiters made after the
// capture are told by their IDs, which grow; keys by a set of the keys
// made since. The sorting of the records and the writing of the snapshot
// (AppendTo) need not the engine at all.
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

	// The live maps' entries, pulled a few at a time; nil once drained.
	nextSession func() (latch.SessionID, *session, bool)
	nextKey     func() (string, *key, bool)
	nextWaiter  func() (WaiterID, *waiter, bool)
	stops       []func()

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
	keys     chunks[record]
	waiters  chunks[record]
}

// record is one session, key or waiter encoded: its bytes
// (bufs.chunk[chunk][off:end]) and the keys it names, by name.
type record struct {
	name            string   // a key's
	id              uint64   // a session's or waiter's
	names           []string // a session's holds or a waiter's queues
	chunk, off, end int
}

// chunkLen is the length of a chunk of chunks.
const chunkLen = 4096

// chunks is a list that grows a chunk of chunkLen at a time: append never
// copies the elements before it, as a slice's append may.
type chunks[T any] struct {
	chunk [][]T
}

// last returns the last chunk, a new one if the last is full. An append
// past a chunk's chunkLen elements copies that chunk alone; chunks of
// elements appended one at a time never are, and pointers to them stay.
func (c *chunks[T]) last() *[]T {
	if n := len(c.chunk); n == 0 || len(c.chunk[n-1]) >= chunkLen {
		c.chunk = append(c.chunk, make([]T, 0, chunkLen))
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
	var stop func()
	c.nextSession, stop = iter.Pull2(maps.All(e.sessions))
	c.stops = append(c.stops, stop)
	c.nextKey, stop = iter.Pull2(maps.All(e.keys))
	c.stops = append(c.stops, stop)
	c.nextWaiter, stop = iter.Pull2(maps.All(e.waiters))
	c.stops = append(c.stops, stop)
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
	for n > 0 && (c.partial != nil || c.nextSession != nil) {
		if c.partial == nil {
			_, s, ok := c.nextSession()
			if !ok {
				c.nextSession = nil
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
	for ; n > 0 && c.nextKey != nil; n-- {
		name, k, ok := c.nextKey()
		if !ok {
			c.nextKey = nil
			break
		}
		if !has(c.freshKeys, k) && !has(c.savedKeys, k) {
			c.addKey(name, k)
			n -= int(k.nholds) // a shared key's holds
		}
	}
	for ; n > 0 && c.nextWaiter != nil; n-- {
		_, w, ok := c.nextWaiter()
		if !ok {
			c.nextWaiter = nil
			break
		}
		// A waiter recycled since has a newer ID; one recycled and not
		// yet reused was saved when it left.
		if w.id <= c.lastWaiter && !has(c.savedWaiters, w) {
			c.addWaiter(w)
		}
	}
	if c.nextSession == nil && c.nextKey == nil && c.nextWaiter == nil {
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
	for _, stop := range c.stops {
		stop()
	}
	c.stops, c.nextSession, c.nextKey, c.nextWaiter = nil, nil, nil, nil
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

func has[K comparable](m map[K]struct{}, k K) bool {
	_, ok := m[k]
	return ok
}

// The engine's calls report their changes through the methods below
// before they make them. Each costs a nil check while no capture is open.

// changeKey is called before k or its holds change (holders, tokens,
// leases, owners, mode, limit, lock-delay) or k leaves the table.
func (e *Engine) changeKey(k *key) {
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
	r := record{name: name, chunk: len(c.bufs.chunk) - 1, off: len(*buf)}
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
		dst = appendTimer(dst, e.leaseOf(h))
		if owner, ok := e.ownerOf(h); ok {
			dst = append(dst, 1)
			dst = binary.AppendUvarint(dst, uint64(len(owner)))
			dst = append(dst, owner...)
		} else {
			dst = append(dst, 0)
		}
	}
	*buf = dst
	r.end = len(dst)
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
	byName := func(a, b record) int { return strings.Compare(a.name, b.name) }
	sessions := slices.SortedFunc(slices.Values(c.sessions.all()), byID)
	keys := slices.SortedFunc(slices.Values(c.keys.all()), byName)
	keys = slices.CompactFunc(keys, func(a, b record) bool { return a.name == b.name })
	waiters := slices.SortedFunc(slices.Values(c.waiters.all()), byID)
	waiters = slices.CompactFunc(waiters, func(a, b record) bool { return a.id == b.id })
	bytesOf := func(r record) []byte { return c.bufs.chunk[r.chunk][r.off:r.end] }
	appendIndexes := func(dst []byte, names []string) []byte {
		dst = binary.AppendUvarint(dst, uint64(len(names)))
		for _, name := range names {
			i, _ := slices.BinarySearchFunc(keys, name, func(r record, name string) int { return strings.Compare(r.name, name) })
			dst = binary.AppendUvarint(dst, uint64(i))
		}
		return dst
	}

	dst = append(dst, c.head...)
	dst = binary.AppendUvarint(dst, uint64(len(sessions)))
	for _, r := range sessions {
		dst = append(dst, bytesOf(r)...)
	}
	dst = binary.AppendUvarint(dst, uint64(len(keys)))
	for _, r := range keys {
		dst = append(dst, bytesOf(r)...)
	}
	dst = binary.AppendUvarint(dst, uint64(len(waiters)))
	for _, r := range waiters {
		dst = append(dst, bytesOf(r)...)
		dst = appendIndexes(dst, r.names)
	}
	for _, r := range sessions {
		dst = appendIndexes(dst, r.names)
	}
	return dst
}
