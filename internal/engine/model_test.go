package engine

// Model-based randomized test of the engine.
//
// A harness drives an Engine and a reference model with the same random
// sequence of operations: sessions opened (with and without TTL and
// lock-delay), acquired keys (shared and exclusive, with limits, waits,
// leases and both re-lock policies), releases, renewals, keepalives,
// cancellations, ended sessions, forced releases, and time that stands
// still, creeps, lands exactly on pending instants or jumps past many. After
// every step it checks
//
//   - the engine against the model: the result of the call, the events it
//     reported, and the table it left (Keys, Key, Sessions, Session, Held,
//     Stats, NextDeadline, Now);
//   - invariants that must hold whatever the model says (checkInvariants),
//     computed from the engine's answers alone;
//
// and it ends every sequence by draining the table (drain), which checks
// that no request stays queued once nothing holds it back.
//
// The model is a plain restatement of the rules in doc.go: slices scanned
// from the start for every question, no indexes, no incremental state.
// Where doc.go leaves a choice open, the model either accepts every answer
// or follows the engine:
//
//   - which error a call reports when several apply: the model gives the
//     set of acceptable ones;
//   - the order of the events of one call: they are compared as a multiset
//     (each event carries its instant), and their order is checked by
//     invariants (checkTime);
//   - which request goes first when several become grantable at once: the
//     model grants first the one the engine reported first (refModel.hint),
//     falling back to arrival order, and never grants a request the rules do
//     not allow. The order matters: it decides the tokens, and the token a
//     session's hold ends up with when two of its requests share a key;
//   - the order in which an ending session releases its keys, which decides
//     how its lock-delays tie: newest hold first, as the engine does.
//
// With those, tokens, leases and the table are compared exactly.
//
// Running it:
//
//	go test ./internal/engine/ -run 'TestModel$'                          # the default sequences
//	LATCH_MODEL_ITERS=200000 go test ./internal/engine/ -run 'TestModel$' # a longer run, random base seed
//	go test ./internal/engine/ -run 'TestModel$' -v -model.seed=N         # replay one sequence, with its log
//	LATCH_MODEL_SEED=N go test ./internal/engine/ -run 'TestModel$' -v    # the same
//	go test ./internal/engine/ -run '^$' -fuzz FuzzEngine                 # coverage-guided (fuzz_test.go)
//
// A failure prints the seed, the operations so far with the engine's
// answers, and what differed.

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"reflect"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch"
)

var flagModelSeed = flag.Uint64("model.seed", 0, "replay the TestModel sequence with this seed (or set LATCH_MODEL_SEED)")

const (
	// defaultModelIters is the number of sequences of a plain go test run;
	// LATCH_MODEL_ITERS overrides it.
	defaultModelIters = 700
	// modelBaseSeed is the first seed of a default run, so that CI runs
	// are reproducible. Long runs (LATCH_MODEL_ITERS) start at a random
	// seed, which they log.
	modelBaseSeed = 0x1a7c4
	// modelMaxSessions bounds the live sessions of a sequence.
	modelMaxSessions = 4
	// modelTimeCap bounds the harness's clock. Durations may still saturate at
	// math.MaxInt64, but the clock never gets there.
	modelTimeCap = 1 << 50
)

// modelKeys are the keys of a sequence: few, so that requests collide.
var modelKeys = []string{"a", "b", "c", "d"}

// modelBadKeys are keys latch.CheckKey rejects.
var modelBadKeys = []string{"", "x y", "x\r", "x\n", strings.Repeat("k", latch.MaxKeyLen+1)}

// modelHuge is a duration that saturates every instant it is added to.
const modelHuge = time.Duration(math.MaxInt64)

// TestModel runs random sequences against the engine and the model, each
// from its own seed (see the top of the file).
func TestModel(t *testing.T) {
	if seed, ok := modelReplaySeed(t); ok {
		log, err := runModelSeed(seed)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("seed %d passed:\n%s", seed, log)
		return
	}
	iters, base := defaultModelIters, uint64(modelBaseSeed)
	if s := os.Getenv("LATCH_MODEL_ITERS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			t.Fatalf("LATCH_MODEL_ITERS=%q: want a positive number", s)
		}
		iters, base = n, rand.Uint64()>>1
	} else if testing.Short() {
		iters /= 10
	}
	t.Logf("%d sequences, seeds %d to %d", iters, base, base+uint64(iters)-1)
	for i := range iters {
		if _, err := runModelSeed(base + uint64(i)); err != nil {
			t.Fatal(err)
		}
	}
}

// modelReplaySeed returns the seed to replay, from -model.seed or
// LATCH_MODEL_SEED.
func modelReplaySeed(t *testing.T) (uint64, bool) {
	if *flagModelSeed != 0 {
		return *flagModelSeed, true
	}
	if s := os.Getenv("LATCH_MODEL_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 0, 64)
		if err != nil {
			t.Fatalf("LATCH_MODEL_SEED=%q: %v", s, err)
		}
		return seed, true
	}
	return 0, false
}

// runModelSeed runs the sequence of one seed and returns its operation log.
func runModelSeed(seed uint64) (string, error) {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	src := &modelRNG{r: r, ops: 100 + r.IntN(200)}
	log, err := runModelSequence(src)
	if err != nil {
		return log, fmt.Errorf("seed %d (replay: go test ./internal/engine/ -run 'TestModel$' -v -model.seed=%d)\n%w", seed, seed, err)
	}
	return log, nil
}

// modelSource supplies the choices of a sequence: a seeded PRNG for TestModel,
// the fuzzer's bytes for FuzzEngine.
type modelSource interface {
	// intn returns a choice in [0, n); n > 0.
	intn(n int) int
	// more reports whether the sequence goes on with another operation.
	more() bool
}

// modelRNG is the modelSource of TestModel.
type modelRNG struct {
	r   *rand.Rand
	ops int // operations left
}

func (s *modelRNG) intn(n int) int { return s.r.IntN(n) }

func (s *modelRNG) more() bool {
	s.ops--
	return s.ops >= 0
}

// modelFailure is what the harness panics with when a check fails;
// runModelSequence recovers it.
type modelFailure string

func modelFailf(format string, args ...any) {
	panic(modelFailure(fmt.Sprintf(format, args...)))
}

// runModelSequence runs one sequence of operations chosen by src, then drains
// the table. It returns the operation log and, on failure, an error that
// includes it.
func runModelSequence(src modelSource) (log string, err error) {
	h := newModelHarness(src)
	defer func() {
		if r := recover(); r != nil {
			msg, ok := r.(modelFailure)
			if !ok {
				msg = modelFailure(fmt.Sprintf("harness panicked: %v\n%s", r, debug.Stack()))
			}
			log = h.opLog()
			err = fmt.Errorf("%s\n\n%s", msg, log)
		}
	}()
	for src.more() {
		h.step(h.nextOp())
	}
	h.drain()
	return h.opLog(), nil
}

// ---------------------------------------------------------------------------
// Operations

type modelOpKind uint8

const (
	mOpen modelOpKind = iota
	mAcquire
	mRelease
	mReleaseAll
	mRenew
	mKeepAlive
	mCancel
	mEndSession
	mForceRelease
	mTick
)

// modelOp is one call of the engine's API.
type modelOp struct {
	kind   modelOpKind
	now    int64
	sess   latch.SessionID
	waiter WaiterID
	keys   []string // Release, Renew
	key    string   // ForceRelease
	lease  time.Duration
	req    latch.LockRequest
	opts   SessionOptions
}

func (o modelOp) String() string {
	at := fmt.Sprintf("@%d ", o.now)
	switch o.kind {
	case mOpen:
		return at + fmt.Sprintf("open ttl=%s lockdelay=%s", mFmtDur(o.opts.TTL), mFmtDur(o.opts.LockDelay))
	case mAcquire:
		r := o.req
		mode := r.Mode.String()
		if r.Mode == latch.Shared {
			mode += fmt.Sprintf("/%d", r.Limit)
		} else if r.Limit != 0 {
			mode += fmt.Sprintf("/limit=%d", r.Limit)
		}
		wait := mFmtDur(r.Wait)
		switch r.Wait {
		case latch.NoWait:
			wait = "nowait"
		case latch.WaitForever:
			wait = "forever"
		}
		relock := "reject"
		switch r.Relock {
		case latch.RelockReject:
		case latch.RelockReuse:
			relock = "reuse"
		default:
			relock = fmt.Sprintf("relock=%d", r.Relock)
		}
		return at + fmt.Sprintf("acquire s%d %q %s wait=%s lease=%s %s", o.sess, r.Keys, mode, wait, mFmtDur(r.Lease), relock)
	case mRelease:
		return at + fmt.Sprintf("release s%d %q", o.sess, o.keys)
	case mReleaseAll:
		return at + fmt.Sprintf("release-all s%d", o.sess)
	case mRenew:
		return at + fmt.Sprintf("renew s%d %q lease=%s", o.sess, o.keys, mFmtDur(o.lease))
	case mKeepAlive:
		return at + fmt.Sprintf("keepalive s%d", o.sess)
	case mCancel:
		return at + fmt.Sprintf("cancel w%d", o.waiter)
	case mEndSession:
		return at + fmt.Sprintf("end-session s%d", o.sess)
	case mForceRelease:
		return at + fmt.Sprintf("force-release %q", o.key)
	case mTick:
		return at + "tick"
	}
	return at + "?"
}

func mFmtDur(d time.Duration) string {
	if d == modelHuge {
		return "huge"
	}
	return strconv.FormatInt(int64(d), 10)
}

// modelOutcome is what the engine answered to an op.
type modelOutcome struct {
	err     error
	session latch.SessionID // OpenSession
	res     Result          // Acquire
	n       int             // ReleaseAll, ForceRelease
	tok     latch.Token     // Renew
	exp     int64           // Renew
	events  []Event         // copied: the engine reuses its slice
}

func (o modelOutcome) summary(kind modelOpKind) string {
	var b strings.Builder
	switch {
	case o.err != nil:
		b.WriteString("error: " + o.err.Error())
	case kind == mOpen:
		fmt.Fprintf(&b, "s%d", o.session)
	case kind == mAcquire && o.res.Granted:
		fmt.Fprintf(&b, "granted tok=%d exp=%d", o.res.Token, o.res.Expires)
	case kind == mAcquire:
		fmt.Fprintf(&b, "queued w%d", o.res.Waiter)
	case kind == mReleaseAll || kind == mForceRelease:
		fmt.Fprintf(&b, "n=%d", o.n)
	case kind == mRenew:
		fmt.Fprintf(&b, "tok=%d exp=%d", o.tok, o.exp)
	default:
		b.WriteString("ok")
	}
	for _, ev := range o.events {
		b.WriteString(" | " + mEventString(ev))
	}
	return b.String()
}

// mEventString formats every non-zero field of an event, so that two events
// format alike exactly when they are equal.
func mEventString(ev Event) string {
	s := fmt.Sprintf("@%d %v", ev.At, ev.Kind)
	if ev.Waiter != 0 {
		s += fmt.Sprintf(" w%d", ev.Waiter)
	}
	if ev.Session != 0 {
		s += fmt.Sprintf(" s%d", ev.Session)
	}
	if ev.Key != "" {
		s += fmt.Sprintf(" key=%s", ev.Key)
	}
	if ev.Token != 0 {
		s += fmt.Sprintf(" tok=%d", ev.Token)
	}
	if ev.Expires != 0 {
		s += fmt.Sprintf(" exp=%d", ev.Expires)
	}
	if ev.Keys != nil {
		s += fmt.Sprintf(" keys=%q", ev.Keys)
	}
	return s
}

func mCopyEvents(evs []Event) []Event {
	out := make([]Event, len(evs))
	for i, ev := range evs {
		ev.Keys = slices.Clone(ev.Keys)
		out[i] = ev
	}
	return out
}

// ---------------------------------------------------------------------------
// The harness

// modelHarness runs one sequence: it makes the operations, runs them on the
// engine and the model, and checks the answers.
type modelHarness struct {
	src   modelSource
	eng   *Engine
	model *refModel
	now   int64  // the harness's clock; an op may pass an earlier now
	limit uint32 // the shared limit most requests of the sequence ask for

	config string   // for the failure report
	log    []string // one line per op, with the engine's answer

	// Bookkeeping for the invariants, built from the engine's answers.
	reqs        map[WaiterID]mWaitReq // every request ever queued
	live        map[WaiterID]bool     // queued requests that have not ended
	arrival     map[WaiterID]int      // queue order of every request ever queued
	lastWaiter  WaiterID
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

func newModelHarness(src modelSource) *modelHarness {
	maxKeys := []int{0, 0, 0, 2, 3}[src.intn(5)]
	first := []latch.Token{0, 0, 1 << 40}[src.intn(3)]
	h := &modelHarness{
		src:        src,
		eng:        New(Config{FirstToken: first, MaxKeys: maxKeys}),
		model:      newRefModel(maxKeys, first),
		limit:      uint32(src.intn(4)),
		reqs:       make(map[WaiterID]mWaitReq),
		live:       make(map[WaiterID]bool),
		arrival:    make(map[WaiterID]int),
		sessions:   make(map[latch.SessionID]bool),
		ghost:      make(map[mGhostKey]latch.Mode),
		ghostLimit: make(map[mGhostKey]uint32),
		maxToken:   first,
	}
	h.config = fmt.Sprintf("config: MaxKeys=%d FirstToken=%d, shared limit mostly %d", maxKeys, first, h.limit)
	return h
}

func (h *modelHarness) opLog() string {
	return h.config + "\n" + strings.Join(h.log, "\n")
}

// step runs one op on the engine and on the model and checks everything.
func (h *modelHarness) step(o modelOp) {
	h.log = append(h.log, fmt.Sprintf("%4d %v", len(h.log), o))
	pre := h.snapshot()
	got := h.run(o)
	h.log[len(h.log)-1] += "  =>  " + got.summary(o.kind)

	h.checkNames(o, got)
	h.model.hint = h.model.hint[:0]
	for _, ev := range got.events {
		if ev.Kind == EventGranted {
			h.model.hint = append(h.model.hint, ev.Waiter)
		}
	}
	want := h.model.apply(o, got)
	h.compareOutcome(o, got, want)
	h.compareEvents(got.events)
	post := h.snapshot()
	h.compareState(post)
	h.checkInvariants(o, pre, got, post)
}

// run calls the engine.
func (h *modelHarness) run(o modelOp) (out modelOutcome) {
	defer func() {
		if r := recover(); r != nil {
			modelFailf("engine panicked on %v: %v\n%s", o, r, debug.Stack())
		}
	}()
	e := h.eng
	switch o.kind {
	case mOpen:
		out.session, out.events = e.OpenSession(o.now, o.opts)
	case mAcquire:
		req := o.req
		req.Keys = slices.Clone(req.Keys)
		out.res, out.events, out.err = e.Acquire(o.now, o.sess, req)
	case mRelease:
		out.events, out.err = e.Release(o.now, o.sess, slices.Clone(o.keys))
	case mReleaseAll:
		out.n, out.events, out.err = e.ReleaseAll(o.now, o.sess)
	case mRenew:
		out.tok, out.exp, out.events, out.err = e.Renew(o.now, o.sess, slices.Clone(o.keys), o.lease)
	case mKeepAlive:
		out.events, out.err = e.KeepAlive(o.now, o.sess)
	case mCancel:
		out.events, out.err = e.Cancel(o.now, o.waiter)
	case mEndSession:
		out.events, out.err = e.EndSession(o.now, o.sess)
	case mForceRelease:
		out.n, out.events = e.ForceRelease(o.now, o.key)
	case mTick:
		out.events = e.Tick(o.now)
	}
	out.events = mCopyEvents(out.events)
	return out
}

// checkNames checks the names the engine gave (session and waiter IDs are
// never reused) before the model adopts them.
func (h *modelHarness) checkNames(o modelOp, got modelOutcome) {
	switch {
	case o.kind == mOpen:
		if got.session == 0 || h.sessions[got.session] {
			modelFailf("OpenSession returned session ID %d, which is zero or was used before", got.session)
		}
		h.sessions[got.session] = true
		h.lastSession = max(h.lastSession, got.session)
	case o.kind == mAcquire && got.err == nil && !got.res.Granted:
		id := got.res.Waiter
		if _, used := h.reqs[id]; id == 0 || used {
			modelFailf("Acquire queued the request as waiter %d, which is zero or was used before", id)
		}
		h.reqs[id] = mWaitReq{sess: o.sess, req: o.req, keys: mDistinct(o.req.Keys)}
		h.arrival[id] = len(h.arrival)
		h.live[id] = true
		h.lastWaiter = max(h.lastWaiter, id)
	}
}

// compareOutcome compares the answer of a call with the model's.
func (h *modelHarness) compareOutcome(o modelOp, got modelOutcome, want mExpect) {
	if len(want.errs) > 0 {
		if got.err == nil {
			modelFailf("%v: got success, want an error wrapping one of %v", o, want.errs)
		}
		if !slices.ContainsFunc(want.errs, func(e error) bool { return errors.Is(got.err, e) }) {
			modelFailf("%v: got error %q, want one wrapping one of %v", o, got.err, want.errs)
		}
		if errors.Is(got.err, latch.ErrWouldBlock) {
			var be *latch.BusyError
			if !errors.As(got.err, &be) || !slices.Equal(be.Keys, want.busy) {
				modelFailf("%v: got %#v, want a *latch.BusyError with keys %q", o, got.err, want.busy)
			}
		}
		return
	}
	if got.err != nil {
		modelFailf("%v: got error %q, want success", o, got.err)
	}
	switch o.kind {
	case mAcquire:
		wantRes := Result{Waiter: got.res.Waiter}
		if want.granted {
			wantRes = Result{Granted: true, Token: want.token, Expires: want.expires}
		}
		if got.res != wantRes || (!want.granted && got.res.Waiter == 0) {
			modelFailf("%v: got %+v, want %+v", o, got.res, wantRes)
		}
	case mReleaseAll, mForceRelease:
		if got.n != want.n {
			modelFailf("%v: released %d holds, want %d", o, got.n, want.n)
		}
	case mRenew:
		if got.tok != want.token || got.exp != want.exp {
			modelFailf("%v: got token %d, lease end %d; want %d, %d", o, got.tok, got.exp, want.token, want.exp)
		}
	}
}

// compareEvents compares the events of one call as multisets.
func (h *modelHarness) compareEvents(got []Event) {
	want := h.model.events
	canon := func(evs []Event) []string {
		out := make([]string, len(evs))
		for i, ev := range evs {
			out[i] = mEventString(ev)
		}
		slices.Sort(out)
		return out
	}
	if !slices.Equal(canon(got), canon(want)) {
		modelFailf("events differ\nengine: %s\nmodel:  %s", mEventsString(got), mEventsString(want))
	}
}

func mEventsString(evs []Event) string {
	if len(evs) == 0 {
		return "(none)"
	}
	s := make([]string, len(evs))
	for i, ev := range evs {
		s[i] = mEventString(ev)
	}
	return strings.Join(s, " | ")
}

// modelSnapshot is the engine's table as its introspection shows it.
type modelSnapshot struct {
	now      int64
	keys     []KeyState
	sessions []SessionState
	stats    Stats
	next     int64
	hasNext  bool
}

func (h *modelHarness) snapshot() modelSnapshot {
	s := modelSnapshot{
		now:      h.eng.Now(),
		keys:     h.eng.Keys("", "", 0),
		sessions: h.eng.Sessions(),
		stats:    h.eng.Stats(),
	}
	s.next, s.hasNext = h.eng.NextDeadline()
	return s
}

// compareState compares the engine's table with the model's, and the
// engine's single-item introspection with its list introspection.
func (h *modelHarness) compareState(post modelSnapshot) {
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
		modelFailf("%s", b.String())
	}

	queries := []struct {
		prefix, after string
		limit         int
	}{{"b", "", 0}, {"", "b", 0}, {"", "a", 2}, {"c", "a", 1}, {"zz", "", 0}}
	for i := range 2 { // two of them per step, in turn
		q := queries[(2*len(h.log)+i)%len(queries)]
		var want []KeyState
		for _, k := range post.keys {
			if strings.HasPrefix(k.Key, q.prefix) && k.Key > q.after && (q.limit <= 0 || len(want) < q.limit) {
				want = append(want, k)
			}
		}
		if got := h.eng.Keys(q.prefix, q.after, q.limit); len(got) != len(want) || (len(got) > 0 && !reflect.DeepEqual(got, want)) {
			modelFailf("Keys(%q, %q, %d) = %+v, want %+v", q.prefix, q.after, q.limit, got, want)
		}
	}
	for _, k := range post.keys {
		if one, ok := h.eng.Key(k.Key); !ok || !reflect.DeepEqual(one, k) {
			modelFailf("Key(%q) = %+v, %v; Keys lists %+v", k.Key, one, ok, k)
		}
	}
	for _, name := range append(slices.Clone(modelKeys), "zz") {
		if _, ok := h.eng.Key(name); ok != slices.ContainsFunc(post.keys, func(k KeyState) bool { return k.Key == name }) {
			modelFailf("Key(%q) reports ok=%v, unlike Keys", name, ok)
		}
	}
	for _, s := range post.sessions {
		if one, ok := h.eng.Session(s.ID); !ok || one != s {
			modelFailf("Session(%d) = %+v, %v; Sessions lists %+v", s.ID, one, ok, s)
		}
		if held, want := h.eng.Held(s.ID), m.heldKeys(s.ID); !slices.Equal(held, want) {
			modelFailf("Held(%d) = %q, want %q", s.ID, held, want)
		}
	}
	for _, id := range h.ended {
		if _, ok := h.eng.Session(id); ok || h.eng.Held(id) != nil {
			modelFailf("Session(%d) or Held(%d) reports a session that ended", id, id)
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
func (h *modelHarness) checkInvariants(o modelOp, pre modelSnapshot, got modelOutcome, post modelSnapshot) {
	h.checkTime(o, pre, got.events, post)
	h.checkWaiters(o, got, post)
	h.checkTokens(o, got, post)
	h.checkExpiryInstants(pre, got.events, post)
	h.checkNoOvertaking(o, pre, got)
	h.checkHolders(post)
	h.checkQueues(post)
	h.checkNothingOverdue(post)
	h.checkEndedSessions(o, got, post)
	h.checkNoDeadlock(post)
}

// checkTime: time never runs backwards, events come in time order within
// the call's span, and at one instant expiries come before deadlines.
func (h *modelHarness) checkTime(o modelOp, pre modelSnapshot, evs []Event, post modelSnapshot) {
	if want := max(pre.now, o.now); post.now != want {
		modelFailf("Now() = %d after a call at %d from %d; want %d", post.now, o.now, pre.now, want)
	}
	last, deadlineAt := pre.now, int64(-1)
	for _, ev := range evs {
		if ev.At < last || ev.At > post.now {
			modelFailf("event %s out of time order (previous instant %d, call at %d)", mEventString(ev), last, post.now)
		}
		last = ev.At
		switch ev.Kind {
		case EventTimedOut:
			deadlineAt = ev.At
		case EventLeaseExpired, EventSessionExpired:
			if ev.At == deadlineAt {
				modelFailf("event %s comes after a deadline of the same instant: expiries go first", mEventString(ev))
			}
		}
	}
}

// checkWaiters: every queued request ends exactly once (granted, timed out,
// aborted or cancelled), aborted only when its session ends, and the
// requests queued in the table are exactly those that have not ended.
func (h *modelHarness) checkWaiters(o modelOp, got modelOutcome, post modelSnapshot) {
	ending := make(map[latch.SessionID]bool) // sessions that ended in this call
	if o.kind == mEndSession && got.err == nil {
		ending[o.sess] = true
	}
	for _, ev := range got.events {
		switch ev.Kind {
		case EventSessionExpired:
			ending[ev.Session] = true
		case EventGranted, EventTimedOut, EventAborted:
			if !h.live[ev.Waiter] {
				modelFailf("event %s for a request that is not waiting", mEventString(ev))
			}
			if ev.Session != h.reqs[ev.Waiter].sess {
				modelFailf("event %s names the wrong session: w%d belongs to s%d", mEventString(ev), ev.Waiter, h.reqs[ev.Waiter].sess)
			}
			if ev.Kind == EventAborted && !ending[ev.Session] {
				modelFailf("event %s, but session s%d did not end", mEventString(ev), ev.Session)
			}
			delete(h.live, ev.Waiter)
		}
	}
	if o.kind == mCancel {
		if got.err == nil {
			if !h.live[o.waiter] {
				modelFailf("Cancel(w%d) succeeded, but the request was not waiting", o.waiter)
			}
			delete(h.live, o.waiter)
		} else if h.live[o.waiter] {
			modelFailf("Cancel(w%d) failed (%v), but the request is waiting", o.waiter, got.err)
		}
	}
	queued := make(map[WaiterID]bool)
	for _, k := range post.keys {
		for _, w := range k.Waiters {
			queued[w.ID] = true
		}
	}
	if !maps.Equal(queued, h.live) || post.stats.Waiters != len(h.live) {
		modelFailf("the table queues %v (Stats says %d), but the requests still waiting are %v", mSortedIDs(queued), post.stats.Waiters, mSortedIDs(h.live))
	}
}

func mSortedIDs(m map[WaiterID]bool) []WaiterID {
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
func (h *modelHarness) grants(o modelOp, got modelOutcome) []mGrant {
	var gs []mGrant
	for _, ev := range got.events {
		if ev.Kind == EventGranted {
			r := h.reqs[ev.Waiter]
			gs = append(gs, mGrant{r.sess, r.req, r.keys, ev.Token})
		}
	}
	if o.kind == mAcquire && got.err == nil && got.res.Granted {
		gs = append(gs, mGrant{o.sess, o.req, mDistinct(o.req.Keys), got.res.Token})
	}
	return gs
}

// checkTokens: tokens strictly increase across grants, except a
// RelockReuse grant of keys all held, which returns an existing token.
// It records the mode and limit of every grant for checkHolders.
func (h *modelHarness) checkTokens(o modelOp, got modelOutcome, post modelSnapshot) {
	for _, g := range h.grants(o, got) {
		switch {
		case g.token > h.maxToken:
			h.maxToken = g.token
		case g.req.Relock != latch.RelockReuse:
			modelFailf("a grant to s%d got token %d, not above the last token %d", g.sess, g.token, h.maxToken)
		}
		for _, k := range g.keys {
			h.ghost[mGhostKey{k, g.token}] = g.req.Mode
			h.ghostLimit[mGhostKey{k, g.token}] = g.req.Limit
		}
	}
	if post.stats.Token != h.maxToken {
		modelFailf("Stats().Token = %d, but the last token granted is %d", post.stats.Token, h.maxToken)
	}
}

// checkExpiryInstants: a lease ends exactly at its end, and the hold is
// gone; a session expires exactly at its TTL's end. It follows the holds of
// the table through the events of the call.
func (h *modelHarness) checkExpiryInstants(pre modelSnapshot, evs []Event, post modelSnapshot) {
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
		case EventGranted:
			for _, k := range h.reqs[ev.Waiter].keys {
				i := slices.IndexFunc(holds, func(x *held) bool { return x.key == k && x.sess == ev.Session })
				if i < 0 {
					holds = append(holds, &held{k, ev.Session, ev.Expires})
				} else {
					holds[i].expires = ev.Expires
				}
			}
		case EventLeaseExpired:
			i := slices.IndexFunc(holds, func(x *held) bool {
				return x.key == ev.Key && x.sess == ev.Session && x.expires == ev.At
			})
			if i < 0 {
				modelFailf("event %s: no lease on %s of s%d ends at %d", mEventString(ev), ev.Key, ev.Session, ev.At)
			}
			holds = slices.Delete(holds, i, i+1)
			for _, k := range post.keys {
				if k.Key == ev.Key && slices.ContainsFunc(k.Holders, func(hs HolderState) bool { return hs.Token == ev.Token }) {
					modelFailf("event %s, but the hold is still there: %+v", mEventString(ev), k.Holders)
				}
			}
		case EventSessionExpired:
			if exp := sessionExpires[ev.Session]; exp != ev.At {
				modelFailf("event %s: the session's TTL ends at %d", mEventString(ev), exp)
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
func (h *modelHarness) checkNoOvertaking(o modelOp, pre modelSnapshot, got modelOutcome) {
	queues := make(map[string][]WaiterState)
	waiting := make(map[WaiterID]bool)
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
	if o.kind == mCancel && got.err == nil {
		delete(waiting, o.waiter)
	}
	check := func(id WaiterID, g mGrant) {
		for _, k := range g.keys {
			if m, ok := held[sessKey{g.sess, k}]; ok && m == g.req.Mode && g.req.Relock == latch.RelockReuse {
				continue
			}
			for _, x := range queues[k] {
				if x.ID == id {
					break
				}
				if waiting[x.ID] && (x.Mode == latch.Exclusive || g.req.Mode == latch.Exclusive) {
					modelFailf("a grant to s%d of %q (%v) overtook w%d (%v), which still waits on %s", g.sess, g.keys, g.req.Mode, x.ID, x.Mode, k)
				}
			}
		}
		for _, k := range g.keys {
			held[sessKey{g.sess, k}] = g.req.Mode
		}
	}
	for _, ev := range got.events {
		switch ev.Kind {
		case EventGranted:
			r := h.reqs[ev.Waiter]
			check(ev.Waiter, mGrant{r.sess, r.req, r.keys, ev.Token})
			delete(waiting, ev.Waiter)
		case EventTimedOut, EventAborted:
			delete(waiting, ev.Waiter)
		}
	}
	if o.kind == mAcquire && got.err == nil && got.res.Granted {
		check(0, mGrant{o.sess, o.req, mDistinct(o.req.Keys), got.res.Token})
	}
}

// checkHolders: never two exclusive holders, nor an exclusive holder
// beside another; shared holders within their limit, all agreeing on it.
// Modes and limits come from the grants, not from the engine's key.
func (h *modelHarness) checkHolders(post modelSnapshot) {
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
				modelFailf("key %s has a holder (s%d) with token %d, which no grant of that key handed out", k.Key, hs.Session, hs.Token)
			}
			modes = append(modes, m)
			limits = append(limits, h.ghostLimit[gk])
		}
		switch {
		case slices.Contains(modes, latch.Exclusive) && len(modes) > 1:
			modelFailf("key %s has an exclusive holder beside others: %+v", k.Key, k.Holders)
		case modes[0] == latch.Shared && slices.ContainsFunc(limits, func(l uint32) bool { return l != limits[0] }):
			modelFailf("shared holders of %s disagree on the limit: %v", k.Key, limits)
		case modes[0] == latch.Shared && limits[0] > 0 && len(modes) > int(limits[0]):
			modelFailf("key %s has %d shared holders, above its limit %d", k.Key, len(modes), limits[0])
		case k.Mode != modes[0]:
			modelFailf("key %s reports mode %v, but its holders hold it %v", k.Key, k.Mode, modes[0])
		case modes[0] == latch.Shared && k.Limit != limits[0]:
			modelFailf("key %s reports limit %d, but its holders agreed on %d", k.Key, k.Limit, limits[0])
		}
	}
}

// checkQueues: every queue is in arrival order (so all queues agree on
// it), and a request is queued on exactly the keys it asked for, as it
// asked.
func (h *modelHarness) checkQueues(post modelSnapshot) {
	seen := make(map[WaiterID][]string)
	for _, k := range post.keys {
		for i, w := range k.Waiters {
			r := h.reqs[w.ID]
			switch {
			case w.Position != i:
				modelFailf("key %s: w%d is at position %d but reports %d", k.Key, w.ID, i, w.Position)
			case i > 0 && h.arrival[w.ID] < h.arrival[k.Waiters[i-1].ID]:
				modelFailf("key %s: w%d is queued behind w%d, which arrived later", k.Key, k.Waiters[i-1].ID, w.ID)
			case w.Session != r.sess || w.Mode != r.req.Mode || w.Limit != r.req.Limit || !slices.Equal(w.Keys, r.keys):
				modelFailf("key %s: w%d reports %+v, but the request was s%d %v/%d %q", k.Key, w.ID, w, r.sess, r.req.Mode, r.req.Limit, r.keys)
			}
			seen[w.ID] = append(seen[w.ID], k.Key)
		}
	}
	for id, keys := range seen {
		want := slices.Sorted(slices.Values(h.reqs[id].keys))
		if !slices.Equal(keys, want) {
			modelFailf("w%d is queued on %q, but asked for %q", id, keys, want)
		}
	}
}

// checkNothingOverdue: after a call nothing is pending at or before now,
// and NextDeadline is the earliest pending instant of the table.
func (h *modelHarness) checkNothingOverdue(post modelSnapshot) {
	earliest, pending := int64(math.MaxInt64), false
	check := func(t int64, format string, args ...any) {
		if t == 0 {
			return
		}
		if t <= post.now {
			modelFailf("%s at %d is overdue at %d", fmt.Sprintf(format, args...), t, post.now)
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
		modelFailf("NextDeadline() = %d, %v; the earliest pending instant is %d, %v", post.next, post.hasNext, earliest, pending)
	}
}

// checkEndedSessions: an ended session is gone, and so is everything it
// held or waited for, at once (its leases stay, detached).
func (h *modelHarness) checkEndedSessions(o modelOp, got modelOutcome, post modelSnapshot) {
	if o.kind == mEndSession && got.err == nil {
		h.ended = append(h.ended, o.sess)
	}
	for _, ev := range got.events {
		if ev.Kind == EventSessionExpired {
			h.ended = append(h.ended, ev.Session)
		}
	}
	for _, id := range h.ended {
		if slices.ContainsFunc(post.sessions, func(s SessionState) bool { return s.ID == id }) {
			modelFailf("session s%d ended but is listed", id)
		}
		for _, k := range post.keys {
			for _, hs := range k.Holders {
				if hs.Session == id {
					modelFailf("session s%d ended but still holds %s", id, k.Key)
				}
			}
			for _, w := range k.Waiters {
				if w.Session == id {
					modelFailf("session s%d ended but w%d still waits on %s", id, w.ID, k.Key)
				}
			}
		}
	}
}

// checkNoDeadlock: the earliest waiter has nobody ahead of it, so only a
// holder or a lock-delay on one of its keys may keep it waiting.
func (h *modelHarness) checkNoDeadlock(post modelSnapshot) {
	var first WaiterID
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
			slices.ContainsFunc(k.Holders, func(hs HolderState) bool { return hs.Session == r.sess }) {
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
	modelFailf("deadlock: the earliest waiter w%d (s%d %v %q) is blocked by no holder and no lock-delay", first, r.sess, r.req.Mode, r.keys)
}

// ---------------------------------------------------------------------------
// Generating operations

func (h *modelHarness) rare() bool { return h.src.intn(100) == 0 }

func mPick[T any](h *modelHarness, xs []T) T { return xs[h.src.intn(len(xs))] }

func (h *modelHarness) nextOp() modelOp {
	o := modelOp{now: h.nextNow()}
	m := h.model
	if len(m.sessions) == 0 || (len(m.sessions) < modelMaxSessions && h.src.intn(10) == 0) {
		o.kind = mOpen
		o.opts.TTL = mPick(h, []time.Duration{0, 0, 0, 30, 100, 300})
		o.opts.LockDelay = mPick(h, []time.Duration{0, 0, 5, 10, 20})
		switch h.src.intn(50) {
		case 0:
			o.opts.TTL = -5 // treated as none
		case 1:
			o.opts.LockDelay = -5
		case 2:
			o.opts.TTL = modelHuge
		case 3:
			o.opts.LockDelay = modelHuge
		}
		return o
	}
	switch r := h.src.intn(100); {
	case r < 36:
		o.kind = mAcquire
		o.sess = h.pickSession()
		o.req = h.genRequest()
	case r < 48:
		o.kind = mRelease
		o.sess = h.pickSession()
		o.keys = h.pickHeldKeys(o.sess)
	case r < 52:
		o.kind = mReleaseAll
		o.sess = h.pickSession()
	case r < 58:
		o.kind = mRenew
		o.sess = h.pickSession()
		o.keys = h.pickHeldKeys(o.sess)
		o.lease = mPick(h, []time.Duration{0, 5, 10, 20, 50})
		if h.rare() {
			o.lease = -1
		}
	case r < 63:
		o.kind = mKeepAlive
		o.sess = h.pickSession()
	case r < 71:
		o.kind = mCancel
		o.waiter = h.pickWaiter()
	case r < 75:
		o.kind = mEndSession
		o.sess = h.pickSession()
	case r < 78:
		o.kind = mForceRelease
		o.key = mPick(h, slices.Concat(modelKeys, []string{"zz"}))
	default:
		o.kind = mTick
	}
	return o
}

// nextNow advances the harness's clock: not at all, a little, exactly to
// the next pending instant (to exercise ties), or past many at once; now
// and then the op gets an earlier instant, which the engine must treat as
// the latest it has seen.
func (h *modelHarness) nextNow() int64 {
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
func (h *modelHarness) pickSession() latch.SessionID {
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
func (h *modelHarness) pickWaiter() WaiterID {
	m := h.model
	if len(m.waiters) > 0 && h.src.intn(6) != 0 {
		return mPick(h, m.waiters).id
	}
	return WaiterID(h.src.intn(int(h.lastWaiter) + 2))
}

// pickHeldKeys picks keys for Release and Renew: mostly keys the session
// holds (sometimes repeated), sometimes any keys, rarely none.
func (h *modelHarness) pickHeldKeys(sid latch.SessionID) []string {
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

func (h *modelHarness) genRequest() latch.LockRequest {
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
func (h *modelHarness) drain() {
	h.log = append(h.log, "---- drain ----")
	for round := 0; len(h.live) > 0; round++ {
		if round > 200 {
			modelFailf("the queue does not drain: %d requests still wait", len(h.live))
		}
		before := len(h.live)
		obstacles, until := h.obstacles()
		letTimePass := round < 3 && until < modelTimeCap && h.src.intn(2) == 0
		if letTimePass {
			h.now = max(h.now, until)
			h.step(modelOp{kind: mTick, now: h.now})
		} else {
			for _, k := range obstacles {
				h.step(modelOp{kind: mForceRelease, now: h.now, key: k})
			}
		}
		for _, s := range slices.Clone(h.model.sessions) {
			h.step(modelOp{kind: mReleaseAll, now: h.now, sess: s.id})
		}
		if !letTimePass && len(h.live) >= before {
			modelFailf("deadlock: %d requests still wait after everything was released", len(h.live))
		}
	}
	for _, s := range slices.Clone(h.model.sessions) {
		h.step(modelOp{kind: mEndSession, now: h.now, sess: s.id})
	}
	for _, k := range h.eng.Keys("", "", 0) {
		h.step(modelOp{kind: mForceRelease, now: h.now, key: k.Key})
	}
	post := h.snapshot()
	if post.stats != (Stats{Token: h.maxToken}) || post.hasNext || len(post.keys) > 0 || len(h.live) > 0 {
		modelFailf("the table is not empty after the drain: %+v, next deadline %v, %d keys, waiting %v",
			post.stats, post.hasNext, len(post.keys), mSortedIDs(h.live))
	}
}

// obstacles returns the keys under lock-delay or held by a lease whose
// session ended, and the instant the last of them ends.
func (h *modelHarness) obstacles() ([]string, int64) {
	var keys []string
	var until int64
	for _, k := range h.eng.Keys("", "", 0) {
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

// ---------------------------------------------------------------------------
// The reference model

// refModel is the rules of doc.go, restated as plainly as possible.
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
	hint []WaiterID
	// events are what the current call reported.
	events []Event
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
	id       WaiterID
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

func (m *refModel) emit(ev Event) {
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
		m.emit(Event{Kind: EventLeaseExpired, Key: h.key, Session: h.sess, Token: h.token})
		m.removeHold(h)
	case t.sess != nil:
		m.emit(Event{Kind: EventSessionExpired, Session: t.sess.id})
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
		m.emit(Event{Kind: EventTimedOut, Waiter: w.id, Session: w.sess, Keys: busy})
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
		m.emit(Event{Kind: EventGranted, Waiter: next.id, Session: next.sess, Token: tok, Expires: exp})
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
			m.emit(Event{Kind: EventAborted, Waiter: w.id, Session: s.id})
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
func (m *refModel) apply(o modelOp, got modelOutcome) mExpect {
	m.begin(o.now)
	switch o.kind {
	case mOpen:
		s := &mSession{id: got.session, opened: m.now, ttl: max(o.opts.TTL, 0), lockDelay: max(o.opts.LockDelay, 0)}
		if s.ttl > 0 {
			s.expires, s.seq = mPlus(m.now, s.ttl), m.nextSeq()
		}
		m.sessions = append(m.sessions, s)
	case mAcquire:
		return m.acquire(o.sess, o.req, got.res.Waiter)
	case mRelease:
		if errs := m.checkHeld(o.sess, o.keys); errs != nil {
			return mExpect{errs: errs}
		}
		for _, k := range mDistinct(o.keys) {
			m.removeHold(m.holdOf(o.sess, k))
		}
		m.serve()
	case mReleaseAll:
		if m.session(o.sess) == nil {
			return mExpect{errs: []error{latch.ErrNoSession}}
		}
		n := 0
		for _, h := range slices.Clone(m.holds) {
			if h.sess == o.sess {
				m.removeHold(h)
				n++
			}
		}
		m.serve()
		return mExpect{n: n}
	case mRenew:
		errs := m.checkHeld(o.sess, o.keys)
		if o.lease < 0 {
			errs = append(errs, latch.ErrInvalidRequest)
		}
		if errs != nil {
			return mExpect{errs: errs}
		}
		var x mExpect // the newest token of the holds, and the lease's end
		for _, k := range o.keys {
			h := m.holdOf(o.sess, k)
			x.token = max(x.token, h.token)
			m.setLease(h, o.lease)
		}
		if o.lease > 0 {
			x.exp = mPlus(m.now, o.lease)
		}
		return x
	case mKeepAlive:
		s := m.session(o.sess)
		if s == nil {
			return mExpect{errs: []error{latch.ErrNoSession}}
		}
		if s.ttl > 0 {
			s.expires, s.seq = mPlus(m.now, s.ttl), m.nextSeq()
		}
	case mCancel:
		i := slices.IndexFunc(m.waiters, func(w *mWaiter) bool { return w.id == o.waiter })
		if i < 0 {
			return mExpect{errs: []error{ErrNoWaiter}}
		}
		m.removeWaiter(m.waiters[i])
		m.serve()
	case mEndSession:
		s := m.session(o.sess)
		if s == nil {
			return mExpect{errs: []error{latch.ErrNoSession}}
		}
		m.endSession(s)
		m.serve()
	case mForceRelease:
		n := len(m.holders(o.key))
		m.holds = slices.DeleteFunc(m.holds, func(h *mHold) bool { return h.key == o.key })
		m.delays = slices.DeleteFunc(m.delays, func(d *mDelay) bool { return d.key == o.key })
		m.serve()
		return mExpect{n: n}
	case mTick:
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

func (m *refModel) acquire(sid latch.SessionID, r latch.LockRequest, id WaiterID) mExpect {
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

func (m *refModel) keyStates() []KeyState {
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

	var out []KeyState
	for _, name := range names {
		st := KeyState{Key: name}
		hs := m.holders(name)
		if len(hs) > 0 {
			st.Mode = hs[0].mode
		}
		st.Limit, _ = m.agreedLimit(name)
		for _, h := range hs {
			st.Holders = append(st.Holders, HolderState{Session: h.sess, Token: h.token, Acquired: h.acquired, Expires: h.expires})
		}
		slices.SortFunc(st.Holders, func(a, b HolderState) int { return cmp.Compare(a.Token, b.Token) })
		for i, w := range m.queue(name) {
			st.Waiters = append(st.Waiters, WaiterState{
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

func (m *refModel) sessionStates() []SessionState {
	out := []SessionState{}
	for _, s := range m.sessions {
		st := SessionState{ID: s.id, Opened: s.opened, TTL: s.ttl, LockDelay: s.lockDelay, Expires: s.expires}
		st.Held = len(m.heldKeys(s.id))
		for _, w := range m.waiters {
			if w.sess == s.id {
				st.Waiting++
			}
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b SessionState) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// stats returns the table's counts; keys is the number of its keys.
func (m *refModel) stats(keys int) Stats {
	return Stats{
		Keys:     keys,
		Holds:    len(m.holds),
		Waiters:  len(m.waiters),
		Sessions: len(m.sessions),
		Token:    m.token,
	}
}

// ---------------------------------------------------------------------------
// Minimal cases of engine bugs the model test found. Each fails until the
// engine is fixed; TestModel fails on them too.

// modelMustAcquire acquires for s at now and returns the result.
func modelMustAcquire(t *testing.T, e *Engine, now int64, s latch.SessionID, req latch.LockRequest) Result {
	t.Helper()
	res, _, err := e.Acquire(now, s, req)
	if err != nil {
		t.Fatalf("acquire %q for s%d: %v", req.Keys, s, err)
	}
	return res
}

// A key's Limit is the limit agreed by its shared holders and waiters
// (latch.KeyInfo: "0 = none"). Once none is left it must not report the
// limit of shared holders that are gone.
func TestModelBugStaleLimit(t *testing.T) {
	e := New(Config{})
	s1, _ := e.OpenSession(0, SessionOptions{})
	s2, _ := e.OpenSession(0, SessionOptions{})
	modelMustAcquire(t, e, 0, s1, latch.LockRequest{Keys: []string{"k"}, Mode: latch.Shared, Limit: 2})
	modelMustAcquire(t, e, 0, s2, latch.LockRequest{Keys: []string{"k"}, Wait: latch.WaitForever})
	if _, err := e.Release(0, s1, []string{"k"}); err != nil {
		t.Fatal(err)
	}
	st, _ := e.Key("k") // held exclusively by s2, nobody waits
	if st.Mode != latch.Exclusive || st.Limit != 0 {
		t.Errorf("key held exclusively, no shared waiter: mode %v, limit %d; want exclusive, limit 0", st.Mode, st.Limit)
	}
}

// A RelockReuse grant of keys that are all held returns the newest
// existing token and "only resets the leases" (doc.go): the holds keep
// their tokens.
func TestModelBugReuseRestampsTokens(t *testing.T) {
	e := New(Config{})
	s, _ := e.OpenSession(0, SessionOptions{})
	ta := modelMustAcquire(t, e, 0, s, latch.LockRequest{Keys: []string{"a"}}).Token
	tb := modelMustAcquire(t, e, 0, s, latch.LockRequest{Keys: []string{"b"}}).Token
	reuse := latch.LockRequest{Keys: []string{"a", "b"}, Relock: latch.RelockReuse}
	if got := modelMustAcquire(t, e, 0, s, reuse).Token; got != tb {
		t.Fatalf("re-lock of a and b returned token %d, want the newest, %d", got, tb)
	}
	if st, _ := e.Key("a"); st.Holders[0].Token != ta {
		t.Errorf("a's hold has token %d after the re-lock, want its own %d", st.Holders[0].Token, ta)
	}
	// And so an idempotent re-lock of a alone no longer returns a's token.
	if got := modelMustAcquire(t, e, 0, s, latch.LockRequest{Keys: []string{"a"}, Relock: latch.RelockReuse}).Token; got != ta {
		t.Errorf("re-lock of a returned token %d, want %d", got, ta)
	}
}

// A queued RelockReuse request whose keys its session has come to hold
// (through an earlier request of its own) is grantable: "RelockReuse
// counts the key as available if held in the same mode", and the engine's
// available() agrees. serve must grant it even behind an exclusive waiter
// that stays, instead of stopping its scan of the queue there.
func TestModelBugReuseWaiterBehindExclusiveWaiter(t *testing.T) {
	e := New(Config{})
	s1, _ := e.OpenSession(0, SessionOptions{})
	s2, _ := e.OpenSession(0, SessionOptions{})
	s3, _ := e.OpenSession(0, SessionOptions{})
	modelMustAcquire(t, e, 0, s3, latch.LockRequest{Keys: []string{"k"}})
	w1 := modelMustAcquire(t, e, 0, s1, latch.LockRequest{Keys: []string{"k"}, Mode: latch.Shared, Wait: latch.WaitForever}).Waiter
	w2 := modelMustAcquire(t, e, 0, s2, latch.LockRequest{Keys: []string{"k"}, Wait: latch.WaitForever}).Waiter
	w3 := modelMustAcquire(t, e, 0, s1, latch.LockRequest{Keys: []string{"k"}, Mode: latch.Shared, Wait: latch.WaitForever, Relock: latch.RelockReuse}).Waiter
	evs, err := e.Release(1, s3, []string{"k"})
	if err != nil {
		t.Fatal(err)
	}
	// w1 is granted, so s1 holds k shared: w3 re-locks a key its session
	// holds in the same mode. A new request like w3 is granted at once.
	var granted []WaiterID
	for _, ev := range evs {
		if ev.Kind == EventGranted {
			granted = append(granted, ev.Waiter)
		}
	}
	if !slices.Equal(granted, []WaiterID{w1, w3}) {
		t.Errorf("release of k granted %v, want w1 and w3 (%v); w2 (%d) still waits for s1", granted, []WaiterID{w1, w3}, w2)
	}
}
