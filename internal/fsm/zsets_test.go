package fsm

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/zset"
)

// zcmd builds an OpOwned command of a sorted-set kind on key.
func zcmd(kind OwnedKind, key string, args ZSetArgs) Command {
	return Command{Op: OpOwned, Owned: kind, Req: latch.LockRequest{Keys: []string{key}}, ZSet: args}
}

func zadd(key string, flags zset.AddFlags, kv ...any) Command {
	var ps []zset.Pair
	for i := 0; i < len(kv); i += 2 {
		ps = append(ps, zset.Pair{Score: kv[i].(float64), Member: kv[i+1].(string)})
	}
	return zcmd(OwnedZAdd, key, ZSetArgs{Flags: flags, Pairs: ps})
}

func zrem(key string, ms ...string) Command { return zcmd(OwnedZRem, key, ZSetArgs{Members: ms}) }

func withLease(c Command, d time.Duration, flags OwnedFlags) Command {
	c.Req.Lease, c.OwnedFlags = d, flags
	return c
}

// zstate describes key in s at now: its set and expiry, "none", or "lock".
func zstate(s *State, now int64, key string) string {
	set, exp := s.ZSet(now, key)
	switch {
	case set != nil && exp != 0:
		return fmt.Sprintf("%v exp+%v", set, time.Duration(exp-now))
	case set != nil:
		return set.String()
	case s.Engine().Owned(now, key).Held:
		return "lock"
	}
	return "none"
}

// TestZSetCommands: the sorted-set kinds, and the lock kinds on
// sorted-set keys, step by step.
func TestZSetCommands(t *testing.T) {
	sec := time.Second
	type step struct {
		c     Command
		dt    time.Duration
		want  string // "count found zkeys" or "err:<substring>"
		state string // zstate of key k after, if set
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"add, rem, emptied set deleted", []step{
			{c: zadd("k", 0, 1.0, "a", 2.0, "b"), want: "2 1 1", state: `{"a":1 "b":2}`},
			{c: zadd("k", zset.CH, 3.0, "a", 2.0, "b"), want: "1 1 1", state: `{"b":2 "a":3}`},
			{c: zrem("k", "a", "zz"), want: "1 1 1", state: `{"b":2}`},
			{c: zrem("k", "b"), want: "1 0 0", state: "none"},
			{c: zrem("k", "b"), want: "0 0 0", state: "none"},
			{c: zadd("k", zset.XX, 1.0, "a"), want: "0 0 0", state: "none"},
		}},
		{"incr", []step{
			{c: zadd("k", zset.INCR, 1.5, "a"), want: "1 1 1", state: `{"a":1.5}`},
			{c: zadd("k", zset.INCR|zset.NX, 1.5, "a"), want: "0 1 1", state: `{"a":1.5}`},
			{c: zadd("k", zset.INCR, math.Inf(1), "a"), want: "1 1 1", state: `{"a":inf}`},
			{c: zadd("k", zset.INCR, math.Inf(-1), "a"), want: "err:not a number", state: `{"a":inf}`},
			{c: zadd("k", zset.NX|zset.XX, 1.0, "a"), want: "err:XX and NX", state: `{"a":inf}`},
		}},
		{"ranges", []step{
			{c: zadd("k", 0, 1.0, "a", 2.0, "b", 3.0, "c", 4.0, "d"), want: "4 1 1"},
			{c: zcmd(OwnedZRemRangeByScore, "k", ZSetArgs{Range: zset.Range{Min: zset.Bound{Value: 1, Excl: true}, Max: zset.Bound{Value: 3}}}), want: "2 1 1", state: `{"a":1 "d":4}`},
			{c: zcmd(OwnedZRemRangeByRank, "k", ZSetArgs{Start: 0, Stop: -1}), want: "2 0 0", state: "none"},
		}},
		{"expiry by At", []step{
			{c: zadd("k", 0, 1.0, "a"), want: "1 1 1"},
			{c: withLease(zcmd(OwnedZExpire, "k", ZSetArgs{}), 2*sec, 0), want: "1 1 1", state: `{"a":1} exp+2s`},
			{c: zadd("k", 0, 2.0, "b"), dt: sec, want: "1 1 1", state: `{"a":1 "b":2} exp+1s`},
			{c: zcmd(OwnedZGet, "k", ZSetArgs{}), dt: sec, want: "0 0 0", state: "none"},
			{c: zadd("k", 0, 3.0, "c"), want: "1 1 1", state: `{"c":3}`},
			{c: withLease(zcmd(OwnedZExpire, "k", ZSetArgs{}), sec, 0), want: "1 1 1", state: `{"c":3} exp+1s`},
			{c: withLease(zcmd(OwnedZExpire, "k", ZSetArgs{}), 0, OwnedPersist), want: "1 1 1", state: `{"c":3}`},
			{c: withLease(zcmd(OwnedZExpire, "k", ZSetArgs{}), 0, OwnedPersist), want: "0 1 1", state: `{"c":3}`},
			{c: withLease(zcmd(OwnedZExpire, "k", ZSetArgs{}), 0, 0), want: "1 0 0", state: "none"},
		}},
		{"wrong types", []step{
			{c: ownedCmd(OwnedAcquire, 0, "me", 0, "k"), want: "1 0 0", state: "lock"},
			{c: zadd("k", 0, 1.0, "a"), want: "err:wrong kind", state: "lock"},
			{c: zcmd(OwnedZGet, "k", ZSetArgs{}), want: "err:wrong kind", state: "lock"},
			{c: zcmd(OwnedZPut, "k", ZSetArgs{Pairs: []zset.Pair{{Score: 1, Member: "a"}}}), want: "err:wrong kind", state: "lock"},
			{c: ownedCmd(OwnedRelease, 0, "", 0, "k"), want: "1 1 0", state: "none"},
			{c: zadd("k", 0, 1.0, "a"), want: "1 1 1"},
			{c: ownedCmd(OwnedAcquire, 0, "me", 0, "k"), want: "0 0 1", state: `{"a":1}`},
			{c: ownedCmd(OwnedSet, 0, "me", 0, "k"), want: "err:wrong kind", state: `{"a":1}`},
			{c: ownedCmd(OwnedGetSet, 0, "me", 0, "k"), want: "0 0 1", state: `{"a":1}`},
			{c: ownedCmd(OwnedObtain, 0, "me", sec, "k"), want: "0 0 1", state: `{"a":1}`},
			{c: ownedCmd(OwnedRelease, OwnedMatch, "me", 0, "k"), want: "0 1 1", state: `{"a":1}`},
			{c: ownedCmd(OwnedGet, 0, "", 0, "k"), want: "0 1 1", state: `{"a":1}`},
		}},
		{"generic del, pexpire, persist", []step{
			{c: zadd("k", 0, 1.0, "a"), want: "1 1 1"},
			{c: ownedCmd(OwnedRenew, 0, "", 3*sec, "k"), want: "1 1 1", state: `{"a":1} exp+3s`},
			{c: ownedCmd(OwnedRenew, OwnedPersist, "", 0, "k"), want: "1 1 1", state: `{"a":1}`},
			{c: ownedCmd(OwnedRenew, OwnedPersist, "", 0, "k"), want: "0 1 1", state: `{"a":1}`},
			{c: ownedCmd(OwnedRelease, 0, "", 0, "k", "k", "other"), want: "1 2 2", state: "none"},
			{c: zadd("k", 0, 1.0, "a"), want: "1 1 1"},
			{c: ownedCmd(OwnedRenew, 0, "", 0, "k"), want: "1 1 1", state: "none"},
		}},
		{"persist a lock", []step{
			{c: ownedCmd(OwnedAcquire, 0, "me", sec, "k"), want: "1 0 0"},
			{c: ownedCmd(OwnedRenew, OwnedPersist, "", 0, "k"), want: "1 1 0"},
			{c: ownedCmd(OwnedGet, 0, "", 0, "k"), dt: time.Hour, want: "1 1 0", state: "lock"},
			{c: ownedCmd(OwnedRenew, OwnedPersist, "", 0, "k"), want: "0 1 0"},
			{c: ownedCmd(OwnedRelease, OwnedPersist, "", 0, "k"), want: "err:invalid"},
		}},
		{"put", []step{
			{c: zcmd(OwnedZPut, "k", ZSetArgs{Pairs: []zset.Pair{{Score: 2, Member: "b"}, {Score: 1, Member: "a"}}}), want: "2 1 1", state: `{"a":1 "b":2}`},
			{c: withLease(zcmd(OwnedZPut, "k", ZSetArgs{Pairs: []zset.Pair{{Score: 5, Member: "c"}}}), 4*sec, 0), want: "1 1 1", state: `{"c":5} exp+4s`},
			{c: withLease(zcmd(OwnedZPut, "k", ZSetArgs{Pairs: []zset.Pair{{Score: 6, Member: "c"}}}), 0, OwnedKeepTTL), dt: sec, want: "1 1 1", state: `{"c":6} exp+3s`},
			{c: zcmd(OwnedZPut, "k", ZSetArgs{Pairs: []zset.Pair{{Score: 6, Member: "c"}, {Score: 7, Member: "c"}}}), want: "err:twice", state: `{"c":6} exp+3s`},
			{c: zcmd(OwnedZPut, "k", ZSetArgs{Pairs: []zset.Pair{{Score: math.NaN(), Member: "c"}}}), want: "err:not a number", state: `{"c":6} exp+3s`},
			{c: zcmd(OwnedZPut, "k", ZSetArgs{}), want: "0 0 0", state: "none"},
		}},
		{"limits", []step{
			{c: zadd("k", 0, 1.0, "a", 2.0, "b", 3.0, "c"), want: "3 1 1"},
			{c: zadd("k", 0, 4.0, "d"), want: "err:at most 3", state: `{"a":1 "b":2 "c":3}`},
			{c: zadd("k", zset.CH, 4.0, "a"), want: "1 1 1", state: `{"b":2 "c":3 "a":4}`},
			{c: zadd("k2", 0, 4.0, "a", 5.0, "b"), want: "err:in all, at most 4", state: `{"b":2 "c":3 "a":4}`},
			{c: zadd("k2", 0, 4.0, "a"), want: "1 1 1"},
			{c: zcmd(OwnedZPut, "k3", ZSetArgs{Pairs: []zset.Pair{{Score: 1, Member: "x"}}}), want: "err:in all"},
			{c: zcmd(OwnedZPut, "k", ZSetArgs{Pairs: []zset.Pair{{Score: 1, Member: "x"}, {Score: 1, Member: "y"}}}), want: "2 1 1", state: `{"x":1 "y":1}`},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig()
			if tt.name == "limits" {
				cfg.ZSet = zset.Limits{MaxMembers: 3, MaxTotal: 4}
			}
			s, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			now := int64(time.Hour)
			for i, st := range tt.steps {
				now += int64(st.dt)
				c := st.c
				c.At = now
				o := apply(s, &c)
				got := fmt.Sprintf("%d %d %d", o.r.Count, o.r.Found, o.r.ZKeys)
				if o.err != "" {
					got = "err:" + o.err
				}
				if !(got == st.want || strings.HasPrefix(st.want, "err:") && strings.Contains(got, st.want[4:])) {
					t.Fatalf("step %d (%v): got %q, want %q", i, c.Owned, got, st.want)
				}
				if st.state != "" {
					if z := zstate(s, now, "k"); z != st.state {
						t.Fatalf("step %d (%v): key is %s, want %s", i, c.Owned, z, st.state)
					}
				}
				if err := sameStates(s, restored(t, s)); err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				keys, members := s.ZKeys()
				var n, m int
				for k, zk := range s.z.keys {
					n++
					m += zk.set.Card()
					if _, v := s.z.volatile[k]; v != (zk.expires != 0) {
						t.Fatalf("step %d: key %q volatile %v, expires %d", i, k, v, zk.expires)
					}
				}
				if keys != n || members != m || len(s.z.volatile) > n {
					t.Fatalf("step %d: counted %d keys %d members, hold %d %d", i, keys, members, n, m)
				}
			}
		})
	}
}

// TestZSetExpiryIsReplicated: an expired set is gone for reads at the
// instant, and deleted by a command or a tick at or after it, never before,
// the same way on every replica.
func TestZSetExpiryIsReplicated(t *testing.T) {
	s := newState(t)
	at := int64(time.Hour)
	run := func(c Command, t int64) outcome { c.At = t; return apply(s, &c) }
	run(zadd("k", 0, 1.0, "a"), at)
	run(withLease(zcmd(OwnedZExpire, "k", ZSetArgs{}), time.Second, 0), at)
	if r := s.OwnedGet(at+int64(time.Second)-1, "k"); r.Found != 1 || r.ZKeys != 1 || r.Expires != at+int64(time.Second) {
		t.Fatalf("just before expiry: %+v", r)
	}
	if r := s.OwnedGet(at+int64(time.Second), "k"); r.Found != 0 {
		t.Fatalf("at expiry: %+v", r)
	}
	if keys, _ := s.ZKeys(); keys != 1 {
		t.Fatalf("a read deleted the set")
	}
	run(Command{Op: OpTick}, at+int64(time.Second)-1)
	if keys, _ := s.ZKeys(); keys != 1 {
		t.Fatalf("a tick before the expiry deleted it")
	}
	run(Command{Op: OpTick}, at+int64(time.Second))
	if keys, members := s.ZKeys(); keys != 0 || members != 0 {
		t.Fatalf("a tick at the expiry left %d keys %d members", keys, members)
	}
}

// TestZSetWatch: a watched sorted set makes a transaction fail after any
// change (members, expiry, delete and re-create), and only then.
func TestZSetWatch(t *testing.T) {
	s := newState(t)
	at := int64(time.Second)
	run := func(c Command) outcome { c.At = at; return apply(s, &c) }
	watch := func() Watch { r := s.OwnedGet(at, "z"); return WatchOfResult("z", &r) }
	tx := func(w Watch) outcome {
		return run(Command{Op: OpOwnedTx, Watch: []Watch{w}, Tx: []Command{
			zcmd(OwnedZGet, "z", ZSetArgs{}),
			zadd("z", zset.INCR, 1.0, "n"),
			ownedCmd(OwnedAcquire, 0, "me", 0, "lock"),
			ownedCmd(OwnedRelease, 0, "", 0, "lock"),
		}})
	}
	run(zadd("z", 0, 1.0, "a"))
	changes := []struct {
		name string
		c    []Command
		same bool
	}{
		{"nothing", nil, true},
		{"an add that changes nothing", []Command{zadd("z", 0, 1.0, "a")}, true},
		{"a removal of nothing", []Command{zrem("z", "none")}, true},
		{"a new member", []Command{zadd("z", 0, 2.0, "b")}, false},
		{"a score", []Command{zadd("z", 0, 5.0, "a")}, false},
		{"an expiry", []Command{withLease(zcmd(OwnedZExpire, "z", ZSetArgs{}), time.Hour, 0)}, false},
		{"delete and re-create", []Command{zcmd(OwnedZDel, "z", ZSetArgs{}), zadd("z", 0, 1.0, "a")}, false},
		{"a put of the same", []Command{zcmd(OwnedZPut, "z", ZSetArgs{Pairs: []zset.Pair{{Score: 1, Member: "a"}}})}, false},
	}
	for _, ch := range changes {
		w := watch()
		if w.Version == 0 {
			t.Fatalf("%s: a set watched without a version", ch.name)
		}
		before := s.AppendSnapshot(nil)
		for _, c := range ch.c {
			run(c)
		}
		if ch.same && string(before) != string(s.AppendSnapshot(nil)) {
			t.Fatalf("%s changed the state", ch.name)
		}
		o := tx(w)
		if changed := errors.Is(errors.New(o.err), ErrWatchChanged) || strings.Contains(o.err, ErrWatchChanged.Error()); changed == ch.same {
			t.Fatalf("%s: exec answered %q", ch.name, o.err)
		}
		if ch.same && (len(o.r.Tx) != 4 || o.r.Tx[0].ZSet == nil || o.r.Tx[1].Count != 1 || o.r.Tx[2].Count != 1 || o.r.Tx[3].Count != 1) {
			t.Fatalf("%s: exec results %+v", ch.name, o.r.Tx)
		}
		// Reset the set for the next case.
		run(zcmd(OwnedZPut, "z", ZSetArgs{Pairs: []zset.Pair{{Score: 1, Member: "a"}}}))
	}
	// A watch of a free key fails once it is a set.
	run(zcmd(OwnedZDel, "z", ZSetArgs{}))
	w := watch()
	run(zadd("z", 0, 1.0, "a"))
	if o := tx(w); !strings.Contains(o.err, ErrWatchChanged.Error()) {
		t.Fatalf("free key became a set: exec answered %q", o.err)
	}
}

// TestZSetReplica: a replica that decodes and applies the encoded log of a
// random history with many sorted-set commands answers as the leader and
// ends in the same state.
func TestZSetReplica(t *testing.T) {
	for seed := range uint64(10) {
		a, b := newState(t), newState(t)
		h := newHistory(500 + seed)
		var log []byte
		var cmds []Command
		for range 2000 {
			c := h.next()
			if h.rng.IntN(2) == 0 { // more sorted sets than the history has
				key := histKeys[h.rng.IntN(len(histKeys))]
				c = Command{Op: OpOwned, At: c.At, Origin: c.Origin, Seq: c.Seq, Owned: OwnedKind(int(OwnedZGet) + h.rng.IntN(int(OwnedZPut-OwnedZGet)+1)),
					Req: latch.LockRequest{Keys: []string{key}, Lease: h.dur(3 * time.Second)}, ZSet: h.zargs()}
				if c.Owned == OwnedZExpire && h.rng.IntN(3) == 0 {
					c.OwnedFlags = OwnedPersist
				}
			}
			cmds = append(cmds, c)
		}
		var want []outcome
		for i := range cmds {
			want = append(want, apply(a, &cmds[i]))
		}
		log = AppendBatch(log, cmds)
		var batch Batch
		if err := DecodeBatch(log, &batch); err != nil {
			t.Fatal(err)
		}
		for i := range batch.Cmds {
			got := apply(b, &batch.Cmds[i])
			if !reflect.DeepEqual(got, want[i]) {
				t.Fatalf("seed %d command %d (%v %v): replica %+v, leader %+v", seed, i, batch.Cmds[i].Op, batch.Cmds[i].Owned, got, want[i])
			}
		}
		if err := sameStates(a, b); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if keys, _ := a.ZKeys(); keys == 0 && seed == 0 {
			t.Logf("seed %d: no sorted set left at the end", seed)
		}
	}
}
