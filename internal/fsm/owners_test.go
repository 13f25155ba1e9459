package fsm

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/engine"
)

// TestOwnedSessions: a node's heartbeat keeps the sessions it owns alive,
// a silent node's sessions end a TTL after its last heartbeat (and their
// locks with them), and a restarted node ends its previous sessions at
// once; the owner table survives a snapshot.
func TestOwnedSessions(t *testing.T) {
	const ttl = 10 * time.Second
	s := newState(t)
	at := int64(1_000)
	seq := uint64(0)
	do := func(c Command) (Result, []engine.Event) {
		t.Helper()
		seq++
		c.At, c.Origin, c.Seq = at, 1, seq
		var r Result
		evs := s.Apply(&c, &r)
		return r, append([]engine.Event(nil), evs...)
	}
	open := func(node string) latch.SessionID {
		t.Helper()
		r, _ := do(Command{Op: OpOpenSession, TTL: ttl, Key: []byte(node)})
		key := fmt.Sprintf("%s/%d", node, r.Session)
		if g, _ := do(Command{Op: OpAcquire, Session: r.Session, Req: latch.LockRequest{Keys: []string{key}}}); !g.Granted {
			t.Fatalf("acquire %s: %+v", key, g)
		}
		return r.Session
	}
	a1, a2, b1 := open("a"), open("a"), open("b")
	for range 3 { // 15 s: b's session lapses, a's live on
		at += int64(5 * time.Second)
		do(Command{Op: OpNodeAlive, Key: []byte("a")})
	}
	for _, id := range []latch.SessionID{a1, a2} {
		if _, ok := s.Engine().Session(id); !ok {
			t.Fatalf("session %d of the live node ended", id)
		}
	}
	if _, ok := s.Engine().Session(b1); ok {
		t.Fatalf("session %d of the silent node lives", b1)
	}
	if got, ok := s.Alive("a"); !ok || got != at {
		t.Fatalf("Alive(a) = %d, %v; want %d", got, ok, at)
	}

	s = restored(t, s)
	r, _ := do(Command{Op: OpEndOwner, Key: []byte("a")})
	if r.Count != 2 || s.Engine().Stats().Sessions != 0 || s.Engine().Stats().Holds != 0 {
		t.Fatalf("end-owner: count %d, stats %+v; want 2 and nothing left", r.Count, s.Engine().Stats())
	}
	if r, _ := do(Command{Op: OpEndOwner, Key: []byte("a")}); r.Count != 0 {
		t.Fatalf("second end-owner ended %d", r.Count)
	}
	// A session ended on its own leaves the table.
	id := open("c")
	if r, _ := do(Command{Op: OpEndSession, Session: id}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if r, _ := do(Command{Op: OpEndOwner, Key: []byte("c")}); r.Count != 0 {
		t.Fatalf("end-owner after end-session ended %d", r.Count)
	}
	if r, _ := do(Command{Op: OpKeepAlive, Session: id}); !errors.Is(r.Err, latch.ErrNoSession) {
		t.Fatalf("keepalive of the ended session: %v", r.Err)
	}
	if s.Now() != at {
		t.Fatalf("Now = %d, want %d", s.Now(), at)
	}
}

// TestResumeGenerations: a resumed session ignores the end that its old
// connection sends late, obeys the new one's, and a node-owned session
// cannot be resumed.
func TestResumeGenerations(t *testing.T) {
	s := newState(t)
	seq := uint64(0)
	do := func(c Command) Result {
		t.Helper()
		seq++
		c.At, c.Origin, c.Seq = int64(seq)*1000, 1, seq
		var r Result
		s.Apply(&c, &r)
		return r
	}
	id := do(Command{Op: OpOpenSession, TTL: time.Minute}).Session
	if r := do(Command{Op: OpAcquire, Session: id, Req: latch.LockRequest{Keys: []string{"k"}}}); !r.Granted {
		t.Fatalf("acquire: %+v", r)
	}
	if r := do(Command{Op: OpResume, Session: id}); r.Err != nil || r.Count != 1 {
		t.Fatalf("resume: %+v", r)
	}
	s = restored(t, s)
	if r := do(Command{Op: OpEndSession, Session: id}); !errors.Is(r.Err, ErrSuperseded) {
		t.Fatalf("end from the old connection: %v, want ErrSuperseded", r.Err)
	}
	if st, ok := s.Engine().Key("k"); !ok || len(st.Holders) != 1 {
		t.Fatalf("k after the old connection's end: %+v, %v; want held", st, ok)
	}
	if r := do(Command{Op: OpEndSession, Session: id, Token: 1}); r.Err != nil {
		t.Fatalf("end from the new connection: %v", r.Err)
	}
	if _, ok := s.Engine().Key("k"); ok {
		t.Fatal("k held after its session ended")
	}
	owned := do(Command{Op: OpOpenSession, TTL: time.Minute, Key: []byte("n1")}).Session
	if r := do(Command{Op: OpResume, Session: owned}); !errors.Is(r.Err, latch.ErrInvalidRequest) {
		t.Fatalf("resume of a node's session: %v, want ErrInvalidRequest", r.Err)
	}
	if r := do(Command{Op: OpResume, Session: 999}); !errors.Is(r.Err, latch.ErrNoSession) {
		t.Fatalf("resume of no session: %v, want ErrNoSession", r.Err)
	}
}
