package engine_test

// The model-based randomized test of the engine, and the tests that ride
// on it. The harness and the reference model are package enginemodel (see
// its documentation): this package drives them with the engine's own
// methods (enginemodel.Direct), and package fsm drives them with commands.
// These tests are in package engine_test because enginemodel imports the
// engine; snapshot_test.go (package engine) lends them what needs the
// engine's internals (SameEngines) and borrows their snapshots
// (ModelSnapshots).
//
//	go test ./internal/engine/ -run 'TestModel$'                          # the default sequences
//	LATCH_MODEL_ITERS=200000 go test ./internal/engine/ -run 'TestModel$' # a longer run, random base seed
//	go test ./internal/engine/ -run 'TestModel$' -v -model.seed=N         # replay one sequence, with its log
//	LATCH_MODEL_SEED=N go test ./internal/engine/ -run 'TestModel$' -v    # the same
//	go test ./internal/engine/ -run '^$' -fuzz FuzzEngine                 # coverage-guided (fuzz_test.go)

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/engine"
	"github.com/latchd/latch/internal/engine/enginemodel"
)

// TestModel runs random sequences against the engine and the model, each
// from its own seed.
func TestModel(t *testing.T) {
	enginemodel.Test(t, "./internal/engine/", enginemodel.NewDirect)
}

// ---------------------------------------------------------------------------
// Model-driven snapshot tests: a second engine follows the harness's.

const (
	snapshotBaseSeed = 0x5eed5
	snapshotIters    = 200
)

// snapshotTwin runs every op of a model sequence on a second engine too
// (AfterStep) and checks that it answers exactly as the harness's engine:
// results, errors, events in order, drops, and the snapshot after each op.
type snapshotTwin struct {
	h     *enginemodel.Harness
	cfg   engine.Config // the harness's engine's
	first latch.Token   // and its first token
	r     *rand.Rand    // when to restart the twin; apart from the op stream
	every int           // restart the twin from a snapshot once in this many ops; 0: never
	twin  *engine.Engine
}

func (tw *snapshotTwin) afterStep(o enginemodel.Op, got enginemodel.Outcome) {
	h := tw.h
	eng := h.Driver().Engine()
	if tw.twin != nil {
		tgot := enginemodel.Direct{E: tw.twin}.Run(o)
		if !reflect.DeepEqual(tgot, got) {
			enginemodel.Failf("%v: the twin answered %s (error %#v)\nthe engine %s (error %#v)", o, tgot.Summary(o.Kind), tgot.Err, got.Summary(o.Kind), got.Err)
		}
		if td, d := tw.twin.Drops(), eng.Drops(); !slices.Equal(td, d) {
			enginemodel.Failf("%v: the twin dropped %+v, the engine %+v", o, td, d)
		}
		if err := engine.SameEngines(eng, tw.twin); err != nil {
			enginemodel.Failf("%v: %v", o, err)
		}
	}
	if tw.every > 0 && tw.r.IntN(tw.every) == 0 {
		from, what := eng, "the engine"
		if tw.twin != nil && tw.r.IntN(2) == 0 {
			from, what = tw.twin, "the twin" // a restored engine's snapshot
		}
		tw.twin = restoreChecked(from, tw.cfg)
		h.Note("  [the twin restarts from a snapshot of " + what + "]")
	}
}

// restoreChecked restores a snapshot of e, which was made with cfg, and
// checks the copy: it snapshots to the same bytes, and inspection and
// counters agree.
func restoreChecked(e *engine.Engine, cfg engine.Config) *engine.Engine {
	snap := e.AppendSnapshot(nil)
	r, err := engine.Restore(cfg, snap)
	if err != nil {
		enginemodel.Failf("Restore of a snapshot: %v", err)
	}
	if again := r.AppendSnapshot(nil); !bytes.Equal(again, snap) {
		enginemodel.Failf("snapshot(restore(snapshot(e))) differs from snapshot(e)\n%v\n%v", again, snap)
	}
	if err := engine.SameEngines(e, r); err != nil {
		enginemodel.Failf("restored engine: %v", err)
	}
	return r
}

// runSnapshotSeed runs a model sequence of one seed with a twin: restarted
// from snapshots at random points (every > 0), or a second fresh engine fed
// the same ops from the start (every == 0).
func runSnapshotSeed(seed uint64, every int) (string, error) {
	tw := &snapshotTwin{r: rand.New(rand.NewPCG(seed, 0x5a95)), every: every}
	newDriver := func(cfg engine.Config, first latch.Token) enginemodel.Driver {
		cfg.RecordDrops = true
		tw.cfg, tw.first = cfg, first
		return enginemodel.NewDirect(cfg, first)
	}
	log, err := enginemodel.Run(enginemodel.SeedSource(seed), newDriver, func(h *enginemodel.Harness) {
		tw.h = h
		if every == 0 {
			tw.twin = engine.New(tw.cfg)
			tw.twin.SeedToken(tw.first)
		}
		h.AfterStep = tw.afterStep
	})
	if err != nil {
		return log, fmt.Errorf("seed %d: %w", seed, err)
	}
	return log, nil
}

// TestSnapshotModel: at random points of model sequences the engine is
// snapshotted and restored into a twin; from then on the twin answers
// every call exactly as the engine does (results, errors, events in order,
// drops, tokens, IDs), and their snapshots stay byte-identical, through
// the drain at the end of the sequence.
func TestSnapshotModel(t *testing.T) {
	iters := snapshotIters
	if testing.Short() {
		iters /= 10
	}
	for i := range iters {
		if _, err := runSnapshotSeed(snapshotBaseSeed+uint64(i), 2+i%20); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSnapshotDeterminism: two fresh engines fed the same ops end (and
// stay, after every op) with byte-identical snapshots, whatever the order
// in which Go iterates their maps.
func TestSnapshotDeterminism(t *testing.T) {
	iters := snapshotIters / 3
	if testing.Short() {
		iters /= 10
	}
	for i := range iters {
		if _, err := runSnapshotSeed(snapshotBaseSeed+1<<20+uint64(i), 0); err != nil {
			t.Fatal(err)
		}
	}
}

func init() { engine.ModelSnapshots = modelSnapshots }

// modelSnapshots returns snapshots taken along model sequences, for the
// seed corpus of FuzzRestore (snapshot_test.go).
func modelSnapshots() [][]byte {
	var seeds [][]byte
	for seed := range uint64(3) {
		src := enginemodel.RandSource(rand.New(rand.NewPCG(seed, 77)), 150)
		n := 0
		enginemodel.Run(src, enginemodel.NewDirect, func(h *enginemodel.Harness) {
			h.AfterStep = func(enginemodel.Op, enginemodel.Outcome) {
				if n++; n%40 == 0 {
					seeds = append(seeds, h.Driver().Engine().AppendSnapshot(nil))
				}
			}
		})
	}
	return seeds
}

// ---------------------------------------------------------------------------
// Minimal cases of engine bugs the model test found. Each fails until the
// engine is fixed; TestModel fails on them too.

// modelMustAcquire acquires for s at now and returns the result.
func modelMustAcquire(t *testing.T, e *engine.Engine, now int64, s latch.SessionID, req latch.LockRequest) engine.Result {
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
	e := engine.New(engine.Config{})
	s1, _ := e.OpenSession(0, engine.SessionOptions{})
	s2, _ := e.OpenSession(0, engine.SessionOptions{})
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
	e := engine.New(engine.Config{})
	s, _ := e.OpenSession(0, engine.SessionOptions{})
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
	e := engine.New(engine.Config{})
	s1, _ := e.OpenSession(0, engine.SessionOptions{})
	s2, _ := e.OpenSession(0, engine.SessionOptions{})
	s3, _ := e.OpenSession(0, engine.SessionOptions{})
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
	var granted []engine.WaiterID
	for _, ev := range evs {
		if ev.Kind == engine.EventGranted {
			granted = append(granted, ev.Waiter)
		}
	}
	if !slices.Equal(granted, []engine.WaiterID{w1, w3}) {
		t.Errorf("release of k granted %v, want w1 and w3 (%v); w2 (%d) still waits for s1", granted, []engine.WaiterID{w1, w3}, w2)
	}
}

// captureCheck follows a model sequence with Captures (AfterStep): at
// random points it captures the engine, recording AppendSnapshot's bytes
// at that instant, and encodes the capture a few entries after every op
// that follows, which change the table under it; the capture, once
// complete, must write exactly the bytes recorded. Some captures are
// given up, or replaced by a new one, half way.
type captureCheck struct {
	h     *enginemodel.Harness
	r     *rand.Rand
	every int // capture once in this many ops
	c     *engine.Capture
	want  []byte
	at    int // the op count at the capture, for messages
	ops   int
	// checked counts the captures compared, given up for the test's
	// own accounting.
	checked, givenUp int
}

func (cc *captureCheck) afterStep(o enginemodel.Op, _ enginemodel.Outcome) {
	cc.ops++
	eng := cc.h.Driver().Engine()
	switch {
	case cc.c == nil && cc.r.IntN(cc.every) == 0, cc.c != nil && cc.r.IntN(50) == 0:
		if cc.c != nil {
			cc.givenUp++
		}
		cc.want = eng.AppendSnapshot(nil)
		cc.c, cc.at = eng.Capture(), cc.ops
		cc.h.Note("  [captured]")
	case cc.c != nil && cc.r.IntN(50) == 0:
		cc.c.Close()
		cc.c = nil
		cc.givenUp++
		cc.h.Note("  [the capture is given up]")
	case cc.c != nil:
		cc.step(o, cc.r.IntN(4))
	}
}

// step encodes up to n entries, and compares the snapshot when complete.
func (cc *captureCheck) step(o enginemodel.Op, n int) {
	if !cc.c.Step(n) {
		return
	}
	got := cc.c.AppendTo(nil)
	if !bytes.Equal(got, cc.want) {
		enginemodel.Failf("%v: the capture made %d ops before wrote\n%x\nwant (AppendSnapshot at the capture)\n%x", o, cc.ops-cc.at, got, cc.want)
	}
	cc.c = nil
	cc.checked++
	cc.h.Note("  [the capture is complete and equal]")
}

// runCaptureSeed runs a model sequence of one seed with a captureCheck.
func runCaptureSeed(seed uint64, every int) (*captureCheck, string, error) {
	cc := &captureCheck{r: rand.New(rand.NewPCG(seed, 0xca97)), every: every}
	log, err := enginemodel.Run(enginemodel.SeedSource(seed), enginemodel.NewDirect, func(h *enginemodel.Harness) {
		cc.h = h
		h.AfterStep = cc.afterStep
	})
	if err != nil {
		return cc, "", fmt.Errorf("seed %d: %w", seed, err)
	}
	if cc.c != nil { // the sequence ended first: no more changes
		if !cc.c.Step(math.MaxInt) {
			return cc, log, fmt.Errorf("seed %d: Step(MaxInt) left the capture incomplete", seed)
		}
		if got := cc.c.AppendTo(nil); !bytes.Equal(got, cc.want) {
			return cc, log, fmt.Errorf("seed %d: the capture made %d ops before the end wrote\n%x\nwant\n%x", seed, cc.ops-cc.at, got, cc.want)
		}
		cc.checked++
	}
	return cc, log, nil
}

// TestCaptureModel: a Capture encoded a few entries at a time while model
// sequences change the engine under it writes the same bytes as
// AppendSnapshot at the instant of the capture, whatever the ops in
// between (grants, queues, releases, expiries, ended sessions, lock-delays,
// owned holds, promotions, recycled keys and waiters); one given up or
// replaced leaves nothing behind that changes a later one.
func TestCaptureModel(t *testing.T) {
	iters := snapshotIters
	if testing.Short() {
		iters /= 10
	}
	checked, givenUp := 0, 0
	for i := range iters {
		cc, log, err := runCaptureSeed(snapshotBaseSeed+2<<20+uint64(i), 1+i%10)
		if err != nil {
			t.Fatalf("%v\n%s", err, log)
		}
		checked += cc.checked
		givenUp += cc.givenUp
	}
	if checked < iters {
		t.Fatalf("only %d captures compared in %d sequences", checked, iters)
	}
	t.Logf("%d captures compared, %d given up", checked, givenUp)
}
