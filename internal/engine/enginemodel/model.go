package enginemodel

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/engine"
)

// ---------------------------------------------------------------------------
// The reference model

// refModel is the rules of the engine's doc.go, restated as plainly as possible.
type refModel struct {
	maxKeys  int
	now      int64
	token    latch.Token // the last token handed out
	seq      uint64      // counts the timers set: ties at one instant go in this order
	arrivals uint64      // counts queued requests: the queue order

	sessions []*mSession // live sessions, in ID order
	holds    []*mHold    // every hold
	waiters  []*mWaiter  // queued requests, in arrival order
	delays   []*mDelay   // lock-delays

	// hint is the order in which the engine granted queued requests in the
	// current call (see serve).
	hint []engine.WaiterID
	// events are what the current call reported.
	events []engine.Event
}

type mSession struct {
	id             latch.SessionID
	opened         int64
	ttl, lockDelay time.Duration
	expires        int64 // 0 without a TTL
	seq            uint64
}

type mHold struct {
	key      string
	sess     latch.SessionID // 0 once a leased hold's session ended
	mode     latch.Mode
	limit    uint32
	token    latch.Token
	acquired int64
	expires  int64 // the lease's end, 0 without a lease
	seq      uint64
}

type mWaiter struct {
	id       engine.WaiterID
	sess     latch.SessionID
	mode     latch.Mode
	limit    uint32
	relock   latch.Relock
	lease    time.Duration
	keys     []string // distinct, in request order
	arrived  uint64
	since    int64
	deadline int64 // 0 when waiting forever
	seq      uint64
}

type mDelay struct {
	key   string
	until int64
	seq   uint64
}

// mExpect is what the model predicts for a call.
type mExpect struct {
	errs    []error     // the call fails with one of these; none: it succeeds
	busy    []string    // the keys of the *latch.BusyError of a would-block
	granted bool        // Acquire: granted at once (token, expires) or queued
	token   latch.Token // Acquire's grant; Renew: the newest token of the holds
	expires int64       // Acquire's grant
	n       int         // ReleaseAll, ForceRelease
	exp     int64       // Renew
}

func newRefModel(maxKeys int, first latch.Token) *refModel {
	return &refModel{maxKeys: maxKeys, token: first}
}

// mPlus adds a duration to an instant, saturating at math.MaxInt64.
func mPlus(t int64, d time.Duration) int64 {
	if d > 0 && t > math.MaxInt64-int64(d) {
		return math.MaxInt64
	}
	return t + int64(d)
}

func mDistinct(keys []string) []string {
	var out []string
	for _, k := range keys {
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

func mValidKey(k string) bool {
	return len(k) >= 1 && len(k) <= latch.MaxKeyLen && !strings.ContainsAny(k, " \r\n")
}

func (m *refModel) nextSeq() uint64 {
	m.seq++
	return m.seq
}

func (m *refModel) emit(ev engine.Event) {
	ev.At = m.now
	m.events = append(m.events, ev)
}

// --- questions about the table

func (m *refModel) session(id latch.SessionID) *mSession {
	for _, s := range m.sessions {
		if s.id == id {
			return s
		}
	}
	return nil
}

func (m *refModel) holders(key string) []*mHold {
	var out []*mHold
	for _, h := range m.holds {
		if h.key == key {
			out = append(out, h)
		}
	}
	return out
}

// holdOf returns the hold of session sid on key, or nil.
func (m *refModel) holdOf(sid latch.SessionID, key string) *mHold {
	for _, h := range m.holds {
		if h.key == key && h.sess == sid && sid != 0 {
			return h
		}
	}
	return nil
}

func (m *refModel) heldKeys(sid latch.SessionID) []string {
	var out []string
	for _, h := range m.holds {
		if h.sess == sid && sid != 0 {
			out = append(out, h.key)
		}
	}
	slices.Sort(out)
	return out
}

func (m *refModel) delay(key string) *mDelay {
	for _, d := range m.delays {
		if d.key == key {
			return d
		}
	}
	return nil
}

// queue returns the requests waiting for key, in arrival order.
func (m *refModel) queue(key string) []*mWaiter {
	var out []*mWaiter
	for _, w := range m.waiters {
		if slices.Contains(w.keys, key) {
			out = append(out, w)
		}
	}
	return out
}

// ahead returns the requests queued on key before w.
func (m *refModel) ahead(w *mWaiter, key string) []*mWaiter {
	var out []*mWaiter
	for _, x := range m.queue(key) {
		if x.arrived < w.arrived {
			out = append(out, x)
		}
	}
	return out
}

// agreedLimit returns the limit the shared holders and waiters of key
// agreed on, if there are any.
func (m *refModel) agreedLimit(key string) (uint32, bool) {
	for _, h := range m.holders(key) {
		if h.mode == latch.Shared {
			return h.limit, true
		}
	}
	for _, w := range m.queue(key) {
		if w.mode == latch.Shared {
			return w.limit, true
		}
	}
	return 0, false
}

// fits reports whether a request of session sid for key, queued behind
// the requests ahead, may take key now: a key its session holds in the
// same mode is available to a re-lock (RelockReuse); a key under
// lock-delay to nobody; otherwise the request must be compatible with
// every holder and with every request ahead, each of which counts as if it
// held the key. Exclusive is compatible with nothing; shared with shared
// while the count stays within the limit.
func (m *refModel) fits(sid latch.SessionID, mode latch.Mode, limit uint32, relock latch.Relock, key string, ahead []*mWaiter) bool {
	if relock == latch.RelockReuse {
		if h := m.holdOf(sid, key); h != nil && h.mode == mode {
			return true
		}
	}
	if m.delay(key) != nil {
		return false
	}
	n := 0
	for _, h := range m.holders(key) {
		if mode == latch.Exclusive || h.mode == latch.Exclusive || h.limit != limit {
			return false
		}
		n++
	}
	for _, w := range ahead {
		if mode == latch.Exclusive || w.mode == latch.Exclusive {
			return false
		}
		n++
	}
	return limit == 0 || n < int(limit)
}

func (m *refModel) waiterFits(w *mWaiter, key string) bool {
	return m.fits(w.sess, w.mode, w.limit, w.relock, key, m.ahead(w, key))
}

func (m *refModel) grantable(w *mWaiter) bool {
	for _, k := range w.keys {
		if !m.waiterFits(w, k) {
			return false
		}
	}
	return true
}

// --- timers

// mTimer is one pending instant: the end of a lease, a session's TTL or a
// lock-delay (class 0), or a waiter's deadline (class 1). At one instant
// class 0 goes first; ties within a class go in the order they were set.
type mTimer struct {
	when  int64
	class int
	seq   uint64
	hold  *mHold
	sess  *mSession
	delay *mDelay
	wait  *mWaiter
}

func (a mTimer) before(b mTimer) bool {
	if a.when != b.when {
		return a.when < b.when
	}
	if a.class != b.class {
		return a.class < b.class
	}
	return a.seq < b.seq
}

func (m *refModel) nextTimer() (mTimer, bool) {
	var ts []mTimer
	for _, h := range m.holds {
		if h.expires != 0 {
			ts = append(ts, mTimer{when: h.expires, seq: h.seq, hold: h})
		}
	}
	for _, s := range m.sessions {
		if s.expires != 0 {
			ts = append(ts, mTimer{when: s.expires, seq: s.seq, sess: s})
		}
	}
	for _, d := range m.delays {
		ts = append(ts, mTimer{when: d.until, seq: d.seq, delay: d})
	}
	for _, w := range m.waiters {
		if w.deadline != 0 {
			ts = append(ts, mTimer{when: w.deadline, class: 1, seq: w.seq, wait: w})
		}
	}
	if len(ts) == 0 {
		return mTimer{}, false
	}
	first := ts[0]
	for _, t := range ts[1:] {
		if t.before(first) {
			first = t
		}
	}
	return first, true
}

func (m *refModel) nextDeadline() (int64, bool) {
	t, ok := m.nextTimer()
	return t.when, ok
}

// begin starts a call: it brings the table up to now, instant by instant,
// granting what each expiry or deadline made grantable.
func (m *refModel) begin(now int64) {
	m.events = nil
	now = max(now, m.now)
	for {
		t, ok := m.nextTimer()
		if !ok || t.when > now {
			break
		}
		m.now = t.when
		m.fire(t)
		m.serve()
	}
	m.now = now
}

func (m *refModel) fire(t mTimer) {
	switch {
	case t.hold != nil:
		h := t.hold
		m.emit(engine.Event{Kind: engine.EventLeaseExpired, Key: h.key, Session: h.sess, Token: h.token})
		m.removeHold(h)
	case t.sess != nil:
		m.emit(engine.Event{Kind: engine.EventSessionExpired, Session: t.sess.id})
		m.endSession(t.sess)
	case t.delay != nil:
		m.delays = slices.DeleteFunc(m.delays, func(d *mDelay) bool { return d == t.delay })
	case t.wait != nil:
		w := t.wait
		var busy []string
		for _, k := range w.keys {
			if !m.waiterFits(w, k) {
				busy = append(busy, k)
			}
		}
		m.emit(engine.Event{Kind: engine.EventTimedOut, Waiter: w.id, Session: w.sess, Keys: busy})
		m.removeWaiter(w)
	}
}

// --- changes

func (m *refModel) removeHold(h *mHold) {
	m.holds = slices.DeleteFunc(m.holds, func(x *mHold) bool { return x == h })
}

func (m *refModel) removeWaiter(w *mWaiter) {
	m.waiters = slices.DeleteFunc(m.waiters, func(x *mWaiter) bool { return x == w })
}

// serve grants queued requests until none is grantable. Of several
// grantable requests, the rules do not say which goes first: serve takes
// the one the engine granted first in this call, if any, else the
// earliest.
func (m *refModel) serve() {
	for {
		var next *mWaiter
		for _, w := range m.waiters {
			if m.grantable(w) && (next == nil || m.rank(w) < m.rank(next)) {
				next = w
			}
		}
		if next == nil {
			return
		}
		m.removeWaiter(next)
		tok, exp := m.grant(next.sess, next.keys, next.mode, next.limit, next.relock, next.lease)
		m.emit(engine.Event{Kind: engine.EventGranted, Waiter: next.id, Session: next.sess, Token: tok, Expires: exp})
	}
}

// rank orders grantable requests for serve: those the engine granted in
// this call by when it did, then the others by arrival.
func (m *refModel) rank(w *mWaiter) int {
	if i := slices.Index(m.hint, w.id); i >= 0 {
		return i
	}
	return len(m.hint) + int(w.arrived)
}

// grant makes session sid a holder of keys. When it re-locks (RelockReuse)
// keys it all holds, it returns their newest existing token (reuse) and
// only resets the leases; otherwise it takes the next token and stamps it
// on every key.
func (m *refModel) grant(sid latch.SessionID, keys []string, mode latch.Mode, limit uint32, relock latch.Relock, lease time.Duration) (tok latch.Token, exp int64) {
	reuse := relock == latch.RelockReuse
	for _, k := range keys {
		if h := m.holdOf(sid, k); h != nil {
			tok = max(tok, h.token)
		} else {
			reuse = false
		}
	}
	if !reuse {
		m.token++
		tok = m.token
	}
	if lease > 0 {
		exp = mPlus(m.now, lease)
	}
	for _, k := range keys {
		h := m.holdOf(sid, k)
		if h == nil {
			h = &mHold{key: k, sess: sid, mode: mode, limit: limit, acquired: m.now}
			m.holds = append(m.holds, h)
		}
		if !reuse {
			h.token = tok
		}
		m.setLease(h, lease)
	}
	return tok, exp
}

func (m *refModel) setLease(h *mHold, lease time.Duration) {
	h.expires = 0
	if lease > 0 {
		h.expires, h.seq = mPlus(m.now, lease), m.nextSeq()
	}
}

// endSession fails the session's waiters and releases its holds, except
// leased ones, which outlive it; its lock-delay then keeps each released
// key unavailable. It releases the newest hold first, as the engine does,
// so that the lock-delays it sets tie in the same order.
func (m *refModel) endSession(s *mSession) {
	for _, w := range slices.Clone(m.waiters) {
		if w.sess == s.id {
			m.emit(engine.Event{Kind: engine.EventAborted, Waiter: w.id, Session: s.id})
			m.removeWaiter(w)
		}
	}
	holds := slices.Clone(m.holds)
	slices.Reverse(holds) // m.holds is in the order they were made
	for _, h := range holds {
		if h.sess != s.id {
			continue
		}
		if h.expires != 0 {
			h.sess = 0
			continue
		}
		m.removeHold(h)
		if s.lockDelay > 0 {
			m.setDelay(h.key, mPlus(m.now, s.lockDelay))
		}
	}
	m.sessions = slices.DeleteFunc(m.sessions, func(x *mSession) bool { return x == s })
}

// setDelay keeps key unavailable until until, or longer if it already is.
func (m *refModel) setDelay(key string, until int64) {
	if d := m.delay(key); d != nil {
		if until > d.until {
			d.until, d.seq = until, m.nextSeq()
		}
		return
	}
	m.delays = append(m.delays, &mDelay{key: key, until: until, seq: m.nextSeq()})
}

// --- the API

// apply runs op on the model. got supplies the names the engine chose for
// a new session or a queued request; everything else is predicted.
func (m *refModel) apply(o Op, got Outcome) mExpect {
	m.begin(o.Now)
	switch o.Kind {
	case OpOpen:
		s := &mSession{id: got.Session, opened: m.now, ttl: max(o.Opts.TTL, 0), lockDelay: max(o.Opts.LockDelay, 0)}
		if s.ttl > 0 {
			s.expires, s.seq = mPlus(m.now, s.ttl), m.nextSeq()
		}
		m.sessions = append(m.sessions, s)
	case OpAcquire:
		return m.acquire(o.Session, o.Req, got.Res.Waiter)
	case OpRelease:
		if errs := m.checkHeld(o.Session, o.Keys); errs != nil {
			return mExpect{errs: errs}
		}
		for _, k := range mDistinct(o.Keys) {
			m.removeHold(m.holdOf(o.Session, k))
		}
		m.serve()
	case OpReleaseAll:
		if m.session(o.Session) == nil {
			return mExpect{errs: []error{latch.ErrNoSession}}
		}
		n := 0
		for _, h := range slices.Clone(m.holds) {
			if h.sess == o.Session {
				m.removeHold(h)
				n++
			}
		}
		m.serve()
		return mExpect{n: n}
	case OpRenew:
		errs := m.checkHeld(o.Session, o.Keys)
		if o.Lease < 0 {
			errs = append(errs, latch.ErrInvalidRequest)
		}
		if errs != nil {
			return mExpect{errs: errs}
		}
		var x mExpect // the newest token of the holds, and the lease's end
		for _, k := range o.Keys {
			h := m.holdOf(o.Session, k)
			x.token = max(x.token, h.token)
			m.setLease(h, o.Lease)
		}
		if o.Lease > 0 {
			x.exp = mPlus(m.now, o.Lease)
		}
		return x
	case OpKeepAlive:
		s := m.session(o.Session)
		if s == nil {
			return mExpect{errs: []error{latch.ErrNoSession}}
		}
		if s.ttl > 0 {
			s.expires, s.seq = mPlus(m.now, s.ttl), m.nextSeq()
		}
	case OpCancel:
		i := slices.IndexFunc(m.waiters, func(w *mWaiter) bool { return w.id == o.Waiter })
		if i < 0 {
			return mExpect{errs: []error{engine.ErrNoWaiter}}
		}
		m.removeWaiter(m.waiters[i])
		m.serve()
	case OpEndSession:
		s := m.session(o.Session)
		if s == nil {
			return mExpect{errs: []error{latch.ErrNoSession}}
		}
		m.endSession(s)
		m.serve()
	case OpForceRelease:
		n := len(m.holders(o.Key))
		m.holds = slices.DeleteFunc(m.holds, func(h *mHold) bool { return h.key == o.Key })
		m.delays = slices.DeleteFunc(m.delays, func(d *mDelay) bool { return d.key == o.Key })
		m.serve()
		return mExpect{n: n}
	case OpTick:
	}
	return mExpect{}
}

// checkHeld returns the errors of a Release or Renew of keys by session
// sid: the session must exist, the keys be named and all held by it.
func (m *refModel) checkHeld(sid latch.SessionID, keys []string) []error {
	var errs []error
	if len(keys) == 0 {
		errs = append(errs, latch.ErrNoKeys)
	}
	if m.session(sid) == nil {
		return append(errs, latch.ErrNoSession)
	}
	for _, k := range keys {
		if m.holdOf(sid, k) == nil {
			return append(errs, latch.ErrNotHeld)
		}
	}
	return errs
}

// validate returns the errors of a malformed request.
func (m *refModel) validate(r latch.LockRequest) []error {
	var errs []error
	if len(r.Keys) == 0 {
		errs = append(errs, latch.ErrNoKeys)
	}
	if m.maxKeys > 0 && len(r.Keys) > m.maxKeys {
		errs = append(errs, latch.ErrTooManyKeys)
	}
	if (r.Mode != latch.Exclusive && r.Mode != latch.Shared) ||
		(r.Mode == latch.Exclusive && r.Limit != 0) ||
		r.Lease < 0 ||
		(r.Wait < 0 && r.Wait != latch.WaitForever) ||
		(r.Relock != latch.RelockReject && r.Relock != latch.RelockReuse) {
		errs = append(errs, latch.ErrInvalidRequest)
	}
	if slices.ContainsFunc(r.Keys, func(k string) bool { return !mValidKey(k) }) {
		errs = append(errs, latch.ErrInvalidKey)
	}
	return errs
}

func (m *refModel) acquire(sid latch.SessionID, r latch.LockRequest, id engine.WaiterID) mExpect {
	errs := m.validate(r)
	if m.session(sid) == nil {
		errs = append(errs, latch.ErrNoSession)
	}
	if errs != nil {
		return mExpect{errs: errs}
	}
	keys := mDistinct(r.Keys)
	for _, k := range keys {
		if h := m.holdOf(sid, k); h != nil {
			switch {
			case r.Relock == latch.RelockReject:
				errs = append(errs, latch.ErrAlreadyHeld)
			case h.mode != r.Mode:
				errs = append(errs, latch.ErrModeMismatch)
			case r.Mode == latch.Shared && h.limit != r.Limit:
				errs = append(errs, latch.ErrLimitMismatch)
			}
		} else if l, ok := m.agreedLimit(k); ok && r.Mode == latch.Shared && l != r.Limit {
			errs = append(errs, latch.ErrLimitMismatch)
		}
	}
	if errs != nil {
		return mExpect{errs: errs}
	}

	// A new request queues behind every waiter: it takes the keys at once
	// only if it fits behind all of them.
	var busy []string
	for _, k := range keys {
		if m.holdOf(sid, k) == nil && !m.fits(sid, r.Mode, r.Limit, r.Relock, k, m.queue(k)) {
			busy = append(busy, k)
		}
	}
	if busy == nil {
		tok, exp := m.grant(sid, keys, r.Mode, r.Limit, r.Relock, r.Lease)
		return mExpect{granted: true, token: tok, expires: exp}
	}
	if r.Wait == latch.NoWait {
		return mExpect{errs: []error{latch.ErrWouldBlock}, busy: busy}
	}
	m.arrivals++
	w := &mWaiter{id: id, sess: sid, mode: r.Mode, limit: r.Limit, relock: r.Relock, lease: r.Lease, keys: keys, arrived: m.arrivals, since: m.now}
	if r.Wait > 0 {
		w.deadline, w.seq = mPlus(m.now, r.Wait), m.nextSeq()
	}
	m.waiters = append(m.waiters, w)
	return mExpect{}
}

// --- introspection, in the engine's terms

func (m *refModel) keyStates() []engine.KeyState {
	var names []string
	add := func(k string) {
		if !slices.Contains(names, k) {
			names = append(names, k)
		}
	}
	for _, h := range m.holds {
		add(h.key)
	}
	for _, w := range m.waiters {
		for _, k := range w.keys {
			add(k)
		}
	}
	for _, d := range m.delays {
		add(d.key)
	}
	slices.Sort(names)

	var out []engine.KeyState
	for _, name := range names {
		st := engine.KeyState{Key: name}
		hs := m.holders(name)
		if len(hs) > 0 {
			st.Mode = hs[0].mode
		}
		st.Limit, _ = m.agreedLimit(name)
		for _, h := range hs {
			st.Holders = append(st.Holders, engine.HolderState{Session: h.sess, Token: h.token, Acquired: h.acquired, Expires: h.expires})
		}
		slices.SortFunc(st.Holders, func(a, b engine.HolderState) int { return cmp.Compare(a.Token, b.Token) })
		for i, w := range m.queue(name) {
			st.Waiters = append(st.Waiters, engine.WaiterState{
				ID: w.id, Session: w.sess, Mode: w.mode, Limit: w.limit, Position: i,
				Since: w.since, Deadline: w.deadline, Keys: slices.Clone(w.keys),
			})
		}
		if d := m.delay(name); d != nil {
			st.DelayedUntil = d.until
		}
		out = append(out, st)
	}
	return out
}

func (m *refModel) sessionStates() []engine.SessionState {
	out := []engine.SessionState{}
	for _, s := range m.sessions {
		st := engine.SessionState{ID: s.id, Opened: s.opened, TTL: s.ttl, LockDelay: s.lockDelay, Expires: s.expires}
		st.Held = len(m.heldKeys(s.id))
		for _, w := range m.waiters {
			if w.sess == s.id {
				st.Waiting++
			}
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b engine.SessionState) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// stats returns the table's counts; keys is the number of its keys.
func (m *refModel) stats(keys int) engine.Stats {
	return engine.Stats{
		Keys:     keys,
		Holds:    len(m.holds),
		Waiters:  len(m.waiters),
		Sessions: len(m.sessions),
		Token:    m.token,
	}
}
