package enginemodel

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/engine"
)

// ---------------------------------------------------------------------------
// The harness

// Harness runs one sequence: it makes the operations, runs them on the
// driver and the model, and checks the answers. Run makes one and hands it
// to its setup functions.
type Harness struct {
	src   Source
	d     Driver
	model *refModel
	now   int64  // the harness's clock; an op may pass an earlier now
	limit uint32 // the shared limit most requests of the sequence ask for

	config string   // for the failure report
	log    []string // one line per op, with the engine's answer

	// AfterStep, if set, is called at the end of every step, once every
	// check passed, with the op and the engine's answer (the engine's
	// snapshot tests drive a second engine with it). It may call Failf.
	AfterStep func(o Op, got Outcome)

	// Bookkeeping for the invariants, built from the engine's answers.
	reqs        map[engine.WaiterID]mWaitReq // every request ever queued
	live        map[engine.WaiterID]bool     // queued requests that have not ended
	arrival     map[engine.WaiterID]int      // queue order of every request ever queued
	lastWaiter  engine.WaiterID
	sessions    map[latch.SessionID]bool // every session ever opened
	lastSession latch.SessionID
	ended       []latch.SessionID        // sessions that ended, in order
	ghost       map[mGhostKey]latch.Mode // mode of every grant, by key and token
	ghostLimit  map[mGhostKey]uint32     // and its limit
	maxToken    latch.Token
}

// mWaitReq is a queued request as the harness made it.
type mWaitReq struct {
	sess latch.SessionID
	req  latch.LockRequest
	keys []string // distinct, in request order
}

// mGhostKey names a grant of one key.
type mGhostKey struct {
	key   string
	token latch.Token
}

// newHarness makes the harness of a sequence: it chooses the engine's
// configuration and has newDriver make the driver.
func newHarness(src Source, newDriver NewDriver) *Harness {
	maxKeys := []int{0, 0, 0, 2, 3}[src.intn(5)]
	first := []latch.Token{0, 0, 1 << 40}[src.intn(3)]
	h := &Harness{
		src:        src,
		d:          newDriver(engine.Config{MaxKeys: maxKeys}, first),
		model:      newRefModel(maxKeys, first),
		limit:      uint32(src.intn(4)),
		reqs:       make(map[engine.WaiterID]mWaitReq),
		live:       make(map[engine.WaiterID]bool),
		arrival:    make(map[engine.WaiterID]int),
		sessions:   make(map[latch.SessionID]bool),
		ghost:      make(map[mGhostKey]latch.Mode),
		ghostLimit: make(map[mGhostKey]uint32),
		maxToken:   first,
	}
	h.config = fmt.Sprintf("config: MaxKeys=%d first token %d, shared limit mostly %d", maxKeys, first, h.limit)
	return h
}

// Driver returns the driver the harness runs its operations on.
func (h *Harness) Driver() Driver { return h.d }

// Note appends s to the log line of the last operation.
func (h *Harness) Note(s string) {
	if len(h.log) > 0 {
		h.log[len(h.log)-1] += s
	}
}

// eng returns the engine under test, for reads.
func (h *Harness) eng() *engine.Engine { return h.d.Engine() }

func (h *Harness) opLog() string {
	return h.config + "\n" + strings.Join(h.log, "\n")
}

// step runs one op on the engine and on the model and checks everything.
func (h *Harness) step(o Op) {
	h.log = append(h.log, fmt.Sprintf("%4d %v", len(h.log), o))
	pre := h.snapshot()
	got := h.run(o)
	h.log[len(h.log)-1] += "  =>  " + got.Summary(o.Kind)

	h.checkNames(o, got)
	h.model.hint = h.model.hint[:0]
	for _, ev := range got.Events {
		if ev.Kind == engine.EventGranted {
			h.model.hint = append(h.model.hint, ev.Waiter)
		}
	}
	want := h.model.apply(o, got)
	h.compareOutcome(o, got, want)
	h.compareEvents(got.Events)
	post := h.snapshot()
	h.compareState(post)
	h.checkInvariants(o, pre, got, post)
	if h.AfterStep != nil {
		h.AfterStep(o, got)
	}
}

// run calls the engine, through the driver.
func (h *Harness) run(o Op) Outcome {
	defer func() {
		if r := recover(); r != nil {
			if f, ok := r.(failure); ok {
				panic(f) // the driver failed the sequence
			}
			Failf("engine panicked on %v: %v\n%s", o, r, debug.Stack())
		}
	}()
	return h.d.Run(o)
}

// checkNames checks the names the engine gave (session and waiter IDs are
// never reused) before the model adopts them.
func (h *Harness) checkNames(o Op, got Outcome) {
	switch {
	case o.Kind == OpOpen:
		if got.Session == 0 || h.sessions[got.Session] {
			Failf("OpenSession returned session ID %d, which is zero or was used before", got.Session)
		}
		h.sessions[got.Session] = true
		h.lastSession = max(h.lastSession, got.Session)
	case o.Kind == OpAcquire && got.Err == nil && !got.Res.Granted:
		id := got.Res.Waiter
		if _, used := h.reqs[id]; id == 0 || used {
			Failf("Acquire queued the request as waiter %d, which is zero or was used before", id)
		}
		h.reqs[id] = mWaitReq{sess: o.Session, req: o.Req, keys: mDistinct(o.Req.Keys)}
		h.arrival[id] = len(h.arrival)
		h.live[id] = true
		h.lastWaiter = max(h.lastWaiter, id)
	}
}

// compareOutcome compares the answer of a call with the model's.
func (h *Harness) compareOutcome(o Op, got Outcome, want mExpect) {
	if len(want.errs) > 0 {
		if got.Err == nil {
			Failf("%v: got success, want an error wrapping one of %v", o, want.errs)
		}
		if !slices.ContainsFunc(want.errs, func(e error) bool { return errors.Is(got.Err, e) }) {
			Failf("%v: got error %q, want one wrapping one of %v", o, got.Err, want.errs)
		}
		if errors.Is(got.Err, latch.ErrWouldBlock) {
			var be *latch.BusyError
			if !errors.As(got.Err, &be) || !slices.Equal(be.Keys, want.busy) {
				Failf("%v: got %#v, want a *latch.BusyError with keys %q", o, got.Err, want.busy)
			}
		}
		return
	}
	if got.Err != nil {
		Failf("%v: got error %q, want success", o, got.Err)
	}
	switch o.Kind {
	case OpAcquire:
		wantRes := engine.Result{Waiter: got.Res.Waiter}
		if want.granted {
			wantRes = engine.Result{Granted: true, Token: want.token, Expires: want.expires}
		}
		if got.Res != wantRes || (!want.granted && got.Res.Waiter == 0) {
			Failf("%v: got %+v, want %+v", o, got.Res, wantRes)
		}
	case OpReleaseAll, OpForceRelease:
		if got.N != want.n {
			Failf("%v: released %d holds, want %d", o, got.N, want.n)
		}
	case OpRenew:
		if got.Token != want.token || got.Expires != want.exp {
			Failf("%v: got token %d, lease end %d; want %d, %d", o, got.Token, got.Expires, want.token, want.exp)
		}
	}
}

// compareEvents compares the events of one call as multisets.
func (h *Harness) compareEvents(got []engine.Event) {
	want := h.model.events
	canon := func(evs []engine.Event) []string {
		out := make([]string, len(evs))
		for i, ev := range evs {
			out[i] = ev.String()
		}
		slices.Sort(out)
		return out
	}
	if !slices.Equal(canon(got), canon(want)) {
		Failf("events differ\nengine: %s\nmodel:  %s", mEventsString(got), mEventsString(want))
	}
}

func mEventsString(evs []engine.Event) string {
	if len(evs) == 0 {
		return "(none)"
	}
	s := make([]string, len(evs))
	for i, ev := range evs {
		s[i] = ev.String()
	}
	return strings.Join(s, " | ")
}

// modelSnapshot is the engine's table as its introspection shows it.
type modelSnapshot struct {
	now      int64
	keys     []engine.KeyState
	sessions []engine.SessionState
	stats    engine.Stats
	next     int64
	hasNext  bool
}

func (h *Harness) snapshot() modelSnapshot {
	s := modelSnapshot{
		now:      h.eng().Now(),
		keys:     h.eng().Keys("", "", 0),
		sessions: h.eng().Sessions(),
		stats:    h.eng().Stats(),
	}
	s.next, s.hasNext = h.eng().NextDeadline()
	return s
}

// compareState compares the engine's table with the model's, and the
// engine's single-item introspection with its list introspection.
func (h *Harness) compareState(post modelSnapshot) {
	m := h.model
	want := modelSnapshot{now: m.now, keys: m.keyStates(), sessions: m.sessionStates()}
	want.stats = m.stats(len(want.keys))
	want.next, want.hasNext = m.nextDeadline()
	if !reflect.DeepEqual(post.normalized(), want.normalized()) {
		got, want := post.lines(), want.lines()
		var b strings.Builder
		b.WriteString("tables differ (! marks a line that differs)\n")
		for i := range max(len(got), len(want)) {
			g, w := mLineAt(got, i), mLineAt(want, i)
			mark := " "
			if g != w {
				mark = "!"
			}
			fmt.Fprintf(&b, "%s engine: %s\n%s model:  %s\n", mark, g, mark, w)
		}
		Failf("%s", b.String())
	}

	queries := []struct {
		prefix, after string
		limit         int
	}{{"b", "", 0}, {"", "b", 0}, {"", "a", 2}, {"c", "a", 1}, {"zz", "", 0}}
	for i := range 2 { // two of them per step, in turn
		q := queries[(2*len(h.log)+i)%len(queries)]
		var want []engine.KeyState
		for _, k := range post.keys {
			if strings.HasPrefix(k.Key, q.prefix) && k.Key > q.after && (q.limit <= 0 || len(want) < q.limit) {
				want = append(want, k)
			}
		}
		if got := h.eng().Keys(q.prefix, q.after, q.limit); len(got) != len(want) || (len(got) > 0 && !reflect.DeepEqual(got, want)) {
			Failf("Keys(%q, %q, %d) = %+v, want %+v", q.prefix, q.after, q.limit, got, want)
		}
	}
	for _, k := range post.keys {
		if one, ok := h.eng().Key(k.Key); !ok || !reflect.DeepEqual(one, k) {
			Failf("Key(%q) = %+v, %v; Keys lists %+v", k.Key, one, ok, k)
		}
	}
	for _, name := range append(slices.Clone(modelKeys), "zz") {
		if _, ok := h.eng().Key(name); ok != slices.ContainsFunc(post.keys, func(k engine.KeyState) bool { return k.Key == name }) {
			Failf("Key(%q) reports ok=%v, unlike Keys", name, ok)
		}
	}
	for _, s := range post.sessions {
		if one, ok := h.eng().Session(s.ID); !ok || one != s {
			Failf("Session(%d) = %+v, %v; Sessions lists %+v", s.ID, one, ok, s)
		}
		if held, want := h.eng().Held(s.ID), m.heldKeys(s.ID); !slices.Equal(held, want) {
			Failf("Held(%d) = %q, want %q", s.ID, held, want)
		}
	}
	for _, id := range h.ended {
		if _, ok := h.eng().Session(id); ok || h.eng().Held(id) != nil {
			Failf("Session(%d) or Held(%d) reports a session that ended", id, id)
		}
	}
}

func mLineAt(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return "(none)"
}

// normalized returns a copy of s to compare: Mode means nothing for a key
// without holders (see latch.KeyInfo), and an empty list is nil.
func (s modelSnapshot) normalized() modelSnapshot {
	s.keys = slices.Clone(s.keys)
	for i := range s.keys {
		k := &s.keys[i]
		if len(k.Holders) == 0 {
			k.Mode, k.Holders = 0, nil
		}
		if len(k.Waiters) == 0 {
			k.Waiters = nil
		}
	}
	if len(s.keys) == 0 {
		s.keys = nil
	}
	if len(s.sessions) == 0 {
		s.sessions = nil
	}
	return s
}

// lines formats a table one line per key and session, for a failure
// report. Mode is left out for a key without holders, as in normalized.
func (s modelSnapshot) lines() []string {
	var out []string
	for _, k := range s.keys {
		line := fmt.Sprintf("key %s", k.Key)
		if len(k.Holders) > 0 {
			line += " " + k.Mode.String()
		}
		line += fmt.Sprintf(" limit=%d delayed-until=%d holders=[", k.Limit, k.DelayedUntil)
		for i, hs := range k.Holders {
			if i > 0 {
				line += " "
			}
			line += fmt.Sprintf("s%d:tok%d:acq%d:exp%d", hs.Session, hs.Token, hs.Acquired, hs.Expires)
		}
		line += "] queue=["
		for i, w := range k.Waiters {
			if i > 0 {
				line += " "
			}
			line += fmt.Sprintf("#%d:w%d:s%d:%v/%d:since%d:deadline%d:%q", w.Position, w.ID, w.Session, w.Mode, w.Limit, w.Since, w.Deadline, w.Keys)
		}
		out = append(out, line+"]")
	}
	for _, ss := range s.sessions {
		out = append(out, fmt.Sprintf("session s%d opened=%d ttl=%s lockdelay=%s expires=%d held=%d waiting=%d",
			ss.ID, ss.Opened, mFmtDur(ss.TTL), mFmtDur(ss.LockDelay), ss.Expires, ss.Held, ss.Waiting))
	}
	out = append(out, fmt.Sprintf("stats %+v", s.stats))
	if s.hasNext {
		out = append(out, fmt.Sprintf("next deadline %d", s.next))
	} else {
		out = append(out, "no next deadline")
	}
	return append(out, fmt.Sprintf("now %d", s.now))
}

// ---------------------------------------------------------------------------
// Invariants: checked on the engine's answers alone.

// checkInvariants runs the checks that need no model, on the snapshots
// before and after a call and on its answer.
func (h *Harness) checkInvariants(o Op, pre modelSnapshot, got Outcome, post modelSnapshot) {
	h.checkTime(o, pre, got.Events, post)
	h.checkWaiters(o, got, post)
	h.checkTokens(o, got, post)
	h.checkExpiryInstants(pre, got.Events, post)
	h.checkNoOvertaking(o, pre, got)
	h.checkHolders(post)
	h.checkQueues(post)
	h.checkNothingOverdue(post)
	h.checkEndedSessions(o, got, post)
	h.checkNoDeadlock(post)
}

// checkTime: time never runs backwards, events come in time order within
// the call's span, and at one instant expiries come before deadlines.
func (h *Harness) checkTime(o Op, pre modelSnapshot, evs []engine.Event, post modelSnapshot) {
	if want := max(pre.now, o.Now); post.now != want {
		Failf("Now() = %d after a call at %d from %d; want %d", post.now, o.Now, pre.now, want)
	}
	last, deadlineAt := pre.now, int64(-1)
	for _, ev := range evs {
		if ev.At < last || ev.At > post.now {
			Failf("event %s out of time order (previous instant %d, call at %d)", ev.String(), last, post.now)
		}
		last = ev.At
		switch ev.Kind {
		case engine.EventTimedOut:
			deadlineAt = ev.At
		case engine.EventLeaseExpired, engine.EventSessionExpired:
			if ev.At == deadlineAt {
				Failf("event %s comes after a deadline of the same instant: expiries go first", ev.String())
			}
		}
	}
}

// checkWaiters: every queued request ends exactly once (granted, timed out,
// aborted or cancelled), aborted only when its session ends, and the
// requests queued in the table are exactly those that have not ended.
func (h *Harness) checkWaiters(o Op, got Outcome, post modelSnapshot) {
	ending := make(map[latch.SessionID]bool) // sessions that ended in this call
	if o.Kind == OpEndSession && got.Err == nil {
		ending[o.Session] = true
	}
	for _, ev := range got.Events {
		switch ev.Kind {
		case engine.EventSessionExpired:
			ending[ev.Session] = true
		case engine.EventGranted, engine.EventTimedOut, engine.EventAborted:
			if !h.live[ev.Waiter] {
				Failf("event %s for a request that is not waiting", ev.String())
			}
			if ev.Session != h.reqs[ev.Waiter].sess {
				Failf("event %s names the wrong session: w%d belongs to s%d", ev.String(), ev.Waiter, h.reqs[ev.Waiter].sess)
			}
			if ev.Kind == engine.EventAborted && !ending[ev.Session] {
				Failf("event %s, but session s%d did not end", ev.String(), ev.Session)
			}
			delete(h.live, ev.Waiter)
		}
	}
	if o.Kind == OpCancel {
		if got.Err == nil {
			if !h.live[o.Waiter] {
				Failf("Cancel(w%d) succeeded, but the request was not waiting", o.Waiter)
			}
			delete(h.live, o.Waiter)
		} else if h.live[o.Waiter] {
			Failf("Cancel(w%d) failed (%v), but the request is waiting", o.Waiter, got.Err)
		}
	}
	queued := make(map[engine.WaiterID]bool)
	for _, k := range post.keys {
		for _, w := range k.Waiters {
			queued[w.ID] = true
		}
	}
	if !maps.Equal(queued, h.live) || post.stats.Waiters != len(h.live) {
		Failf("the table queues %v (Stats says %d), but the requests still waiting are %v", mSortedIDs(queued), post.stats.Waiters, mSortedIDs(h.live))
	}
}

func mSortedIDs(m map[engine.WaiterID]bool) []engine.WaiterID {
	return slices.Sorted(maps.Keys(m))
}

// mGrant is one grant of a call: a queued request's or the Acquire's.
type mGrant struct {
	sess  latch.SessionID
	req   latch.LockRequest
	keys  []string
	token latch.Token
}

// grants lists the grants of a call, in order.
func (h *Harness) grants(o Op, got Outcome) []mGrant {
	var gs []mGrant
	for _, ev := range got.Events {
		if ev.Kind == engine.EventGranted {
			r := h.reqs[ev.Waiter]
			gs = append(gs, mGrant{r.sess, r.req, r.keys, ev.Token})
		}
	}
	if o.Kind == OpAcquire && got.Err == nil && got.Res.Granted {
		gs = append(gs, mGrant{o.Session, o.Req, mDistinct(o.Req.Keys), got.Res.Token})
	}
	return gs
}

// checkTokens: tokens strictly increase across grants, except a
// RelockReuse grant of keys all held, which returns an existing token.
// It records the mode and limit of every grant for checkHolders.
func (h *Harness) checkTokens(o Op, got Outcome, post modelSnapshot) {
	for _, g := range h.grants(o, got) {
		switch {
		case g.token > h.maxToken:
			h.maxToken = g.token
		case g.req.Relock != latch.RelockReuse:
			Failf("a grant to s%d got token %d, not above the last token %d", g.sess, g.token, h.maxToken)
		}
		for _, k := range g.keys {
			h.ghost[mGhostKey{k, g.token}] = g.req.Mode
			h.ghostLimit[mGhostKey{k, g.token}] = g.req.Limit
		}
	}
	if post.stats.Token != h.maxToken {
		Failf("Stats().Token = %d, but the last token granted is %d", post.stats.Token, h.maxToken)
	}
}

// checkExpiryInstants: a lease ends exactly at its end, and the hold is
// gone; a session expires exactly at its TTL's end. It follows the holds of
// the table through the events of the call.
func (h *Harness) checkExpiryInstants(pre modelSnapshot, evs []engine.Event, post modelSnapshot) {
	type held struct {
		key     string
		sess    latch.SessionID // 0 once the session ended
		expires int64
	}
	var holds []*held
	for _, k := range pre.keys {
		for _, hs := range k.Holders {
			holds = append(holds, &held{k.Key, hs.Session, hs.Expires})
		}
	}
	sessionExpires := make(map[latch.SessionID]int64)
	for _, s := range pre.sessions {
		sessionExpires[s.ID] = s.Expires
	}
	for _, ev := range evs {
		switch ev.Kind {
		case engine.EventGranted:
			for _, k := range h.reqs[ev.Waiter].keys {
				i := slices.IndexFunc(holds, func(x *held) bool { return x.key == k && x.sess == ev.Session })
				if i < 0 {
					holds = append(holds, &held{k, ev.Session, ev.Expires})
				} else {
					holds[i].expires = ev.Expires
				}
			}
		case engine.EventLeaseExpired:
			i := slices.IndexFunc(holds, func(x *held) bool {
				return x.key == ev.Key && x.sess == ev.Session && x.expires == ev.At
			})
			if i < 0 {
				Failf("event %s: no lease on %s of s%d ends at %d", ev.String(), ev.Key, ev.Session, ev.At)
			}
			holds = slices.Delete(holds, i, i+1)
			for _, k := range post.keys {
				if k.Key == ev.Key && slices.ContainsFunc(k.Holders, func(hs engine.HolderState) bool { return hs.Token == ev.Token }) {
					Failf("event %s, but the hold is still there: %+v", ev.String(), k.Holders)
				}
			}
		case engine.EventSessionExpired:
			if exp := sessionExpires[ev.Session]; exp != ev.At {
				Failf("event %s: the session's TTL ends at %d", ev.String(), exp)
			}
			holds = slices.DeleteFunc(holds, func(x *held) bool { return x.sess == ev.Session && x.expires == 0 })
			for _, x := range holds {
				if x.sess == ev.Session {
					x.sess = 0
				}
			}
		}
	}
}

// checkNoOvertaking: no request is granted while an earlier conflicting
// request on one of its keys still waits, unless it re-locks (RelockReuse)
// a key its session holds in the same mode. Only mode conflicts are
// checked here; limits are the model's business. A request cancelled by
// the call counts as gone from the start of the call.
func (h *Harness) checkNoOvertaking(o Op, pre modelSnapshot, got Outcome) {
	queues := make(map[string][]engine.WaiterState)
	waiting := make(map[engine.WaiterID]bool)
	type sessKey struct {
		sess latch.SessionID
		key  string
	}
	held := make(map[sessKey]latch.Mode) // what sessions held before, or took in the call
	for _, k := range pre.keys {
		queues[k.Key] = k.Waiters
		for _, w := range k.Waiters {
			waiting[w.ID] = true
		}
		for _, hs := range k.Holders {
			held[sessKey{hs.Session, k.Key}] = k.Mode
		}
	}
	if o.Kind == OpCancel && got.Err == nil {
		delete(waiting, o.Waiter)
	}
	check := func(id engine.WaiterID, g mGrant) {
		for _, k := range g.keys {
			if m, ok := held[sessKey{g.sess, k}]; ok && m == g.req.Mode && g.req.Relock == latch.RelockReuse {
				continue
			}
			for _, x := range queues[k] {
				if x.ID == id {
					break
				}
				if waiting[x.ID] && (x.Mode == latch.Exclusive || g.req.Mode == latch.Exclusive) {
					Failf("a grant to s%d of %q (%v) overtook w%d (%v), which still waits on %s", g.sess, g.keys, g.req.Mode, x.ID, x.Mode, k)
				}
			}
		}
		for _, k := range g.keys {
			held[sessKey{g.sess, k}] = g.req.Mode
		}
	}
	for _, ev := range got.Events {
		switch ev.Kind {
		case engine.EventGranted:
			r := h.reqs[ev.Waiter]
			check(ev.Waiter, mGrant{r.sess, r.req, r.keys, ev.Token})
			delete(waiting, ev.Waiter)
		case engine.EventTimedOut, engine.EventAborted:
			delete(waiting, ev.Waiter)
		}
	}
	if o.Kind == OpAcquire && got.Err == nil && got.Res.Granted {
		check(0, mGrant{o.Session, o.Req, mDistinct(o.Req.Keys), got.Res.Token})
	}
}

// checkHolders: never two exclusive holders, nor an exclusive holder
// beside another; shared holders within their limit, all agreeing on it.
// Modes and limits come from the grants, not from the engine's key.
func (h *Harness) checkHolders(post modelSnapshot) {
	for _, k := range post.keys {
		if len(k.Holders) == 0 {
			continue
		}
		var modes []latch.Mode
		var limits []uint32
		for _, hs := range k.Holders {
			gk := mGhostKey{k.Key, hs.Token}
			m, ok := h.ghost[gk]
			if !ok {
				Failf("key %s has a holder (s%d) with token %d, which no grant of that key handed out", k.Key, hs.Session, hs.Token)
			}
			modes = append(modes, m)
			limits = append(limits, h.ghostLimit[gk])
		}
		switch {
		case slices.Contains(modes, latch.Exclusive) && len(modes) > 1:
			Failf("key %s has an exclusive holder beside others: %+v", k.Key, k.Holders)
		case modes[0] == latch.Shared && slices.ContainsFunc(limits, func(l uint32) bool { return l != limits[0] }):
			Failf("shared holders of %s disagree on the limit: %v", k.Key, limits)
		case modes[0] == latch.Shared && limits[0] > 0 && len(modes) > int(limits[0]):
			Failf("key %s has %d shared holders, above its limit %d", k.Key, len(modes), limits[0])
		case k.Mode != modes[0]:
			Failf("key %s reports mode %v, but its holders hold it %v", k.Key, k.Mode, modes[0])
		case modes[0] == latch.Shared && k.Limit != limits[0]:
			Failf("key %s reports limit %d, but its holders agreed on %d", k.Key, k.Limit, limits[0])
		}
	}
}

// checkQueues: every queue is in arrival order (so all queues agree on
// it), and a request is queued on exactly the keys it asked for, as it
// asked.
func (h *Harness) checkQueues(post modelSnapshot) {
	seen := make(map[engine.WaiterID][]string)
	for _, k := range post.keys {
		for i, w := range k.Waiters {
			r := h.reqs[w.ID]
			switch {
			case w.Position != i:
				Failf("key %s: w%d is at position %d but reports %d", k.Key, w.ID, i, w.Position)
			case i > 0 && h.arrival[w.ID] < h.arrival[k.Waiters[i-1].ID]:
				Failf("key %s: w%d is queued behind w%d, which arrived later", k.Key, k.Waiters[i-1].ID, w.ID)
			case w.Session != r.sess || w.Mode != r.req.Mode || w.Limit != r.req.Limit || !slices.Equal(w.Keys, r.keys):
				Failf("key %s: w%d reports %+v, but the request was s%d %v/%d %q", k.Key, w.ID, w, r.sess, r.req.Mode, r.req.Limit, r.keys)
			}
			seen[w.ID] = append(seen[w.ID], k.Key)
		}
	}
	for id, keys := range seen {
		want := slices.Sorted(slices.Values(h.reqs[id].keys))
		if !slices.Equal(keys, want) {
			Failf("w%d is queued on %q, but asked for %q", id, keys, want)
		}
	}
}

// checkNothingOverdue: after a call nothing is pending at or before now,
// and NextDeadline is the earliest pending instant of the table.
func (h *Harness) checkNothingOverdue(post modelSnapshot) {
	earliest, pending := int64(math.MaxInt64), false
	check := func(t int64, format string, args ...any) {
		if t == 0 {
			return
		}
		if t <= post.now {
			Failf("%s at %d is overdue at %d", fmt.Sprintf(format, args...), t, post.now)
		}
		earliest, pending = min(earliest, t), true
	}
	for _, k := range post.keys {
		check(k.DelayedUntil, "the lock-delay of %s", k.Key)
		for _, hs := range k.Holders {
			check(hs.Expires, "the lease of s%d on %s", hs.Session, k.Key)
		}
		for _, w := range k.Waiters {
			check(w.Deadline, "the deadline of w%d", w.ID)
		}
	}
	for _, s := range post.sessions {
		check(s.Expires, "the TTL of s%d", s.ID)
	}
	if post.hasNext != pending || (pending && post.next != earliest) {
		Failf("NextDeadline() = %d, %v; the earliest pending instant is %d, %v", post.next, post.hasNext, earliest, pending)
	}
}

// checkEndedSessions: an ended session is gone, and so is everything it
// held or waited for, at once (its leases stay, detached).
func (h *Harness) checkEndedSessions(o Op, got Outcome, post modelSnapshot) {
	if o.Kind == OpEndSession && got.Err == nil {
		h.ended = append(h.ended, o.Session)
	}
	for _, ev := range got.Events {
		if ev.Kind == engine.EventSessionExpired {
			h.ended = append(h.ended, ev.Session)
		}
	}
	for _, id := range h.ended {
		if slices.ContainsFunc(post.sessions, func(s engine.SessionState) bool { return s.ID == id }) {
			Failf("session s%d ended but is listed", id)
		}
		for _, k := range post.keys {
			for _, hs := range k.Holders {
				if hs.Session == id {
					Failf("session s%d ended but still holds %s", id, k.Key)
				}
			}
			for _, w := range k.Waiters {
				if w.Session == id {
					Failf("session s%d ended but w%d still waits on %s", id, w.ID, k.Key)
				}
			}
		}
	}
}

// checkNoDeadlock: the earliest waiter has nobody ahead of it, so only a
// holder or a lock-delay on one of its keys may keep it waiting.
func (h *Harness) checkNoDeadlock(post modelSnapshot) {
	var first engine.WaiterID
	for id := range h.live {
		if first == 0 || h.arrival[id] < h.arrival[first] {
			first = id
		}
	}
	if first == 0 {
		return
	}
	r := h.reqs[first]
	for _, k := range post.keys {
		if !slices.Contains(r.keys, k.Key) {
			continue
		}
		if r.req.Relock == latch.RelockReuse && len(k.Holders) > 0 && k.Mode == r.req.Mode &&
			slices.ContainsFunc(k.Holders, func(hs engine.HolderState) bool { return hs.Session == r.sess }) {
			continue // re-lock of a key it holds
		}
		switch {
		case k.DelayedUntil != 0:
			return
		case len(k.Holders) == 0:
		case r.req.Mode == latch.Exclusive || k.Mode == latch.Exclusive:
			return
		case r.req.Limit > 0 && len(k.Holders) >= int(r.req.Limit):
			return
		}
	}
	Failf("deadlock: the earliest waiter w%d (s%d %v %q) is blocked by no holder and no lock-delay", first, r.sess, r.req.Mode, r.keys)
}

// ---------------------------------------------------------------------------
// Generating operations

func (h *Harness) rare() bool { return h.src.intn(100) == 0 }

func mPick[T any](h *Harness, xs []T) T { return xs[h.src.intn(len(xs))] }

func (h *Harness) nextOp() Op {
	o := Op{Now: h.nextNow()}
	m := h.model
	if len(m.sessions) == 0 || (len(m.sessions) < modelMaxSessions && h.src.intn(10) == 0) {
		o.Kind = OpOpen
		o.Opts.TTL = mPick(h, []time.Duration{0, 0, 0, 30, 100, 300})
		o.Opts.LockDelay = mPick(h, []time.Duration{0, 0, 5, 10, 20})
		switch h.src.intn(50) {
		case 0:
			o.Opts.TTL = -5 // treated as none
		case 1:
			o.Opts.LockDelay = -5
		case 2:
			o.Opts.TTL = modelHuge
		case 3:
			o.Opts.LockDelay = modelHuge
		}
		return o
	}
	switch r := h.src.intn(100); {
	case r < 36:
		o.Kind = OpAcquire
		o.Session = h.pickSession()
		o.Req = h.genRequest()
	case r < 48:
		o.Kind = OpRelease
		o.Session = h.pickSession()
		o.Keys = h.pickHeldKeys(o.Session)
	case r < 52:
		o.Kind = OpReleaseAll
		o.Session = h.pickSession()
	case r < 58:
		o.Kind = OpRenew
		o.Session = h.pickSession()
		o.Keys = h.pickHeldKeys(o.Session)
		o.Lease = mPick(h, []time.Duration{0, 5, 10, 20, 50})
		if h.rare() {
			o.Lease = -1
		}
	case r < 63:
		o.Kind = OpKeepAlive
		o.Session = h.pickSession()
	case r < 71:
		o.Kind = OpCancel
		o.Waiter = h.pickWaiter()
	case r < 75:
		o.Kind = OpEndSession
		o.Session = h.pickSession()
	case r < 78:
		o.Kind = OpForceRelease
		o.Key = mPick(h, slices.Concat(modelKeys, []string{"zz"}))
	default:
		o.Kind = OpTick
	}
	return o
}

// nextNow advances the harness's clock: not at all, a little, exactly to
// the next pending instant (to exercise ties), or past many at once; now
// and then the op gets an earlier instant, which the engine must treat as
// the latest it has seen.
func (h *Harness) nextNow() int64 {
	switch r := h.src.intn(100); {
	case r < 40:
	case r < 65:
		h.now += int64(1 + h.src.intn(5))
	case r < 78:
		h.now += int64(5 + h.src.intn(40))
	case r < 90:
		if t, ok := h.model.nextDeadline(); ok && t > h.now && t < modelTimeCap {
			h.now = t
		}
	case r < 96:
		h.now += int64(50 + h.src.intn(400))
	default:
		return max(h.now-int64(h.src.intn(30)), 0)
	}
	h.now = min(h.now, modelTimeCap)
	return h.now
}

// pickSession mostly picks a live session, sometimes one that ended or was
// never opened.
func (h *Harness) pickSession() latch.SessionID {
	m := h.model
	switch {
	case len(m.sessions) > 0 && h.src.intn(30) != 0:
		return mPick(h, m.sessions).id
	case len(h.ended) > 0 && h.src.intn(2) == 0:
		return mPick(h, h.ended)
	}
	return h.lastSession + 1
}

// pickWaiter mostly picks a waiting request, sometimes one that ended or
// never existed.
func (h *Harness) pickWaiter() engine.WaiterID {
	m := h.model
	if len(m.waiters) > 0 && h.src.intn(6) != 0 {
		return mPick(h, m.waiters).id
	}
	return engine.WaiterID(h.src.intn(int(h.lastWaiter) + 2))
}

// pickHeldKeys picks keys for Release and Renew: mostly keys the session
// holds (sometimes repeated), sometimes any keys, rarely none.
func (h *Harness) pickHeldKeys(sid latch.SessionID) []string {
	if h.rare() {
		return nil
	}
	from := h.model.heldKeys(sid)
	if len(from) == 0 || h.src.intn(4) == 0 {
		from = modelKeys
	}
	keys := make([]string, 1+h.src.intn(2))
	for i := range keys {
		keys[i] = mPick(h, from)
	}
	return keys
}

func (h *Harness) genRequest() latch.LockRequest {
	var r latch.LockRequest
	n := 1 + h.src.intn(3)
	switch h.src.intn(50) {
	case 0:
		n = 0 // ErrNoKeys
	case 1:
		n = 17 + h.src.intn(4) // enough for the engine to dedupe with a map
	}
	for range n {
		r.Keys = append(r.Keys, mPick(h, modelKeys))
	}
	if n > 0 && h.src.intn(60) == 0 {
		r.Keys[h.src.intn(n)] = mPick(h, modelBadKeys)
	}
	if h.src.intn(2) == 0 {
		r.Mode = latch.Shared
		r.Limit = h.limit
		if h.src.intn(4) == 0 {
			r.Limit = uint32(h.src.intn(4))
		}
	}
	r.Wait = mPick(h, []time.Duration{latch.NoWait, latch.NoWait, latch.NoWait, latch.WaitForever, latch.WaitForever, 1, 5, 10, 20, 50})
	r.Lease = mPick(h, []time.Duration{0, 0, 0, 0, 0, 5, 10, 20, 50})
	if h.src.intn(5) < 2 {
		r.Relock = latch.RelockReuse
	}
	// Now and then one thing is wrong or extreme.
	switch h.src.intn(100) {
	case 0:
		r.Mode = 2
	case 1:
		if r.Mode == latch.Exclusive {
			r.Limit = 1
		}
	case 2:
		r.Wait = -5
	case 3:
		r.Lease = -1
	case 4:
		r.Relock = 9
	case 5:
		r.Wait = modelHuge
	case 6:
		r.Lease = modelHuge
	}
	return r
}

// ---------------------------------------------------------------------------
// Draining

// drain ends a sequence. Round after round it lifts what no session can
// release (lock-delays, and leases whose session ended), either by letting
// time pass or by ForceRelease, and has every session release everything,
// until no request waits. A round in which no time passes must grant (or
// end) the earliest waiter, which is blocked only by holders and
// lock-delays: a queue that does not shrink is a deadlock. Then it ends
// every session, clears the table and checks that it is empty.
func (h *Harness) drain() {
	h.log = append(h.log, "---- drain ----")
	for round := 0; len(h.live) > 0; round++ {
		if round > 200 {
			Failf("the queue does not drain: %d requests still wait", len(h.live))
		}
		before := len(h.live)
		obstacles, until := h.obstacles()
		letTimePass := round < 3 && until < modelTimeCap && h.src.intn(2) == 0
		if letTimePass {
			h.now = max(h.now, until)
			h.step(Op{Kind: OpTick, Now: h.now})
		} else {
			for _, k := range obstacles {
				h.step(Op{Kind: OpForceRelease, Now: h.now, Key: k})
			}
		}
		for _, s := range slices.Clone(h.model.sessions) {
			h.step(Op{Kind: OpReleaseAll, Now: h.now, Session: s.id})
		}
		if !letTimePass && len(h.live) >= before {
			Failf("deadlock: %d requests still wait after everything was released", len(h.live))
		}
	}
	for _, s := range slices.Clone(h.model.sessions) {
		h.step(Op{Kind: OpEndSession, Now: h.now, Session: s.id})
	}
	for _, k := range h.eng().Keys("", "", 0) {
		h.step(Op{Kind: OpForceRelease, Now: h.now, Key: k.Key})
	}
	post := h.snapshot()
	if post.stats != (engine.Stats{Token: h.maxToken}) || post.hasNext || len(post.keys) > 0 || len(h.live) > 0 {
		Failf("the table is not empty after the drain: %+v, next deadline %v, %d keys, waiting %v",
			post.stats, post.hasNext, len(post.keys), mSortedIDs(h.live))
	}
}

// obstacles returns the keys under lock-delay or held by a lease whose
// session ended, and the instant the last of them ends.
func (h *Harness) obstacles() ([]string, int64) {
	var keys []string
	var until int64
	for _, k := range h.eng().Keys("", "", 0) {
		blocked := k.DelayedUntil != 0
		until = max(until, k.DelayedUntil)
		for _, hs := range k.Holders {
			if hs.Session == 0 {
				blocked = true
				until = max(until, hs.Expires)
			}
		}
		if blocked {
			keys = append(keys, k.Key)
		}
	}
	return keys, until
}
