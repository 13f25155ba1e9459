package client

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/config"
	"github.com/latchd/latch/internal/latchtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testServer is an in-process latch server (latchtest.Start) and its
// lock service.
type testServer struct {
	*latchtest.Server
	addr string // the dlock front end's
	svc  latch.Service
}

// startServer starts a server with every listener on a free loopback port
// and shuts it down when the test ends. maxKeys is its limit of keys per
// request; tokens, when given, are the access tokens its dlock front end
// requires.
func startServer(t *testing.T, maxKeys int, tokens ...string) *testServer {
	t.Helper()
	tokensFile := ""
	if len(tokens) > 0 {
		tokensFile = filepath.Join(t.TempDir(), "tokens")
		if err := os.WriteFile(tokensFile, []byte(strings.Join(tokens, "\n")), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	srv := latchtest.Start(t, func(c *config.Config) {
		c.Lock.MaxKeys = maxKeys
		c.DLock.TokensFile = tokensFile
	})
	return &testServer{Server: srv, addr: srv.DLock, svc: srv.Service()}
}

// holders returns the sessions holding key.
func (s *testServer) holders(key string) []latch.SessionID {
	info, _ := s.svc.Lock(key)
	var ids []latch.SessionID
	for _, h := range info.Holders {
		ids = append(ids, h.Session)
	}
	return ids
}

// waiters returns how many requests wait for key.
func (s *testServer) waiters(key string) int {
	info, _ := s.svc.Lock(key)
	return len(info.Waiters)
}

// eventually polls cond until it holds, failing the test after a long
// while. It waits for a state change; it asserts nothing about speed.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never happened: %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// dial connects a Client to addr and closes it when the test ends.
func dial(t *testing.T, addr string, opts ...Option) *Client {
	t.Helper()
	c, err := Dial(context.Background(), addr, opts...)
	if err != nil {
		t.Fatalf("Dial(%s) error = %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// mustLock takes keys exclusively or fails the test.
func mustLock(t *testing.T, c *Client, keys ...string) *Lock {
	t.Helper()
	l, err := c.Lock(context.Background(), keys)
	if err != nil {
		t.Fatalf("Lock(%q) error = %v", keys, err)
	}
	return l
}

// isDone reports whether ch is closed.
func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// waitDone waits for ch to close, failing the test after a long while.
func waitDone(t *testing.T, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: not done", what)
	}
}

// proxy forwards TCP connections to a server. Partition makes it drop
// every byte in both directions while keeping the connections open, as a
// network partition would; a close on either side still passes through.
type proxy struct {
	addr        string
	ln          net.Listener
	partitioned atomic.Bool
	// gate holds back what the server sends while Hold has it locked.
	gate  sync.RWMutex
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []net.Conn
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	return listenProxy(t, target, (*proxy).pipes)
}

// listenProxy starts a proxy to target whose connections relay carries:
// for a client's connection in and the proxy's own to the server out, it
// returns the loops that forward what in sends (up) and what out sends
// (down). Each runs in its goroutine; the proxy waits for both when it
// closes, after closing every connection.
func listenProxy(t *testing.T, target string, relay func(p *proxy, in, out net.Conn) (up, down func())) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{addr: ln.Addr().String(), ln: ln}
	p.wg.Go(func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			up, down := relay(p, in, out)
			p.wg.Go(up)
			p.wg.Go(down)
		}
	})
	t.Cleanup(p.close)
	return p
}

// pipes is startProxy's relay: bytes as they come, unless partitioned,
// and what the server sends only while not held.
func (p *proxy) pipes(in, out net.Conn) (up, down func()) {
	return func() { p.pipe(in, out, nil) }, func() { p.pipe(out, in, &p.gate) }
}

func (p *proxy) pipe(src, dst net.Conn, gate *sync.RWMutex) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if gate != nil {
			gate.RLock()
			gate.RUnlock() //lint:ignore SA2001 waits for Hold's release
		}
		if n > 0 && !p.partitioned.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// hold holds back what the server sends until release is called.
func (p *proxy) hold()    { p.gate.Lock() }
func (p *proxy) release() { p.gate.Unlock() }

// cut closes every connection through the proxy, as a crash would.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}

func (p *proxy) close() {
	p.ln.Close()
	p.cut()
	p.wg.Wait()
}

// fakeClock is a clock that moves only when Advance is called. Timers due
// by then run in Advance's goroutine, in order.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	c       *fakeClock
	at      time.Time
	f       func()
	stopped bool
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) stopper {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.stopped
	t.stopped = true
	return was
}

// Advance moves the clock d forward, running the timers that fall due, at
// their instants, in order.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		c.timers = slices.DeleteFunc(c.timers, func(t *fakeTimer) bool { return t.stopped })
		slices.SortStableFunc(c.timers, func(a, b *fakeTimer) int { return a.at.Compare(b.at) })
		if len(c.timers) == 0 || c.timers[0].at.After(end) {
			c.now = end
			c.mu.Unlock()
			return
		}
		t := c.timers[0]
		c.timers = c.timers[1:]
		t.stopped = true
		if t.at.After(c.now) {
			c.now = t.at
		}
		c.mu.Unlock()
		t.f()
	}
}

// errorIs reports whether err wraps every one of targets.
func errorIs(err error, targets ...error) bool {
	for _, target := range targets {
		if !errors.Is(err, target) {
			return false
		}
	}
	return err != nil
}

var _ io.Closer = (*Client)(nil)

// settle advances clk by d in steps of at most the keepalive interval,
// waiting after each step until every keepalive in flight is answered, as
// if the network were instant.
func settle(t *testing.T, clk *fakeClock, c *Client, d time.Duration) {
	t.Helper()
	for d > 0 {
		step := min(d, c.interval)
		clk.Advance(step)
		d -= step
		eventually(t, "the keepalives are answered", func() bool {
			c.mu.Lock()
			defer c.mu.Unlock()
			for _, cl := range c.pending {
				if cl.ch == nil { // a keepalive
					return false
				}
			}
			return true
		})
	}
}

// pingsAnswered returns the send time of the newest keepalive answered, as
// a count of nanoseconds, for tests to see keepalives land.
func (c *Client) pingsAnswered() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastAck.UnixNano()
}

// server returns the address of the server whose connection carries the
// session, or "" while the Client resumes it.
func (c *Client) server() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil || c.resuming {
		return ""
	}
	return c.addr
}
