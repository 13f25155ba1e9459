package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/latchd/latch"
)

// TestSeedToken: SeedToken raises the token counter, never lowers it, and
// the next grant follows it.
func TestSeedToken(t *testing.T) {
	tests := []struct {
		name  string
		first latch.Token
		seeds []latch.Token
		want  latch.Token // Stats().Token after the seeds
	}{
		{"raises", 100, []latch.Token{5000}, 5000},
		{"never lowers", 100, []latch.Token{50}, 100},
		{"equal", 100, []latch.Token{100}, 100},
		{"the highest wins", 0, []latch.Token{70, 900, 300}, 900},
		{"zero", 0, []latch.Token{0}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := New(Config{})
			e.SeedToken(tt.first)
			for _, s := range tt.seeds {
				e.SeedToken(s)
			}
			if got := e.Stats().Token; got != tt.want {
				t.Fatalf("Stats().Token = %d, want %d", got, tt.want)
			}
			s, _ := e.OpenSession(0, SessionOptions{})
			res, _, err := e.Acquire(0, s, req("k"))
			if err != nil || res.Token != tt.want+1 {
				t.Fatalf("Acquire = %+v, %v; want token %d", res, err, tt.want+1)
			}
		})
	}
}

// TestSeedTokenInSnapshot: a seeded counter survives a snapshot.
func TestSeedTokenInSnapshot(t *testing.T) {
	e := New(Config{})
	e.SeedToken(1 << 40)
	r, err := Restore(Config{}, e.AppendSnapshot(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Stats().Token; got != 1<<40 {
		t.Errorf("restored Stats().Token = %d, want %d (the snapshot's counter)", got, 1<<40)
	}
}

// ---------------------------------------------------------------------------
// A snapshot written by hand, to pin the format down.

type tTimer struct {
	when int64
	seq  uint64
}

type tSession struct {
	id                   uint64
	opened, ttl, lockDel int64
	expiry               *tTimer
}

type tHold struct {
	sess, token uint64
	acquired    int64
	lease       *tTimer
	owner       *string
}

type tKey struct {
	name  string
	mode  byte
	limit uint64
	delay *tTimer
	holds []tHold
}

type tWaiter struct {
	id, sess     uint64
	mode         byte
	limit        uint64
	relock       byte
	lease, since int64
	deadline     *tTimer
	keys         []uint64
}

// tSnap is a snapshot as a test spells it out; encode writes it in the
// format that snapshot.go documents.
type tSnap struct {
	version                                  byte
	now                                      int64
	token, lastSession, lastWaiter, timerSeq uint64
	sessions                                 []tSession
	keys                                     []tKey
	waiters                                  []tWaiter
	held                                     [][]uint64 // per session
	trailing                                 []byte
}

func (s tSnap) encode() []byte {
	u := binary.AppendUvarint
	i := binary.AppendVarint
	tm := func(b []byte, t *tTimer) []byte {
		if t == nil {
			return append(b, 0)
		}
		return u(i(append(b, 1), t.when), t.seq)
	}
	b := []byte{s.version}
	b = i(b, s.now)
	b = u(b, s.token)
	b = u(b, s.lastSession)
	b = u(b, s.lastWaiter)
	b = u(b, s.timerSeq)
	b = u(b, uint64(len(s.sessions)))
	for _, x := range s.sessions {
		b = tm(i(i(i(u(b, x.id), x.opened), x.ttl), x.lockDel), x.expiry)
	}
	b = u(b, uint64(len(s.keys)))
	for _, k := range s.keys {
		b = append(u(b, uint64(len(k.name))), k.name...)
		b = tm(u(append(b, k.mode), k.limit), k.delay)
		b = u(b, uint64(len(k.holds)))
		for _, h := range k.holds {
			b = tm(i(u(u(b, h.sess), h.token), h.acquired), h.lease)
			if h.owner == nil {
				b = append(b, 0)
			} else {
				b = append(u(append(b, 1), uint64(len(*h.owner))), *h.owner...)
			}
		}
	}
	b = u(b, uint64(len(s.waiters)))
	for _, w := range s.waiters {
		b = u(u(b, w.id), w.sess)
		b = append(u(append(b, w.mode), w.limit), w.relock)
		b = tm(i(i(b, w.lease), w.since), w.deadline)
		b = u(b, uint64(len(w.keys)))
		for _, k := range w.keys {
			b = u(b, k)
		}
	}
	for _, h := range s.held {
		b = u(b, uint64(len(h)))
		for _, k := range h {
			b = u(b, k)
		}
	}
	return append(b, s.trailing...)
}

// handEngine builds, through the API, the state that handSnap spells out.
func handEngine(t testing.TB) *Engine {
	t.Helper()
	e := New(Config{})
	const now = 100
	s1, _ := e.OpenSession(now, SessionOptions{TTL: 50, LockDelay: 5}) // TTL timer: seq 1
	s2, _ := e.OpenSession(now, SessionOptions{})
	s3, _ := e.OpenSession(now, SessionOptions{LockDelay: 7})
	for _, a := range []struct {
		s   latch.SessionID
		req latch.LockRequest
	}{
		{s1, req("a", "b")},                                   // token 1
		{s2, withLease(shared(2, "c"), 30)},                   // token 2, lease: seq 2
		{s3, req("d")},                                        // token 3
		{s3, withLease(req("e"), 40)},                         // token 4, lease: seq 3
		{s2, withReuse(withLease(withWait(req("a"), 20), 9))}, // waiter 1, deadline: seq 4
		{s1, withWait(req("c", "f"), latch.WaitForever)},      // waiter 2
	} {
		if _, _, err := e.Acquire(now, a.s, a.req); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.EndSession(now, s3); err != nil { // d delayed: seq 5; e's lease stays
		t.Fatal(err)
	}
	return e
}

// handSnap is the snapshot of handEngine. Keys: a=0 b=1 c=2 d=3 e=4 f=5.
func handSnap() tSnap {
	return tSnap{
		version: 2, now: 100, token: 4, lastSession: 3, lastWaiter: 2, timerSeq: 5,
		sessions: []tSession{
			{id: 1, opened: 100, ttl: 50, lockDel: 5, expiry: &tTimer{150, 1}},
			{id: 2, opened: 100},
		},
		keys: []tKey{
			{name: "a", holds: []tHold{{sess: 1, token: 1, acquired: 100}}},
			{name: "b", holds: []tHold{{sess: 1, token: 1, acquired: 100}}},
			{name: "c", mode: 1, limit: 2, holds: []tHold{{sess: 2, token: 2, acquired: 100, lease: &tTimer{130, 2}}}},
			{name: "d", delay: &tTimer{107, 5}},
			{name: "e", holds: []tHold{{sess: 0, token: 4, acquired: 100, lease: &tTimer{140, 3}}}},
			{name: "f"},
		},
		waiters: []tWaiter{
			{id: 1, sess: 2, relock: 1, lease: 9, since: 100, deadline: &tTimer{120, 4}, keys: []uint64{0}},
			{id: 2, sess: 1, since: 100, keys: []uint64{2, 5}},
		},
		held: [][]uint64{{1, 0}, {2}}, // s1 took a, then b: newest first
	}
}

// TestSnapshotFormat: AppendSnapshot writes the documented format, and
// Restore reads it back into an engine that behaves as the original.
func TestSnapshotFormat(t *testing.T) {
	e := handEngine(t)
	want := handSnap().encode()
	got := e.AppendSnapshot([]byte("prefix"))
	if !bytes.HasPrefix(got, []byte("prefix")) {
		t.Fatalf("AppendSnapshot dropped dst: %q", got)
	}
	got = got[len("prefix"):]
	if !bytes.Equal(got, want) {
		t.Fatalf("AppendSnapshot =\n%v\nwant\n%v", got, want)
	}
	r, err := Restore(Config{}, want)
	if err != nil {
		t.Fatal(err)
	}
	if err := sameEngines(e, r); err != nil {
		t.Fatal(err)
	}
	// The same calls, the same answers: the lock-delay ends, the deadline
	// passes, s1's TTL lapses (releasing b, then a), the orphan lease ends.
	for _, now := range []int64{107, 120, 130, 135, 140, 150, 160} {
		if got, want := copyEvents(r.Tick(now)), copyEvents(e.Tick(now)); !reflect.DeepEqual(got, want) {
			t.Fatalf("Tick(%d): restored engine reports %s, original %s", now, eventsString(got), eventsString(want))
		}
		if !bytes.Equal(r.AppendSnapshot(nil), e.AppendSnapshot(nil)) {
			t.Fatalf("after Tick(%d) the snapshots differ", now)
		}
	}
}

// TestRestoreEmpty: a new engine's snapshot restores to an empty engine.
func TestRestoreEmpty(t *testing.T) {
	e9 := New(Config{})
	e9.SeedToken(9)
	snap := e9.AppendSnapshot(nil)
	if want := []byte{2, 0, 9, 0, 0, 0, 0, 0, 0}; !bytes.Equal(snap, want) {
		t.Fatalf("snapshot of a new engine = %v, want %v", snap, want)
	}
	r, err := Restore(Config{}, snap)
	if err != nil {
		t.Fatal(err)
	}
	if st := r.Stats(); st != (Stats{Token: 9}) {
		t.Errorf("Stats() = %+v", st)
	}
}

// TestRestoreRejects: Restore refuses malformed and inconsistent input
// with an error wrapping ErrBadSnapshot.
func TestRestoreRejects(t *testing.T) {
	mod := func(f func(s *tSnap)) []byte {
		s := handSnap()
		f(&s)
		return s.encode()
	}
	base := handSnap().encode()
	if _, err := Restore(Config{}, base); err != nil {
		t.Fatalf("the base snapshot: %v", err)
	}
	tests := []struct {
		name string
		snap []byte
		want string // in the error
	}{
		{"empty", nil, "version: truncated"},
		{"version 0", mod(func(s *tSnap) { s.version = 0 }), "version 0"},
		{"version 1", mod(func(s *tSnap) { s.version = 1 }), "version 1"},
		{"version 3", mod(func(s *tSnap) { s.version = 3 }), "version 3"},
		{"trailing byte", mod(func(s *tSnap) { s.trailing = []byte{0} }), "1 bytes after"},
		{"long varint", []byte{2, 0x80, 0x00}, "shortest form"},
		{"varint overflow", append([]byte{2}, bytes.Repeat([]byte{0xff}, 11)...), "overflows"},
		{"negative now", mod(func(s *tSnap) { s.now = -1; s.sessions, s.keys, s.waiters, s.held = nil, nil, nil, nil }), "negative"},
		{"absurd session count", []byte{2, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f}, "cannot fit"},
		{"absurd key count", []byte{2, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0x03, 0, 0, 0}, "keys: 65535 of them cannot fit"},
		{"absurd waiter count", []byte{2, 0, 0, 0, 0, 0, 0, 0, 0x80, 0x01, 0, 0}, "waiters: 128 of them cannot fit"},

		{"session 0", mod(func(s *tSnap) { s.sessions[0].id = 0 }), "session ID 0"},
		{"session after last", mod(func(s *tSnap) { s.sessions[1].id = 4 }), "session ID 4"},
		{"sessions out of order", mod(func(s *tSnap) { s.sessions[0], s.sessions[1] = s.sessions[1], s.sessions[0] }), "after session"},
		{"duplicate session", mod(func(s *tSnap) { s.sessions[1].id = 1 }), "session 1 after session 1"},
		{"session opened later", mod(func(s *tSnap) { s.sessions[1].opened = 101 }), "opened at 101, not in 0..now (100)"},
		{"session opened before 0", mod(func(s *tSnap) { s.sessions[1].opened = -1 }), "opened at -1"},
		{"negative TTL", mod(func(s *tSnap) { s.sessions[1].ttl = -1 }), "negative TTL"},
		{"negative lock-delay", mod(func(s *tSnap) { s.sessions[1].lockDel = -1 }), "negative TTL"},
		{"TTL without timer", mod(func(s *tSnap) { s.sessions[0].expiry = nil }), "disagree"},
		{"timer without TTL", mod(func(s *tSnap) { s.sessions[1].expiry = &tTimer{200, 6}; s.timerSeq = 6 }), "disagree"},

		{"invalid key", mod(func(s *tSnap) { s.keys[5].name = "f g" }), "invalid key"},
		{"empty key name", mod(func(s *tSnap) { s.keys[0].name = "" }), "invalid key"},
		{"duplicate key", mod(func(s *tSnap) { s.keys[1].name = "a" }), `key "a" after key "a"`},
		{"keys out of order", mod(func(s *tSnap) { s.keys[0].name = "z" }), `key "b" after key "z"`},
		{"key mode", mod(func(s *tSnap) { s.keys[3].mode = 2 }), "mode 2"},
		{"key limit", mod(func(s *tSnap) { s.keys[3].limit = 1 << 32 }), "limit"},
		{"empty key", mod(func(s *tSnap) { s.keys[3].delay = nil }), "neither held"},
		{"holder session unknown", mod(func(s *tSnap) { s.keys[0].holds[0].sess = 3 }), "session 3 does not exist"},
		{"held twice", mod(func(s *tSnap) { s.keys[0].holds = append(s.keys[0].holds, s.keys[0].holds[0]) }), "holds it twice"},
		{"orphan without lease", mod(func(s *tSnap) { s.keys[4].holds[0].lease = nil }), "neither session, lease nor owner"},
		{"token 0", mod(func(s *tSnap) { s.keys[0].holds[0].token = 0 }), "token 0"},
		{"token above the counter", mod(func(s *tSnap) { s.keys[0].holds[0].token = 5 }), "token 5"},
		{"acquired later", mod(func(s *tSnap) { s.keys[0].holds[0].acquired = 101 }), "acquired at 101, not in 0..now"},
		{"acquired before 0", mod(func(s *tSnap) { s.keys[0].holds[0].acquired = -1 }), "acquired at -1"},
		{"two exclusive holders", mod(func(s *tSnap) {
			s.keys[1].holds = append(s.keys[1].holds, tHold{sess: 2, token: 2, acquired: 100})
			s.held[1] = append(s.held[1], 1)
		}), "2 exclusive holders"},
		{"shared holders above the limit", mod(func(s *tSnap) {
			s.keys[2].limit = 1
			s.keys[2].holds = append(s.keys[2].holds, tHold{sess: 1, token: 3, acquired: 100})
			s.held[0] = append(s.held[0], 2)
		}), "above its limit"},

		{"timer before now", mod(func(s *tSnap) { s.keys[3].delay.when = 99 }), "before now"},
		{"timer seq 0", mod(func(s *tSnap) { s.keys[3].delay.seq = 0 }), "sequence number 0"},
		{"timer seq above the counter", mod(func(s *tSnap) { s.keys[3].delay.seq = 6 }), "sequence number 6"},
		{"duplicate timer seq", mod(func(s *tSnap) { s.keys[3].delay.seq = 1 }), "two timers"},
		{"timer flag", func() []byte {
			b := tSnap{version: 2, now: 100, lastSession: 1, sessions: []tSession{{id: 1, opened: 100}}, held: [][]uint64{{}}}.encode()
			b[len(b)-4] = 2 // the session's TTL timer, before 0 keys, 0 waiters, 0 held keys
			return b
		}(), "flag 2"},

		{"waiter 0", mod(func(s *tSnap) { s.waiters[0].id = 0 }), "waiter ID 0"},
		{"waiter after last", mod(func(s *tSnap) { s.waiters[1].id = 3 }), "waiter ID 3"},
		{"waiters out of order", mod(func(s *tSnap) { s.waiters[0], s.waiters[1] = s.waiters[1], s.waiters[0] }), "waiter 1 after waiter 2"},
		{"waiter session unknown", mod(func(s *tSnap) { s.waiters[0].sess = 3 }), "session 3 does not exist"},
		{"waiter mode", mod(func(s *tSnap) { s.waiters[0].mode = 7 }), "mode 7"},
		{"exclusive waiter with a limit", mod(func(s *tSnap) { s.waiters[0].limit = 1 }), "limit 1"},
		{"waiter relock", mod(func(s *tSnap) { s.waiters[0].relock = 2 }), "relock policy 2"},
		{"waiter lease", mod(func(s *tSnap) { s.waiters[0].lease = -1 }), "negative lease"},
		{"waiter since", mod(func(s *tSnap) { s.waiters[0].since = 101 }), "queued at 101, not in 0..now"},
		{"waiter since before 0", mod(func(s *tSnap) { s.waiters[0].since = -1 }), "queued at -1"},
		{"waiter without keys", mod(func(s *tSnap) { s.waiters[0].keys = nil }), "no keys"},
		{"waiter key index", mod(func(s *tSnap) { s.waiters[0].keys = []uint64{6} }), "key index 6"},
		{"waiter key twice", mod(func(s *tSnap) { s.waiters[1].keys = []uint64{2, 5, 2} }), `key "c" twice`},
		{"shared waiter limit", mod(func(s *tSnap) {
			s.waiters[1].mode, s.waiters[1].limit, s.waiters[1].keys = 1, 3, []uint64{2}
			s.keys[5].holds = []tHold{{sess: 2, token: 3, acquired: 100}}
			s.held[1] = []uint64{5, 2}
		}), "whose limit is 2"},

		{"held count", mod(func(s *tSnap) { s.held[0] = s.held[0][:1] }), "1 held keys listed, 2 held"},
		{"held twice", mod(func(s *tSnap) { s.held[0] = []uint64{1, 1} }), `key "b" listed twice`},
		{"held not held", mod(func(s *tSnap) { s.held[0] = []uint64{1, 2} }), `key "c" listed twice, or not held`},
		{"held index", mod(func(s *tSnap) { s.held[0] = []uint64{1, 9} }), "key index 9"},
		{"held missing", mod(func(s *tSnap) { s.held = s.held[:1] }), "truncated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := Restore(Config{}, tt.snap)
			if err == nil {
				t.Fatalf("Restore accepted it: %+v", e.Stats())
			}
			if !errors.Is(err, ErrBadSnapshot) {
				t.Errorf("error %q does not wrap ErrBadSnapshot", err)
			}
			if !strings.HasPrefix(err.Error(), "engine: restore: ") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q, want one starting with %q and containing %q", err, "engine: restore: ", tt.want)
			}
		})
	}
	t.Run("every truncation", func(t *testing.T) {
		for n := range len(base) {
			if _, err := Restore(Config{}, base[:n]); !errors.Is(err, ErrBadSnapshot) {
				t.Fatalf("Restore of the first %d of %d bytes: %v", n, len(base), err)
			}
		}
	})
}

// ---------------------------------------------------------------------------
// Engines compared

// The model-driven snapshot tests (TestSnapshotModel,
// TestSnapshotDeterminism) are in model_test.go, in package engine_test: the
// model harness (package enginemodel) imports the engine, so the engine's
// own tests cannot import it. These two lend and borrow across.
var (
	// SameEngines is sameEngines, which reads the engine's internals, for
	// the tests of package engine_test.
	SameEngines = sameEngines
	// ModelSnapshots, set by model_test.go, returns snapshots taken along
	// model sequences, for the seed corpus of FuzzRestore.
	ModelSnapshots func() [][]byte
)

// sameEngines compares two engines through their snapshots, their
// inspection and their internal counters and lists.
func sameEngines(a, b *Engine) error {
	if sa, sb := a.AppendSnapshot(nil), b.AppendSnapshot(nil); !bytes.Equal(sa, sb) {
		return fmt.Errorf("snapshots differ:\n%v\n%v", sa, sb)
	}
	type view struct {
		Now      int64
		Stats    Stats
		Next     int64
		HasNext  bool
		Keys     []KeyState
		Key      []KeyState
		Sessions []SessionState
		Session  []SessionState
		Held     [][]string
	}
	see := func(e *Engine) view {
		v := view{Now: e.Now(), Stats: e.Stats(), Keys: e.Keys("", "", 0), Sessions: e.Sessions()}
		v.Next, v.HasNext = e.NextDeadline()
		for _, k := range v.Keys {
			one, _ := e.Key(k.Key)
			v.Key = append(v.Key, one)
		}
		for _, s := range v.Sessions {
			one, _ := e.Session(s.ID)
			v.Session = append(v.Session, one)
			v.Held = append(v.Held, e.Held(s.ID))
		}
		return v
	}
	if va, vb := see(a), see(b); !reflect.DeepEqual(va, vb) {
		return fmt.Errorf("inspection differs (-a +b):\n%s", cmp.Diff(va, vb))
	}
	return sameCounters(a, b)
}

// leases counts the lease timers in e's heap.
func leases(e *Engine) int {
	n := 0
	for _, ent := range e.timers {
		if ent.t.kind == timerLease {
			n++
		}
	}
	return n
}

// sameCounters compares what the snapshot does not spell out: the
// counters of keys and sessions, the queues and the session lists.
func sameCounters(a, b *Engine) error {
	if a.nholds != b.nholds || len(a.timers) != len(b.timers) || leases(a) != leases(b) || len(a.delays) != len(b.delays) ||
		len(a.waiters) != len(b.waiters) || len(a.keys) != len(b.keys) || len(a.sessions) != len(b.sessions) {
		return fmt.Errorf("table counts differ: holds %d/%d, timers %d/%d, leases %d/%d, delays %d/%d, waiters %d/%d, keys %d/%d, sessions %d/%d",
			a.nholds, b.nholds, len(a.timers), len(b.timers), leases(a), leases(b), len(a.delays), len(b.delays),
			len(a.waiters), len(b.waiters), len(a.keys), len(b.keys), len(a.sessions), len(b.sessions))
	}
	for name, ka := range a.keys {
		kb := b.keys[name]
		if kb == nil {
			return fmt.Errorf("key %q missing", name)
		}
		qa, qb := queueIDs(ka), queueIDs(kb)
		if ka.nholds != kb.nholds || ka.qexcl != kb.qexcl || ka.qshared != kb.qshared || ka.mode != kb.mode ||
			ka.limit != kb.limit || ka.delayed != kb.delayed || ka.dirty || kb.dirty || !slices.Equal(qa, qb) {
			return fmt.Errorf("key %q differs: nholds %d/%d qexcl %d/%d qshared %d/%d mode %v/%v limit %d/%d delayed %v/%v dirty %v/%v queue %v/%v",
				name, ka.nholds, kb.nholds, ka.qexcl, kb.qexcl, ka.qshared, kb.qshared, ka.mode, kb.mode,
				ka.limit, kb.limit, ka.delayed, kb.delayed, ka.dirty, kb.dirty, qa, qb)
		}
		if n := len(qa); n > 0 && (ka.qhead.prev.w.id != qa[n-1] || kb.qhead.prev.w.id != qb[n-1]) {
			return fmt.Errorf("key %q: the queue's head does not point at its tail", name)
		}
	}
	for id, sa := range a.sessions {
		sb := b.sessions[id]
		if sb == nil {
			return fmt.Errorf("session %d missing", id)
		}
		ha, hb := sessionHolds(sa), sessionHolds(sb)
		wa, wb := sessionWaiters(sa), sessionWaiters(sb)
		if sa.nholds != sb.nholds || sa.nwait != sb.nwait || len(ha) != sa.nholds || len(wa) != sa.nwait ||
			!slices.Equal(ha, hb) || !slices.Equal(wa, wb) {
			return fmt.Errorf("session %d differs: nholds %d/%d holds %q/%q nwait %d/%d waiters %v/%v",
				id, sa.nholds, sb.nholds, ha, hb, sa.nwait, sb.nwait, wa, wb)
		}
	}
	return nil
}

func queueIDs(k *key) []WaiterID {
	var ids []WaiterID
	for q := k.qhead; q != nil; q = q.next {
		ids = append(ids, q.w.id)
	}
	return ids
}

func sessionHolds(s *session) []string {
	var names []string
	for h := s.holds; h != nil; h = h.snext {
		names = append(names, h.k.name)
	}
	return names
}

func sessionWaiters(s *session) []WaiterID {
	var ids []WaiterID
	for w := s.waiters; w != nil; w = w.snext {
		ids = append(ids, w.id)
	}
	return ids
}

// TestSnapshotNoAllocsInHotPath: snapshots change nothing on the hot path;
// Acquire and Release of a restored engine allocate nothing once warm.
func TestSnapshotNoAllocsInHotPath(t *testing.T) {
	e := handEngine(t)
	r, err := Restore(Config{}, e.AppendSnapshot(nil))
	if err != nil {
		t.Fatal(err)
	}
	s, _ := r.OpenSession(200, SessionOptions{})
	q := req("x", "y")
	keys := []string{"x", "y"}
	allocs := testing.AllocsPerRun(100, func() {
		r.Acquire(200, s, q)
		r.Release(200, s, keys)
	})
	if allocs != 0 {
		t.Errorf("Acquire+Release allocates %v times, want 0", allocs)
	}
}

// ---------------------------------------------------------------------------
// Fuzzing

// snapshotSeeds returns real snapshots for the seed corpus of FuzzRestore:
// the hand-made one, a new engine's, and some taken along model sequences.
func snapshotSeeds(f *testing.F) [][]byte {
	if ModelSnapshots == nil {
		f.Fatal("ModelSnapshots is not set (model_test.go sets it)")
	}
	seeds := [][]byte{New(Config{}).AppendSnapshot(nil), handSnap().encode(), ownedSnapshot()}
	return append(seeds, ModelSnapshots()...)
}

// FuzzRestore: Restore never panics; what it accepts re-encodes to the same
// bytes, restores again, and is a table the engine can run: inspection is
// consistent, time can pass, and ending every session and force-releasing
// every key empties it. Two restored copies answer alike throughout.
//
//	go test ./internal/engine/ -run '^$' -fuzz FuzzRestore -fuzztime 60s
func FuzzRestore(f *testing.F) {
	for _, s := range snapshotSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg := Config{RecordDrops: true}
		e, err := Restore(cfg, data)
		if err != nil {
			if !errors.Is(err, ErrBadSnapshot) {
				t.Fatalf("Restore error %q does not wrap ErrBadSnapshot", err)
			}
			return
		}
		snap := e.AppendSnapshot(nil)
		if !bytes.Equal(snap, data) {
			t.Fatalf("an accepted snapshot re-encodes differently:\n%v\n%v", data, snap)
		}
		e2, err := Restore(cfg, snap)
		if err != nil {
			t.Fatalf("re-encoded snapshot: %v", err)
		}
		if err := sameEngines(e, e2); err != nil {
			t.Fatal(err)
		}
		checkInspection(t, e)
		if got, want := exerciseRestored(e2), exerciseRestored(e); got != want {
			t.Fatalf("two restored copies answer differently:\n%s\n---\n%s", got, want)
		}
		if st := e.Stats(); st.Keys != 0 || st.Holds != 0 || st.Waiters != 0 || st.Sessions != 0 {
			t.Fatalf("the table is not empty after ending every session and force-releasing every key: %+v", st)
		}
		if next, ok := e.NextDeadline(); ok {
			t.Fatalf("an empty table has a next deadline: %d", next)
		}
	})
}

// checkInspection checks that Stats agrees with Keys and Sessions.
func checkInspection(t *testing.T, e *Engine) {
	t.Helper()
	st := e.Stats()
	keys := e.Keys("", "", 0)
	sessions := e.Sessions()
	holds := 0
	waiters := make(map[WaiterID]bool)
	for _, k := range keys {
		holds += len(k.Holders)
		for _, w := range k.Waiters {
			waiters[w.ID] = true
		}
	}
	held := 0
	for _, s := range sessions {
		held += len(e.Held(s.ID))
	}
	orphans := 0
	for _, k := range keys {
		for _, h := range k.Holders {
			if h.Session == 0 {
				orphans++
			}
		}
	}
	if st.Keys != len(keys) || st.Sessions != len(sessions) || st.Holds != holds || st.Waiters != len(waiters) || held+orphans != holds {
		t.Fatalf("Stats() = %+v, but Keys lists %d keys, %d holds (%d orphaned), %d waiters; Sessions %d sessions holding %d",
			st, len(keys), holds, orphans, len(waiters), len(sessions), held)
	}
}

// exerciseRestored runs a restored table forward and tears it down: time
// passes, a new session asks for a key, every session ends and every key
// is force-released. It returns what the engine answered.
func exerciseRestored(e *Engine) string {
	var b strings.Builder
	note := func(what string, evs []Event, err error) {
		fmt.Fprintf(&b, "%s: %v %s\n", what, err, eventsString(evs))
		for _, d := range e.Drops() {
			fmt.Fprintf(&b, "  drop %+v\n", d)
		}
	}
	now := e.Now()
	if next, ok := e.NextDeadline(); ok {
		now = next
		note("tick", e.Tick(now), nil)
	}
	now = min(now, math.MaxInt64-100) + 1
	note("tick", e.Tick(now), nil)
	sid, evs := e.OpenSession(now, SessionOptions{TTL: 10, LockDelay: 3})
	note("open", evs, nil)
	name := "k"
	if ks := e.Keys("", "", 1); len(ks) > 0 {
		name = ks[0].Key
	}
	res, evs, err := e.Acquire(now, sid, latch.LockRequest{Keys: []string{name, "zz"}, Wait: 5, Relock: latch.RelockReuse})
	note(fmt.Sprintf("acquire %+v", res), evs, err)
	if ss := e.Sessions(); len(ss) > 0 { // one of them; the others end with their holds
		n, evs, err := e.ReleaseAll(now, ss[0].ID)
		note(fmt.Sprintf("release-all s%d n=%d", ss[0].ID, n), evs, err)
	}
	for _, s := range e.Sessions() {
		evs, err := e.EndSession(now, s.ID)
		note(fmt.Sprintf("end s%d", s.ID), evs, err)
	}
	for _, k := range e.Keys("", "", 0) {
		n, evs := e.ForceRelease(now, k.Key)
		note(fmt.Sprintf("force %s n=%d", k.Key, n), evs, nil)
	}
	note("tick max", e.Tick(math.MaxInt64), nil)
	fmt.Fprintf(&b, "stats %+v\n", e.Stats())
	return b.String()
}

// copyEvents returns a deep copy of evs, which the engine reuses.
func copyEvents(evs []Event) []Event {
	out := make([]Event, len(evs))
	for i, ev := range evs {
		ev.Keys = slices.Clone(ev.Keys)
		out[i] = ev
	}
	return out
}

// eventsString formats evs, every non-zero field of each, so that two
// lists format alike exactly when they are equal (as the model harness
// does; it is not importable here).
func eventsString(evs []Event) string {
	if len(evs) == 0 {
		return "(none)"
	}
	s := make([]string, len(evs))
	for i, ev := range evs {
		s[i] = ev.String()
	}
	return strings.Join(s, " | ")
}
