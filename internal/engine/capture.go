package engine

import (
	"cmp"
	"encoding/binary"
	"iter"
	"maps"
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
// not changed, from the live table. Sessions and waiters made after the
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
	// encode; savedKeys, savedSessions and savedWaiters those whose
	// record was encoded at their first change, before it. An entry
	// encoded by Step and changed later is encoded twice, alike, and
	// appendTo keeps one.
	freshKeys     map[*key]struct{}
	savedKeys     map[*key]struct{}
	savedSessions map[*session]struct{}
	savedWaiters  map[*waiter]struct{}

	// The records, in the order they were encoded: each one's bytes are
	// buf[off:end], and the keys it names (a session's holds, a waiter's
	// queues) names[from:to].
	buf      []byte
	names    []string
	sessions []record
	keys     []record
	waiters  []record
}

// record is one session, key or waiter encoded.
type record struct {
	name     string // a key's
	id       uint64 // a session's or waiter's
	off, end int
	from, to int
}

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
	for ; n > 0 && c.nextSession != nil; n-- {
		_, s, ok := c.nextSession()
		if !ok {
			c.nextSession = nil
			break
		}
		if s.id <= c.lastSession && !has(c.savedSessions, s) {
			c.addSession(s)
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
	c.freshKeys, c.savedKeys, c.savedSessions, c.savedWaiters = nil, nil, nil, nil
	if c.e.capture == c {
		c.e.capture = nil
	}
}

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
	if c := e.capture; c != nil && s.id <= c.lastSession && !has(c.savedSessions, s) {
		c.savedSessions[s] = struct{}{}
		c.addSession(s)
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

// addSession encodes s's record: its entry in the sessions section and
// the keys of its holds, in its list's order, for the held keys section.
func (c *Capture) addSession(s *session) {
	r := record{id: uint64(s.id), off: len(c.buf), from: len(c.names)}
	c.buf = binary.AppendUvarint(c.buf, uint64(s.id))
	c.buf = binary.AppendVarint(c.buf, s.opened)
	c.buf = binary.AppendVarint(c.buf, int64(s.ttl))
	c.buf = binary.AppendVarint(c.buf, int64(s.lockDelay))
	c.buf = appendTimer(c.buf, s.expiry)
	for h := s.holds; h != nil; h = h.snext {
		c.names = append(c.names, h.k.name)
	}
	r.end, r.to = len(c.buf), len(c.names)
	c.sessions = append(c.sessions, r)
}

// addKey encodes the record of k, named name: the key and its holds.
func (c *Capture) addKey(name string, k *key) {
	e := c.e
	r := record{name: name, off: len(c.buf)}
	dst := c.buf
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
	c.buf = dst
	r.end = len(c.buf)
	c.keys = append(c.keys, r)
}

// addWaiter encodes w's record, up to its deadline, and the keys it waits
// for, in request order.
func (c *Capture) addWaiter(w *waiter) {
	r := record{id: uint64(w.id), off: len(c.buf), from: len(c.names)}
	dst := c.buf
	dst = binary.AppendUvarint(dst, uint64(w.id))
	dst = binary.AppendUvarint(dst, uint64(w.s.id))
	dst = append(dst, byte(w.mode))
	dst = binary.AppendUvarint(dst, uint64(w.limit))
	dst = append(dst, byte(w.relock))
	dst = binary.AppendVarint(dst, int64(w.lease))
	dst = binary.AppendVarint(dst, w.since)
	dst = appendTimer(dst, w.deadline)
	c.buf = dst
	for i := range w.entries {
		c.names = append(c.names, w.entries[i].k.name)
	}
	r.end, r.to = len(c.buf), len(c.names)
	c.waiters = append(c.waiters, r)
}

// appendTo writes the records in the snapshot's order (see the format in
// snapshot.go): sessions and waiters by ID, keys by name, every key named
// by its index among them. An entry encoded twice (by Step, then at its
// first change) keeps one of its records, which are alike.
func (c *Capture) appendTo(dst []byte) []byte {
	byID := func(a, b record) int { return cmp.Compare(a.id, b.id) }
	byName := func(a, b record) int { return strings.Compare(a.name, b.name) }
	slices.SortFunc(c.sessions, byID)
	c.sessions = slices.CompactFunc(c.sessions, func(a, b record) bool { return a.id == b.id })
	slices.SortFunc(c.keys, byName)
	c.keys = slices.CompactFunc(c.keys, func(a, b record) bool { return a.name == b.name })
	slices.SortFunc(c.waiters, byID)
	c.waiters = slices.CompactFunc(c.waiters, func(a, b record) bool { return a.id == b.id })
	index := func(name string) uint64 {
		i, _ := slices.BinarySearchFunc(c.keys, name, func(r record, name string) int { return strings.Compare(r.name, name) })
		return uint64(i)
	}

	dst = append(dst, c.head...)
	dst = binary.AppendUvarint(dst, uint64(len(c.sessions)))
	for _, r := range c.sessions {
		dst = append(dst, c.buf[r.off:r.end]...)
	}
	dst = binary.AppendUvarint(dst, uint64(len(c.keys)))
	for _, r := range c.keys {
		dst = append(dst, c.buf[r.off:r.end]...)
	}
	dst = binary.AppendUvarint(dst, uint64(len(c.waiters)))
	for _, r := range c.waiters {
		dst = append(dst, c.buf[r.off:r.end]...)
		dst = binary.AppendUvarint(dst, uint64(r.to-r.from))
		for _, name := range c.names[r.from:r.to] {
			dst = binary.AppendUvarint(dst, index(name))
		}
	}
	for _, r := range c.sessions {
		dst = binary.AppendUvarint(dst, uint64(r.to-r.from))
		for _, name := range c.names[r.from:r.to] {
			dst = binary.AppendUvarint(dst, index(name))
		}
	}
	return dst
}
