package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/dlockpb"
)

func TestLockUnlock(t *testing.T) {
	srv := startServer(t, 0)
	a := dial(t, srv.addr)
	b := dial(t, srv.addr)
	ctx := context.Background()

	l, err := a.Lock(ctx, []string{"k2", "k1", "k2"})
	if err != nil {
		t.Fatalf("Lock() error = %v", err)
	}
	if got, want := l.Keys(), []string{"k2", "k1"}; !slices.Equal(got, want) {
		t.Errorf("Keys() = %q, want %q", got, want)
	}
	if l.Token() == 0 {
		t.Error("Token() = 0, want a fencing token")
	}
	if got := l.Tokens(); len(got) != 2 || got[0] != l.Token() || got[1] != l.Token() {
		t.Errorf("Tokens() = %v, want [%d %d]", got, l.Token(), l.Token())
	}
	if l.Mode() != latch.Exclusive {
		t.Errorf("Mode() = %v, want exclusive", l.Mode())
	}
	if got := srv.holders("k1"); !slices.Equal(got, []latch.SessionID{a.SessionID()}) {
		t.Errorf("holders of k1 = %v, want the session of a %d", got, a.SessionID())
	}
	if isDone(l.Done()) || l.Err() != nil {
		t.Fatalf("a held lock is done: %v", l.Err())
	}

	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock() error = %v", err)
	}
	if !isDone(l.Done()) || !errors.Is(l.Err(), ErrUnlocked) {
		t.Errorf("after Unlock: done %v, Err() = %v, want done with ErrUnlocked", isDone(l.Done()), l.Err())
	}
	if err := l.Unlock(ctx); !errors.Is(err, latch.ErrNotHeld) {
		t.Errorf("second Unlock() error = %v, want ErrNotHeld", err)
	}
	if len(srv.holders("k1")) != 0 {
		t.Errorf("k1 still held after Unlock: %v", srv.holders("k1"))
	}

	l2, err := b.Lock(ctx, []string{"k1"})
	if err != nil {
		t.Fatalf("b.Lock() after Unlock error = %v", err)
	}
	if l2.Token() <= l.Token() {
		t.Errorf("second token %d, want more than the first %d", l2.Token(), l.Token())
	}
}

func TestLockConflicts(t *testing.T) {
	srv := startServer(t, 0)
	holder := dial(t, srv.addr)
	ctx := context.Background()
	mustLock(t, holder, "x")
	if _, err := holder.RLock(ctx, []string{"s"}, Limit(1)); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name     string
		lock     func(c *Client) (*Lock, error)
		wantErr  error
		wantBusy []string
	}{
		{
			name:     "TryLock",
			lock:     func(c *Client) (*Lock, error) { return c.TryLock(ctx, []string{"free", "x"}) },
			wantErr:  latch.ErrWouldBlock,
			wantBusy: []string{"x"},
		},
		{
			name:     "Wait(0) tries once",
			lock:     func(c *Client) (*Lock, error) { return c.Lock(ctx, []string{"x"}, Wait(0)) },
			wantErr:  latch.ErrWouldBlock,
			wantBusy: []string{"x"},
		},
		{
			name:     "Wait times out",
			lock:     func(c *Client) (*Lock, error) { return c.Lock(ctx, []string{"x"}, Wait(20*time.Millisecond)) },
			wantErr:  latch.ErrTimeout,
			wantBusy: []string{"x"},
		},
		{
			name:     "TryRLock on an exclusive lock",
			lock:     func(c *Client) (*Lock, error) { return c.TryRLock(ctx, []string{"x"}) },
			wantErr:  latch.ErrWouldBlock,
			wantBusy: []string{"x"},
		},
		{
			name:     "semaphore full",
			lock:     func(c *Client) (*Lock, error) { return c.TryRLock(ctx, []string{"s"}, Limit(1)) },
			wantErr:  latch.ErrWouldBlock,
			wantBusy: []string{"s"},
		},
		{
			name:    "limit mismatch",
			lock:    func(c *Client) (*Lock, error) { return c.TryRLock(ctx, []string{"s"}, Limit(3)) },
			wantErr: latch.ErrLimitMismatch,
		},
		{
			name:    "invalid key",
			lock:    func(c *Client) (*Lock, error) { return c.Lock(ctx, []string{"a b"}) },
			wantErr: latch.ErrInvalidKey,
		},
		{
			name:    "no keys",
			lock:    func(c *Client) (*Lock, error) { return c.Lock(ctx, nil) },
			wantErr: latch.ErrNoKeys,
		},
		{
			name:    "limit on an exclusive lock",
			lock:    func(c *Client) (*Lock, error) { return c.Lock(ctx, []string{"y"}, Limit(2)) },
			wantErr: latch.ErrInvalidRequest,
		},
		{
			name:    "negative lease",
			lock:    func(c *Client) (*Lock, error) { return c.Lock(ctx, []string{"y"}, Lease(-time.Second)) },
			wantErr: latch.ErrInvalidRequest,
		},
		{
			name: "context already done",
			lock: func(c *Client) (*Lock, error) {
				ctx, cancel := context.WithCancel(ctx)
				cancel()
				return c.Lock(ctx, []string{"y"})
			},
			wantErr: latch.ErrCanceled,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dial(t, srv.addr)
			l, err := tt.lock(c)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("error = %v, want %v", err, tt.wantErr)
			}
			if l != nil {
				t.Errorf("a failed request returned a lock")
			}
			var busy *latch.BusyError
			if tt.wantBusy != nil {
				if !errors.As(err, &busy) || !slices.Equal(busy.Keys, tt.wantBusy) {
					t.Errorf("error = %#v, want a BusyError naming %q", err, tt.wantBusy)
				}
			}
			// Nothing was taken, and the keys are free to request again.
			free, err := c.TryLock(ctx, []string{"free"})
			if err != nil {
				t.Fatalf("TryLock(free) after the failure: %v", err)
			}
			if err := free.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestTooManyKeys(t *testing.T) {
	srv := startServer(t, 2)
	c := dial(t, srv.addr)
	_, err := c.Lock(context.Background(), []string{"a", "b", "c"})
	var se *StatusError
	if !errors.Is(err, latch.ErrTooManyKeys) || !errors.As(err, &se) || se.Status != dlockpb.ResponseStatus_TooManyKeys {
		t.Fatalf("Lock(3 keys) error = %v, want a TooManyKeys StatusError wrapping ErrTooManyKeys", err)
	}
}

func TestAccessToken(t *testing.T) {
	srv := startServer(t, 0, "s3cret")
	if c, err := Dial(context.Background(), srv.addr); !errors.Is(err, ErrUnauthorized) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("Dial() without a token error = %v, want ErrUnauthorized", err)
	}
	c := dial(t, srv.addr, AccessToken("s3cret"))
	mustLock(t, c, "k")
}

func TestDialErrors(t *testing.T) {
	srv := startServer(t, 0)
	tests := []struct {
		name string
		addr string
		opts []Option
		want string
	}{
		{"zero TTL", srv.addr, []Option{SessionTTL(0)}, "session TTL"},
		{"margin as long as the TTL", srv.addr, []Option{SessionTTL(time.Second), SafetyMargin(time.Second)}, "safety margin"},
		{"negative dial timeout", srv.addr, []Option{DialTimeout(-1)}, "dial timeout"},
		{"nobody listening", "127.0.0.1:1", nil, "connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Dial(context.Background(), tt.addr, tt.opts...)
			if err == nil {
				c.Close()
				t.Fatal("Dial() error = nil")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Dial() error = %v, want it to mention %q", err, tt.want)
			}
		})
	}
}

func TestSharedLocks(t *testing.T) {
	srv := startServer(t, 0)
	ctx := context.Background()
	r1, r2, w := dial(t, srv.addr), dial(t, srv.addr), dial(t, srv.addr)

	l1, err := r1.RLock(ctx, []string{"doc"})
	if err != nil {
		t.Fatal(err)
	}
	l2, err := r2.RLock(ctx, []string{"doc"})
	if err != nil {
		t.Fatalf("second RLock() error = %v, want readers to share", err)
	}
	if l2.Mode() != latch.Shared {
		t.Errorf("Mode() = %v, want shared", l2.Mode())
	}
	if _, err := w.TryLock(ctx, []string{"doc"}); !errors.Is(err, latch.ErrWouldBlock) {
		t.Fatalf("TryLock() under readers error = %v, want ErrWouldBlock", err)
	}

	got := make(chan error, 1)
	go func() {
		l, err := w.Lock(ctx, []string{"doc"})
		if err == nil {
			err = l.Unlock(ctx)
		}
		got <- err
	}()
	eventually(t, "the writer queues", func() bool { return srv.waiters("doc") == 1 })
	l1.Unlock(ctx)
	select {
	case err := <-got:
		t.Fatalf("the writer got the lock beside a reader (%v)", err)
	default:
	}
	l2.Unlock(ctx)
	if err := <-got; err != nil {
		t.Fatalf("writer: %v", err)
	}
}

// A Client waits for many locks at once on its one connection; they are
// granted as their keys free, in any order.
func TestConcurrentWaits(t *testing.T) {
	srv := startServer(t, 0)
	ctx := context.Background()
	holder, waiter := dial(t, srv.addr), dial(t, srv.addr)
	const n = 20
	var held []*Lock
	for i := range n {
		held = append(held, mustLock(t, holder, fmt.Sprint("k", i)))
	}

	type result struct {
		i   int
		l   *Lock
		err error
	}
	results := make(chan result, n)
	for i := range n {
		go func() {
			l, err := waiter.Lock(ctx, []string{fmt.Sprint("k", i)})
			results <- result{i, l, err}
		}()
	}
	for i := range n {
		eventually(t, "every request waits", func() bool { return srv.waiters(fmt.Sprint("k", i)) == 1 })
	}
	// Release in reverse order: each waiter is answered as its key frees,
	// whatever the order of the requests.
	for i := n - 1; i >= 0; i-- {
		if err := held[i].Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		r := <-results
		if r.err != nil || r.i != i {
			t.Fatalf("after unlocking k%d: result of k%d error %v", i, r.i, r.err)
		}
		if r.l.Token() <= held[i].Token() {
			t.Errorf("k%d: token %d after %d", i, r.l.Token(), held[i].Token())
		}
	}
}

func TestAlreadyHeld(t *testing.T) {
	srv := startServer(t, 0)
	c := dial(t, srv.addr)
	ctx := context.Background()
	l := mustLock(t, c, "a", "b")
	for _, keys := range [][]string{{"a"}, {"c", "b"}} {
		if _, err := c.RLock(ctx, keys); !errors.Is(err, latch.ErrAlreadyHeld) {
			t.Errorf("RLock(%q) while holding [a b]: error = %v, want ErrAlreadyHeld", keys, err)
		}
	}
	// c is free: the failed request reserved nothing.
	mustLock(t, c, "c")
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	mustLock(t, c, "a")
}

func TestCancelWait(t *testing.T) {
	srv := startServer(t, 0)
	holder, waiter, third := dial(t, srv.addr), dial(t, srv.addr), dial(t, srv.addr)
	h := mustLock(t, holder, "k")

	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan error, 1)
	go func() {
		_, err := waiter.Lock(ctx, []string{"k"})
		got <- err
	}()
	eventually(t, "the request waits", func() bool { return srv.waiters("k") == 1 })
	cancel()
	err := <-got
	if !errorIs(err, latch.ErrCanceled, context.Canceled) {
		t.Fatalf("Lock() error = %v, want ErrCanceled and context.Canceled", err)
	}
	if n := srv.waiters("k"); n != 0 {
		t.Errorf("%d requests still wait for k after the cancellation", n)
	}
	if err := h.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Nothing queued is left to take k before the third client.
	if _, err := third.TryLock(context.Background(), []string{"k"}); err != nil {
		t.Errorf("TryLock(k) after the cancelled wait: %v", err)
	}
	// The waiter can ask for k again.
	if _, err := waiter.Lock(context.Background(), []string{"k"}, Wait(time.Millisecond)); !errors.Is(err, latch.ErrTimeout) {
		t.Errorf("waiter's Lock(k) again: error = %v, want ErrTimeout", err)
	}
}

// A request cancelled after the server granted it, but before its answer
// arrived: the Client gives the keys back.
func TestCancelAfterGrant(t *testing.T) {
	srv := startServer(t, 0)
	p := startProxy(t, srv.addr)
	// No keepalive goes during the test: the waiter's requests in
	// flight are the Lock and the Cancel only.
	holder, waiter, third := dial(t, srv.addr), dial(t, p.addr, SessionTTL(time.Hour)), dial(t, srv.addr)
	h := mustLock(t, holder, "k")

	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan error, 1)
	go func() {
		_, err := waiter.Lock(ctx, []string{"k"})
		got <- err
	}()
	eventually(t, "the request waits", func() bool { return srv.waiters("k") == 1 })
	p.hold()
	if err := h.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the server grants k to the waiter", func() bool {
		return slices.Equal(srv.holders("k"), []latch.SessionID{waiter.SessionID()})
	})
	cancel()
	eventually(t, "the Client sends a Cancel", func() bool {
		waiter.mu.Lock()
		defer waiter.mu.Unlock()
		return len(waiter.pending) == 2 // the Lock and the Cancel
	})
	p.release()
	if err := <-got; !errorIs(err, latch.ErrCanceled, context.Canceled) {
		t.Fatalf("Lock() error = %v, want ErrCanceled and context.Canceled", err)
	}
	if got := srv.holders("k"); len(got) != 0 {
		t.Errorf("holders of k = %v after the cancelled grant, want none", got)
	}
	if _, err := third.TryLock(context.Background(), []string{"k"}); err != nil {
		t.Errorf("TryLock(k) after the cancelled grant: %v", err)
	}
}

func TestContextDeadline(t *testing.T) {
	srv := startServer(t, 0)
	holder, waiter := dial(t, srv.addr), dial(t, srv.addr)
	mustLock(t, holder, "k")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := waiter.Lock(ctx, []string{"k"})
	if !errorIs(err, latch.ErrCanceled, context.DeadlineExceeded) {
		t.Fatalf("Lock() error = %v, want ErrCanceled and DeadlineExceeded", err)
	}
}

func TestClose(t *testing.T) {
	srv := startServer(t, 0)
	holder, c, other := dial(t, srv.addr), dial(t, srv.addr), dial(t, srv.addr)
	mustLock(t, holder, "busy")
	l := mustLock(t, c, "k")

	got := make(chan error, 1)
	go func() {
		_, err := c.Lock(context.Background(), []string{"busy"})
		got <- err
	}()
	eventually(t, "the request waits", func() bool { return srv.waiters("busy") == 1 })
	if err := c.Close(); err != nil {
		t.Fatalf("Close() error = %v", err)
	}
	if err := <-got; !errors.Is(err, ErrClosed) {
		t.Errorf("waiting Lock() error = %v, want ErrClosed", err)
	}
	if !isDone(l.Done()) || !errors.Is(l.Err(), ErrClosed) {
		t.Errorf("lock after Close: done %v, Err() = %v, want ErrClosed", isDone(l.Done()), l.Err())
	}
	if !isDone(c.Done()) || !errors.Is(c.Err(), ErrClosed) {
		t.Errorf("client after Close: done %v, Err() = %v", isDone(c.Done()), c.Err())
	}
	if _, err := c.Lock(context.Background(), []string{"z"}); !errors.Is(err, ErrClosed) {
		t.Errorf("Lock() after Close error = %v, want ErrClosed", err)
	}
	if err := l.Unlock(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Unlock() after Close error = %v, want ErrClosed", err)
	}
	// The server released k when the connection closed.
	if _, err := other.Lock(context.Background(), []string{"k"}); err != nil {
		t.Fatalf("Lock(k) after the holder closed: %v", err)
	}
	c.Close() // again: a no-op
}

// A broken connection that no server takes back (the server is gone) ends
// the session: the Client tries to resume it until its keepalive watch
// gives it up, then every lock ends; the request that was waiting fails,
// as lost in flight or with the session. (Whether a server that lives on
// ends the session before the Client's resume reaches it is a race, so the
// server here is unreachable after the cut.)
func TestConnectionLost(t *testing.T) {
	srv := startServer(t, 0)
	p := startProxy(t, srv.addr)
	c := dial(t, p.addr, SessionTTL(2*time.Second))
	holder := dial(t, srv.addr)
	mustLock(t, holder, "busy")
	l := mustLock(t, c, "k")
	got := make(chan error, 1)
	go func() {
		_, err := c.Lock(context.Background(), []string{"busy"})
		got <- err
	}()
	eventually(t, "the request waits", func() bool { return srv.waiters("busy") == 1 })

	p.close()
	waitDone(t, "lock", l.Done())
	if !errors.Is(l.Err(), latch.ErrSessionEnded) {
		t.Errorf("Err() = %v, want ErrSessionEnded", l.Err())
	}
	if err := <-got; !errors.Is(err, ErrConnectionLost) && !errors.Is(err, latch.ErrSessionEnded) {
		t.Errorf("waiting Lock() error = %v, want ErrConnectionLost or ErrSessionEnded", err)
	}
	if err := l.Unlock(context.Background()); !errors.Is(err, latch.ErrSessionEnded) {
		t.Errorf("Unlock() of a lost lock error = %v, want ErrSessionEnded", err)
	}
}

func TestServerShutdown(t *testing.T) {
	srv := startServer(t, 0)
	c := dial(t, srv.addr)
	l := mustLock(t, c, "k")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	waitDone(t, "lock", l.Done())
	if !errors.Is(l.Err(), latch.ErrSessionEnded) {
		t.Errorf("Err() = %v, want ErrSessionEnded", l.Err())
	}
}

// The keepalives keep a session with a short TTL alive for many TTLs.
func TestKeepalive(t *testing.T) {
	srv := startServer(t, 0)
	const ttl = time.Second
	c := dial(t, srv.addr, SessionTTL(ttl))
	l := mustLock(t, c, "k")
	time.Sleep(3 * ttl)
	if isDone(l.Done()) {
		t.Fatalf("lock lost: %v", l.Err())
	}
	if got := srv.holders("k"); !slices.Equal(got, []latch.SessionID{c.SessionID()}) {
		t.Fatalf("holders of k = %v, want %d", got, c.SessionID())
	}
}

// In a partition the Client gives the lock up before the server could
// release it, and closes the connection only when the server could.
func TestPartitionFakeClock(t *testing.T) {
	srv := startServer(t, 0)
	p := startProxy(t, srv.addr)
	clk := newFakeClock()
	// The server measures the TTL in real time: a minute does not pass
	// during the test, so only the Client's clock decides.
	const ttl, margin = time.Minute, 15 * time.Second
	c := dial(t, p.addr, SessionTTL(ttl), SafetyMargin(margin), withClock(clk))
	l := mustLock(t, c, "k")

	// Keepalives go every (ttl-margin)/3 = 15s. Answered, they keep the
	// session for far longer than a TTL.
	interval := (ttl - margin) / 3
	for range 12 {
		before := c.pingsAnswered()
		settle(t, clk, c, interval)
		if c.pingsAnswered() <= before {
			t.Fatal("no keepalive answered in a keepalive interval")
		}
	}
	if isDone(l.Done()) {
		t.Fatalf("lock lost with every keepalive answered: %v", l.Err())
	}

	// Partition: the keepalive answered last was sent now.
	p.partitioned.Store(true)
	clk.Advance(ttl - margin - time.Nanosecond)
	if isDone(l.Done()) {
		t.Fatalf("lock given up before ttl-margin: %v", l.Err())
	}
	clk.Advance(time.Nanosecond)
	if !isDone(l.Done()) {
		t.Fatal("lock not given up at ttl-margin after the last answered keepalive")
	}
	if !errorIs(l.Err(), latch.ErrSessionEnded, ErrKeepalive) {
		t.Errorf("Err() = %v, want ErrSessionEnded and ErrKeepalive", l.Err())
	}
	// The server holds the lock still, and must: the connection stays
	// open until the server could end the session by itself.
	time.Sleep(10 * time.Millisecond)
	if got := srv.holders("k"); len(got) != 1 {
		t.Fatalf("holders of k = %v right after the Client gave up, want the Client's session", got)
	}
	clk.Advance(margin - time.Nanosecond)
	time.Sleep(10 * time.Millisecond)
	if got := srv.holders("k"); len(got) != 1 {
		t.Fatalf("holders of k = %v before the TTL ran out, want the Client's session", got)
	}
	clk.Advance(time.Nanosecond)
	eventually(t, "the server releases k once the connection closes", func() bool { return len(srv.holders("k")) == 0 })
}

// The guarantee in real time: when Done closes after a partition, the
// server still holds the lock; it releases it only later, when the session
// TTL lapses.
func TestPartitionRealTime(t *testing.T) {
	srv := startServer(t, 0)
	p := startProxy(t, srv.addr)
	const ttl = 2 * time.Second // margin: ttl/4
	c := dial(t, p.addr, SessionTTL(ttl))
	l := mustLock(t, c, "k")
	p.partitioned.Store(true)
	waitDone(t, "lock", l.Done())
	if got := srv.holders("k"); len(got) != 1 {
		t.Fatalf("holders of k = %v when Done closed, want the session still holding it", got)
	}
	if !errorIs(l.Err(), latch.ErrSessionEnded, ErrKeepalive) {
		t.Errorf("Err() = %v, want ErrSessionEnded and ErrKeepalive", l.Err())
	}
	eventually(t, "the server releases k", func() bool { return len(srv.holders("k")) == 0 })
}

func TestLease(t *testing.T) {
	srv := startServer(t, 0)
	clk := newFakeClock()
	const ttl, margin = time.Hour, time.Minute
	c := dial(t, srv.addr, SessionTTL(ttl), SafetyMargin(margin), withClock(clk))
	ctx := context.Background()

	const lease = time.Hour // margin: min(1m, lease/4) = 1m
	l, err := c.Lock(ctx, []string{"k"}, Lease(lease))
	if err != nil {
		t.Fatal(err)
	}
	settle(t, clk, c, lease-margin-time.Second)
	if isDone(l.Done()) {
		t.Fatalf("lease given up early: %v", l.Err())
	}
	// A renewal restarts the lease from its send time.
	if err := l.Renew(ctx, lease); err != nil {
		t.Fatalf("Renew() error = %v", err)
	}
	settle(t, clk, c, lease-margin-time.Nanosecond)
	if isDone(l.Done()) {
		t.Fatalf("renewed lease given up early: %v", l.Err())
	}
	settle(t, clk, c, time.Nanosecond)
	if !isDone(l.Done()) || !errors.Is(l.Err(), ErrLeaseExpired) {
		t.Fatalf("lease not given up at its end: done %v, Err() = %v", isDone(l.Done()), l.Err())
	}
	if err := l.Renew(ctx, lease); !errors.Is(err, latch.ErrNotHeld) {
		t.Errorf("Renew() of a lapsed lease error = %v, want ErrNotHeld", err)
	}

	// Renew(0) turns a lease into a plain lock: no deadline of its own.
	l2, err := c.Lock(ctx, []string{"k2"}, Lease(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if err := l2.Renew(ctx, 0); err != nil {
		t.Fatal(err)
	}
	settle(t, clk, c, 2*time.Minute)
	if isDone(l2.Done()) {
		t.Fatalf("a lock without a lease ended: %v", l2.Err())
	}
	if _, exp := leaseOf(srv, "k2"); !exp.IsZero() {
		t.Errorf("k2 has a lease ending at %v after Renew(0)", exp)
	}
}

// leaseOf returns the holder of key and when its lease ends.
func leaseOf(srv *testServer, key string) (latch.SessionID, time.Time) {
	info, _ := srv.svc.Lock(key)
	if len(info.Holders) == 0 {
		return 0, time.Time{}
	}
	return info.Holders[0].Session, info.Holders[0].Expires
}

// A leased lock outlives the Client's connection.
func TestLeaseOutlivesConnection(t *testing.T) {
	srv := startServer(t, 0)
	c := dial(t, srv.addr)
	other := dial(t, srv.addr)
	if _, err := c.Lock(context.Background(), []string{"k"}, Lease(time.Hour)); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if _, err := other.TryLock(context.Background(), []string{"k"}); !errors.Is(err, latch.ErrWouldBlock) {
		t.Fatalf("TryLock(k) after the lease holder left: error = %v, want ErrWouldBlock", err)
	}
}

func TestRenewNotHeld(t *testing.T) {
	srv := startServer(t, 0)
	c := dial(t, srv.addr)
	ctx := context.Background()
	l, err := c.Lock(ctx, []string{"k"}, Lease(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.svc.ForceRelease("k"); err != nil {
		t.Fatal(err)
	}
	if err := l.Renew(ctx, time.Hour); !errors.Is(err, latch.ErrNotHeld) {
		t.Fatalf("Renew() error = %v, want ErrNotHeld", err)
	}
	if !isDone(l.Done()) {
		t.Error("a lock found not held is not done")
	}
	// Its keys are free for this Client again.
	mustLock(t, c, "k")
}

// Many goroutines share one Client: a race detector exercise.
func TestConcurrentUse(t *testing.T) {
	srv := startServer(t, 0)
	c := dial(t, srv.addr, SessionTTL(time.Second))
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				key := fmt.Sprintf("g%d-%d", g, i%3)
				l, err := c.Lock(ctx, []string{key}, Lease(time.Minute))
				if err != nil {
					t.Error(err)
					return
				}
				_ = l.Token()
				if err := l.Renew(ctx, time.Minute); err != nil {
					t.Error(err)
				}
				if err := l.Unlock(ctx); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
}

// A lease granted after a long wait is renewed before Lock returns: its
// request's send time, from which the Client dates the lease, is too old.
func TestLeaseAfterLongWait(t *testing.T) {
	srv := startServer(t, 0)
	holder := dial(t, srv.addr)
	h := mustLock(t, holder, "k")
	clk := newFakeClock()
	const ttl, margin, lease = time.Hour, time.Minute, time.Hour
	c := dial(t, srv.addr, SessionTTL(ttl), SafetyMargin(margin), withClock(clk))

	type result struct {
		l   *Lock
		err error
	}
	got := make(chan result, 1)
	go func() {
		l, err := c.Lock(context.Background(), []string{"k"}, Lease(lease))
		got <- result{l, err}
	}()
	eventually(t, "the request waits", func() bool { return srv.waiters("k") == 1 })
	settle(t, clk, c, 40*time.Minute)
	if err := h.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("Lock() error = %v", r.err)
	}
	// Dated from the renewal, at minute 40, not from the request.
	settle(t, clk, c, lease-margin-time.Nanosecond)
	if isDone(r.l.Done()) {
		t.Fatalf("lease given up before its renewal's end: %v", r.l.Err())
	}
	settle(t, clk, c, time.Nanosecond)
	if !isDone(r.l.Done()) {
		t.Fatal("lease not given up at its renewal's end")
	}
}

// An operator ends the session: the next answer says so, and the Client
// stops.
func TestSessionEndedByOperator(t *testing.T) {
	srv := startServer(t, 0)
	c := dial(t, srv.addr)
	l := mustLock(t, c, "k")
	if err := srv.svc.EndSession(c.SessionID()); err != nil {
		t.Fatal(err)
	}
	_, err := c.Lock(context.Background(), []string{"other"})
	var se *StatusError
	if !errors.Is(err, latch.ErrSessionEnded) || !errors.As(err, &se) || se.Status != dlockpb.ResponseStatus_SessionExpired {
		t.Fatalf("Lock() on an ended session: error = %v, want SessionExpired", err)
	}
	waitDone(t, "lock", l.Done())
	if !errors.Is(l.Err(), latch.ErrSessionEnded) {
		t.Errorf("Err() = %v, want ErrSessionEnded", l.Err())
	}
	if !isDone(c.Done()) {
		t.Error("the Client runs on with an ended session")
	}
}
