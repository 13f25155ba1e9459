package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/cache"
	"github.com/latchd/latch/internal/engine"
	"github.com/latchd/latch/internal/znode"
	"github.com/latchd/latch/internal/zset"
)

func testConfig() Config {
	return Config{
		Engine: engine.Config{MaxKeys: 4},
		Cache:  cache.Config{MemoryLimit: 4 << 10, MaxItemSize: 1 << 10},
	}
}

func newState(t testing.TB) *State {
	t.Helper()
	s, err := New(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// history generates random commands over a few keys, sessions and items:
// every kind of command, valid or not, with time moving on.
type history struct {
	rng      *rand.Rand
	now      int64
	seq      uint64
	sessions uint64 // sessions opened so far (ids are 1..sessions)
	waiters  uint64 // an upper bound of the waiter ids handed out
}

func newHistory(seed uint64) *history {
	return &history{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), now: 1_700_000_000 * int64(time.Second)}
}

var (
	histKeys  = []string{"a", "b", "c", "d"}
	histItems = [][]byte{[]byte("a"), []byte("b"), []byte("i1"), []byte("i2"), []byte("bad key")}
	histNodes = [][]byte{[]byte("n1"), []byte("n2")}
)

func (h *history) session() latch.SessionID {
	if h.sessions == 0 || h.rng.IntN(20) == 0 {
		return latch.SessionID(h.rng.Uint64N(h.sessions + 2))
	}
	return latch.SessionID(1 + h.rng.Uint64N(h.sessions))
}

func (h *history) keys() []string {
	n := 1 + h.rng.IntN(3)
	ks := make([]string, n)
	for i := range ks {
		ks[i] = histKeys[h.rng.IntN(len(histKeys))]
	}
	return ks
}

// histScores are the scores of histories' sorted sets.
var histScores = []float64{math.Inf(-1), -1, 0, 1, 1, 2.5, 3, math.Inf(1), math.NaN()}

// zargs returns random sorted-set arguments, valid or not.
func (h *history) zargs() ZSetArgs {
	member := func() string { return []string{"m1", "m2", "m3", ""}[h.rng.IntN(4)] }
	score := func() float64 { return histScores[h.rng.IntN(len(histScores)-1+h.rng.IntN(2))] }
	a := ZSetArgs{Flags: zset.AddFlags(h.rng.IntN(64))}
	if h.rng.IntN(2) == 0 {
		a.Flags &= zset.CH | zset.XX | zset.GT // mostly valid
	}
	for range 1 + h.rng.IntN(3) {
		a.Pairs = append(a.Pairs, zset.Pair{Score: score(), Member: member()})
		a.Members = append(a.Members, member())
	}
	a.Range = zset.Range{Min: zset.Bound{Value: score(), Excl: h.rng.IntN(2) == 0}, Max: zset.Bound{Value: score(), Excl: h.rng.IntN(2) == 0}}
	a.Start, a.Stop = int64(h.rng.IntN(7)-3), int64(h.rng.IntN(7)-3)
	return a
}

// histPassword is the ZooKeeper sessions' password in histories.
var histPassword = []byte("0123456789abcdef")

// histPaths are the znodes of histories.
var histPaths = []string{"/a", "/a/b", "/a/c-", "/d", "/d/e-"}

// zop returns a random znode operation.
func (h *history) zop() znode.Op {
	op := znode.Op{Path: histPaths[h.rng.IntN(len(histPaths))], Version: int32(h.rng.IntN(3)) - 1}
	switch h.rng.IntN(4) {
	case 0, 1:
		op.Kind, op.Mode = znode.OpCreate, znode.Mode(h.rng.IntN(5))
		op.ACL = []znode.ACL{{Perms: znode.PermAll, Scheme: "world", ID: "anyone"}}
		op.Data = []byte("x")
	case 2:
		op.Kind = znode.OpDelete
	default:
		op.Kind, op.Data = znode.OpSetData, []byte("yy")
	}
	return op
}

func (h *history) dur(max time.Duration) time.Duration {
	return time.Duration(h.rng.Int64N(int64(max)))
}

// next returns the next command of the history.
func (h *history) next() Command {
	switch h.rng.IntN(10) {
	case 0:
		h.now += int64(h.dur(3 * time.Second))
	case 1:
		h.now -= int64(h.dur(time.Second)) // a proposer's time may lag
	}
	h.seq++
	c := Command{At: h.now, Origin: 1 + h.rng.Uint64N(2), Seq: h.seq}
	item := func() []byte { return histItems[h.rng.IntN(len(histItems))] }
	value := func() []byte { return bytes.Repeat([]byte{'v'}, h.rng.IntN(400)) }
	owned := func() Command {
		o := Command{Op: OpOwned, Owned: OwnedKind(1 + h.rng.IntN(int(numOwnedKinds)-1))}
		o.OwnedFlags = OwnedFlags(h.rng.IntN(ownedFlagsMask + 1))
		o.Req.Keys = h.keys()
		if o.Owned != OwnedAcquire && o.Owned != OwnedRelease && o.Owned != OwnedRenew {
			o.Req.Keys = o.Req.Keys[:1]
		}
		o.Value = []byte{"ab"[h.rng.IntN(2)], "xy"[h.rng.IntN(2)]}
		if h.rng.IntN(3) > 0 {
			o.Req.Lease = h.dur(6 * time.Second)
		}
		o.Prefix = uint32(h.rng.IntN(3))
		if o.Owned.IsZSet() {
			o.ZSet = h.zargs()
		}
		return o
	}
	switch h.rng.IntN(31) {
	case 29: // a ZooKeeper session
		c.Op, c.TTL, c.Value, c.Exptime = OpZOpen, time.Second+h.dur(4*time.Second), histPassword, h.now/1e6
		if h.rng.IntN(10) == 0 {
			c.Value = histPassword[:3] // refused
		}
		h.sessions++
	case 30: // the ZooKeeper tree's other commands
		switch h.rng.IntN(8) {
		case 0:
			c.Op, c.Session, c.Gen, c.Value = OpZAttach, h.session(), uint64(h.rng.IntN(2)), histPassword
			if h.rng.IntN(4) == 0 {
				c.Value = bytes.Repeat([]byte{'x'}, PasswordLen)
			}
		case 1:
			c.Op, c.Exptime = OpZReap, h.now/1e6
		default:
			c.Op, c.Session, c.Gen, c.Exptime = OpZWrite, h.session(), uint64(h.rng.IntN(2)), h.now/1e6
			var ops []znode.Op
			for range 1 + h.rng.IntN(3) {
				ops = append(ops, h.zop())
			}
			if len(ops) > 1 || h.rng.IntN(4) == 0 {
				c.Flags = ZMulti
			}
			c.Value = AppendZOps(nil, ops)
			if h.rng.IntN(30) == 0 {
				c.Value = c.Value[:len(c.Value)/2] // malformed
			}
		}
	case 24, 25, 26:
		o := owned()
		o.At, o.Origin, o.Seq = c.At, c.Origin, c.Seq
		c = o
	case 27:
		c.Op = OpOwnedTx
		for range h.rng.IntN(3) {
			c.Tx = append(c.Tx, owned())
		}
		for range h.rng.IntN(2) {
			k := histKeys[h.rng.IntN(len(histKeys))]
			c.Watch = append(c.Watch, Watch{Key: k, Token: latch.Token(h.rng.IntN(3))})
		}
	case 0, 1:
		c.Op = OpOpenSession
		if h.rng.IntN(2) == 0 {
			c.TTL = h.dur(5 * time.Second)
		}
		if h.rng.IntN(3) == 0 {
			c.Key = histNodes[h.rng.IntN(len(histNodes))]
		}
		c.LockDelay = h.dur(time.Second) * time.Duration(h.rng.IntN(2))
		h.sessions++
	case 2:
		c.Op, c.Session = OpKeepAlive, h.session()
	case 3:
		c.Op, c.Session, c.Token = OpEndSession, h.session(), latch.Token(h.rng.IntN(2))
	case 4, 5, 6:
		c.Op, c.Session = OpAcquire, h.session()
		c.Req = latch.LockRequest{Keys: h.keys(), Mode: latch.Mode(h.rng.IntN(2)), Relock: latch.Relock(h.rng.IntN(2))}
		if c.Req.Mode == latch.Shared {
			c.Req.Limit = uint32(h.rng.IntN(3))
		}
		switch h.rng.IntN(3) {
		case 0:
			c.Req.Wait = latch.NoWait
		case 1:
			c.Req.Wait = latch.WaitForever
			h.waiters++
		case 2:
			c.Req.Wait = h.dur(4 * time.Second)
			h.waiters++
		}
		if h.rng.IntN(3) == 0 {
			c.Req.Lease = h.dur(6 * time.Second)
		}
	case 7:
		c.Op, c.Waiter = OpCancel, engine.WaiterID(h.rng.Uint64N(h.waiters+2))
	case 8:
		c.Op, c.Session, c.Req.Keys = OpRelease, h.session(), h.keys()
	case 9:
		c.Op, c.Session = OpReleaseAll, h.session()
	case 10:
		c.Op, c.Session, c.Req.Keys, c.Req.Lease = OpRenew, h.session(), h.keys(), h.dur(5*time.Second)
	case 11:
		c.Op, c.Key = OpForceRelease, []byte(histKeys[h.rng.IntN(len(histKeys))])
	case 12:
		c.Op = OpTick
	case 13, 14:
		c.Op = []Op{OpItemSet, OpItemAdd, OpItemReplace, OpItemCAS}[h.rng.IntN(4)]
		c.Session, c.Key, c.Value, c.Flags = h.session(), item(), value(), h.rng.Uint32()
		c.Exptime = int64(h.rng.IntN(4))
		if h.rng.IntN(2) == 0 {
			c.CAS = h.rng.Uint64N(40)
		}
	case 15:
		c.Op = []Op{OpItemAppend, OpItemPrepend}[h.rng.IntN(2)]
		c.Session, c.Key, c.Value = h.session(), item(), bytes.Repeat([]byte{'w'}, h.rng.IntN(20))
	case 16:
		c.Op = []Op{OpItemIncr, OpItemDecr}[h.rng.IntN(2)]
		c.Session, c.Key, c.Delta = h.session(), item(), h.rng.Uint64N(1000)
		if h.rng.IntN(2) == 0 {
			c.Value, c.Exptime = []byte("42"), int64(h.rng.IntN(3))
		}
	case 17:
		c.Op, c.Session, c.Key = OpItemDelete, h.session(), item()
	case 18:
		c.Op = []Op{OpItemTouch, OpItemGetAndTouch}[h.rng.IntN(2)]
		c.Key, c.Exptime = item(), int64(h.rng.IntN(3))
	case 19:
		c.Op, c.Exptime = OpItemFlush, int64(h.rng.IntN(2))
	case 20, 21:
		c.Op, c.Session, c.Key, c.LockMode = OpItemLock, h.session(), item(), cache.LockMode(h.rng.IntN(3))
		c.Exptime = int64(h.rng.IntN(3))
	case 22:
		c.Op = []Op{OpItemUnlock, OpItemUnlockAll}[h.rng.IntN(2)]
		c.Session, c.Key = h.session(), item()
	case 23:
		switch h.rng.IntN(2) {
		case 0:
			c.Op, c.Session, c.Key, c.Value = OpItemReplaceAndUnlock, h.session(), item(), value()
		case 1:
			c.Op, c.Key, c.CAS = OpItemEvict, item(), h.rng.Uint64N(40)
		}
	case 28: // a cluster's commands
		node := histNodes[h.rng.IntN(len(histNodes))]
		switch h.rng.IntN(5) {
		case 4:
			c.Op, c.Session = OpResume, h.session()
		case 0:
			c.Op, c.TTL = OpPromote, h.dur(4*time.Second)
		case 1, 2:
			c.Op, c.Key = OpNodeAlive, node
		case 3:
			c.Op, c.Key = OpEndOwner, node
		}
	}
	if carriesGen(c.Op) {
		// Mostly the first two generations (resumes are rare); sometimes
		// a version 1 command's.
		c.Gen = []uint64{0, 0, 1, 1, 2, AnyGen}[h.rng.IntN(6)]
	}
	if h.rng.IntN(50) == 0 && h.seq > 1 {
		c.Seq = h.rng.Uint64N(h.seq) // a resend: not applied again
	}
	return c
}

// outcome is what one Apply answered, comparable between states.
type outcome struct {
	r   Result
	err string
	evs []engine.Event
}

func apply(s *State, c *Command) outcome {
	var r Result
	evs := s.Apply(c, &r)
	o := outcome{r: r, evs: append([]engine.Event(nil), evs...)}
	if r.Err != nil {
		o.err = r.Err.Error()
		o.r.Err = nil
	}
	return o
}

// TestDeterminism: two fresh states fed the same random stream of
// commands, on locks and items, answer alike and end byte-identical in
// their snapshots.
func TestDeterminism(t *testing.T) {
	for seed := range uint64(20) {
		a, b := newState(t), newState(t)
		h := newHistory(seed)
		for i := range 3000 {
			c := h.next()
			oa, ob := apply(a, &c), apply(b, &c)
			if !reflect.DeepEqual(oa, ob) {
				t.Fatalf("seed %d, command %d (%v): answers differ:\n%+v\n%+v", seed, i, c.Op, oa, ob)
			}
		}
		if sa, sb := a.AppendSnapshot(nil), b.AppendSnapshot(nil); !bytes.Equal(sa, sb) {
			t.Fatalf("seed %d: snapshots differ (%d and %d bytes)", seed, len(sa), len(sb))
		}
	}
}

// TestSnapshotRestore: apply(restore(snapshot(s)), rest) answers as
// apply(s, rest) and ends in the same state, on random histories; and a
// snapshot restores to one that encodes to the same bytes.
func TestSnapshotRestore(t *testing.T) {
	for seed := range uint64(40) {
		s := newState(t)
		h := newHistory(100 + seed)
		cut := 200 + int(seed)*50
		for range cut {
			c := h.next()
			apply(s, &c)
		}
		snap := s.AppendSnapshot(nil)
		r, err := Restore(testConfig(), snap)
		if err != nil {
			t.Fatalf("seed %d: Restore: %v", seed, err)
		}
		if again := r.AppendSnapshot(nil); !bytes.Equal(again, snap) {
			t.Fatalf("seed %d: snapshot(restore(snap)) differs from snap", seed)
		}
		for i := range 2000 {
			c := h.next()
			os, or := apply(s, &c), apply(r, &c)
			if !reflect.DeepEqual(os, or) {
				t.Fatalf("seed %d, command %d after the snapshot (%v %+v): answers differ:\nstate:    %+v\nrestored: %+v", seed, i, c.Op, c, os, or)
			}
		}
		if a, b := s.AppendSnapshot(nil), r.AppendSnapshot(nil); !bytes.Equal(a, b) {
			t.Fatalf("seed %d: final snapshots differ", seed)
		}
	}
}

// TestCapture: a capture encoded a few lock-table entries after every
// command of random histories (locks, items, owners, resumes), which
// change the state under it, writes exactly the snapshot of the instant it
// was taken; one of a state that Restore replaced goes on alike.
func TestCapture(t *testing.T) {
	for seed := range uint64(40) {
		s := newState(t)
		h := newHistory(300 + seed)
		var c *Capture
		var want []byte
		compared := 0
		for i := range 3000 {
			if c == nil && h.rng.IntN(20) == 0 {
				want, c = s.AppendSnapshot(nil), s.Capture()
			}
			cmd := h.next()
			apply(s, &cmd)
			if c == nil || !c.Step(h.rng.IntN(3)) {
				continue
			}
			if got := c.AppendTo(nil); !bytes.Equal(got, want) {
				t.Fatalf("seed %d, command %d: the capture wrote\n%x\nwant\n%x", seed, i, got, want)
			}
			c = nil
			compared++
			if h.rng.IntN(4) == 0 { // a restored state's captures, and the old state's
				want, c = s.AppendSnapshot(nil), s.Capture()
				s = restored(t, s)
			}
		}
		if compared == 0 {
			t.Fatalf("seed %d: no capture compared", seed)
		}
	}
}

// TestResendAppliesOnce: a command whose (Origin, Seq) was applied is not
// applied again, whatever came from other origins in between, and across
// a snapshot.
func TestResendAppliesOnce(t *testing.T) {
	s := newState(t)
	at := int64(time.Second)
	set := Command{Op: OpItemIncr, At: at, Origin: 7, Seq: 1, Key: []byte("n"), Value: []byte("0")}
	if o := apply(s, &set); o.err != "" {
		t.Fatal(o.err)
	}
	incr := Command{Op: OpItemIncr, At: at, Origin: 7, Seq: 2, Key: []byte("n"), Delta: 1}
	if o := apply(s, &incr); o.r.Value != 1 {
		t.Fatalf("first incr: %+v", o)
	}
	other := Command{Op: OpItemIncr, At: at, Origin: 8, Seq: 1, Key: []byte("n"), Delta: 10}
	apply(s, &other)
	for _, st := range []*State{s, restored(t, s)} {
		var r Result
		st.Apply(&incr, &r)
		if !errors.Is(r.Err, ErrDuplicate) {
			t.Fatalf("resent incr: err = %v, want ErrDuplicate", r.Err)
		}
		it, err := st.Cache().Get(at, []byte("n"))
		if err != nil || string(it.Value) != "11" {
			t.Fatalf("n = %q, %v; want 11", it.Value, err)
		}
	}
	// Seq 0 is not numbered: applied every time.
	zero := Command{Op: OpItemIncr, At: at, Origin: 7, Key: []byte("n"), Delta: 1}
	apply(s, &zero)
	if o := apply(s, &zero); o.r.Value != 13 {
		t.Fatalf("unnumbered incr applied twice: %+v", o)
	}
}

func restored(t *testing.T, s *State) *State {
	t.Helper()
	r, err := Restore(s.Config(), s.AppendSnapshot(nil))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestItemLockIsOneLock: a memcached lock is held in the lock table and on
// the item together, and every command that ends it in one ends it in
// both: the holder's unlock, delete and RaU, unlock-all, an operator's
// force-release, the end of the session, its TTL.
func TestItemLockIsOneLock(t *testing.T) {
	key := []byte("fk")
	for _, tc := range []struct {
		name string
		end  func(sess latch.SessionID) Command
	}{
		{"unlock", func(s latch.SessionID) Command { return Command{Op: OpItemUnlock, Session: s, Key: key} }},
		{"delete", func(s latch.SessionID) Command { return Command{Op: OpItemDelete, Session: s, Key: key} }},
		{"rau", func(s latch.SessionID) Command {
			return Command{Op: OpItemReplaceAndUnlock, Session: s, Key: key, Value: []byte("y")}
		}},
		{"unlock-all", func(s latch.SessionID) Command { return Command{Op: OpItemUnlockAll, Session: s} }},
		{"force-release", func(latch.SessionID) Command { return Command{Op: OpForceRelease, Key: key} }},
		{"end-session", func(s latch.SessionID) Command { return Command{Op: OpEndSession, Session: s} }},
		{"ttl", func(latch.SessionID) Command { return Command{Op: OpTick, At: int64(time.Minute)} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newState(t)
			at := int64(time.Second)
			run := func(c Command) outcome {
				t.Helper()
				if c.At == 0 {
					c.At = at
				}
				return apply(s, &c)
			}
			holder := run(Command{Op: OpOpenSession, TTL: 10 * time.Second}).r.Session
			other := run(Command{Op: OpOpenSession}).r.Session
			run(Command{Op: OpItemSet, Session: holder, Key: key, Value: []byte("x")})
			if o := run(Command{Op: OpItemLock, Session: holder, Key: key}); o.err != "" {
				t.Fatalf("lock: %s", o.err)
			}
			if err := lockErr(s, other, key); !errors.Is(err, cache.ErrLocked) {
				t.Fatalf("another session's lock: %v, want ErrLocked", err)
			}
			run(tc.end(holder))
			if st := s.Engine().Stats(); st.Holds != 0 {
				t.Fatalf("lock table still holds %d", st.Holds)
			}
			if st := s.Cache().Stats(); st.LockedItems != 0 {
				t.Fatalf("cache still has %d locked items", st.LockedItems)
			}
		})
	}
}

// lockErr tries an item lock of key for sess and returns its error.
func lockErr(s *State, sess latch.SessionID, key []byte) error {
	var r Result
	s.Apply(&Command{Op: OpItemLock, At: s.Engine().Now(), Session: sess, Key: key}, &r)
	return r.Err
}

// FuzzRestore: Restore never panics, and what it accepts encodes back to
// the same bytes.
func FuzzRestore(f *testing.F) {
	for seed := range uint64(4) {
		s := newState(f)
		h := newHistory(seed)
		for range 300 {
			c := h.next()
			apply(s, &c)
		}
		f.Add(s.AppendSnapshot(nil))
	}
	f.Add([]byte{SnapshotVersion, 0, 0, 0})
	zs := newState(f)
	for i, c := range []Command{zadd("sem", 0, 1.0, "a", math.Inf(-1), "b"), zadd("sem2", 0, 2.0, ""),
		withLease(zcmd(OwnedZExpire, "sem2", ZSetArgs{}), time.Second, 0)} {
		c.At = int64(i)
		apply(zs, &c)
	}
	f.Add(zs.AppendSnapshot(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Restore(testConfig(), b)
		if err != nil {
			return
		}
		if again := s.AppendSnapshot(nil); !bytes.Equal(again, b) {
			t.Fatalf("re-encoded snapshot differs:\n%x\n%x", b, again)
		}
		h := newHistory(1)
		h.now = s.Engine().Now()
		for range 50 {
			c := h.next()
			apply(s, &c)
		}
	})
}

func ExampleState_Apply() {
	s, _ := New(Config{Cache: cache.DefaultConfig()})
	var r Result
	s.Apply(&Command{Op: OpSeed, At: 1, Token: 100}, &r)
	s.Apply(&Command{Op: OpOpenSession, At: 1}, &r)
	sess := r.Session
	s.Apply(&Command{Op: OpAcquire, At: 2, Origin: 1, Seq: 1, Session: sess, Req: latch.LockRequest{Keys: []string{"deploy"}}}, &r)
	fmt.Println(r.Granted, r.Token)
	// Output: true 101
}

// resumedState returns a state with one session of TTL ttl, which holds
// "held" with a lease of a minute and was then resumed (generation 1),
// and the function that applies the next command of its proposer, one
// millisecond after the last.
func resumedState(t *testing.T, ttl time.Duration) (*State, latch.SessionID, func(Command) Result) {
	t.Helper()
	s := newState(t)
	seq := uint64(0)
	do := func(c Command) Result {
		seq++
		c.At, c.Origin, c.Seq = t0+int64(seq)*int64(time.Millisecond), 1, seq
		var r Result
		s.Apply(&c, &r)
		return r
	}
	id := do(Command{Op: OpOpenSession, TTL: ttl}).Session
	if r := do(Command{Op: OpAcquire, Session: id, Req: latch.LockRequest{Keys: []string{"held"}, Lease: time.Minute}}); !r.Granted {
		t.Fatalf("acquire held: %+v", r)
	}
	if r := do(Command{Op: OpResume, Session: id}); r.Err != nil || r.Count != 1 {
		t.Fatalf("resume: %+v", r)
	}
	if g := s.Gen(id); g != 1 {
		t.Fatalf("Gen(%d) = %d after one resume, want 1", id, g)
	}
	return s, id, do
}

// TestStaleGeneration: once OpResume moved a session to generation 1, a
// command on its behalf of generation 0 (its old connection's node
// proposed it before the resume, and it is applied after) is refused with
// ErrSuperseded and changes nothing: the state ends as if a tick had been
// applied in its place. The same command of generation 1 acts, and so
// does one of AnyGen (a version 1 command).
func TestStaleGeneration(t *testing.T) {
	const ttl = time.Minute
	// at is the instant of the command under test: the fourth.
	at := t0 + 4*int64(time.Millisecond)
	for _, tc := range []struct {
		name string
		c    Command // Session is set by the test
		// acted checks the result and state of the command that acted.
		acted func(t *testing.T, s *State, id latch.SessionID, r Result)
	}{
		{
			name: "acquire",
			c:    Command{Op: OpAcquire, Req: latch.LockRequest{Keys: []string{"free"}, Wait: latch.WaitForever}},
			acted: func(t *testing.T, s *State, id latch.SessionID, r Result) {
				if st, ok := s.Engine().Key("free"); !r.Granted || !ok || len(st.Holders) != 1 || st.Holders[0].Session != id {
					t.Errorf("acquire: %+v, free %+v; want granted to session %d", r, st, id)
				}
			},
		},
		{
			name: "release",
			c:    Command{Op: OpRelease, Req: latch.LockRequest{Keys: []string{"held"}}},
			acted: func(t *testing.T, s *State, _ latch.SessionID, r Result) {
				if st, ok := s.Engine().Key("held"); r.Err != nil || ok {
					t.Errorf("release: %v, held %+v; want released", r.Err, st)
				}
			},
		},
		{
			name: "release all",
			c:    Command{Op: OpReleaseAll},
			acted: func(t *testing.T, s *State, _ latch.SessionID, r Result) {
				if st, ok := s.Engine().Key("held"); r.Err != nil || r.Count != 1 || ok {
					t.Errorf("release all: %+v, held %+v; want 1 released", r, st)
				}
			},
		},
		{
			name: "renew",
			c:    Command{Op: OpRenew, Req: latch.LockRequest{Keys: []string{"held"}, Lease: time.Hour}},
			acted: func(t *testing.T, _ *State, _ latch.SessionID, r Result) {
				if r.Err != nil || r.Expires != at+int64(time.Hour) {
					t.Errorf("renew: %+v; want the lease to end at %d", r, at+int64(time.Hour))
				}
			},
		},
		{
			name: "keepalive",
			c:    Command{Op: OpKeepAlive},
			acted: func(t *testing.T, s *State, id latch.SessionID, r Result) {
				if st, _ := s.Engine().Session(id); r.Err != nil || st.Expires != at+int64(ttl) {
					t.Errorf("keepalive: %v, session %+v; want its TTL to end at %d", r.Err, st, at+int64(ttl))
				}
			},
		},
	} {
		for _, gen := range []uint64{0, 1, AnyGen} {
			name := fmt.Sprintf("%s/gen %d", tc.name, gen)
			if gen == AnyGen {
				name = tc.name + "/gen any"
			}
			t.Run(name, func(t *testing.T) {
				s, id, do := resumedState(t, ttl)
				c := tc.c
				c.Session, c.Gen = id, gen
				r := do(c)
				if gen != 0 {
					tc.acted(t, s, id, r)
					return
				}
				if !errors.Is(r.Err, ErrSuperseded) || !errors.Is(r.Err, latch.ErrUnavailable) {
					t.Fatalf("%v of generation 0 after the resume: %+v; want ErrSuperseded, which wraps latch.ErrUnavailable (the client resumes)", c.Op, r)
				}
				if r.Granted || r.Count != 0 || r.Expires != 0 {
					t.Errorf("refused %v has a result: %+v", c.Op, r)
				}
				twin, _, doTwin := resumedState(t, ttl)
				doTwin(Command{Op: OpTick})
				if got, want := s.AppendSnapshot(nil), twin.AppendSnapshot(nil); !bytes.Equal(got, want) {
					t.Errorf("the refused %v changed the state: its snapshot differs from a tick's", c.Op)
				}
			})
		}
	}
}

// TestVersion1AppliesUnchecked: a version 1 batch, written before
// commands carried a generation, decodes with AnyGen and applies as it
// did: a session's acquire from such a log is granted after the session
// was resumed.
func TestVersion1AppliesUnchecked(t *testing.T) {
	s, id, do := resumedState(t, time.Minute)
	data := raw(byte(1), uint64(2),
		OpAcquire, int64(t0+int64(time.Second)), uint64(2), uint64(1), uint64(id),
		uint64(1), uint64(4), "free", byte(latch.Exclusive), uint64(0), int64(latch.NoWait), int64(0), byte(latch.RelockReject),
		OpRenew, int64(t0+int64(time.Second)), uint64(2), uint64(2), uint64(id),
		uint64(1), uint64(4), "free", int64(time.Hour))
	var b Batch
	if err := DecodeBatch(data, &b); err != nil {
		t.Fatalf("DecodeBatch of version 1: %v", err)
	}
	for i, c := range b.Cmds {
		if c.Gen != AnyGen {
			t.Errorf("command %d (%v): Gen %d; want AnyGen", i, c.Op, c.Gen)
		}
	}
	b.Results = make([]Result, len(b.Cmds))
	for i := range b.Cmds {
		s.Apply(&b.Cmds[i], &b.Results[i])
	}
	if r := b.Results[0]; !r.Granted {
		t.Errorf("version 1 acquire after the resume: %+v; want granted", r)
	}
	if r := b.Results[1]; r.Err != nil || r.Expires != t0+int64(time.Second)+int64(time.Hour) {
		t.Errorf("version 1 renew after the resume: %+v; want the lease renewed", r)
	}
	// The session's current connection goes on as before.
	if r := do(Command{Op: OpRelease, Session: id, Gen: 1, Req: latch.LockRequest{Keys: []string{"free"}}}); r.Err != nil {
		t.Errorf("release of generation 1: %v", r.Err)
	}
}

// TestDropsPerCommand: Drops holds the holds that the last command ended,
// and nothing for a command that ended none, even one refused before it
// reached the lock table (a compare-and-delete by another owner, a
// resent command), whose Drops were once the command before's, counted
// again by the metrics.
func TestDropsPerCommand(t *testing.T) {
	cfg := testConfig()
	cfg.Engine.RecordDrops = true
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	const at = int64(time.Second)
	owned := func(seq uint64, kind OwnedKind, value string) *Command {
		return &Command{Op: OpOwned, At: at, Origin: 1, Seq: seq, Owned: kind, OwnedFlags: OwnedMatch,
			Req: latch.LockRequest{Keys: []string{"k"}, Lease: time.Minute}, Value: []byte(value)}
	}
	release := owned(2, OwnedRelease, "a")
	for _, step := range []struct {
		name  string
		c     *Command
		drops int
	}{
		{"acquire", owned(1, OwnedAcquire, "a"), 0},
		{"release by the owner", release, 1},
		{"release by another owner", owned(3, OwnedRelease, "b"), 0},
		{"the release again", release, 0},
		{"an unknown op", &Command{Op: Op(200), At: at}, 0},
	} {
		var r Result
		s.Apply(step.c, &r)
		if got := len(s.Drops()); got != step.drops {
			t.Errorf("%s: %d drops, want %d (result %+v)", step.name, got, step.drops, r)
		}
	}
}
