package engine

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/peakmap"
)

// maxPooled bounds each free list.
const maxPooled = 1024

// freeList keeps cleared records of a kind for reuse, maxPooled at most;
// the one taken is the one last freed, the likeliest still in the cache.
type freeList[T any] []*T

// get returns a kept record, or a new one.
func (l *freeList[T]) get() *T {
	n := len(*l)
	if n == 0 {
		return new(T)
	}
	x := (*l)[n-1]
	(*l)[n-1] = nil
	*l = (*l)[:n-1]
	return x
}

// put keeps x, which the caller has cleared, unless the list is full.
func (l *freeList[T]) put(x *T) {
	if len(*l) < maxPooled {
		*l = append(*l, x)
	}
}

// Engine is the lock table. See the package documentation for its rules.
// The zero value is not usable; call New.
type Engine struct {
	cfg   Config
	now   int64
	token latch.Token

	keys     map[string]*key
	sessions map[latch.SessionID]*session
	waiters  map[WaiterID]*waiter
	delays   map[*key]*timer // lock-delays; rare, so kept out of key

	// The peaks of keys, sessions and waiters, which are rebuilt when they
	// drain far below them (peakmap).
	keysPeak, sessionsPeak, waitersPeak peakmap.Peak

	lastSession latch.SessionID
	lastWaiter  WaiterID
	nholds      int

	timers   timerHeap
	timerSeq uint64

	events []Event
	ready  []*waiter // grantable waiters found by serve, not yet granted
	drops  []Drop
	dirty  []*key

	// scratch space for one request, reused to keep Acquire allocation-free
	reqKeys  []*key
	reqNames []string
	reqSeen  map[string]struct{}

	freeKeys    freeList[key]
	freeHolds   freeList[hold]
	freeLeases  freeList[timer]
	freeWaiters freeList[waiter]

	// capture is the open Capture, told of every change before it is
	// made; nil when none is open.
	capture *Capture

	// changed lists the keys changed since TakeChanged, when
	// recordChanged (RecordChanged).
	recordChanged bool
	changed       []string
}

// RecordChanged makes the engine list the names of the keys whose holders,
// tokens, leases, owner values or lock-delays its calls change, from now
// on (on) or no more, for TakeChanged: the keys a client caching their
// state must forget (the Redis front end's invalidations). It changes
// nothing of the table, so a replica may record or not.
func (e *Engine) RecordChanged(on bool) {
	e.recordChanged = on
	if !on {
		clear(e.changed)
		e.changed = e.changed[:0]
	}
}

// TakeChanged appends to dst the names of the keys changed since the last
// TakeChanged (in the order they changed; a key may be listed more than
// once), forgets them, and returns dst. It is empty unless RecordChanged
// is on.
func (e *Engine) TakeChanged(dst []string) []string {
	dst = append(dst, e.changed...)
	clear(e.changed)
	e.changed = e.changed[:0]
	return dst
}

// New returns an empty lock table.
func New(cfg Config) *Engine {
	return &Engine{
		cfg:      cfg,
		keys:     make(map[string]*key),
		sessions: make(map[latch.SessionID]*session),
		waiters:  make(map[WaiterID]*waiter),
		delays:   make(map[*key]*timer),
	}
}

// Now returns the latest instant the engine has seen.
func (e *Engine) Now() int64 { return e.now }

// NextDeadline returns the earliest instant at which the engine has work to
// do (a lease, session TTL or lock-delay ending, a waiter's deadline), and
// false when there is none. The driver calls Tick at that instant.
func (e *Engine) NextDeadline() (int64, bool) {
	if t := e.timers.top(); t != nil {
		return t.when, true
	}
	return 0, false
}

// Tick brings the table up to now and returns what happened.
func (e *Engine) Tick(now int64) []Event {
	e.begin(now)
	return e.events
}

// OpenSession starts a session.
func (e *Engine) OpenSession(now int64, opts SessionOptions) (latch.SessionID, []Event) {
	e.begin(now)
	e.lastSession++
	s := &session{
		id:        e.lastSession,
		opened:    e.now,
		ttl:       max(opts.TTL, 0),
		lockDelay: max(opts.LockDelay, 0),
	}
	if s.ttl > 0 {
		s.expiry = &timer{kind: timerSession, sess: s, idx: -1}
		e.schedule(s.expiry, addTime(e.now, s.ttl))
	}
	e.sessions[s.id] = s
	return s.id, e.events
}

// KeepAlive restarts the TTL of a session.
func (e *Engine) KeepAlive(now int64, id latch.SessionID) ([]Event, error) {
	e.begin(now)
	s := e.sessions[id]
	if s == nil {
		return e.events, fmt.Errorf("keepalive session %d: %w", id, latch.ErrNoSession)
	}
	if s.expiry != nil {
		e.schedule(s.expiry, addTime(e.now, s.ttl))
	}
	return e.events, nil
}

// EndSession ends a session: its waiters are aborted, its non-leased holds
// released (with the session's lock-delay) and its leased holds detached.
func (e *Engine) EndSession(now int64, id latch.SessionID) ([]Event, error) {
	e.begin(now)
	s := e.sessions[id]
	if s == nil {
		return e.events, fmt.Errorf("end session %d: %w", id, latch.ErrNoSession)
	}
	e.endSession(s)
	e.serve()
	return e.events, nil
}

// Acquire asks for the keys of req on behalf of session id. It grants at
// once, queues the request (Result.Waiter), or fails without changing the
// table: a *latch.BusyError wrapping latch.ErrWouldBlock for a try-once
// request that cannot be granted now, or an error wrapping one of latch's
// request errors.
func (e *Engine) Acquire(now int64, id latch.SessionID, req latch.LockRequest) (Result, []Event, error) {
	e.begin(now)
	s := e.sessions[id]
	if s == nil {
		return Result{}, e.events, fmt.Errorf("acquire: session %d: %w", id, latch.ErrNoSession)
	}
	if len(req.Keys) == 1 && req.Mode == latch.Exclusive && req.Limit == 0 && req.Wait == latch.NoWait &&
		req.Relock == latch.RelockReject && req.Lease >= 0 {
		return e.tryOne(s, req.Keys[0], req.Lease)
	}
	if err := e.check(&req); err != nil {
		return Result{}, e.events, err
	}
	keys := e.reqKeys
	held := 0 // keys s already holds (RelockReuse)
	ready := true
	for i, name := range e.reqNames {
		k := keys[i]
		if k == nil {
			continue
		}
		if h := k.holdOf(s); h != nil {
			switch {
			case req.Relock == latch.RelockReject:
				return Result{}, e.events, fmt.Errorf("acquire %q: %w", name, latch.ErrAlreadyHeld)
			case k.mode != req.Mode:
				return Result{}, e.events, fmt.Errorf("acquire %q as %v: %w", name, req.Mode, latch.ErrModeMismatch)
			case req.Mode == latch.Shared && k.limit != req.Limit:
				return Result{}, e.events, fmt.Errorf("acquire %q with limit %d, key's limit is %d: %w", name, req.Limit, k.limit, latch.ErrLimitMismatch)
			}
			held++
			continue
		}
		if req.Mode == latch.Shared && k.nshared() > 0 && k.limit != req.Limit {
			return Result{}, e.events, fmt.Errorf("acquire %q with limit %d, key's limit is %d: %w", name, req.Limit, k.limit, latch.ErrLimitMismatch)
		}
		if ready && !k.admitsNew(req.Mode, req.Limit) {
			ready = false
		}
	}

	if ready {
		for i, name := range e.reqNames {
			if keys[i] == nil {
				keys[i] = e.newKey(name)
			}
		}
		tok, exp := e.grant(s, keys, req.Mode, req.Limit, req.Lease, held == len(keys))
		e.clearScratch()
		return Result{Granted: true, Token: tok, Expires: exp}, e.events, nil
	}

	if req.Wait == latch.NoWait {
		var busy []string
		for i, name := range e.reqNames {
			if k := keys[i]; k != nil && k.holdOf(s) == nil && !k.admitsNew(req.Mode, req.Limit) {
				busy = append(busy, name)
			}
		}
		e.clearScratch()
		return Result{}, e.events, &latch.BusyError{Err: latch.ErrWouldBlock, Keys: busy}
	}

	if err := e.checkRoom(); err != nil {
		e.clearScratch()
		return Result{}, e.events, err
	}
	e.lastWaiter++
	w := e.newWaiter(len(keys))
	w.id, w.s, w.since = e.lastWaiter, s, e.now
	w.mode, w.limit, w.relock, w.lease = req.Mode, req.Limit, req.Relock, req.Lease
	for i, name := range e.reqNames {
		k := keys[i]
		if k == nil {
			k = e.newKey(name)
		}
		if req.Mode == latch.Shared && k.nshared() == 0 {
			e.changeKey(k)
			k.limit = req.Limit
		}
		w.entries[i] = qentry{w: w, k: k}
		enqueue(&w.entries[i])
	}
	if req.Wait > 0 {
		w.deadline = &timer{kind: timerDeadline, wait: w, idx: -1}
		e.schedule(w.deadline, addTime(e.now, req.Wait))
	}
	linkWaiter(w)
	e.waiters[w.id] = w
	e.clearScratch()
	return Result{Waiter: w.id}, e.events, nil
}

// tryOne is Acquire of one key, exclusive, try once, re-lock rejected,
// with lease (0 or more): the memcached lock and the try-lock of every
// protocol. It decides as Acquire's general path does, with the same
// errors, events and changes, without the scratch space of a request of
// many keys.
func (e *Engine) tryOne(s *session, name string, lease time.Duration) (Result, []Event, error) {
	if err := latch.CheckKey(name); err != nil {
		return Result{}, e.events, fmt.Errorf("acquire: %w", err)
	}
	k := e.keys[name]
	switch {
	case k == nil:
		k = e.newKey(name)
	case k.holdOf(s) != nil:
		return Result{}, e.events, fmt.Errorf("acquire %q: %w", name, latch.ErrAlreadyHeld)
	case !k.admitsNew(latch.Exclusive, 0):
		return Result{}, e.events, &latch.BusyError{Err: latch.ErrWouldBlock, Keys: []string{name}}
	}
	e.token++
	e.changeKey(k)
	e.changeSession(s)
	h := e.newHold(k)
	h.s, h.acquired, h.token = s, e.now, e.token
	k.mode = latch.Exclusive
	linkHold(h)
	e.nholds++
	exp := e.setLease(h, lease)
	return Result{Granted: true, Token: h.token, Expires: exp}, e.events, nil
}

// Cancel removes a queued request. It returns ErrNoWaiter if the request is
// no longer queued; bringing the table up to now may be what ended it, in
// which case the returned events say how.
func (e *Engine) Cancel(now int64, id WaiterID) ([]Event, error) {
	e.begin(now)
	w := e.waiters[id]
	if w == nil {
		return e.events, fmt.Errorf("cancel waiter %d: %w", id, ErrNoWaiter)
	}
	e.removeWaiter(w)
	e.serve()
	return e.events, nil
}

// Release releases keys held by session id. If the session does not hold
// one of them nothing is released and the error wraps latch.ErrNotHeld.
func (e *Engine) Release(now int64, id latch.SessionID, keys []string) ([]Event, error) {
	e.begin(now)
	s := e.sessions[id]
	if s == nil {
		return e.events, fmt.Errorf("release: session %d: %w", id, latch.ErrNoSession)
	}
	if len(keys) == 0 {
		return e.events, fmt.Errorf("release: %w", latch.ErrNoKeys)
	}
	if len(keys) == 1 { // one look-up, not two
		h := e.holdOf(s, keys[0])
		if h == nil {
			return e.events, fmt.Errorf("release %q: %w", keys[0], latch.ErrNotHeld)
		}
		e.dropHold(h, DropReleased)
		e.serve()
		return e.events, nil
	}
	for _, name := range keys {
		if e.holdOf(s, name) == nil {
			return e.events, fmt.Errorf("release %q: %w", name, latch.ErrNotHeld)
		}
	}
	for _, name := range keys {
		if h := e.holdOf(s, name); h != nil { // nil for a repeated key
			e.dropHold(h, DropReleased)
		}
	}
	e.serve()
	return e.events, nil
}

// ReleaseAll releases every hold of session id, leased ones included, and
// returns how many it released.
func (e *Engine) ReleaseAll(now int64, id latch.SessionID) (int, []Event, error) {
	e.begin(now)
	s := e.sessions[id]
	if s == nil {
		return 0, e.events, fmt.Errorf("release all: session %d: %w", id, latch.ErrNoSession)
	}
	n := 0
	for s.holds != nil {
		e.dropHold(s.holds, DropReleased)
		n++
	}
	e.serve()
	return n, e.events, nil
}

// Renew resets the lease of keys held by session id to end lease from now
// (lease 0 removes the lease). It returns the newest token of those holds
// and the new end (0 without a lease). If the session does not hold one of
// them nothing changes and the error wraps latch.ErrNotHeld.
func (e *Engine) Renew(now int64, id latch.SessionID, keys []string, lease time.Duration) (latch.Token, int64, []Event, error) {
	e.begin(now)
	s := e.sessions[id]
	if s == nil {
		return 0, 0, e.events, fmt.Errorf("renew: session %d: %w", id, latch.ErrNoSession)
	}
	if len(keys) == 0 {
		return 0, 0, e.events, fmt.Errorf("renew: %w", latch.ErrNoKeys)
	}
	if lease < 0 {
		return 0, 0, e.events, fmt.Errorf("renew: negative lease %v: %w", lease, latch.ErrInvalidRequest)
	}
	for _, name := range keys {
		if e.holdOf(s, name) == nil {
			return 0, 0, e.events, fmt.Errorf("renew %q: %w", name, latch.ErrNotHeld)
		}
	}
	var tok latch.Token
	var exp int64
	for _, name := range keys {
		h := e.holdOf(s, name)
		tok = max(tok, h.token)
		exp = e.setLease(h, lease)
	}
	return tok, exp, e.events, nil
}

// ForceRelease removes every holder of a key, leased ones included, and any
// lock-delay on it, and returns how many holders it removed.
func (e *Engine) ForceRelease(now int64, name string) (int, []Event) {
	e.begin(now)
	k := e.keys[name]
	if k == nil {
		return 0, e.events
	}
	n := 0
	for k.holds != nil {
		e.dropHold(k.holds, DropForced)
		n++
	}
	if k.delayed {
		e.undelay(k)
	}
	e.serve()
	return n, e.events
}

// Drops returns the holds that the last call changing the table removed, in
// the order it removed them: released, ended with their session, expired or
// forced. It is empty unless Config.RecordDrops is set. Like the events a
// call returns, the slice is the engine's own and valid only until the next
// call.
func (e *Engine) Drops() []Drop { return e.drops }

// ClearDrops empties Drops, for a caller whose next operation may end
// without a call that changes the table (a state machine's command
// refused before it reaches the table): Drops would still hold the drops
// of the call before, and they would be counted twice.
func (e *Engine) ClearDrops() { e.drops = e.drops[:0] }

// Stats returns counts of the table's state.
func (e *Engine) Stats() Stats {
	return Stats{
		Keys:     len(e.keys),
		Holds:    e.nholds,
		Waiters:  len(e.waiters),
		Sessions: len(e.sessions),
		Token:    e.token,
	}
}

// SeedToken raises the fencing-token counter to t if it is below t; it
// never lowers it. The counter is seeded once, when a state is created (by
// a command stamped by the proposer), so that tokens keep growing across
// in-memory restarts; like the rest of the counter it is part of the
// replicated state. It reports no events and leaves the time alone.
func (e *Engine) SeedToken(t latch.Token) {
	if t > e.token {
		e.token = t
	}
}

// begin starts a public call: it resets the event buffer and brings the
// table up to now.
func (e *Engine) begin(now int64) {
	clear(e.events)
	e.events = e.events[:0]
	e.drops = e.drops[:0]
	if now < e.now {
		now = e.now
	}
	for {
		t := e.timers.top()
		if t == nil || t.when > now {
			break
		}
		e.now = t.when
		e.timers.remove(t)
		e.fire(t)
		e.serve()
	}
	e.now = now
}

// fire acts on a timer that is due.
func (e *Engine) fire(t *timer) {
	switch t.kind {
	case timerLease:
		h := t.hold
		sid := latch.SessionID(0)
		if h.s != nil {
			sid = h.s.id
		}
		e.emit(Event{Kind: EventLeaseExpired, Session: sid, Key: h.k.name, Token: h.token})
		e.dropHold(h, DropLeaseExpired)
	case timerSession:
		e.emit(Event{Kind: EventSessionExpired, Session: t.sess.id})
		e.endSession(t.sess)
	case timerDelay:
		e.undelay(t.key)
	case timerDeadline:
		w := t.wait
		e.changeWaiter(w)
		var busy []string
		for i := range w.entries {
			if !e.available(&w.entries[i]) {
				busy = append(busy, w.entries[i].k.name)
			}
		}
		w.deadline = nil
		e.emit(Event{Kind: EventTimedOut, Waiter: w.id, Session: w.s.id, Keys: busy})
		e.removeWaiter(w)
	}
}

func (e *Engine) emit(ev Event) {
	ev.At = e.now
	e.events = append(e.events, ev)
}

// schedule sets t to fire at when, adding it to the heap or moving it.
func (e *Engine) schedule(t *timer, when int64) {
	e.changeTimer(t)
	e.timerSeq++
	t.when, t.seq = when, e.timerSeq
	if t.idx < 0 {
		e.timers.push(t)
	} else {
		e.timers.fix(t.idx)
	}
}

// checkRoom reports latch.ErrTooManyWaiters when the request in the
// scratch space may not queue: the table or one of its keys' queues holds
// as many waiters as Config allows.
func (e *Engine) checkRoom() error {
	if m := e.cfg.MaxWaiters; m > 0 && len(e.waiters) >= m {
		return fmt.Errorf("acquire: %d requests waiting, at most %d: %w", len(e.waiters), m, latch.ErrTooManyWaiters)
	}
	m := e.cfg.MaxWaitersPerKey
	if m <= 0 || m > MaxQueue {
		m = MaxQueue
	}
	for i, k := range e.reqKeys {
		if n := k.queued(); k != nil && n >= m {
			return fmt.Errorf("acquire %q: %d requests waiting on the key, at most %d: %w", e.reqNames[i], n, m, latch.ErrTooManyWaiters)
		}
	}
	return nil
}

// check validates req and fills the request scratch space with its
// distinct keys and their table entries (nil when absent).
func (e *Engine) check(req *latch.LockRequest) error {
	n := len(req.Keys)
	switch {
	case n == 0:
		return fmt.Errorf("acquire: %w", latch.ErrNoKeys)
	case e.cfg.MaxKeys > 0 && n > e.cfg.MaxKeys:
		return fmt.Errorf("acquire: %d keys, at most %d: %w", n, e.cfg.MaxKeys, latch.ErrTooManyKeys)
	case req.Mode != latch.Exclusive && req.Mode != latch.Shared:
		return fmt.Errorf("acquire: mode %v: %w", req.Mode, latch.ErrInvalidRequest)
	case req.Mode == latch.Exclusive && req.Limit != 0:
		return fmt.Errorf("acquire: limit %d on an exclusive lock: %w", req.Limit, latch.ErrInvalidRequest)
	case req.Lease < 0:
		return fmt.Errorf("acquire: negative lease %v: %w", req.Lease, latch.ErrInvalidRequest)
	case req.Wait < 0 && req.Wait != latch.WaitForever:
		return fmt.Errorf("acquire: wait %v: %w", req.Wait, latch.ErrInvalidRequest)
	case req.Relock != latch.RelockReject && req.Relock != latch.RelockReuse:
		return fmt.Errorf("acquire: relock policy %d: %w", req.Relock, latch.ErrInvalidRequest)
	}
	for _, name := range req.Keys {
		if err := latch.CheckKey(name); err != nil {
			return fmt.Errorf("acquire: %w", err)
		}
	}
	e.reqNames = e.reqNames[:0]
	e.reqKeys = e.reqKeys[:0]
	if n > 16 {
		if e.reqSeen == nil {
			e.reqSeen = make(map[string]struct{})
		}
		clear(e.reqSeen)
	}
	for i, name := range req.Keys {
		if n > 16 {
			if _, dup := e.reqSeen[name]; dup {
				continue
			}
			e.reqSeen[name] = struct{}{}
		} else if contains(req.Keys[:i], name) {
			continue
		}
		e.reqNames = append(e.reqNames, name)
		e.reqKeys = append(e.reqKeys, e.keys[name])
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// clearScratch drops the request scratch space's references.
func (e *Engine) clearScratch() {
	clear(e.reqKeys)
	clear(e.reqNames)
}

// admitsNew reports whether a new request in mode (with limit) could take k
// now, queueing behind nobody: no lock-delay, no waiter it would have to
// queue behind, and holders it is compatible with.
func (k *key) admitsNew(mode latch.Mode, limit uint32) bool {
	if k.delayed {
		return false
	}
	if mode == latch.Exclusive {
		return k.nholds == 0 && k.qhead == nil
	}
	if k.qexcl > 0 || (k.nholds > 0 && k.mode != latch.Shared) {
		return false
	}
	return limit == 0 || uint32(k.nholds)+uint32(k.qshared) < limit
}

// available reports whether the waiter of entry q could take q's key now:
// it already holds it (RelockReuse, same mode), or it is compatible with the
// key's holders and with every waiter ahead of it in the queue.
func (e *Engine) available(q *qentry) bool {
	w, k := q.w, q.k
	if w.relock == latch.RelockReuse && k.nholds > 0 && k.mode == w.mode {
		if k.holdOf(w.s) != nil {
			return true
		}
	}
	if k.delayed {
		return false
	}
	if w.mode == latch.Exclusive {
		return k.nholds == 0 && q == k.qhead
	}
	if k.nholds > 0 && (k.mode != latch.Shared || k.limit != w.limit) {
		return false
	}
	n := k.nholds
	for p := q; p != k.qhead; {
		p = p.prev
		if p.w.mode != latch.Shared {
			return false
		}
		n++
	}
	return w.limit == 0 || uint32(n) < w.limit
}

// grantable reports whether every key of w is available to it.
func (e *Engine) grantable(w *waiter) bool {
	for i := range w.entries {
		if !e.available(&w.entries[i]) {
			return false
		}
	}
	return true
}

// serve grants every queued request that the changes since the last call
// made grantable. Granting only adds holders, which never makes another
// request grantable, and two requests that are grantable at once never
// conflict (the later one would count the earlier as a holder), so the set
// to grant does not depend on the order the changed keys are looked at.
// The grants are made in arrival order, so that their tokens follow it.
func (e *Engine) serve() {
	for len(e.dirty) > 0 {
		for len(e.dirty) > 0 {
			k := e.dirty[len(e.dirty)-1]
			e.dirty[len(e.dirty)-1] = nil
			e.dirty = e.dirty[:len(e.dirty)-1]
			k.dirty = false
			e.findReady(k)
			e.collect(k)
		}
		slices.SortFunc(e.ready, func(a, b *waiter) int { return cmp.Compare(a.id, b.id) })
		for i, w := range e.ready {
			e.ready[i] = nil
			e.grantWaiter(w)
		}
		e.ready = e.ready[:0]
	}
}

// findReady adds the grantable waiters of k's queue to e.ready.
func (e *Engine) findReady(k *key) {
	blocked := false // behind an exclusive waiter that stays
	for q := k.qhead; q != nil; q = q.next {
		w := q.w
		switch {
		case w.ready:
		case blocked && (w.relock != latch.RelockReuse || k.holdOf(w.s) == nil):
			// Nobody behind an exclusive waiter can be granted, but a
			// re-lock of a key its session holds may be.
		case e.grantable(w):
			w.ready = true
			e.ready = append(e.ready, w)
		case w.mode == latch.Exclusive:
			blocked = true
		}
	}
}

// markDirty queues k for serve.
func (e *Engine) markDirty(k *key) {
	if !k.dirty {
		k.dirty = true
		e.dirty = append(e.dirty, k)
	}
}

// collect removes k from the table if nothing refers to it any more.
func (e *Engine) collect(k *key) {
	if !k.empty() || k.dirty {
		return
	}
	e.changeKey(k)
	delete(e.keys, k.name)
	if e.keysPeak.Due(len(e.keys)) {
		e.keys = peakmap.Rebuild(e.keys, &e.keysPeak)
	}
	*k = key{}
	e.freeKeys.put(k)
}

// newKey adds an empty key to the table.
func (e *Engine) newKey(name string) *key {
	k := e.freeKeys.get()
	k.name = name
	e.keys[name] = k
	e.madeKey(k)
	return k
}

// holdOf returns s's hold on the named key, or nil.
func (e *Engine) holdOf(s *session, name string) *hold {
	k := e.keys[name]
	if k == nil {
		return nil
	}
	return k.holdOf(s)
}

// grantWaiter grants a queued request and reports it.
func (e *Engine) grantWaiter(w *waiter) {
	keys := e.reqKeys[:0]
	all := true
	for i := range w.entries {
		k := w.entries[i].k
		keys = append(keys, k)
		if all && (w.relock != latch.RelockReuse || k.holdOf(w.s) == nil) {
			all = false
		}
	}
	e.reqKeys = keys
	id, s, mode, limit, lease := w.id, w.s, w.mode, w.limit, w.lease
	e.removeWaiter(w) // w is recycled from here on
	tok, exp := e.grant(s, keys, mode, limit, lease, all)
	clear(e.reqKeys)
	e.emit(Event{Kind: EventGranted, Waiter: id, Session: s.id, Token: tok, Expires: exp})
}

// grant makes s a holder of every key. Keys s already holds keep their
// hold; when all of them were held (reuse) the newest existing token is
// returned, otherwise a new token is stamped on every key.
func (e *Engine) grant(s *session, keys []*key, mode latch.Mode, limit uint32, lease time.Duration, reuse bool) (latch.Token, int64) {
	var tok latch.Token
	if reuse {
		for _, k := range keys {
			tok = max(tok, k.holdOf(s).token)
		}
	} else {
		e.token++
		tok = e.token
	}
	var exp int64
	for _, k := range keys {
		e.changeKey(k)
		h := k.holdOf(s)
		if h == nil {
			if s != nil {
				e.changeSession(s)
			}
			if mode == latch.Shared && k.nshared() == 0 {
				k.limit = limit
			}
			h = e.newHold(k)
			h.s = s
			h.acquired = e.now
			k.mode = mode
			linkHold(h)
			e.nholds++
		}
		if !reuse { // a reuse keeps every hold's token and resets the lease
			h.token = tok
		}
		exp = e.setLease(h, lease)
	}
	return tok, exp
}

func (e *Engine) newHold(k *key) *hold {
	if k.h0.k == nil {
		k.h0.k = k
		return &k.h0
	}
	h := e.freeHolds.get()
	h.k = k
	return h
}

// setLease gives h a lease ending lease from now (none when lease is 0) and
// returns its end.
func (e *Engine) setLease(h *hold, lease time.Duration) int64 {
	e.changeKey(h.k)
	if lease <= 0 {
		e.dropLease(h)
		return 0
	}
	t := h.lease
	if t == nil {
		t = e.freeLeases.get()
		*t = timer{kind: timerLease, hold: h, idx: -1}
		h.lease = t
	}
	when := addTime(e.now, lease)
	e.schedule(t, when)
	return when
}

// dropLease removes h's lease, if it has one.
func (e *Engine) dropLease(h *hold) {
	if t := h.lease; t != nil {
		e.changeKey(h.k)
		e.timers.remove(t)
		h.lease = nil
		*t = timer{}
		e.freeLeases.put(t)
	}
}

// dropHold removes a hold from the table and, with RecordDrops, records it
// in e.drops.
func (e *Engine) dropHold(h *hold, cause DropCause) {
	k := h.k
	e.changeKey(k)
	if h.s != nil {
		e.changeSession(h.s)
	}
	if e.cfg.RecordDrops {
		var sid latch.SessionID
		if h.s != nil {
			sid = h.s.id
		}
		e.drops = append(e.drops, Drop{Session: sid, Acquired: h.acquired, At: e.now, Cause: cause, Owned: h.owned})
	}
	unlinkFromKey(h)
	unlinkFromSession(h)
	e.dropLease(h)
	e.nholds--
	if h == &k.h0 {
		k.h0 = hold{}
	} else {
		*h = hold{}
		e.freeHolds.put(h)
	}
	e.markDirty(k)
}

// removeWaiter takes w out of every queue and of its session.
func (e *Engine) removeWaiter(w *waiter) {
	e.changeWaiter(w)
	for i := range w.entries {
		q := &w.entries[i]
		dequeue(q)
		e.markDirty(q.k)
	}
	if w.deadline != nil {
		e.timers.remove(w.deadline)
		w.deadline = nil
	}
	unlinkWaiter(w)
	delete(e.waiters, w.id)
	if e.waitersPeak.Due(len(e.waiters)) {
		e.waiters = peakmap.Rebuild(e.waiters, &e.waitersPeak)
	}
	clear(w.entries)
	*w = waiter{entries: w.entries[:0]}
	e.freeWaiters.put(w)
}

// newWaiter returns a blank waiter with n queue entries.
func (e *Engine) newWaiter(n int) *waiter {
	w := e.freeWaiters.get()
	w.entries = slices.Grow(w.entries[:0], n)[:n]
	return w
}

// endSession aborts the waiters of s, releases its non-leased holds (with
// its lock-delay) and detaches its leased ones.
func (e *Engine) endSession(s *session) {
	e.changeSession(s)
	for s.waiters != nil {
		w := s.waiters
		e.emit(Event{Kind: EventAborted, Waiter: w.id, Session: s.id})
		e.removeWaiter(w)
	}
	for s.holds != nil {
		h := s.holds
		if h.lease != nil {
			e.changeKey(h.k)
			unlinkFromSession(h)
			continue
		}
		k := h.k
		e.dropHold(h, DropSessionEnded)
		if s.lockDelay > 0 {
			e.delay(k, addTime(e.now, s.lockDelay))
		}
	}
	if s.expiry != nil {
		e.timers.remove(s.expiry)
		s.expiry = nil
	}
	delete(e.sessions, s.id)
	if e.sessionsPeak.Due(len(e.sessions)) {
		e.sessions = peakmap.Rebuild(e.sessions, &e.sessionsPeak)
	}
}

// delay makes k unavailable until the instant until (or a later one it
// already had).
func (e *Engine) delay(k *key, until int64) {
	e.changeKey(k)
	t := e.delays[k]
	if t == nil {
		t = &timer{kind: timerDelay, key: k, idx: -1}
		e.delays[k] = t
		k.delayed = true
	}
	if until > t.when {
		e.schedule(t, until)
	}
}

// undelay ends k's lock-delay.
func (e *Engine) undelay(k *key) {
	e.changeKey(k)
	if t := e.delays[k]; t != nil {
		e.timers.remove(t)
		delete(e.delays, k)
	}
	k.delayed = false
	e.markDirty(k)
}

// addTime returns t+d, saturating instead of overflowing.
func addTime(t int64, d time.Duration) int64 {
	if d > 0 && t > math.MaxInt64-int64(d) {
		return math.MaxInt64
	}
	return t + int64(d)
}
