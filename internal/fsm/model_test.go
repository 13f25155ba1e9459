package fsm_test

// The engine's model-based test (package enginemodel), driving the lock
// table through commands: every operation of a sequence is one Command,
// applied by State.Apply, and every check of the engine's TestModel and
// FuzzEngine applies to what the state answers.
//
//	go test ./internal/fsm/ -run 'TestModel$'                          # the default sequences
//	LATCH_MODEL_ITERS=200000 go test ./internal/fsm/ -run 'TestModel$' # a longer run, random base seed
//	go test ./internal/fsm/ -run 'TestModel$' -v -model.seed=N         # replay one sequence, with its log
//	go test ./internal/fsm/ -run '^$' -fuzz FuzzModel                  # coverage-guided

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/cache"
	"github.com/latchd/latch/internal/engine"
	"github.com/latchd/latch/internal/engine/enginemodel"
	"github.com/latchd/latch/internal/fsm"
)

// TestModel runs the engine's TestModel sequences (the same seeds, as
// many) through commands.
func TestModel(t *testing.T) {
	enginemodel.Test(t, "./internal/fsm/", newCommandDriver)
}

// FuzzModel is the engine's FuzzEngine through commands. Its seed corpus
// is FuzzEngine's: enginemodel.FuzzSeeds and the engine's
// testdata/fuzz/FuzzEngine (the reproducers of the bugs the harness found,
// and inputs the fuzzer found interesting).
//
//	go test ./internal/fsm/ -run '^$' -fuzz FuzzModel -fuzztime 60s
func FuzzModel(f *testing.F) {
	for _, seed := range enginemodel.FuzzSeeds() {
		f.Add(seed)
	}
	for _, seed := range engineCorpus(f) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := enginemodel.Run(enginemodel.BytesSource(data), newCommandDriver); err != nil {
			t.Fatal(err)
		}
	})
}

// engineCorpus reads the seed corpus of the engine's FuzzEngine.
func engineCorpus(f *testing.F) [][]byte {
	dir := filepath.Join("..", "engine", "testdata", "fuzz", "FuzzEngine")
	entries, err := os.ReadDir(dir)
	if err != nil {
		f.Fatal(err)
	}
	var seeds [][]byte
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			f.Fatal(err)
		}
		// "go test fuzz v1", then one []byte value, Go-quoted.
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) != 2 || lines[0] != "go test fuzz v1" ||
			!strings.HasPrefix(lines[1], "[]byte(") || !strings.HasSuffix(lines[1], ")") {
			f.Fatalf("%s: not a corpus file of one []byte", e.Name())
		}
		data, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
		if err != nil {
			f.Fatalf("%s: %v", e.Name(), err)
		}
		seeds = append(seeds, []byte(data))
	}
	if len(seeds) == 0 {
		f.Fatalf("%s: no corpus", dir)
	}
	return seeds
}

// commandDriver runs the harness's operations as commands on a State: one
// Command per operation, from one origin, numbered from 1.
type commandDriver struct {
	s   *fsm.State
	seq uint64 // the Seq of the last command
}

// newCommandDriver returns the driver of a new state configured with cfg.
// The token counter starts at first, seeded by an OpSeed command at instant
// 0, as a proposer seeds a new state.
func newCommandDriver(cfg engine.Config, first latch.Token) enginemodel.Driver {
	s, err := fsm.New(fsm.Config{Engine: cfg, Cache: cache.DefaultConfig()})
	if err != nil {
		enginemodel.Failf("fsm.New: %v", err)
	}
	d := &commandDriver{s: s}
	var r fsm.Result
	if evs := d.apply(&fsm.Command{Op: fsm.OpSeed, Token: first}, &r); r.Err != nil || len(evs) > 0 {
		enginemodel.Failf("seed %d: error %v, events %+v", first, r.Err, evs)
	}
	if got := s.Engine().Stats().Token; got != first {
		enginemodel.Failf("seed %d: Stats().Token = %d", first, got)
	}
	return d
}

func (d *commandDriver) Engine() *engine.Engine { return d.s.Engine() }

// apply numbers c and applies it.
func (d *commandDriver) apply(c *fsm.Command, r *fsm.Result) []engine.Event {
	d.seq++
	c.Origin, c.Seq = 1, d.seq
	return d.s.Apply(c, r)
}

// Run turns o into its command, applies it, and reads the answer from the
// result, the events Apply returned and the engine's Drops.
func (d *commandDriver) Run(o enginemodel.Op) (out enginemodel.Outcome) {
	c := fsm.Command{At: o.Now}
	switch o.Kind {
	case enginemodel.OpOpen:
		c.Op, c.TTL, c.LockDelay = fsm.OpOpenSession, o.Opts.TTL, o.Opts.LockDelay
	case enginemodel.OpAcquire:
		c.Op, c.Session, c.Req = fsm.OpAcquire, o.Session, o.Req
		c.Req.Keys = slices.Clone(o.Req.Keys)
	case enginemodel.OpRelease:
		c.Op, c.Session, c.Req.Keys = fsm.OpRelease, o.Session, slices.Clone(o.Keys)
	case enginemodel.OpReleaseAll:
		c.Op, c.Session = fsm.OpReleaseAll, o.Session
	case enginemodel.OpRenew:
		c.Op, c.Session, c.Req.Keys, c.Req.Lease = fsm.OpRenew, o.Session, slices.Clone(o.Keys), o.Lease
	case enginemodel.OpKeepAlive:
		c.Op, c.Session = fsm.OpKeepAlive, o.Session
	case enginemodel.OpCancel:
		c.Op, c.Waiter = fsm.OpCancel, o.Waiter
	case enginemodel.OpEndSession:
		c.Op, c.Session = fsm.OpEndSession, o.Session
	case enginemodel.OpForceRelease:
		c.Op, c.Key = fsm.OpForceRelease, []byte(o.Key)
	case enginemodel.OpTick:
		c.Op = fsm.OpTick
	default:
		enginemodel.Failf("%v: no command for this operation", o)
	}
	var r fsm.Result
	evs := d.apply(&c, &r)
	out.Err = r.Err
	switch o.Kind {
	case enginemodel.OpOpen:
		out.Session = r.Session
	case enginemodel.OpAcquire:
		out.Res = engine.Result{Granted: r.Granted, Token: r.Token, Expires: r.Expires, Waiter: r.Waiter}
	case enginemodel.OpReleaseAll, enginemodel.OpForceRelease:
		out.N = r.Count
	case enginemodel.OpRenew:
		out.Token, out.Expires = r.Token, r.Expires
	}
	out.Events = enginemodel.CopyEvents(evs)
	out.Drops = enginemodel.CopyDrops(d.s.Engine().Drops())
	return out
}
