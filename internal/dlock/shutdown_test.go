package dlock

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	pb "github.com/latchd/latch/dlockpb"
	"github.com/latchd/latch/internal/netserve"
	"github.com/latchd/latch/internal/node"
)

// TestShutdownAnswersWaiters: the lock service shuts down first and answers
// every waiting Lock; the front end writes those answers (and answers what
// was queued behind them), then closes the connections.
func TestShutdownAnswersWaiters(t *testing.T) {
	e := newEnv(t, nil)
	holder, c2, c3 := e.dial(t), e.dial(t), e.dial(t)
	lockOK(t, holder, 1, "k")
	c2.sendMsg(v2Lock(1, 0, 0, "k"))
	e.waitFor(t, "k", "v2 Lock queued", waiters(1))
	c2.sendMsg(v2(2, tPing))
	c2.sendMsg(v2Lock(3, 0, 0, "j"))
	e.waitConn(t, c2, "queued", func(sc *conn) bool { return len(sc.queue) == 2 })
	c3.sendPB(v3Lock(7, []string{"k"}))
	e.waitFor(t, "k", "v3 Lock queued", waiters(2))

	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		e.svc.Shutdown(ctx)
		done <- e.srv.Shutdown(ctx)
	}()

	if r := c2.recv(); r.id != 1 || r.status != sGeneral || !strings.HasPrefix(r.text, "ShuttingDown: ") {
		t.Errorf("waiting v2 Lock: %s %q, want General ShuttingDown", r.shape(), r.text)
	}
	if r := c2.recv(); r.id != 2 || r.status != sOk {
		t.Errorf("Ping behind it: %s %q, want Ok", r.shape(), r.text)
	}
	if r := c2.recv(); r.id != 3 || r.status != sGeneral || !strings.HasPrefix(r.text, "ShuttingDown: ") {
		t.Errorf("Lock behind it: %s %q, want General ShuttingDown", r.shape(), r.text)
	}
	c2.expectEOF()
	if r := c3.recvPB(); r.GetRequestId() != 7 || r.GetStatus() != pb.ResponseStatus_ShuttingDown {
		t.Errorf("waiting v3 Lock: %v, want ShuttingDown", r)
	}
	c3.expectEOF()
	holder.expectEOF()
	if err := <-done; err != nil {
		t.Errorf("Shutdown() error = %v", err)
	}
}

// TestShutdownAlone: the front end shutting down without the service ends
// its connections' sessions, which answers their waiting Locks.
func TestShutdownAlone(t *testing.T) {
	svc, err := node.New(node.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Shutdown(context.Background())
	srv, err := New(svc, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	e := &env{svc: svc, srv: srv, addr: srv.Addr().String()}
	e.hold(t, "k")
	c := e.dial(t)
	c.sendPB(v3Lock(2, []string{"k"}))
	e.waitFor(t, "k", "queued", waiters(1))
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown() error = %v", err)
	}
	if r := c.recvPB(); r.GetStatus() != pb.ResponseStatus_ShuttingDown {
		t.Errorf("waiting Lock: %v, want ShuttingDown", r)
	}
	c.expectEOF()
	if info, _ := svc.Lock("k"); len(info.Waiters) != 0 {
		t.Errorf("k after the front end shut down: %+v, want no waiter", info)
	}
	if err := srv.Serve(nil); err == nil {
		t.Error("Serve() after Shutdown succeeded")
	}
}

// TestShutdownDeadline: a client that never reads its answers cannot hold
// a shutdown past its context.
func TestShutdownDeadline(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.WriteTimeout = 0 })
	c := e.dial(t)
	// Fill the socket buffers with answers the client does not read.
	var wire []byte
	for i := range 1 << 20 {
		wire = append(wire, byte(0), 0, 0, 6, 0x08, 0x02, 0x10, byte(i%100+1), 0x20, 0x01)
	}
	go func() {
		for i := 0; i < 8; i++ {
			if _, err := c.nc.Write(wire); err != nil {
				return
			}
		}
	}()
	if e.looped(t, c) {
		// An event loop writes only what the socket takes: Shutdown
		// drops the rest and returns without waiting for the client.
		time.Sleep(200 * time.Millisecond) // the answers back up
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		if err := e.srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown() error = %v, want none: a loop never waits for a client", err)
		}
		return
	}
	// The reader writes the answers itself: it is stuck once it has been
	// writing for a while.
	stuck := 0
	e.waitConn(t, c, "a write stuck", func(sc *conn) bool {
		sc.out.mu.Lock()
		writing := sc.out.writing
		sc.out.mu.Unlock()
		if !writing {
			stuck = 0
			return false
		}
		stuck++
		time.Sleep(20 * time.Millisecond)
		return stuck >= 10
	})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := e.srv.Shutdown(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown() error = %v, want the context's", err)
	}
}

func TestStartFails(t *testing.T) {
	e := newEnv(t, nil)
	srv, err := New(e.svc, Config{Config: netserve.Config{Addr: e.addr}, MaxFrame: 1024, MaxPending: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err == nil || !strings.Contains(err.Error(), "dlock") {
		t.Errorf("Start() on a port in use: %v, want an error", err)
	}
	for _, cfg := range []Config{
		{MaxFrame: 10, MaxPending: 1},
		{MaxFrame: 1024, MaxPending: 0},
		{Config: netserve.Config{IdleTimeout: -1}, MaxFrame: 1024, MaxPending: 1},
		{MaxFrame: 1024, MaxPending: 1, Tokens: []netserve.Token{{Value: ""}}},
	} {
		if _, err := New(e.svc, cfg); err == nil {
			t.Errorf("New(%+v) error = nil", cfg)
		}
	}
}

// TestEndedSessionClosesConnection: when the service ends the session of a
// connection without a TTL (an operator, a cluster node letting go of its
// clients), the connection closes, so that a version 2 client learns that
// its locks are gone.
func TestEndedSessionClosesConnection(t *testing.T) {
	e := newEnv(t, nil)
	c := e.dial(t)
	lockOK(t, c, 1, "k")
	sessions := e.svc.Sessions()
	if len(sessions) != 1 {
		t.Fatalf("sessions = %+v, want one", sessions)
	}
	if err := e.svc.EndSession(sessions[0].ID); err != nil {
		t.Fatal(err)
	}
	c.expectEOF()
	if info, ok := e.svc.Lock("k"); ok && len(info.Holders) > 0 {
		t.Errorf("k after the session ended: %+v", info)
	}
}
