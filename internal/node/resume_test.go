package node

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/latchd/latch"
)

// TestResumeSession: a session with a TTL taken over by a new connection
// keeps its locks; its old handle ends without ending it, its waiting
// request fails, and the new handle's Close ends it. A session without a
// TTL cannot be resumed, nor one that ended.
func TestResumeSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNode(t, Config{})
		old := open(t, n, latch.SessionOptions{TTL: time.Minute, Protocol: "dlock"})
		other := open(t, n, latch.SessionOptions{})
		mustAcquire(t, old, x(0, "k"))
		mustAcquire(t, other, x(0, "busy"))
		waiting := goAcquire(context.Background(), old, x(latch.WaitForever, "busy"))

		s, err := n.ResumeSession(old.ID(), latch.SessionOptions{Protocol: "dlock", Peer: "new"})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		waiting.failed(t, latch.ErrSessionEnded)
		if !isClosed(old.Done()) {
			t.Error("the old handle's Done is open")
		}
		if err := old.Close(); err != nil {
			t.Fatal(err)
		}
		if info, ok := n.Lock("k"); !ok || len(info.Holders) != 1 || info.Holders[0].Session != s.ID() {
			t.Fatalf("k after the resume = %+v, %v", info, ok)
		}
		if err := s.Release("k"); err != nil {
			t.Fatalf("release through the resumed session: %v", err)
		}
		mustAcquire(t, s, x(0, "k"))
		s.Close()
		if _, ok := n.Lock("k"); ok {
			t.Error("k held after the resumed session closed")
		}
		if _, err := n.ResumeSession(s.ID(), latch.SessionOptions{}); !errors.Is(err, latch.ErrNoSession) {
			t.Errorf("resume of an ended session: %v", err)
		}
		if _, err := n.ResumeSession(other.ID(), latch.SessionOptions{}); !errors.Is(err, latch.ErrInvalidRequest) {
			t.Errorf("resume of a connection-bound session: %v, want ErrInvalidRequest", err)
		}
	})
}

// TestResumedSessionCalls: every call of a resumed session's new handle
// is proposed with the session's new generation and acts; none is refused
// as the old connection's late commands are (fsm.ErrSuperseded).
func TestResumedSessionCalls(t *testing.T) {
	ctx := context.Background()
	errOf := func(f func(done func(error))) error {
		ch := make(chan error, 1)
		f(func(err error) { ch <- err })
		return <-ch
	}
	for _, tc := range []struct {
		name string
		call func(s latch.Session) error
	}{
		{"acquire", func(s latch.Session) error { _, err := s.Acquire(ctx, x(0, "new")); return err }},
		{"acquire func", func(s latch.Session) error {
			ch := make(chan error, 1)
			_, _, err := s.AcquireFunc(x(0, "new"), func(_ latch.Grant, err error) { ch <- err })
			if err != nil {
				return err
			}
			select {
			case err := <-ch:
				return err
			default:
				return nil // granted at once
			}
		}},
		{"release", func(s latch.Session) error { return s.Release("k") }},
		{"release func", func(s latch.Session) error {
			return errOf(func(done func(error)) { s.ReleaseFunc([]string{"k"}, done) })
		}},
		{"release all", func(s latch.Session) error {
			n, err := s.ReleaseAll()
			if err == nil && n != 1 {
				return fmt.Errorf("released %d keys, want 1", n)
			}
			return err
		}},
		{"renew", func(s latch.Session) error { _, err := s.Renew(time.Minute, "k"); return err }},
		{"renew func", func(s latch.Session) error {
			return errOf(func(done func(error)) {
				s.RenewFunc(time.Minute, []string{"k"}, func(_ latch.Grant, err error) { done(err) })
			})
		}},
		{"keepalive", func(s latch.Session) error { return s.KeepAlive() }},
		{"keepalive func", func(s latch.Session) error { return errOf(s.KeepAliveFunc) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := newNode(t, Config{})
				s := resumedHolder(t, n)
				if err := tc.call(s); err != nil {
					t.Errorf("%s of the resumed session: %v", tc.name, err)
				}
				s.Close()
			})
		})
	}
}

// TestEndResumedSession: an operator's end-session of a session resumed
// on this node ends it: it is of the session's current generation.
func TestEndResumedSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNode(t, Config{})
		s := resumedHolder(t, n)
		if err := n.EndSession(s.ID()); err != nil {
			t.Fatalf("end of the resumed session: %v", err)
		}
		if !isClosed(s.Done()) {
			t.Error("the resumed session's Done is open after its end")
		}
		if _, ok := n.Lock("k"); ok {
			t.Error("k held after its session ended")
		}
	})
}

// TestShutdownLeavesTTLSessions: a replicated node (the second run of the
// tests, a cluster of one) that shuts down lets go of its sessions with a
// TTL without ending them: their parked requests, their later calls and
// their resume on the node fail with an error wrapping
// latch.ErrUnavailable alone, for their clients to resume them on another
// node, and they stay in the lock table with their locks. A session
// without a TTL ends (latch.ErrShutdown), and so does every session of a
// node in memory, whose lock table goes with it.
func TestShutdownLeavesTTLSessions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNode(t, Config{})
		kept := open(t, n, latch.SessionOptions{TTL: time.Minute})
		bound := open(t, n, latch.SessionOptions{})
		mustAcquire(t, kept, x(0, "k"))
		mustAcquire(t, bound, x(0, "busy"))
		waiting := goAcquire(context.Background(), kept, x(latch.WaitForever, "busy"))

		if err := n.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		_, err := kept.Acquire(context.Background(), x(0, "other"))
		_, rerr := n.ResumeSession(kept.ID(), latch.SessionOptions{})
		errs := map[string]error{"the parked request": waiting.result(t).err, "Acquire": err, "KeepAlive": kept.KeepAlive(), "ResumeSession": rerr}
		for what, err := range errs {
			if !asyncReplicas {
				if !errors.Is(err, latch.ErrShutdown) {
					t.Errorf("%s after the shutdown of a node in memory: %v, want ErrShutdown", what, err)
				}
				continue
			}
			if !errors.Is(err, latch.ErrUnavailable) || errors.Is(err, latch.ErrShutdown) || errors.Is(err, latch.ErrSessionEnded) || errors.Is(err, latch.ErrNoSession) {
				t.Errorf("%s after the shutdown: %v, want ErrUnavailable alone", what, err)
			}
		}
		if !isClosed(kept.Done()) {
			t.Error("the session's handle is not done after the shutdown")
		}
		if _, err := bound.Acquire(context.Background(), x(0, "other")); !errors.Is(err, latch.ErrShutdown) {
			t.Errorf("Acquire of the session without a TTL after the shutdown: %v, want ErrShutdown", err)
		}
		if !asyncReplicas {
			return
		}
		if got := holders(n, "k"); len(got) != 1 || got[0] != kept.ID() {
			t.Errorf("k after the shutdown: held by %v, want the session with a TTL", got)
		}
		if got := holders(n, "busy"); len(got) != 0 {
			t.Errorf("busy after the shutdown: held by %v, want released with the session without a TTL", got)
		}
	})
}

// resumedHolder opens a session with a TTL on n that takes k, and returns
// its handle resumed on n: of generation 1.
func resumedHolder(t *testing.T, n *Node) latch.Session {
	t.Helper()
	old := open(t, n, latch.SessionOptions{TTL: time.Minute})
	mustAcquire(t, old, x(0, "k"))
	s, err := n.ResumeSession(old.ID(), latch.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
