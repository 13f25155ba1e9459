package engine

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/latchd/latch"
)

// The snapshot format, version 2. Integers are encoding/binary varints in
// their shortest form: u is an unsigned one (AppendUvarint), i a signed one
// (AppendVarint); a string is its length (u) and its bytes; a timer is one
// byte, 0 for none or 1 followed by its instant (i) and sequence number (u).
//
//	version      byte 1
//	now          i
//	token        u   the last token handed out
//	lastSession  u
//	lastWaiter   u
//	timerSeq     u
//	sessions     u count, then by ascending ID:
//	  id u, opened i, ttl i, lockDelay i, TTL timer
//	keys         u count, then by ascending name:
//	  name string, mode byte, limit u, lock-delay timer,
//	  holds: u count, then in the key's list order:
//	    session u (0: a lease whose session ended, or an owned hold),
//	    token u, acquired i, lease timer, owner: one byte, 0 for none or 1
//	    followed by the owner value (string) of an owned hold
//	waiters      u count, then by ascending ID:
//	  id u, session u, mode byte, limit u, relock byte, lease i, since i,
//	  deadline timer, keys: u count, then key indexes u (positions in the
//	  keys section) in request order
//	held keys    for every session, in the order of the sessions section:
//	  u count, then key indexes u in the order of the session's holds list
//
// The order of the holds in a key's list and in a session's list is state:
// it decides the order in which ForceRelease, ReleaseAll and the end of a
// session release them, hence the order of grants and tokens. The order of
// a key's queue is not written: requests join the queues of all their keys
// when they arrive and never move, and waiter IDs follow arrival, so every
// queue is in ID order and Restore rebuilds it by queueing the waiters in
// ID order. So is every session's list of waiters (newest first).
// Timers need no order either: their sequence numbers are unique, so
// (instant, class, sequence) orders them totally, whatever the heap's
// layout.

// snapshotVersion is the first byte of a snapshot: its format.
const snapshotVersion = 2

// AppendSnapshot appends an encoding of the engine's replicated state to
// dst and returns the extended slice: the time, the token counter, the ID
// and timer counters, and every session, key, hold, lease, lock-delay and
// queued request, with everything that decides what the engine does next
// (the order of the holds in their lists, the sequence numbers that break
// timer ties). Restore rebuilds an Engine from it that behaves exactly as
// this one from then on. The Config is not part of it, nor are the events
// and drops of the last call.
//
// The encoding is canonical: engines in the same state produce the same
// bytes. Its first byte is the format version (2; version 1, without
// owned holds, was never written to disk by a release and is refused). It costs allocations
// proportional to the table; it does not change the engine. Capture
// writes the same bytes without holding the caller's lock for the whole
// encoding.
func (e *Engine) AppendSnapshot(dst []byte) []byte {
	c := e.newCapture()
	for _, s := range e.sessions {
		c.addSession(s)
	}
	for name, k := range e.keys {
		c.addKey(name, k)
	}
	for _, w := range e.waiters {
		c.addWaiter(w)
	}
	return c.appendTo(dst)
}

// appendTimer encodes t, which may be nil.
func appendTimer(dst []byte, t *timer) []byte {
	if t == nil {
		return append(dst, 0)
	}
	dst = append(dst, 1)
	dst = binary.AppendVarint(dst, t.when)
	return binary.AppendUvarint(dst, t.seq)
}

// Restore returns an Engine in the state that snap, made by AppendSnapshot,
// describes, configured by cfg. From then on it behaves exactly as the
// engine that made snap did: the same calls return the same results,
// events, tokens and IDs. The token counter is part of the snapshot
// (SeedToken raises it).
//
// Restore checks snap thoroughly and never panics on bad input: an unknown
// version, a truncated or overlong encoding, and a state the engine could
// not be in (unknown sessions, duplicate keys, holds or IDs, invalid keys
// or modes, broken invariants) are reported by an error wrapping
// ErrBadSnapshot. A snapshot Restore accepts re-encodes to the same bytes.
// No count read from snap makes it allocate more than the size of snap
// allows.
func Restore(cfg Config, snap []byte) (*Engine, error) {
	r := &restorer{snapReader: snapReader{b: snap}, e: New(cfg)}
	r.restore()
	if r.err != nil {
		return nil, r.err
	}
	return r.e, nil
}

// snapReader decodes a snapshot. The first error sticks: after it every
// read returns zero.
type snapReader struct {
	b   []byte
	err error
}

func (r *snapReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("engine: restore: %s: %w", fmt.Sprintf(format, args...), ErrBadSnapshot)
	}
}

func (r *snapReader) u8(what string) byte {
	if r.err != nil {
		return 0
	}
	if len(r.b) == 0 {
		r.fail("%s: truncated", what)
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *snapReader) uvarint(what string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	switch {
	case n == 0:
		r.fail("%s: truncated", what)
		return 0
	case n < 0:
		r.fail("%s: varint overflows 64 bits", what)
		return 0
	case n > 1 && r.b[n-1] == 0:
		r.fail("%s: varint not in its shortest form", what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *snapReader) varint(what string) int64 {
	u := r.uvarint(what)
	v := int64(u >> 1)
	if u&1 != 0 {
		v = ^v
	}
	return v
}

// count reads the length of a list whose elements take at least size bytes
// each, and fails if the bytes left cannot hold that many.
func (r *snapReader) count(what string, size int) int {
	n := r.uvarint(what)
	if r.err == nil && n > uint64(len(r.b)/size) {
		r.fail("%s: %d of them cannot fit in the %d bytes left", what, n, len(r.b))
		return 0
	}
	return int(n)
}

func (r *snapReader) str(what string) string {
	n := r.uvarint(what)
	if r.err != nil {
		return ""
	}
	if n > uint64(len(r.b)) {
		r.fail("%s: %d bytes, %d left", what, n, len(r.b))
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

// timer reads an optional timer.
func (r *snapReader) timer(what string) (ok bool, when int64, seq uint64) {
	switch flag := r.u8(what); {
	case r.err != nil:
		return false, 0, 0
	case flag == 0:
		return false, 0, 0
	case flag != 1:
		r.fail("%s: flag %d", what, flag)
		return false, 0, 0
	}
	when = r.varint(what)
	seq = r.uvarint(what)
	return r.err == nil, when, seq
}

// The least bytes an element of each list of a snapshot takes, which
// bounds its count by the bytes left.
const (
	minSessionBytes = 5  // id, opened, ttl, lockDelay, timer flag
	minKeyBytes     = 6  // name length, a byte of name, mode, limit, timer flag, holds
	minHoldBytes    = 5  // session, token, acquired, timer flag, owner flag
	minWaiterBytes  = 10 // id to deadline flag (8), keys, one key
)

// restorer rebuilds an Engine from a snapshot.
type restorer struct {
	snapReader
	e        *Engine
	sessions []*session // in ID order, as in the snapshot
	keys     []*key     // in name order, as in the snapshot
	// holds are the holds of live sessions, by session and key index,
	// until the held-keys section links them into their session's list.
	holds map[sessionKey]*hold
	seqs  []uint64 // of every timer, to check that they are unique
}

type sessionKey struct {
	s latch.SessionID
	k int
}

func (r *restorer) restore() {
	e := r.e
	if v := r.u8("version"); r.err == nil && v != snapshotVersion {
		r.fail("format version %d, want %d", v, snapshotVersion)
	}
	e.now = r.varint("now")
	e.token = latch.Token(r.uvarint("token"))
	e.lastSession = latch.SessionID(r.uvarint("last session"))
	e.lastWaiter = WaiterID(r.uvarint("last waiter"))
	e.timerSeq = r.uvarint("timer sequence")
	if e.timerSeq >= 1<<63 {
		r.fail("timer sequence %d, not below 1<<63", e.timerSeq)
	}
	if r.err == nil && e.now < 0 {
		r.fail("now %d is negative", e.now)
	}
	r.restoreSessions()
	r.restoreKeys()
	r.restoreWaiters()
	r.restoreHeld()
	if r.err != nil {
		return
	}
	if len(r.b) > 0 {
		r.fail("%d bytes after the snapshot", len(r.b))
		return
	}
	for _, k := range r.keys {
		if k.empty() {
			r.fail("key %q is neither held, waited for nor delayed", k.name)
			return
		}
	}
	slices.Sort(r.seqs)
	for i := 1; i < len(r.seqs); i++ {
		if r.seqs[i] == r.seqs[i-1] {
			r.fail("two timers have sequence number %d", r.seqs[i])
			return
		}
	}
}

// setTimer schedules t as the snapshot says.
func (r *restorer) setTimer(t *timer, when int64, seq uint64, what string) {
	e := r.e
	switch {
	case when < e.now:
		r.fail("%s: due at %d, before now (%d)", what, when, e.now)
		return
	case seq == 0 || seq > e.timerSeq:
		r.fail("%s: sequence number %d, not in 1..%d", what, seq, e.timerSeq)
		return
	}
	t.when, t.seq = when, seq
	e.timers.push(t)
	r.seqs = append(r.seqs, seq)
}

func (r *restorer) restoreSessions() {
	e := r.e
	n := r.count("sessions", minSessionBytes)
	r.sessions = make([]*session, 0, n)
	for range n {
		id := latch.SessionID(r.uvarint("session ID"))
		opened := r.varint("session opened")
		ttl := time.Duration(r.varint("session TTL"))
		lockDelay := time.Duration(r.varint("session lock-delay"))
		expires, when, seq := r.timer("session TTL timer")
		if r.err != nil {
			return
		}
		switch {
		case id == 0 || id > e.lastSession:
			r.fail("session ID %d, not in 1..%d", id, e.lastSession)
		case len(r.sessions) > 0 && id <= r.sessions[len(r.sessions)-1].id:
			r.fail("session %d after session %d", id, r.sessions[len(r.sessions)-1].id)
		case opened < 0 || opened > e.now:
			r.fail("session %d opened at %d, not in 0..now (%d)", id, opened, e.now)
		case ttl < 0 || lockDelay < 0:
			r.fail("session %d: negative TTL %d or lock-delay %d", id, ttl, lockDelay)
		case expires != (ttl > 0):
			r.fail("session %d: TTL %d and TTL timer %v disagree", id, ttl, expires)
		}
		if r.err != nil {
			return
		}
		s := &session{id: id, opened: opened, ttl: ttl, lockDelay: lockDelay}
		if expires {
			s.expiry = &timer{kind: timerSession, sess: s, idx: -1}
			r.setTimer(s.expiry, when, seq, fmt.Sprintf("session %d TTL", id))
		}
		e.sessions[id] = s
		r.sessions = append(r.sessions, s)
	}
}

func (r *restorer) restoreKeys() {
	e := r.e
	n := r.count("keys", minKeyBytes)
	r.keys = make([]*key, 0, n)
	r.holds = make(map[sessionKey]*hold)
	for i := range n {
		name := r.str("key name")
		mode := latch.Mode(r.u8("key mode"))
		limit := r.uvarint("key limit")
		delayed, when, seq := r.timer("key lock-delay")
		if r.err != nil {
			return
		}
		if err := latch.CheckKey(name); err != nil {
			r.fail("key %q: %v", name, err)
			return
		}
		switch {
		case len(r.keys) > 0 && name <= r.keys[len(r.keys)-1].name:
			r.fail("key %q after key %q", name, r.keys[len(r.keys)-1].name)
		case mode != latch.Exclusive && mode != latch.Shared:
			r.fail("key %q: mode %d", name, mode)
		case limit > math.MaxUint32:
			r.fail("key %q: limit %d", name, limit)
		}
		if r.err != nil {
			return
		}
		k := e.newKey(name)
		k.mode, k.limit = mode, uint32(limit)
		r.keys = append(r.keys, k)
		if delayed {
			t := &timer{kind: timerDelay, key: k, idx: -1}
			e.delays[k] = t
			k.delayed = true
			r.setTimer(t, when, seq, fmt.Sprintf("key %q lock-delay", name))
		}
		r.restoreHolds(k, i)
		if r.err != nil {
			return
		}
		switch {
		case k.nholds > 1 && k.mode == latch.Exclusive:
			r.fail("key %q: %d exclusive holders", name, k.nholds)
		case k.nholds > 0 && k.mode == latch.Shared && k.limit > 0 && uint32(k.nholds) > k.limit:
			r.fail("key %q: %d shared holders, above its limit %d", name, k.nholds, k.limit)
		}
	}
}

// restoreHolds reads the holders of k, the key at index i, in list order.
func (r *restorer) restoreHolds(k *key, i int) {
	e := r.e
	n := r.count(fmt.Sprintf("key %q holders", k.name), minHoldBytes)
	var tail *hold
	for range n {
		sid := latch.SessionID(r.uvarint("holder session"))
		tok := latch.Token(r.uvarint("holder token"))
		acquired := r.varint("holder acquired")
		leased, when, seq := r.timer("holder lease")
		owned := false
		var owner string
		switch flag := r.u8("holder owner"); {
		case r.err != nil:
		case flag == 1:
			owned, owner = true, r.str("holder owner")
		case flag != 0:
			r.fail("key %q: owner flag %d", k.name, flag)
		}
		if r.err != nil {
			return
		}
		var s *session
		if sid != 0 {
			if s = e.sessions[sid]; s == nil {
				r.fail("key %q: holder session %d does not exist", k.name, sid)
				return
			}
			if r.holds[sessionKey{sid, i}] != nil {
				r.fail("key %q: session %d holds it twice", k.name, sid)
				return
			}
		}
		switch {
		case s == nil && !leased && !owned:
			r.fail("key %q: a hold with neither session, lease nor owner", k.name)
		case owned && s != nil:
			r.fail("key %q: an owned hold of session %d", k.name, sid)
		case owned && (n != 1 || k.mode != latch.Exclusive):
			r.fail("key %q: an owned hold beside other holders or shared", k.name)
		case tok == 0 || tok > e.token:
			r.fail("key %q: token %d, not in 1..%d", k.name, tok, e.token)
		case acquired < 0 || acquired > e.now:
			r.fail("key %q: acquired at %d, not in 0..now (%d)", k.name, acquired, e.now)
		}
		if r.err != nil {
			return
		}
		h := e.newHold(k)
		h.s, h.token, h.acquired = s, tok, acquired
		h.kprev = tail
		if tail == nil {
			k.holds = h
		} else {
			tail.knext = h
		}
		tail = h
		k.nholds++
		e.nholds++
		if s != nil {
			s.nholds++ // linked by restoreHeld
			r.holds[sessionKey{sid, i}] = h
		}
		if owned {
			h.owner, h.owned = owner, true
		}
		if leased {
			t := &timer{kind: timerLease, hold: h, idx: -1}
			h.lease = t
			r.setTimer(t, when, seq, fmt.Sprintf("key %q lease", k.name))
		}
	}
}

func (r *restorer) restoreWaiters() {
	e := r.e
	n := r.count("waiters", minWaiterBytes)
	if r.err != nil {
		return
	}
	seen := make([]WaiterID, len(r.keys)) // the last waiter that named each key
	var last WaiterID
	for range n {
		id := WaiterID(r.uvarint("waiter ID"))
		sid := latch.SessionID(r.uvarint("waiter session"))
		mode := latch.Mode(r.u8("waiter mode"))
		limit := r.uvarint("waiter limit")
		relock := latch.Relock(r.u8("waiter relock"))
		lease := time.Duration(r.varint("waiter lease"))
		since := r.varint("waiter since")
		deadline, when, seq := r.timer("waiter deadline")
		nk := r.count("waiter keys", 1)
		if r.err != nil {
			return
		}
		s := e.sessions[sid]
		switch {
		case id == 0 || id > e.lastWaiter:
			r.fail("waiter ID %d, not in 1..%d", id, e.lastWaiter)
		case id <= last:
			r.fail("waiter %d after waiter %d", id, last)
		case s == nil:
			r.fail("waiter %d: session %d does not exist", id, sid)
		case mode != latch.Exclusive && mode != latch.Shared:
			r.fail("waiter %d: mode %d", id, mode)
		case limit > math.MaxUint32 || (mode == latch.Exclusive && limit != 0):
			r.fail("waiter %d: limit %d in mode %v", id, limit, mode)
		case relock != latch.RelockReject && relock != latch.RelockReuse:
			r.fail("waiter %d: relock policy %d", id, relock)
		case lease < 0:
			r.fail("waiter %d: negative lease %d", id, lease)
		case since < 0 || since > e.now:
			r.fail("waiter %d: queued at %d, not in 0..now (%d)", id, since, e.now)
		case nk == 0:
			r.fail("waiter %d: no keys", id)
		}
		if r.err != nil {
			return
		}
		last = id
		w := &waiter{id: id, s: s, mode: mode, limit: uint32(limit), relock: relock, lease: lease, since: since}
		w.entries = make([]qentry, nk)
		for j := range w.entries {
			ki := r.uvarint("waiter key")
			if r.err != nil {
				return
			}
			if ki >= uint64(len(r.keys)) {
				r.fail("waiter %d: key index %d of %d keys", id, ki, len(r.keys))
				return
			}
			k := r.keys[ki]
			switch {
			case seen[ki] == id:
				r.fail("waiter %d: key %q twice", id, k.name)
			case k.queued() >= MaxQueue:
				r.fail("waiter %d: more than %d waiters on key %q", id, MaxQueue, k.name)
			case mode == latch.Shared && uint32(limit) != k.limit:
				r.fail("waiter %d: limit %d on key %q, whose limit is %d", id, limit, k.name, k.limit)
			}
			if r.err != nil {
				return
			}
			seen[ki] = id
			w.entries[j] = qentry{w: w, k: k}
			enqueue(&w.entries[j]) // in ID order, which is arrival order
		}
		if deadline {
			w.deadline = &timer{kind: timerDeadline, wait: w, idx: -1}
			r.setTimer(w.deadline, when, seq, fmt.Sprintf("waiter %d deadline", id))
		}
		linkWaiter(w) // in ID order, so the newest comes first
		e.waiters[id] = w
	}
}

// restoreHeld reads the order of every session's holds and links them.
func (r *restorer) restoreHeld() {
	for _, s := range r.sessions {
		n := r.count(fmt.Sprintf("session %d held keys", s.id), 1)
		if r.err != nil {
			return
		}
		if n != s.nholds {
			r.fail("session %d: %d held keys listed, %d held", s.id, n, s.nholds)
			return
		}
		var tail *hold
		for range n {
			ki := r.uvarint("held key")
			if r.err != nil {
				return
			}
			if ki >= uint64(len(r.keys)) {
				r.fail("session %d: key index %d of %d keys", s.id, ki, len(r.keys))
				return
			}
			sk := sessionKey{s.id, int(ki)}
			h := r.holds[sk]
			if h == nil {
				r.fail("session %d: key %q listed twice, or not held", s.id, r.keys[ki].name)
				return
			}
			delete(r.holds, sk)
			h.sprev = tail
			if tail == nil {
				s.holds = h
			} else {
				tail.snext = h
			}
			tail = h
		}
	}
}
