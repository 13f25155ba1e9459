package enginemodel

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/engine"
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
	// modelMaxFuzzOps bounds the operations of one fuzz input, which keeps an
	// execution in the order of a millisecond: the fuzzer minimizes every new
	// interesting input by running it over and over.
	modelMaxFuzzOps = 200
)

// modelKeys are the keys of a sequence: few, so that requests collide.
var modelKeys = []string{"a", "b", "c", "d"}

// modelBadKeys are keys latch.CheckKey rejects.
var modelBadKeys = []string{"", "x y", "x\r", "x\n", strings.Repeat("k", latch.MaxKeyLen+1)}

// modelHuge is a duration that saturates every instant it is added to.
const modelHuge = time.Duration(math.MaxInt64)

// ---------------------------------------------------------------------------
// The seam: what the harness runs its sequences on

// A Driver runs one operation on the lock table under test and answers what
// the engine answered.
type Driver interface {
	// Run makes the call o describes at o.Now. The Outcome must not share
	// memory with the engine (copy Events and Drops), nor o's slices with
	// the call: the harness keeps both.
	Run(o Op) Outcome
	// Engine is the lock table under test, for the harness's reads only
	// (Keys, Key, Sessions, Session, Held, Stats, NextDeadline, Now).
	Engine() *engine.Engine
}

// Direct is the Driver that calls the methods of the engine E.
type Direct struct{ E *engine.Engine }

// NewDirect returns a Direct driver of a new engine, for Run.
func NewDirect(cfg engine.Config, first latch.Token) Driver {
	e := engine.New(cfg)
	e.SeedToken(first)
	return Direct{e}
}

// NewDriver makes the driver of a new lock table configured with cfg whose
// token counter starts at first (the first grant gets first+1).
type NewDriver func(cfg engine.Config, first latch.Token) Driver

// Engine returns d.E.
func (d Direct) Engine() *engine.Engine { return d.E }

// Run calls the engine's method for o.
func (d Direct) Run(o Op) (out Outcome) {
	e := d.E
	switch o.Kind {
	case OpOpen:
		out.Session, out.Events = e.OpenSession(o.Now, o.Opts)
	case OpAcquire:
		req := o.Req
		req.Keys = slices.Clone(req.Keys)
		out.Res, out.Events, out.Err = e.Acquire(o.Now, o.Session, req)
	case OpRelease:
		out.Events, out.Err = e.Release(o.Now, o.Session, slices.Clone(o.Keys))
	case OpReleaseAll:
		out.N, out.Events, out.Err = e.ReleaseAll(o.Now, o.Session)
	case OpRenew:
		out.Token, out.Expires, out.Events, out.Err = e.Renew(o.Now, o.Session, slices.Clone(o.Keys), o.Lease)
	case OpKeepAlive:
		out.Events, out.Err = e.KeepAlive(o.Now, o.Session)
	case OpCancel:
		out.Events, out.Err = e.Cancel(o.Now, o.Waiter)
	case OpEndSession:
		out.Events, out.Err = e.EndSession(o.Now, o.Session)
	case OpForceRelease:
		out.N, out.Events = e.ForceRelease(o.Now, o.Key)
	case OpTick:
		out.Events = e.Tick(o.Now)
	}
	out.Events = CopyEvents(out.Events)
	out.Drops = CopyDrops(e.Drops())
	return out
}

// ---------------------------------------------------------------------------
// Running sequences

// Test runs the default sequences (see the package documentation), each
// from its own seed, on the drivers newDriver returns: the body of a
// TestModel. pkg is the package directory the replay hint names
// ("./internal/engine/").
func Test(t *testing.T, pkg string, newDriver NewDriver) {
	t.Helper()
	if seed, ok := modelReplaySeed(t); ok {
		log, err := runModelSeed(seed, pkg, newDriver)
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
		if _, err := runModelSeed(base+uint64(i), pkg, newDriver); err != nil {
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
func runModelSeed(seed uint64, pkg string, newDriver NewDriver) (string, error) {
	log, err := Run(SeedSource(seed), newDriver)
	if err != nil {
		return log, fmt.Errorf("seed %d (replay: go test %s -run 'TestModel$' -v -model.seed=%d)\n%w", seed, pkg, seed, err)
	}
	return log, nil
}

// Run runs one sequence of operations chosen by src on a driver made by
// newDriver, then drains the table. It calls the setup functions on the
// harness first. It returns the operation log and, on failure, an error
// that includes it.
func Run(src Source, newDriver NewDriver, setup ...func(*Harness)) (log string, err error) {
	var h *Harness
	defer func() {
		if r := recover(); r != nil {
			msg, ok := r.(failure)
			if !ok {
				msg = failure(fmt.Sprintf("harness panicked: %v\n%s", r, debug.Stack()))
			}
			if h != nil {
				log = h.opLog()
			}
			err = fmt.Errorf("%s\n\n%s", msg, log)
		}
	}()
	h = newHarness(src, newDriver)
	for _, f := range setup {
		f(h)
	}
	for src.more() {
		h.step(h.nextOp())
	}
	h.drain()
	return h.opLog(), nil
}

// failure is what the harness panics with when a check fails; Run
// recovers it.
type failure string

// Failf fails the sequence being run: it panics with a message that Run
// recovers and returns as its error, with the operation log. Drivers and
// the hooks of a Harness call it.
func Failf(format string, args ...any) {
	panic(failure(fmt.Sprintf(format, args...)))
}

// ---------------------------------------------------------------------------
// Sources of choices

// A Source supplies the choices of a sequence: a seeded PRNG for TestModel,
// the fuzzer's bytes for a fuzz target.
type Source interface {
	// intn returns a choice in [0, n); n > 0.
	intn(n int) int
	// more reports whether the sequence goes on with another operation.
	more() bool
}

// SeedSource returns the Source of the TestModel sequence of seed: 100 to
// 299 operations chosen by a PRNG.
func SeedSource(seed uint64) Source {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return &rngSource{r: r, ops: 100 + r.IntN(200)}
}

// RandSource returns a Source of ops operations chosen by r.
func RandSource(r *rand.Rand, ops int) Source { return &rngSource{r: r, ops: ops} }

// rngSource is the Source of TestModel.
type rngSource struct {
	r   *rand.Rand
	ops int // operations left
}

func (s *rngSource) intn(n int) int { return s.r.IntN(n) }

func (s *rngSource) more() bool {
	s.ops--
	return s.ops >= 0
}

// BytesSource returns a Source reading the fuzzer's bytes: every choice
// the operation generator makes (which operation, session, keys, mode,
// wait, lease, instant...) takes one byte, or two for a choice among more
// than 256, so a mutation changes the sequence locally. The sequence ends
// when the bytes run out (or after 200 operations); once they run out
// every choice is 0.
func BytesSource(data []byte) Source { return &bytesSource{data: data} }

// bytesSource is the Source of BytesSource.
type bytesSource struct {
	data []byte
	ops  int
}

func (s *bytesSource) intn(n int) int {
	if n <= 1 || len(s.data) == 0 {
		return 0
	}
	v := int(s.data[0])
	s.data = s.data[1:]
	if n > 256 && len(s.data) > 0 {
		v = v<<8 | int(s.data[0])
		s.data = s.data[1:]
	}
	return v % n
}

func (s *bytesSource) more() bool {
	s.ops++
	return len(s.data) > 0 && s.ops <= modelMaxFuzzOps
}

// FuzzSeeds returns the inputs a fuzz target over BytesSource adds to its
// seed corpus: none (drain an empty table), a few operations with the
// first choices, and PRNG inputs of growing length.
func FuzzSeeds() [][]byte {
	seeds := [][]byte{{}, {0, 1, 2, 3, 4, 5, 6, 7}}
	for seed := range uint64(3) {
		seeds = append(seeds, modelFuzzInput(seed, 64<<(2*seed)))
	}
	return seeds
}

// modelFuzzInput returns n bytes of the PRNG seeded with seed.
func modelFuzzInput(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// ---------------------------------------------------------------------------
// Operations

// OpKind says which call of the engine's API an Op is.
type OpKind uint8

// The calls, by the engine method they name. The fields of Op each reads
// are listed; every call also has Now.
const (
	OpOpen         OpKind = iota // OpenSession(Opts)
	OpAcquire                    // Acquire(Session, Req)
	OpRelease                    // Release(Session, Keys)
	OpReleaseAll                 // ReleaseAll(Session)
	OpRenew                      // Renew(Session, Keys, Lease)
	OpKeepAlive                  // KeepAlive(Session)
	OpCancel                     // Cancel(Waiter)
	OpEndSession                 // EndSession(Session)
	OpForceRelease               // ForceRelease(Key)
	OpTick                       // Tick
)

// Op is one call of the engine's API.
type Op struct {
	Kind    OpKind
	Now     int64
	Session latch.SessionID
	Waiter  engine.WaiterID
	Keys    []string // Release, Renew
	Key     string   // ForceRelease
	Lease   time.Duration
	Req     latch.LockRequest
	Opts    engine.SessionOptions
}

// String formats o for the operation log.
func (o Op) String() string {
	at := fmt.Sprintf("@%d ", o.Now)
	switch o.Kind {
	case OpOpen:
		return at + fmt.Sprintf("open ttl=%s lockdelay=%s", mFmtDur(o.Opts.TTL), mFmtDur(o.Opts.LockDelay))
	case OpAcquire:
		r := o.Req
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
		return at + fmt.Sprintf("acquire s%d %q %s wait=%s lease=%s %s", o.Session, r.Keys, mode, wait, mFmtDur(r.Lease), relock)
	case OpRelease:
		return at + fmt.Sprintf("release s%d %q", o.Session, o.Keys)
	case OpReleaseAll:
		return at + fmt.Sprintf("release-all s%d", o.Session)
	case OpRenew:
		return at + fmt.Sprintf("renew s%d %q lease=%s", o.Session, o.Keys, mFmtDur(o.Lease))
	case OpKeepAlive:
		return at + fmt.Sprintf("keepalive s%d", o.Session)
	case OpCancel:
		return at + fmt.Sprintf("cancel w%d", o.Waiter)
	case OpEndSession:
		return at + fmt.Sprintf("end-session s%d", o.Session)
	case OpForceRelease:
		return at + fmt.Sprintf("force-release %q", o.Key)
	case OpTick:
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

// Outcome is what the engine answered to an Op.
type Outcome struct {
	Err     error
	Session latch.SessionID // OpenSession
	Res     engine.Result   // Acquire
	N       int             // ReleaseAll, ForceRelease
	Token   latch.Token     // Renew
	Expires int64           // Renew
	Events  []engine.Event  // copied: the engine reuses its slice
	// Drops are what Engine.Drops reported after the call (copied; nil
	// when it reported none, as without Config.RecordDrops).
	Drops []engine.Drop
}

// Summary formats the answer to an op of kind for the operation log.
func (o Outcome) Summary(kind OpKind) string {
	var b strings.Builder
	switch {
	case o.Err != nil:
		b.WriteString("error: " + o.Err.Error())
	case kind == OpOpen:
		fmt.Fprintf(&b, "s%d", o.Session)
	case kind == OpAcquire && o.Res.Granted:
		fmt.Fprintf(&b, "granted tok=%d exp=%d", o.Res.Token, o.Res.Expires)
	case kind == OpAcquire:
		fmt.Fprintf(&b, "queued w%d", o.Res.Waiter)
	case kind == OpReleaseAll || kind == OpForceRelease:
		fmt.Fprintf(&b, "n=%d", o.N)
	case kind == OpRenew:
		fmt.Fprintf(&b, "tok=%d exp=%d", o.Token, o.Expires)
	default:
		b.WriteString("ok")
	}
	for _, ev := range o.Events {
		b.WriteString(" | " + ev.String())
	}
	return b.String()
}

// CopyEvents returns a deep copy of evs, which the engine reuses: an empty
// slice if there are none.
func CopyEvents(evs []engine.Event) []engine.Event {
	out := make([]engine.Event, len(evs))
	for i, ev := range evs {
		ev.Keys = slices.Clone(ev.Keys)
		out[i] = ev
	}
	return out
}

// CopyDrops returns a copy of drops, which the engine reuses: nil if there
// are none.
func CopyDrops(drops []engine.Drop) []engine.Drop {
	if len(drops) == 0 {
		return nil
	}
	return slices.Clone(drops)
}
