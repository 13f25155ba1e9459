package fsm

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/cache"
	"github.com/latchd/latch/internal/engine"
)

// ownedCmd builds an OpOwned command.
func ownedCmd(kind OwnedKind, flags OwnedFlags, value string, lease time.Duration, keys ...string) Command {
	return Command{Op: OpOwned, Owned: kind, OwnedFlags: flags, Value: []byte(value), Req: latch.LockRequest{Keys: keys, Lease: lease}}
}

// TestOwnedCommands: each owned-lock operation, step by step, with what it
// answers (Count/Found/Owner, or an error).
func TestOwnedCommands(t *testing.T) {
	sec := time.Second
	type step struct {
		c    Command
		dt   time.Duration // time passes before the step
		want string        // "count found owner" or "err:<substring>"
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"acquire, exclude, release by value", []step{
			{c: ownedCmd(OwnedAcquire, 0, "a", sec, "k"), want: "1 0 "},
			{c: ownedCmd(OwnedAcquire, 0, "b", sec, "k"), want: "0 0 "},
			{c: ownedCmd(OwnedGet, 0, "", 0, "k"), want: "1 1 a"},
			{c: ownedCmd(OwnedRelease, OwnedMatch, "b", 0, "k"), want: "0 1 "},
			{c: ownedCmd(OwnedRelease, OwnedMatch, "a", 0, "k"), want: "1 1 "},
			{c: ownedCmd(OwnedRelease, OwnedMatch, "a", 0, "k"), want: "0 0 "},
		}},
		{"lease ends", []step{
			{c: ownedCmd(OwnedAcquire, 0, "a", sec, "k"), want: "1 0 "},
			{c: ownedCmd(OwnedGet, 0, "", 0, "k"), dt: sec - 1, want: "1 1 a"},
			{c: ownedCmd(OwnedGet, 0, "", 0, "k"), dt: 1, want: "0 0 "},
			{c: ownedCmd(OwnedAcquire, 0, "b", sec, "k"), want: "1 0 "},
		}},
		{"plain set never steals", []step{
			{c: ownedCmd(OwnedSet, OwnedXX, "a", 0, "k"), want: "0 0 "},
			{c: ownedCmd(OwnedSet, 0, "a", sec, "k"), want: "1 0 "},
			{c: ownedCmd(OwnedSet, 0, "a", 0, "k"), want: "1 0 "}, // same owner: lease removed
			{c: ownedCmd(OwnedGet, 0, "", 0, "k"), dt: time.Hour, want: "1 1 a"},
			{c: ownedCmd(OwnedSet, 0, "b", sec, "k"), want: "err:lock is busy"},
		}},
		{"getset takeover", []step{
			{c: ownedCmd(OwnedGetSet, 0, "t1", 0, "k"), want: "1 0 "},
			{c: ownedCmd(OwnedGetSet, 0, "t2", 0, "k"), want: "1 1 t1"},
			{c: ownedCmd(OwnedRelease, 0, "", 0, "k"), want: "1 1 "},
		}},
		{"renew adds or replaces, zero releases", []step{
			{c: ownedCmd(OwnedAcquire, 0, "a", 10*sec, "k"), want: "1 0 "},
			{c: ownedCmd(OwnedRenew, OwnedMatch|OwnedAdd, "a", 10*sec, "k"), dt: 5 * sec, want: "1 1 "},
			{c: ownedCmd(OwnedGet, 0, "", 0, "k"), dt: 14 * sec, want: "1 1 a"},
			{c: ownedCmd(OwnedRenew, OwnedMatch, "b", 10*sec, "k"), want: "0 1 "},
			{c: ownedCmd(OwnedRenew, 0, "", 0, "k"), want: "1 1 "},
			{c: ownedCmd(OwnedGet, 0, "", 0, "k"), want: "0 0 "},
		}},
		{"multi-key all or nothing", []step{
			{c: ownedCmd(OwnedAcquire, 0, "a", sec, "x", "y"), want: "1 0 "},
			{c: ownedCmd(OwnedRenew, OwnedMatch|OwnedAll, "a", 0, "x", "y", "z"), want: "0 2 "},
			{c: ownedCmd(OwnedRelease, OwnedMatch, "a", 0, "x", "y", "z"), want: "2 2 "},
		}},
		{"obtain by prefix", []step{
			{c: Command{Op: OpOwned, Owned: OwnedObtain, Prefix: 3, Value: []byte("tokA"), Req: latch.LockRequest{Keys: []string{"k"}, Lease: sec}}, want: "1 0 "},
			{c: Command{Op: OpOwned, Owned: OwnedObtain, Prefix: 3, Value: []byte("tokB"), Req: latch.LockRequest{Keys: []string{"k"}, Lease: sec}}, want: "1 0 "},
			{c: ownedCmd(OwnedGet, 0, "", 0, "k"), want: "1 1 tokB"},
			{c: Command{Op: OpOwned, Owned: OwnedObtain, Prefix: 3, Value: []byte("xyz"), Req: latch.LockRequest{Keys: []string{"k"}, Lease: sec}}, want: "0 0 "},
		}},
		{"lease ends at an instant", []step{ // the steps start at 1s
			{c: ownedCmd(OwnedAcquire, OwnedAt, "a", 11*sec, "k"), want: "1 0 "},
			{c: ownedCmd(OwnedGet, 0, "", 0, "k"), dt: 10*sec - 1, want: "1 1 a"},
			{c: ownedCmd(OwnedRenew, OwnedAt, "", 20*sec, "k"), want: "1 1 "},
			{c: ownedCmd(OwnedGet, 0, "", 0, "k"), dt: 9 * sec, want: "1 1 a"},
			{c: ownedCmd(OwnedGet, 0, "", 0, "k"), dt: 1, want: "0 0 "},
		}},
		{"an instant already past", []step{
			{c: ownedCmd(OwnedAcquire, OwnedAt, "a", 1, "k"), want: "1 0 "},
			{c: ownedCmd(OwnedGet, 0, "", 0, "k"), want: "0 0 "},
			{c: ownedCmd(OwnedSet, OwnedAt, "a", 1, "k"), want: "1 0 "},
			{c: ownedCmd(OwnedGet, 0, "", 0, "k"), want: "0 0 "},
			{c: ownedCmd(OwnedSet, 0, "a", 0, "k"), want: "1 0 "},
			{c: ownedCmd(OwnedSet, OwnedAt, "b", 1, "k"), want: "err:lock is busy"},
			{c: ownedCmd(OwnedSet, OwnedAt, "a", 1, "k"), want: "1 0 "},
			{c: ownedCmd(OwnedGet, 0, "", 0, "k"), want: "0 0 "},
			{c: ownedCmd(OwnedSet, 0, "a", 0, "k"), want: "1 0 "},
			{c: ownedCmd(OwnedRenew, OwnedAt, "", -5, "k"), want: "1 1 "},
			{c: ownedCmd(OwnedGet, 0, "", 0, "k"), want: "0 0 "},
		}},
		{"persist", []step{
			{c: ownedCmd(OwnedAcquire, 0, "a", sec, "k"), want: "1 0 "},
			{c: ownedCmd(OwnedRenew, OwnedPersist, "", 0, "k"), want: "1 1 "},
			{c: ownedCmd(OwnedGet, 0, "", 0, "k"), dt: time.Hour, want: "1 1 a"},
			{c: ownedCmd(OwnedRenew, 0, "", 0, "k"), want: "1 1 "},
			{c: ownedCmd(OwnedGet, 0, "", 0, "k"), want: "0 0 "},
		}},
		{"invalid", []step{
			{c: ownedCmd(OwnedAcquire, 0, "a", sec, "a b"), want: "err:invalid key"},
			{c: ownedCmd(OwnedGet, 0, "", 0, "a", "b"), want: "err:want 1"},
			{c: ownedCmd(OwnedAcquire, 0, "a", 0), want: "err:no keys"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newState(t)
			at := int64(time.Second)
			for i, st := range tt.steps {
				at += int64(st.dt)
				c := st.c
				c.At = at
				o := apply(s, &c)
				got := fmt.Sprintf("%d %d %s", o.r.Count, o.r.Found, o.r.Owner)
				if o.err != "" {
					got = "err:" + o.err
				}
				if st.want[:min(4, len(st.want))] == "err:" {
					if o.err == "" || !strings.Contains(o.err, st.want[4:]) {
						t.Fatalf("step %d %v: got %q, want %q", i, c.Owned, got, st.want)
					}
					continue
				}
				if got != st.want {
					t.Fatalf("step %d %v: got %q, want %q", i, c.Owned, got, st.want)
				}
			}
			if err := sameStates(s, restored(t, s)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func sameStates(a, b *State) error {
	if sa, sb := a.AppendSnapshot(nil), b.AppendSnapshot(nil); string(sa) != string(sb) {
		return errors.New("snapshots differ")
	}
	return nil
}

// TestOwnedTx: a transaction applies all its commands or, when a watched
// key changed, none.
func TestOwnedTx(t *testing.T) {
	s := newState(t)
	at := int64(time.Second)
	run := func(c Command) outcome { c.At = at; return apply(s, &c) }
	run(ownedCmd(OwnedAcquire, 0, "a", 0, "k"))
	w := WatchOf("k", s.Engine().Owned(at, "k"))
	tx := Command{Op: OpOwnedTx, Watch: []Watch{w}, Tx: []Command{
		ownedCmd(OwnedGet, 0, "", 0, "k"),
		ownedCmd(OwnedRelease, 0, "", 0, "k"),
		ownedCmd(OwnedAcquire, 0, "b", 0, "k2"),
	}}
	// The key changes hands in between: nothing applies.
	run(ownedCmd(OwnedGetSet, 0, "c", 0, "k"))
	if o := run(tx); !strings.Contains(o.err, ErrWatchChanged.Error()) {
		t.Fatalf("exec after a change: %+v %s", o.r, o.err)
	}
	if st := s.Engine().Owned(at, "k2"); st.Held {
		t.Fatalf("a failed transaction took k2")
	}
	tx.Watch = []Watch{WatchOf("k", s.Engine().Owned(at, "k"))}
	o := run(tx)
	if o.err != "" || len(o.r.Tx) != 3 || o.r.Tx[0].Owner != "c" || o.r.Tx[1].Count != 1 || o.r.Tx[2].Count != 1 {
		t.Fatalf("exec: %+v %s", o.r, o.err)
	}
}

// TestOwnedAcrossProtocols: an owned hold and a memcached lock or a
// session's lock exclude each other; an owned release never frees another
// protocol's lock, and grants a queued session at once.
func TestOwnedAcrossProtocols(t *testing.T) {
	s := newState(t)
	at := int64(time.Second)
	run := func(c Command) outcome { c.At = at; return apply(s, &c) }
	sess := run(Command{Op: OpOpenSession}).r.Session
	run(Command{Op: OpItemSet, Session: sess, Key: []byte("m"), Value: []byte("x")})
	run(ownedCmd(OwnedAcquire, 0, "o", 0, "m"))
	if err := lockErr(s, sess, []byte("m")); !errors.Is(err, cache.ErrLocked) {
		t.Fatalf("memcached lock of an owned key: %v, want ErrLocked", err)
	}
	run(ownedCmd(OwnedRelease, 0, "", 0, "m"))
	if err := lockErr(s, sess, []byte("m")); err != nil {
		t.Fatalf("memcached lock of a freed key: %v", err)
	}
	if o := run(ownedCmd(OwnedAcquire, 0, "o", 0, "m")); o.r.Count != 0 {
		t.Fatalf("owned acquire of a memcached-locked key: %+v", o.r)
	}
	if o := run(ownedCmd(OwnedRelease, 0, "", 0, "m")); o.r.Count != 0 || o.r.Found != 1 {
		t.Fatalf("owned release of a memcached-locked key: %+v", o.r)
	}

	run(ownedCmd(OwnedAcquire, 0, "o", 0, "d"))
	q := run(Command{Op: OpAcquire, Session: sess, Req: latch.LockRequest{Keys: []string{"d"}, Wait: latch.WaitForever}})
	if q.r.Waiter == 0 {
		t.Fatalf("session did not queue: %+v %s", q.r, q.err)
	}
	o := run(ownedCmd(OwnedRelease, OwnedMatch, "o", 0, "d"))
	if len(o.evs) != 1 || o.evs[0].Kind != engine.EventGranted || o.evs[0].Waiter != q.r.Waiter {
		t.Fatalf("release did not grant the waiter: %v", o.evs)
	}
}

// TestOwnedGrantedAndForeign: an owned command reports a new grant
// (Granted), and the keys it found held by a session (Foreign), which the
// Redis front end answers as keys of another type.
func TestOwnedGrantedAndForeign(t *testing.T) {
	sec := time.Second
	obtain := func(value string, prefix uint32, keys ...string) Command {
		return Command{Op: OpOwned, Owned: OwnedObtain, Prefix: prefix, Value: []byte(value), Req: latch.LockRequest{Keys: keys, Lease: sec}}
	}
	// "s" is held by a session, "o" by the owner value "a", "f" is free.
	tests := []struct {
		name    string
		c       Command
		granted bool
		foreign int
	}{
		{"acquire free", ownedCmd(OwnedAcquire, 0, "b", sec, "f"), true, 0},
		{"acquire busy", ownedCmd(OwnedAcquire, 0, "b", sec, "f", "s"), false, 0},
		{"set free", ownedCmd(OwnedSet, 0, "b", sec, "f"), true, 0},
		{"set same owner", ownedCmd(OwnedSet, 0, "a", sec, "o"), false, 0},
		{"set other owner", ownedCmd(OwnedSet, 0, "b", sec, "o"), false, 0},
		{"set session's", ownedCmd(OwnedSet, 0, "b", sec, "s"), false, 1},
		{"getset free", ownedCmd(OwnedGetSet, 0, "b", 0, "f"), true, 0},
		{"getset takeover", ownedCmd(OwnedGetSet, 0, "b", 0, "o"), true, 0},
		{"getset session's", ownedCmd(OwnedGetSet, 0, "b", 0, "s"), false, 1},
		{"get owned", ownedCmd(OwnedGet, 0, "", 0, "o"), false, 0},
		{"get session's", ownedCmd(OwnedGet, 0, "", 0, "s"), false, 1},
		{"get free", ownedCmd(OwnedGet, 0, "", 0, "f"), false, 0},
		{"release", ownedCmd(OwnedRelease, OwnedMatch, "a", 0, "o", "s", "f", "s"), false, 2},
		{"renew all stops at the first", ownedCmd(OwnedRenew, OwnedMatch|OwnedAll, "a", sec, "f", "s"), false, 0},
		{"renew all reaches the session's", ownedCmd(OwnedRenew, OwnedMatch|OwnedAll, "a", sec, "o", "s"), false, 1},
		{"obtain free", obtain("b", 0, "f"), true, 0},
		{"obtain re-obtain", obtain("a-2", 1, "o"), false, 0},
		{"obtain session's", obtain("b", 0, "s"), false, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newState(t)
			at := int64(time.Second)
			run := func(c Command) outcome { c.At = at; return apply(s, &c) }
			sess := run(Command{Op: OpOpenSession}).r.Session
			if o := run(Command{Op: OpAcquire, Session: sess, Req: latch.LockRequest{Keys: []string{"s"}}}); !o.r.Granted {
				t.Fatalf("session acquire: %+v %s", o.r, o.err)
			}
			if o := run(ownedCmd(OwnedAcquire, 0, "a", 0, "o")); !o.r.Granted {
				t.Fatalf("owned acquire: %+v %s", o.r, o.err)
			}
			o := run(tt.c)
			if o.r.Granted != tt.granted || o.r.Foreign != tt.foreign {
				t.Errorf("Granted %v Foreign %d, want %v %d (result %+v, err %s)", o.r.Granted, o.r.Foreign, tt.granted, tt.foreign, o.r, o.err)
			}
		})
	}
}

// TestOwnedTxResultsRoom: OpOwnedTx puts its results in the proposer's
// room when it is large enough, cleared, and in its own otherwise.
func TestOwnedTxResultsRoom(t *testing.T) {
	s := newState(t)
	tx := []Command{ownedCmd(OwnedAcquire, 0, "a", 0, "k"), ownedCmd(OwnedGet, 0, "", 0, "k")}
	room := make([]Result, 2, 4)
	room[1] = Result{Owner: "stale", Count: 7}
	o := apply(s, &Command{Op: OpOwnedTx, At: int64(time.Second), Tx: tx, TxResults: room[:0]})
	if len(o.r.Tx) != 2 || &o.r.Tx[0] != &room[0] {
		t.Fatalf("results %+v not in the room given", o.r.Tx)
	}
	if r := o.r.Tx[1]; r.Count != 1 || r.Owner != "a" {
		t.Errorf("the get's result %+v, want owner a", r)
	}
	small := make([]Result, 0, 1)
	o = apply(s, &Command{Op: OpOwnedTx, At: int64(time.Second), Tx: tx, TxResults: small})
	if len(o.r.Tx) != 2 || o.r.Tx[0].Count != 0 || o.r.Tx[1].Owner != "a" {
		t.Fatalf("results %+v", o.r.Tx)
	}
}
