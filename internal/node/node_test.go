package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/fsm"
)

func TestAcquireAtOnce(t *testing.T) {
	tests := []struct {
		name     string
		cfg      Config
		setup    func(t *testing.T, other, s latch.Session) // s is the one that asks
		req      latch.LockRequest
		canceled bool // ctx done before the call
		wantTok  latch.Token
		wantErr  error
		wantBusy []string // keys of a *latch.BusyError
	}{
		{name: "free key", req: x(0, "a"), wantTok: 101},
		{name: "multi-key with a duplicate", req: x(0, "a", "b", "a"), wantTok: 101},
		{
			name:    "shared beside shared",
			setup:   func(t *testing.T, o, s latch.Session) { mustAcquire(t, o, sh(0, "a")) },
			req:     sh(0, "a"),
			wantTok: 102,
		},
		{
			name:     "exclusive holder",
			setup:    func(t *testing.T, o, s latch.Session) { mustAcquire(t, o, x(0, "a")) },
			req:      x(0, "b", "a"),
			wantErr:  latch.ErrWouldBlock,
			wantBusy: []string{"a"},
		},
		{
			name:     "shared behind exclusive",
			setup:    func(t *testing.T, o, s latch.Session) { mustAcquire(t, o, x(0, "a")) },
			req:      sh(0, "a"),
			wantErr:  latch.ErrWouldBlock,
			wantBusy: []string{"a"},
		},
		{
			name: "shared limit reached",
			setup: func(t *testing.T, o, s latch.Session) {
				mustAcquire(t, o, latch.LockRequest{Keys: []string{"a"}, Mode: latch.Shared, Limit: 1})
			},
			req:      latch.LockRequest{Keys: []string{"a"}, Mode: latch.Shared, Limit: 1},
			wantErr:  latch.ErrWouldBlock,
			wantBusy: []string{"a"},
		},
		{
			name: "shared limit mismatch",
			setup: func(t *testing.T, o, s latch.Session) {
				mustAcquire(t, o, latch.LockRequest{Keys: []string{"a"}, Mode: latch.Shared, Limit: 2})
			},
			req:     latch.LockRequest{Keys: []string{"a"}, Mode: latch.Shared, Limit: 3},
			wantErr: latch.ErrLimitMismatch,
		},
		{
			name:    "relock rejected",
			setup:   func(t *testing.T, o, s latch.Session) { mustAcquire(t, s, x(0, "a")) },
			req:     x(0, "a"),
			wantErr: latch.ErrAlreadyHeld,
		},
		{
			name:    "relock reused keeps the token",
			setup:   func(t *testing.T, o, s latch.Session) { mustAcquire(t, s, x(0, "a")) },
			req:     latch.LockRequest{Keys: []string{"a"}, Relock: latch.RelockReuse},
			wantTok: 101,
		},
		{name: "too many keys", cfg: Config{MaxKeys: 2}, req: x(0, "a", "b", "c"), wantErr: latch.ErrTooManyKeys},
		{name: "invalid key", req: x(0, "a b"), wantErr: latch.ErrInvalidKey},
		{name: "no keys", req: x(0), wantErr: latch.ErrNoKeys},
		{name: "bad wait", req: x(-2, "a"), wantErr: latch.ErrInvalidRequest},
		{name: "context already done", req: x(0, "a"), canceled: true, wantErr: latch.ErrCanceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := newNode(t, tt.cfg)
				other := open(t, n, latch.SessionOptions{})
				s := open(t, n, latch.SessionOptions{})
				if tt.setup != nil {
					tt.setup(t, other, s)
				}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				if tt.canceled {
					cancel()
				}
				g, err := s.Acquire(ctx, tt.req)
				if tt.wantErr == nil {
					if err != nil || g.Token != tt.wantTok || !g.Expires.IsZero() {
						t.Fatalf("Acquire = (%+v, %v), want token %d", g, err, tt.wantTok)
					}
					return
				}
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Acquire = (%+v, %v), want an error wrapping %v", g, err, tt.wantErr)
				}
				if tt.wantBusy != nil {
					var be *latch.BusyError
					if !errors.As(err, &be) {
						t.Fatalf("Acquire error %v (%T) is not a *latch.BusyError", err, err)
					}
					if diff := cmp.Diff(tt.wantBusy, be.Keys); diff != "" {
						t.Errorf("busy keys (-want +got):\n%s", diff)
					}
				}
				if tt.canceled {
					if !errors.Is(err, context.Canceled) {
						t.Errorf("Acquire error %v does not wrap context.Canceled", err)
					}
					if _, ok := n.Lock("a"); ok {
						t.Errorf("a cancelled request reached the table")
					}
				}
			})
		})
	}
}

func TestLeaseGrant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNode(t, Config{})
		start := time.Now()
		s := open(t, n, latch.SessionOptions{})
		g := mustAcquire(t, s, latch.LockRequest{Keys: []string{"a"}, Lease: 10 * time.Second})
		if want := start.Add(10 * time.Second); !g.Expires.Equal(want) {
			t.Errorf("Expires = %v, want %v", g.Expires, want)
		}
		time.Sleep(4 * time.Second)
		g, err := s.Renew(20*time.Second, "a")
		if err != nil || g.Token != 101 || !g.Expires.Equal(start.Add(24*time.Second)) {
			t.Errorf("Renew = (%+v, %v), want token 101 expiring at +24s", g, err)
		}
		g, err = s.Renew(0, "a")
		if err != nil || g.Token != 101 || !g.Expires.IsZero() {
			t.Errorf("Renew(0) = (%+v, %v), want token 101 without a lease", g, err)
		}
		if _, err := s.Renew(time.Second, "b"); !errors.Is(err, latch.ErrNotHeld) {
			t.Errorf("Renew of a key not held = %v, want ErrNotHeld", err)
		}
		time.Sleep(time.Hour)
		if got := holders(n, "a"); len(got) != 1 {
			t.Errorf("holders after the lease was removed = %v, want one", got)
		}
	})
}

func TestReleaseHandsOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNode(t, Config{})
		s1 := open(t, n, latch.SessionOptions{})
		s2 := open(t, n, latch.SessionOptions{})
		s3 := open(t, n, latch.SessionOptions{})
		mustAcquire(t, s1, x(0, "a", "b"))
		ctx := context.Background()
		c2 := goAcquire(ctx, s2, x(latch.WaitForever, "a"))
		c3 := goAcquire(ctx, s3, sh(latch.WaitForever, "b"))
		c2.waiting(t)
		c3.waiting(t)
		if diff := cmp.Diff([]latch.SessionID{s2.ID()}, waiters(n, "a")); diff != "" {
			t.Errorf("waiters of a (-want +got):\n%s", diff)
		}

		if err := s1.Release("a"); err != nil {
			t.Fatal(err)
		}
		c2.granted(t, 102)
		c3.waiting(t)
		if diff := cmp.Diff([]latch.SessionID{s2.ID()}, holders(n, "a")); diff != "" {
			t.Errorf("holders of a (-want +got):\n%s", diff)
		}

		if err := s1.Release("a"); !errors.Is(err, latch.ErrNotHeld) {
			t.Errorf("second Release = %v, want ErrNotHeld", err)
		}
		if cnt, err := s1.ReleaseAll(); cnt != 1 || err != nil {
			t.Errorf("ReleaseAll = (%d, %v), want (1, nil)", cnt, err)
		}
		c3.granted(t, 103)
	})
}

func TestSharedWaitersGrantedTogether(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNode(t, Config{})
		s0 := open(t, n, latch.SessionOptions{})
		mustAcquire(t, s0, x(0, "a"))
		var cs []call
		for range 3 {
			s := open(t, n, latch.SessionOptions{})
			cs = append(cs, goAcquire(context.Background(), s, sh(latch.WaitForever, "a")))
		}
		sx := open(t, n, latch.SessionOptions{})
		cx := goAcquire(context.Background(), sx, x(latch.WaitForever, "a"))
		if err := s0.Release("a"); err != nil {
			t.Fatal(err)
		}
		for i, c := range cs {
			c.granted(t, latch.Token(102+i))
		}
		cx.waiting(t)
		if got := len(holders(n, "a")); got != 3 {
			t.Errorf("%d holders, want 3", got)
		}
	})
}

func TestTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNode(t, Config{})
		s1 := open(t, n, latch.SessionOptions{})
		s2 := open(t, n, latch.SessionOptions{})
		s3 := open(t, n, latch.SessionOptions{})
		mustAcquire(t, s1, x(0, "a"))
		start := time.Now()
		c2 := goAcquire(context.Background(), s2, x(10*time.Second, "b", "a"))
		c3 := goAcquire(context.Background(), s3, x(2*time.Second, "a"))

		ki, _ := n.Lock("a")
		if len(ki.Waiters) != 2 || !ki.Waiters[0].Deadline.Equal(start.Add(10*time.Second)) || ki.Waiters[0].Keys != 2 {
			t.Errorf("waiters of a = %+v, want s2 with its deadline first", ki.Waiters)
		}

		time.Sleep(2*time.Second - 1)
		c3.waiting(t)
		time.Sleep(time.Nanosecond)
		err := c3.failed(t, latch.ErrTimeout)
		var be *latch.BusyError
		if !errors.As(err, &be) || !cmp.Equal(be.Keys, []string{"a"}) {
			t.Errorf("timeout error = %#v, want a BusyError naming a", err)
		}

		time.Sleep(8*time.Second - 1)
		c2.waiting(t)
		time.Sleep(time.Nanosecond)
		err = c2.failed(t, latch.ErrTimeout)
		if !errors.As(err, &be) || !cmp.Equal(be.Keys, []string{"a"}) {
			t.Errorf("timeout error = %#v, want a BusyError naming a (not b, which was free)", err)
		}
		if _, ok := n.Lock("b"); ok {
			t.Errorf("key b still in the table after its only waiter timed out")
		}
		if time.Since(start) != 10*time.Second {
			t.Errorf("timed out after %v, want 10s", time.Since(start))
		}
	})
}

// A lease ending at the instant a waiter's deadline falls grants the waiter.
func TestExpiryBeforeDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNode(t, Config{})
		s1 := open(t, n, latch.SessionOptions{})
		s2 := open(t, n, latch.SessionOptions{})
		mustAcquire(t, s1, latch.LockRequest{Keys: []string{"a"}, Lease: 5 * time.Second})
		c := goAcquire(context.Background(), s2, x(5*time.Second, "a"))
		time.Sleep(5 * time.Second)
		c.granted(t, 102)
	})
}

func TestCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNode(t, Config{})
		s1 := open(t, n, latch.SessionOptions{})
		s2 := open(t, n, latch.SessionOptions{})
		s3 := open(t, n, latch.SessionOptions{})
		mustAcquire(t, s1, sh(0, "a"))
		ctx, cancel := context.WithCancel(context.Background())
		c2 := goAcquire(ctx, s2, x(latch.WaitForever, "a"))
		c3 := goAcquire(context.Background(), s3, sh(latch.WaitForever, "a"))
		c3.waiting(t) // a shared request queues behind an exclusive waiter
		cancel()
		err := c2.failed(t, latch.ErrCanceled)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancel error %v does not wrap context.Canceled", err)
		}
		c3.granted(t, 102)
		if got := waiters(n, "a"); len(got) != 0 {
			t.Errorf("waiters after cancel = %v, want none", got)
		}
	})
}

func TestCancelDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNode(t, Config{})
		s1 := open(t, n, latch.SessionOptions{})
		s2 := open(t, n, latch.SessionOptions{})
		mustAcquire(t, s1, x(0, "a"))
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		c := goAcquire(ctx, s2, x(latch.WaitForever, "a"))
		time.Sleep(3 * time.Second)
		err := c.failed(t, latch.ErrCanceled)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("error %v does not wrap context.DeadlineExceeded", err)
		}
		if got := waiters(n, "a"); len(got) != 0 {
			t.Errorf("waiters after cancel = %v, want none", got)
		}
	})
}

// When the grant and the cancellation arrive together, the grant wins.
func TestGrantWinsCancelRace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNode(t, Config{})
		s1 := open(t, n, latch.SessionOptions{})
		s2 := open(t, n, latch.SessionOptions{})
		for i := range 20 { // the parked select picks either case at random
			mustAcquire(t, s1, x(0, "a"))
			ctx, cancel := context.WithCancel(context.Background())
			c := goAcquire(ctx, s2, x(latch.WaitForever, "a"))
			// Cancel and release (s1.Release inlined) both land before the
			// parked goroutine can take the mutex.
			n.mu.Lock()
			cancel()
			rel := n.command(fsm.OpRelease)
			rel.Session, rel.Req.Keys = s1.ID(), []string{"a"}
			if err := n.propose().Err; err != nil {
				t.Fatal(err)
			}
			n.mu.Unlock()
			c.granted(t, latch.Token(102+2*i))
			if err := s2.Release("a"); err != nil {
				t.Fatalf("round %d: the grant was returned but not held: %v", i, err)
			}
		}
	})
}

func TestCloseReleasesAndAborts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNode(t, Config{LockDelay: time.Minute})
		s1 := open(t, n, latch.SessionOptions{LockDelay: -1}) // no lock-delay
		s2 := open(t, n, latch.SessionOptions{})
		s3 := open(t, n, latch.SessionOptions{})
		mustAcquire(t, s1, x(0, "a"))
		mustAcquire(t, s3, x(0, "b"))
		c1 := goAcquire(context.Background(), s1, x(latch.WaitForever, "b"))
		c2 := goAcquire(context.Background(), s2, x(latch.WaitForever, "a"))
		if isClosed(s1.Done()) {
			t.Fatal("Done closed before Close")
		}
		if err := s1.Close(); err != nil {
			t.Fatal(err)
		}
		c1.failed(t, latch.ErrSessionEnded)
		c2.granted(t, 103)
		if !isClosed(s1.Done()) {
			t.Error("Done not closed after Close")
		}
		if err := s1.Close(); err != nil {
			t.Errorf("second Close = %v", err)
		}
		if _, err := s1.Acquire(context.Background(), x(0, "c")); !errors.Is(err, latch.ErrNoSession) {
			t.Errorf("Acquire after Close = %v, want ErrNoSession", err)
		}
		if err := s1.Release("a"); !errors.Is(err, latch.ErrNoSession) {
			t.Errorf("Release after Close = %v, want ErrNoSession", err)
		}
		if _, err := s1.ReleaseAll(); !errors.Is(err, latch.ErrNoSession) {
			t.Errorf("ReleaseAll after Close = %v, want ErrNoSession", err)
		}
		if _, err := s1.Renew(0, "a"); !errors.Is(err, latch.ErrNoSession) {
			t.Errorf("Renew after Close = %v, want ErrNoSession", err)
		}
		if err := s1.KeepAlive(); !errors.Is(err, latch.ErrNoSession) {
			t.Errorf("KeepAlive after Close = %v, want ErrNoSession", err)
		}
		if got := len(n.Sessions()); got != 2 {
			t.Errorf("%d sessions listed, want 2", got)
		}
	})
}

func TestSessionTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNode(t, Config{})
		start := time.Now()
		s1 := open(t, n, latch.SessionOptions{TTL: 10 * time.Second})
		s2 := open(t, n, latch.SessionOptions{})
		mustAcquire(t, s1, x(0, "a"))
		mustAcquire(t, s2, x(0, "b"))
		c1 := goAcquire(context.Background(), s1, x(latch.WaitForever, "b"))
		c2 := goAcquire(context.Background(), s2, x(latch.WaitForever, "a"))
		time.Sleep(6 * time.Second)
		if err := s1.KeepAlive(); err != nil {
			t.Fatal(err)
		}
		if si := n.Sessions(); si[0].Expires != start.Add(16*time.Second) {
			t.Errorf("session expires %v, want %v", si[0].Expires, start.Add(16*time.Second))
		}
		time.Sleep(10*time.Second - 1)
		c2.waiting(t)
		if isClosed(s1.Done()) {
			t.Fatal("Done closed before the TTL lapsed")
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if !isClosed(s1.Done()) {
			t.Fatal("Done not closed when the TTL lapsed")
		}
		c1.failed(t, latch.ErrSessionEnded)
		c2.granted(t, 103)
		if err := s1.KeepAlive(); !errors.Is(err, latch.ErrNoSession) {
			t.Errorf("KeepAlive after expiry = %v, want ErrNoSession", err)
		}
		if err := s1.Close(); err != nil {
			t.Errorf("Close after expiry = %v", err)
		}
	})
}

func TestLeaseSurvivesClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNode(t, Config{})
		start := time.Now()
		s1 := open(t, n, latch.SessionOptions{})
		s2 := open(t, n, latch.SessionOptions{})
		mustAcquire(t, s1, latch.LockRequest{Keys: []string{"a"}, Lease: 10 * time.Second})
		mustAcquire(t, s1, x(0, "b"))
		if err := s1.Close(); err != nil {
			t.Fatal(err)
		}
		ki, ok := n.Lock("a")
		want := latch.KeyInfo{Key: "a", Holders: []latch.HolderInfo{{
			Session: 0, Token: 101, Acquired: start, Expires: start.Add(10 * time.Second),
		}}}
		if diff := cmp.Diff(want, ki); !ok || diff != "" {
			t.Errorf("Lock(a) after Close (-want +got):\n%s", diff)
		}
		if _, ok := n.Lock("b"); ok {
			t.Errorf("non-leased b still held after Close")
		}
		c := goAcquire(context.Background(), s2, x(latch.WaitForever, "a"))
		time.Sleep(10*time.Second - 1)
		c.waiting(t)
		time.Sleep(time.Nanosecond)
		c.granted(t, 103)
	})
}

func TestLockDelay(t *testing.T) {
	tests := []struct {
		name      string
		cfg       Config
		opts      latch.SessionOptions
		end       func(n *Node, s latch.Session) error
		wantDelay time.Duration
	}{
		{"close, node default", Config{LockDelay: 3 * time.Second}, latch.SessionOptions{}, closeSession, 3 * time.Second},
		{"close, session option", Config{LockDelay: 3 * time.Second}, latch.SessionOptions{LockDelay: 5 * time.Second}, closeSession, 5 * time.Second},
		{"close, session opts out", Config{LockDelay: 3 * time.Second}, latch.SessionOptions{LockDelay: -1}, closeSession, 0},
		{"admin end-session", Config{LockDelay: 3 * time.Second}, latch.SessionOptions{}, adminEnd, 3 * time.Second},
		{"TTL lapses", Config{}, latch.SessionOptions{TTL: time.Second, LockDelay: 2 * time.Second}, ttlLapse, 2 * time.Second},
		{"release: never delayed", Config{LockDelay: 3 * time.Second}, latch.SessionOptions{}, release, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := newNode(t, tt.cfg)
				s1 := open(t, n, tt.opts)
				s2 := open(t, n, latch.SessionOptions{})
				mustAcquire(t, s1, x(0, "a"))
				c := goAcquire(context.Background(), s2, x(latch.WaitForever, "a"))
				if err := tt.end(n, s1); err != nil {
					t.Fatal(err)
				}
				ended := time.Now()
				if tt.wantDelay == 0 {
					c.granted(t, 102)
					return
				}
				ki, _ := n.Lock("a")
				if want := ended.Add(tt.wantDelay); !ki.DelayedUntil.Equal(want) || len(ki.Holders) != 0 {
					t.Errorf("Lock(a) = %+v, want no holder, delayed until %v", ki, want)
				}
				if _, err := s2.Acquire(context.Background(), x(0, "a")); !errors.Is(err, latch.ErrWouldBlock) {
					t.Errorf("try-lock during the delay = %v, want ErrWouldBlock", err)
				}
				time.Sleep(tt.wantDelay - 1)
				c.waiting(t)
				time.Sleep(time.Nanosecond)
				c.granted(t, 102)
			})
		})
	}
}

func closeSession(n *Node, s latch.Session) error { return s.Close() }
func adminEnd(n *Node, s latch.Session) error     { return n.EndSession(s.ID()) }
func release(n *Node, s latch.Session) error      { return s.Release("a") }
func ttlLapse(n *Node, s latch.Session) error {
	time.Sleep(time.Second)
	synctest.Wait()
	if !isClosed(s.Done()) {
		return errors.New("session did not expire")
	}
	return nil
}

func TestShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNode(t, Config{})
		s1 := open(t, n, latch.SessionOptions{TTL: time.Minute})
		s2 := open(t, n, latch.SessionOptions{})
		mustAcquire(t, s1, x(0, "a"))
		mustAcquire(t, s1, latch.LockRequest{Keys: []string{"leased"}, Lease: time.Hour})
		c2 := goAcquire(context.Background(), s2, x(latch.WaitForever, "a"))
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		c3 := goAcquire(ctx, s2, x(time.Hour, "leased"))

		if err := n.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		c2.failed(t, latch.ErrShutdown)
		c3.failed(t, latch.ErrShutdown)
		for _, s := range []latch.Session{s1, s2} {
			if !isClosed(s.Done()) {
				t.Errorf("session %d: Done not closed", s.ID())
			}
		}
		if _, err := n.OpenSession(latch.SessionOptions{}); !errors.Is(err, latch.ErrShutdown) {
			t.Errorf("OpenSession after Shutdown = %v, want ErrShutdown", err)
		}
		_, err := s2.Acquire(context.Background(), x(0, "b"))
		if !errors.Is(err, latch.ErrShutdown) || !errors.Is(err, latch.ErrNoSession) {
			t.Errorf("Acquire after Shutdown = %v, want ErrShutdown and ErrNoSession", err)
		}
		if err := s1.Close(); err != nil {
			t.Errorf("Close after Shutdown = %v", err)
		}
		if err := n.Shutdown(context.Background()); err != nil {
			t.Errorf("second Shutdown = %v", err)
		}
		if asyncReplicas {
			// A cluster node leaves its TTL sessions to the cluster, for
			// their clients to resume on another node; it ends the others.
			if got := n.Sessions(); len(got) != 1 || got[0].ID != s1.ID() {
				t.Errorf("sessions after Shutdown = %+v, want s1's only", got)
			}
		} else {
			if got := n.Sessions(); len(got) != 0 {
				t.Errorf("sessions after Shutdown = %+v", got)
			}
			if got := n.Locks("", "", 0); len(got) != 1 || got[0].Key != "leased" {
				t.Errorf("locks after Shutdown = %+v, want the lease only", got)
			}
		}
		time.Sleep(2 * time.Hour) // no timer fires after Shutdown
	})
}

func TestAdmin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs bytes.Buffer
		n := newNode(t, Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		start := time.Now()
		s1 := open(t, n, latch.SessionOptions{Protocol: "memcache", Peer: "10.0.0.1:5000"})
		s2 := open(t, n, latch.SessionOptions{Protocol: "dlock", Peer: "10.0.0.2:6000", TTL: time.Minute})
		s3 := open(t, n, latch.SessionOptions{Protocol: "dlock", Peer: "10.0.0.3:7000"})
		mustAcquire(t, s1, latch.LockRequest{Keys: []string{"k1", "k2"}, Mode: latch.Shared, Limit: 4})
		mustAcquire(t, s2, latch.LockRequest{Keys: []string{"k1"}, Mode: latch.Shared, Limit: 4, Lease: time.Hour})
		time.Sleep(time.Second)
		since := time.Now()
		c3 := goAcquire(context.Background(), s3, x(30*time.Second, "k2", "k1"))

		got := n.Locks("k", "", 0)
		want := []latch.KeyInfo{
			{
				Key: "k1", Mode: latch.Shared, Limit: 4,
				Holders: []latch.HolderInfo{
					{Session: s1.ID(), Protocol: "memcache", Peer: "10.0.0.1:5000", Token: 101, Acquired: start},
					{Session: s2.ID(), Protocol: "dlock", Peer: "10.0.0.2:6000", Token: 102, Acquired: start, Expires: start.Add(time.Hour)},
				},
				Waiters: []latch.WaiterInfo{
					{Session: s3.ID(), Protocol: "dlock", Peer: "10.0.0.3:7000", Mode: latch.Exclusive, Since: since, Deadline: since.Add(30 * time.Second), Keys: 2},
				},
			},
			{
				Key: "k2", Mode: latch.Shared, Limit: 4,
				Holders: []latch.HolderInfo{
					{Session: s1.ID(), Protocol: "memcache", Peer: "10.0.0.1:5000", Token: 101, Acquired: start},
				},
				Waiters: []latch.WaiterInfo{
					{Session: s3.ID(), Protocol: "dlock", Peer: "10.0.0.3:7000", Mode: latch.Exclusive, Since: since, Deadline: since.Add(30 * time.Second), Keys: 2},
				},
			},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Locks (-want +got):\n%s", diff)
		}
		if got := n.Locks("k", "k1", 0); len(got) != 1 || got[0].Key != "k2" {
			t.Errorf("Locks after k1 = %+v, want k2", got)
		}
		if got := n.Locks("", "", 1); len(got) != 1 || got[0].Key != "k1" {
			t.Errorf("Locks limit 1 = %+v, want k1", got)
		}
		if got := n.Locks("x", "", 0); len(got) != 0 {
			t.Errorf("Locks prefix x = %+v, want none", got)
		}
		if _, ok := n.Lock("nope"); ok {
			t.Errorf("Lock(nope) found")
		}

		wantSessions := []latch.SessionInfo{
			{ID: s1.ID(), Protocol: "memcache", Peer: "10.0.0.1:5000", Node: n.cfg.NodeID, Opened: start, Held: 2},
			{ID: s2.ID(), Protocol: "dlock", Peer: "10.0.0.2:6000", Opened: start, TTL: time.Minute, Expires: start.Add(time.Minute), Held: 1},
			{ID: s3.ID(), Protocol: "dlock", Peer: "10.0.0.3:7000", Node: n.cfg.NodeID, Opened: start, Waiting: 1},
		}
		if diff := cmp.Diff(wantSessions, n.Sessions()); diff != "" {
			t.Errorf("Sessions (-want +got):\n%s", diff)
		}

		// Ending s1 leaves k1 to s2's lease; force-releasing k1 grants s3.
		if err := n.EndSession(s1.ID()); err != nil {
			t.Fatal(err)
		}
		if !isClosed(s1.Done()) {
			t.Error("EndSession did not close Done")
		}
		if err := n.EndSession(s1.ID()); !errors.Is(err, latch.ErrNoSession) {
			t.Errorf("EndSession twice = %v, want ErrNoSession", err)
		}
		if _, err := s1.Acquire(context.Background(), x(0, "z")); !errors.Is(err, latch.ErrNoSession) {
			t.Errorf("Acquire on an ended session = %v, want ErrNoSession", err)
		}
		c3.waiting(t)
		cnt, err := n.ForceRelease("k1")
		if cnt != 1 || err != nil {
			t.Errorf("ForceRelease = (%d, %v), want (1, nil)", cnt, err)
		}
		c3.granted(t, 103)
		if cnt, err := n.ForceRelease("nope"); cnt != 0 || err != nil {
			t.Errorf("ForceRelease(nope) = (%d, %v), want (0, nil)", cnt, err)
		}
		if _, err := n.ForceRelease("a b"); !errors.Is(err, latch.ErrInvalidKey) {
			t.Errorf("ForceRelease(invalid) = %v, want ErrInvalidKey", err)
		}
		for _, want := range []string{
			`msg="node: admin end-session" session=1 protocol=memcache peer=10.0.0.1:5000`,
			`msg="node: admin force-release" key=k1 holders=1`,
		} {
			if !strings.Contains(logs.String(), want) {
				t.Errorf("log lacks %q:\n%s", want, logs.String())
			}
		}
	})
}

// A lease whose session ended is listed with session 0.
func TestLeaseHolderSessionZero(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNode(t, Config{})
		s := open(t, n, latch.SessionOptions{TTL: time.Second})
		mustAcquire(t, s, latch.LockRequest{Keys: []string{"a"}, Lease: time.Minute})
		time.Sleep(time.Second)
		synctest.Wait()
		if !isClosed(s.Done()) {
			t.Fatal("session did not expire")
		}
		ki, _ := n.Lock("a")
		if len(ki.Holders) != 1 || ki.Holders[0].Session != 0 || ki.Holders[0].Protocol != "" {
			t.Errorf("holders = %+v, want one with session 0", ki.Holders)
		}
	})
}

// recordObserver records what it hears, one line per call (per drop).
type recordObserver struct {
	protos []string // by proto; NoProto is "none"
	calls  []string
	mu     sync.Mutex
}

func (o *recordObserver) name(proto int) string {
	if proto == NoProto {
		return "none"
	}
	return o.protos[proto]
}

func (o *recordObserver) add(format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, fmt.Sprintf(format, args...))
}

func (o *recordObserver) SessionOpened(protocol string) int {
	if o.protos == nil {
		o.protos = []string{"none"}
	}
	for i, p := range o.protos[1:] {
		if p == protocol {
			return i + 1
		}
	}
	o.protos = append(o.protos, protocol)
	o.add("open %s", protocol)
	return len(o.protos) - 1
}
func (o *recordObserver) SessionEnded(proto int)   { o.add("end %s", o.name(proto)) }
func (o *recordObserver) SessionExpired(proto int) { o.add("expire %s", o.name(proto)) }
func (o *recordObserver) Granted(proto, keys int, waited time.Duration) {
	o.add("grant %s keys=%d waited=%v", o.name(proto), keys, waited)
}
func (o *recordObserver) TimedOut(proto, keys int) { o.add("timeout %s keys=%d", o.name(proto), keys) }
func (o *recordObserver) Canceled(proto int)       { o.add("cancel %s", o.name(proto)) }
func (o *recordObserver) Released(drops []Drop) {
	for _, d := range drops {
		o.add("release %s %v held=%v", o.name(int(d.Tag)), d.Cause, time.Duration(d.At-d.Acquired))
	}
}
func (o *recordObserver) HandedOff(latency time.Duration) { o.add("handoff %v", latency) }

func (o *recordObserver) get() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.calls)
}

func TestObserver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := &recordObserver{}
		n := newNode(t, Config{Observer: o})
		s1 := open(t, n, latch.SessionOptions{Protocol: "mc", TTL: time.Hour})
		s2 := open(t, n, latch.SessionOptions{Protocol: "dl"})
		mustAcquire(t, s1, x(0, "a", "b"))
		c := goAcquire(context.Background(), s2, x(latch.WaitForever, "a"))
		time.Sleep(3 * time.Second)
		s1.Release("a", "b")
		c.granted(t, 102)
		c = goAcquire(context.Background(), s1, x(time.Second, "a"))
		time.Sleep(time.Second)
		c.failed(t, latch.ErrTimeout)
		ctx, cancel := context.WithCancel(context.Background())
		c = goAcquire(ctx, s1, x(latch.WaitForever, "a"))
		cancel()
		c.failed(t, latch.ErrCanceled)
		mustAcquire(t, s1, latch.LockRequest{Keys: []string{"l"}, Lease: time.Second})
		time.Sleep(2 * time.Second)
		if _, err := n.ForceRelease("a"); err != nil {
			t.Fatal(err)
		}
		s3 := open(t, n, latch.SessionOptions{Protocol: "mc"})
		mustAcquire(t, s3, latch.LockRequest{Keys: []string{"k"}, Lease: 10 * time.Second})
		mustAcquire(t, s3, x(0, "m"))
		s3.Close()
		time.Sleep(time.Hour)
		s2.Close()
		want := []string{
			"open mc",
			"open dl",
			"grant mc keys=2 waited=0s",
			"release mc released held=3s",
			"release mc released held=3s",
			"grant dl keys=1 waited=3s",
			"handoff 0s",
			"timeout mc keys=1",
			"cancel mc",
			"grant mc keys=1 waited=0s",
			"release mc lease-expired held=1s",
			"release dl forced held=3s",
			"grant mc keys=1 waited=0s",
			"grant mc keys=1 waited=0s",
			"release mc session-ended held=0s",
			"end mc",
			"release none lease-expired held=10s",
			"expire mc",
			"end mc",
			"end dl",
		}
		if diff := cmp.Diff(want, o.get()); diff != "" {
			t.Errorf("observed calls (-want +got):\n%s", diff)
		}
		if st := n.Stats(); st != (Stats{Token: 105, Znodes: 4}) {
			t.Errorf("Stats() = %+v, want an empty table with token 105 and the tree's 4 built-in znodes", st)
		}
	})
}

// Concurrent Acquires on one session, each parked, are answered separately.
func TestSessionConcurrentWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNode(t, Config{})
		s1 := open(t, n, latch.SessionOptions{})
		s2 := open(t, n, latch.SessionOptions{})
		mustAcquire(t, s1, x(0, "a", "b", "c"))
		ca := goAcquire(context.Background(), s2, x(latch.WaitForever, "a"))
		cb := goAcquire(context.Background(), s2, x(time.Second, "b"))
		cc := goAcquire(context.Background(), s2, x(latch.WaitForever, "c"))
		s1.Release("c")
		cc.granted(t, 102)
		time.Sleep(time.Second)
		cb.failed(t, latch.ErrTimeout)
		ca.waiting(t)
		s2.Close()
		ca.failed(t, latch.ErrSessionEnded)
	})
}

// A lease that ends at the instant a waiter's context does hands the key to
// the waiter, whichever of the node's timer and the context runs first: a
// cancellation first brings the table up to now, which grants the request.
func TestCancelAtGrantInstant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNode(t, Config{})
		s1 := open(t, n, latch.SessionOptions{})
		s2 := open(t, n, latch.SessionOptions{})
		for i := range 20 {
			mustAcquire(t, s1, latch.LockRequest{Keys: []string{"a"}, Lease: time.Second})
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			c := goAcquire(ctx, s2, x(latch.WaitForever, "a"))
			time.Sleep(time.Second)
			c.granted(t, latch.Token(102+2*i))
			cancel()
			if err := s2.Release("a"); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func TestNewDefaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		n, err := New(Config{}) // FirstToken from the clock, no logger
		if err != nil {
			t.Fatal(err)
		}
		defer n.Shutdown(context.Background())
		if _, err := n.OpenSession(latch.SessionOptions{TTL: -time.Second}); !errors.Is(err, latch.ErrInvalidRequest) {
			t.Errorf("OpenSession with a negative TTL = %v, want ErrInvalidRequest", err)
		}
		s := open(t, n, latch.SessionOptions{})
		g := mustAcquire(t, s, x(0, "a"))
		if want := latch.Token(start.UnixNano()) + 1; g.Token != want {
			t.Errorf("first token %d, want %d (start time + 1)", g.Token, want)
		}
		mustAcquire(t, s, latch.LockRequest{Keys: []string{"l"}, Lease: time.Second})
		time.Sleep(time.Second) // a lease expiry with the discarding logger
	})
}

// A node answers inline with replica.Local and replicated with a
// replicator of its own, for its whole life.
func TestExecution(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want latch.Execution
	}{
		{"local", Config{}, latch.Inline},
		{"replicator", Config{Replicator: newAsyncReplicator, NodeID: "test-node"}, latch.Replicated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := New(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if got := n.Execution(); got != tt.want {
				t.Errorf("Execution() = %v, want %v", got, tt.want)
			}
			n.Shutdown(context.Background())
			if got := n.Execution(); got != tt.want {
				t.Errorf("Execution() after Shutdown = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestDebugLog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs bytes.Buffer
		n := newNode(t, Config{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
		s := open(t, n, latch.SessionOptions{TTL: 2 * time.Second})
		mustAcquire(t, s, latch.LockRequest{Keys: []string{"l"}, Lease: time.Second})
		time.Sleep(2 * time.Second)
		synctest.Wait()
		for _, want := range []string{
			`msg="node: lease expired" key=l session=1 token=101`,
			`msg="node: session expired" session=1`,
		} {
			if !strings.Contains(logs.String(), want) {
				t.Errorf("log lacks %q:\n%s", want, logs.String())
			}
		}
	})
}

// Shutdown answers every parked request with ErrShutdown, however the
// queues interleave: withdrawing them newest first grants nobody.
func TestShutdownManyWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs bytes.Buffer
		n := newNode(t, Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		rng := rand.New(rand.NewPCG(1, 2))
		var parked []call
		for range 60 {
			s := open(t, n, latch.SessionOptions{})
			req := randomRequest(rng, []string{"k0", "k1", "k2", "k3"})
			req.Wait = latch.WaitForever
			if rng.IntN(3) == 0 {
				req.Lease = time.Hour
			}
			c := goAcquire(context.Background(), s, req)
			select {
			case o := <-c:
				if o.err != nil {
					t.Fatal(o.err)
				}
			default:
				parked = append(parked, c)
			}
		}
		if len(parked) < 20 {
			t.Fatalf("only %d requests parked", len(parked))
		}
		n.Shutdown(context.Background())
		for _, c := range parked {
			c.failed(t, latch.ErrShutdown)
		}
		if strings.Contains(logs.String(), "level=ERROR") {
			t.Errorf("errors logged:\n%s", logs.String())
		}
		for _, ki := range n.Locks("", "", 0) {
			if len(ki.Waiters) != 0 {
				t.Errorf("%s: waiters left: %+v", ki.Key, ki.Waiters)
			}
			for _, h := range ki.Holders {
				if h.Session != 0 || h.Expires.IsZero() {
					t.Errorf("%s: a holder other than a detached lease is left: %+v", ki.Key, h)
				}
			}
		}
	})
}

// TestOnEnd: a session's OnEnd runs once when it ends behind its owner's
// back (an operator, its TTL, shutdown), never when its owner closes it.
func TestOnEnd(t *testing.T) {
	tests := []struct {
		name string
		end  func(n *Node, s latch.Session)
		want int
		why  error // what OnEnd is told
	}{
		{"Close", func(n *Node, s latch.Session) { s.Close() }, 0, nil},
		{"operator", func(n *Node, s latch.Session) { n.EndSession(s.ID()) }, 1, latch.ErrSessionEnded},
		{"TTL", func(n *Node, s latch.Session) { time.Sleep(11 * time.Second) }, 1, latch.ErrSessionEnded},
		{"shutdown", func(n *Node, s latch.Session) { n.Shutdown(context.Background()) }, 1, latch.ErrShutdown},
		{"operator, then Close", func(n *Node, s latch.Session) { n.EndSession(s.ID()); s.Close() }, 1, latch.ErrSessionEnded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := newNode(t, Config{})
				var calls atomic.Int32
				var got atomic.Value
				s := open(t, n, latch.SessionOptions{TTL: 10 * time.Second, OnEnd: func(why error) {
					calls.Add(1)
					got.Store(why)
				}})
				mustAcquire(t, s, x(0, "a"))
				tt.end(n, s)
				synctest.Wait()
				if got := int(calls.Load()); got != tt.want {
					t.Errorf("OnEnd called %d times, want %d", got, tt.want)
				}
				want := tt.why
				if asyncReplicas && want == latch.ErrShutdown {
					// The session has a TTL: it lives on in the cluster
					// (TestShutdownLeavesTTLSessions).
					want = latch.ErrUnavailable
				}
				if why, _ := got.Load().(error); want != nil && !errors.Is(why, want) {
					t.Errorf("OnEnd told %v, want %v", why, want)
				}
				s.Close()
			})
		})
	}
}
