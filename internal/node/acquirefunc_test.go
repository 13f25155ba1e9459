package node

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/latchd/latch"
)

// ends records the calls of an AcquireFunc request's done.
type ends struct {
	mu    sync.Mutex
	calls []outcome
}

func (e *ends) done(g latch.Grant, err error) {
	e.mu.Lock()
	e.calls = append(e.calls, outcome{g, err})
	e.mu.Unlock()
}

// got returns the calls so far, without waiting for any: done must have run
// by the time the call that ended the request returned.
func (e *ends) got() []outcome {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]outcome(nil), e.calls...)
}

// one fails the test unless done was called exactly once, and returns that
// call.
func (e *ends) one(t *testing.T) outcome {
	t.Helper()
	got := e.got()
	// A cluster node reports ends that other callers' commands caused from
	// its reporter goroutine: wait for it.
	for i := 0; asyncReplicas && len(got) == 0 && i < 5000; i++ {
		time.Sleep(time.Millisecond)
		got = e.got()
	}
	if len(got) != 1 {
		t.Fatalf("done called %d times (%+v), want once", len(got), got)
	}
	return got[0]
}

// queue starts req with AcquireFunc and fails the test unless it waits.
func queue(t *testing.T, s latch.Session, req latch.LockRequest) (latch.WaitID, *ends) {
	t.Helper()
	e := new(ends)
	g, id, err := s.AcquireFunc(req, e.done)
	if id == 0 || err != nil || g != (latch.Grant{}) {
		t.Fatalf("AcquireFunc(%v) = (%+v, %d, %v), want it to wait", req.Keys, g, id, err)
	}
	if got := e.got(); len(got) != 0 {
		t.Fatalf("done called before the request ended: %+v", got)
	}
	return id, e
}

func TestAcquireFuncAtOnce(t *testing.T) {
	n := newNode(t, Config{MaxWaitersPerKey: 1})
	s1 := open(t, n, latch.SessionOptions{})
	s2 := open(t, n, latch.SessionOptions{})
	s3 := open(t, n, latch.SessionOptions{})
	mustAcquire(t, s1, x(0, "held"))
	queue(t, s2, x(latch.WaitForever, "held")) // fills held's one waiter slot
	tests := []struct {
		name    string
		s       latch.Session
		req     latch.LockRequest
		wantTok latch.Token
		wantErr error
	}{
		{"free key", s3, x(latch.WaitForever, "free"), 102, nil},
		{"busy, try once", s3, x(latch.NoWait, "held"), 0, latch.ErrWouldBlock},
		{"queue full", s3, x(latch.WaitForever, "held"), 0, latch.ErrTooManyWaiters},
		{"no keys", s3, x(latch.WaitForever), 0, latch.ErrNoKeys},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := new(ends)
			g, id, err := tt.s.AcquireFunc(tt.req, e.done)
			if asyncReplicas {
				// A cluster node decides nothing at once: the
				// outcome comes through done.
				if id == 0 || err != nil {
					t.Fatalf("AcquireFunc = (%+v, %d, %v), want an id and no error", g, id, err)
				}
				o := e.one(t)
				g, id, err = o.g, 0, o.err
				e = new(ends)
			}
			if id != 0 || !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) || g.Token != tt.wantTok {
				t.Errorf("AcquireFunc = (%+v, %d, %v), want token %d, id 0, error %v", g, id, err, tt.wantTok, tt.wantErr)
			}
			if got := e.got(); len(got) != 0 {
				t.Errorf("done called for a request decided at once: %+v", got)
			}
		})
	}
	s3.Close()
	if _, _, err := s3.AcquireFunc(x(latch.WaitForever, "other"), new(ends).done); !errors.Is(err, latch.ErrNoSession) {
		t.Errorf("AcquireFunc on a closed session: %v, want ErrNoSession", err)
	}
}

// A release hands the lock to a waiting AcquireFunc request and calls its
// done before the release returns, in the releasing goroutine.
func TestAcquireFuncHandOff(t *testing.T) {
	n := newNode(t, Config{})
	s1 := open(t, n, latch.SessionOptions{})
	s2 := open(t, n, latch.SessionOptions{})
	s3 := open(t, n, latch.SessionOptions{})
	mustAcquire(t, s1, x(0, "a"))
	_, e2 := queue(t, s2, x(latch.WaitForever, "a"))
	_, e3 := queue(t, s3, sh(latch.WaitForever, "a", "b"))
	if err := s1.Release("a"); err != nil {
		t.Fatal(err)
	}
	if o := e2.one(t); o.err != nil || o.g.Token != 102 {
		t.Errorf("s2's done got (%+v, %v), want token 102", o.g, o.err)
	}
	if got := e3.got(); len(got) != 0 {
		t.Errorf("s3's done called while s2 holds a: %+v", got)
	}
	if err := s2.Release("a"); err != nil {
		t.Fatal(err)
	}
	if o := e3.one(t); o.err != nil || o.g.Token != 103 {
		t.Errorf("s3's done got (%+v, %v), want token 103", o.g, o.err)
	}
	if got := holders(n, "b"); len(got) != 1 || got[0] != s3.ID() {
		t.Errorf("holders of b = %v, want s3", got)
	}
}

// done may call the node: it runs after the node's mutex is released.
func TestAcquireFuncDoneCallsNode(t *testing.T) {
	n := newNode(t, Config{})
	s1 := open(t, n, latch.SessionOptions{})
	s2 := open(t, n, latch.SessionOptions{})
	mustAcquire(t, s1, x(0, "a"))
	released := make(chan error, 1)
	if _, _, err := s2.AcquireFunc(x(latch.WaitForever, "a"), func(_ latch.Grant, err error) {
		if err != nil {
			released <- err
			return
		}
		released <- s2.Release("a") // deadlocks if done runs under the mutex
	}); err != nil {
		t.Fatal(err)
	}
	if err := s1.Release("a"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-released:
		if err != nil {
			t.Fatalf("done's release: %v", err)
		}
	default:
		if !asyncReplicas { // a cluster node reports it from another goroutine
			t.Fatal("done not called by the time the release returned")
		}
		if err := <-released; err != nil {
			t.Fatalf("done's release: %v", err)
		}
	}
	if _, ok := n.Lock("a"); ok {
		t.Errorf("a still in the lock table after done released it")
	}
}

// Every other end of a waiting request reaches done once: its deadline, its
// session's end, the node's shutdown and Cancel.
func TestAcquireFuncEnds(t *testing.T) {
	tests := []struct {
		name string
		end  func(n *Node, s latch.Session, id latch.WaitID)
		want error
	}{
		{"deadline", func(*Node, latch.Session, latch.WaitID) { time.Sleep(5 * time.Second) }, latch.ErrTimeout},
		{"session closed", func(_ *Node, s latch.Session, _ latch.WaitID) { s.Close() }, latch.ErrSessionEnded},
		{"ended by an operator", func(n *Node, s latch.Session, _ latch.WaitID) { n.EndSession(s.ID()) }, latch.ErrSessionEnded},
		{"shutdown", func(n *Node, _ latch.Session, _ latch.WaitID) { n.Shutdown(context.Background()) }, latch.ErrShutdown},
		{"cancelled", func(_ *Node, s latch.Session, id latch.WaitID) {
			if !s.Cancel(id) {
				panic("Cancel of a waiting request returned false")
			}
		}, latch.ErrCanceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := newNode(t, Config{})
				s1 := open(t, n, latch.SessionOptions{})
				s2 := open(t, n, latch.SessionOptions{})
				mustAcquire(t, s1, x(0, "a"))
				id, e := queue(t, s2, x(5*time.Second, "a"))
				tt.end(n, s2, id)
				synctest.Wait() // the timer's goroutine, for the deadline
				if o := e.one(t); !errors.Is(o.err, tt.want) {
					t.Errorf("done got (%+v, %v), want an error wrapping %v", o.g, o.err, tt.want)
				}
				if got := waiters(n, "a"); len(got) != 0 {
					t.Errorf("waiters of a = %v, want none", got)
				}
				if s2.Cancel(id) {
					t.Errorf("Cancel of an ended request returned true")
				}
				if len(e.got()) != 1 {
					t.Errorf("done called again after the request ended")
				}
			})
		})
	}
}

// Cancel withdraws only the session's own waiting requests; a cancelled
// exclusive request lets the shared request behind it in.
func TestAcquireFuncCancel(t *testing.T) {
	n := newNode(t, Config{})
	s1 := open(t, n, latch.SessionOptions{})
	s2 := open(t, n, latch.SessionOptions{})
	s3 := open(t, n, latch.SessionOptions{})
	mustAcquire(t, s1, sh(0, "a"))
	id2, e2 := queue(t, s2, x(latch.WaitForever, "a"))
	_, e3 := queue(t, s3, sh(latch.WaitForever, "a"))
	for _, bad := range []struct {
		s  latch.Session
		id latch.WaitID
	}{{s3, id2}, {s2, id2 + 100}, {s2, 0}} {
		if bad.s.Cancel(bad.id) {
			t.Errorf("session %d: Cancel(%d) = true, want false", bad.s.ID(), bad.id)
		}
	}
	if len(e2.got()) != 0 {
		t.Fatalf("done called by a refused Cancel")
	}
	if !s2.Cancel(id2) {
		t.Fatalf("Cancel(%d) = false, want true", id2)
	}
	if o := e2.one(t); !errors.Is(o.err, latch.ErrCanceled) {
		t.Errorf("cancelled request's done got %v, want ErrCanceled", o.err)
	}
	if o := e3.one(t); o.err != nil || o.g.Token != 102 {
		t.Errorf("shared waiter's done got (%+v, %v), want token 102", o.g, o.err)
	}
}

// The Func calls of latch.Session answer what their blocking counterparts
// return, once: before they return on a node that answers inline, once
// applied on a cluster node (latch.Replicated).
func TestFuncCalls(t *testing.T) {
	n := newNode(t, Config{})
	s := open(t, n, latch.SessionOptions{TTL: time.Minute})
	closed := open(t, n, latch.SessionOptions{})
	closed.Close()
	mustAcquire(t, s, x(0, "a", "b"))
	inline := n.Execution() == latch.Inline
	// call makes one Func call and waits for its one answer, which an
	// inline node gives before the call returns.
	call := func(f func(done func(latch.Grant, error))) (latch.Grant, error) {
		e := new(ends)
		f(e.done)
		if inline && len(e.got()) != 1 {
			t.Errorf("an inline node's Func call returned before its answer")
		}
		o := e.one(t)
		return o.g, o.err
	}
	errOnly := func(done func(latch.Grant, error)) func(error) {
		return func(err error) { done(latch.Grant{}, err) }
	}
	tests := []struct {
		name      string
		s         latch.Session
		f         func(s latch.Session, done func(latch.Grant, error))
		wantErr   error
		wantLease bool
	}{
		{"keepalive", s, func(s latch.Session, d func(latch.Grant, error)) { s.KeepAliveFunc(errOnly(d)) }, nil, false},
		{"renew", s, func(s latch.Session, d func(latch.Grant, error)) { s.RenewFunc(time.Minute, []string{"a"}, d) }, nil, true},
		{"renew not held", s, func(s latch.Session, d func(latch.Grant, error)) { s.RenewFunc(time.Minute, []string{"c"}, d) }, latch.ErrNotHeld, false},
		{"release", s, func(s latch.Session, d func(latch.Grant, error)) { s.ReleaseFunc([]string{"a"}, errOnly(d)) }, nil, false},
		{"release again", s, func(s latch.Session, d func(latch.Grant, error)) { s.ReleaseFunc([]string{"a"}, errOnly(d)) }, latch.ErrNotHeld, false},
		{"keepalive, closed", closed, func(s latch.Session, d func(latch.Grant, error)) { s.KeepAliveFunc(errOnly(d)) }, latch.ErrNoSession, false},
		{"release, closed", closed, func(s latch.Session, d func(latch.Grant, error)) { s.ReleaseFunc([]string{"b"}, errOnly(d)) }, latch.ErrNoSession, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := call(func(d func(latch.Grant, error)) { tt.f(tt.s, d) })
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("error %v, want %v", err, tt.wantErr)
			}
			if tt.wantLease && (g.Token == 0 || g.Expires.IsZero()) {
				t.Errorf("grant %+v, want a token and a lease end", g)
			}
		})
	}
	// The calls took effect: a is free, b still held.
	if ki, ok := n.Lock("a"); ok && len(ki.Holders) > 0 {
		t.Errorf("a still held after ReleaseFunc: %+v", ki)
	}
	if ki, ok := n.Lock("b"); !ok || len(ki.Holders) != 1 {
		t.Errorf("b: %+v, want held", ki)
	}
}
