package memcache

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/cache"
	"github.com/latchd/latch/internal/node"
)

// slowOpens is a node whose OpenSession counts its calls, waits until
// release is closed for the calls numbered in hold (as a cluster node's
// waits for a commit), and fails with fail when it is set.
type slowOpens struct {
	*node.Node
	n       atomic.Int32
	hold    map[int32]bool
	release chan struct{}
	fail    error
	getErr  error // Get's error, when set
}

func (s *slowOpens) Get(now int64, key []byte) (cache.Item, error) {
	if s.getErr != nil {
		return cache.Item{}, s.getErr
	}
	return s.Node.Get(now, key)
}

func (s *slowOpens) OpenSession(opts latch.SessionOptions) (latch.Session, error) {
	if s.hold[s.n.Add(1)] {
		<-s.release
	}
	if s.fail != nil {
		return nil, s.fail
	}
	return s.Node.OpenSession(opts)
}

func serveSlowOpens(t *testing.T, svc *slowOpens) string {
	t.Helper()
	n, err := node.New(node.Config{Cache: cache.Config{MemoryLimit: 1 << 20, MaxItemSize: 1 << 10}})
	if err != nil {
		t.Fatal(err)
	}
	svc.Node = n
	srv, err := New(svc, Config{Version: "test", MaxLine: 1 << 10})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		n.Shutdown(ctx)
	})
	return ln.Addr().String()
}

// lineConn is a text connection to a test server.
type lineConn struct {
	t  *testing.T
	nc net.Conn
	r  *bufio.Reader
}

func dialLines(t *testing.T, addr string) *lineConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &lineConn{t: t, nc: nc, r: bufio.NewReader(nc)}
}

func (c *lineConn) send(req string) {
	c.t.Helper()
	c.nc.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.nc.Write([]byte(req)); err != nil {
		c.t.Fatal(err)
	}
}

// line returns the next line of the answer, or the read's error.
func (c *lineConn) line() string {
	line, err := c.r.ReadString('\n')
	if err != nil {
		return fmt.Sprintf("error: %v", err)
	}
	return line
}

// TestSessionOnFirstLock: a connection opens its session with its first
// lock, once, and a connection that never locks opens none (in a cluster
// each open and end is a commit).
func TestSessionOnFirstLock(t *testing.T) {
	svc := &slowOpens{}
	c := dialLines(t, serveSlowOpens(t, svc))
	c.send("set k 0 0 1\r\nx\r\nget k\r\ndelete k\r\nset k 0 0 1\r\nx\r\nunlock k\r\n")
	for _, want := range []string{"STORED\r\n", "VALUE k 0 1\r\n", "x\r\n", "END\r\n", "DELETED\r\n", "STORED\r\n", rNotLocked} {
		if got := c.line(); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
	if n := svc.n.Load(); n != 0 {
		t.Fatalf("%d sessions opened by a connection that did not lock", n)
	}
	c.send("lock k\r\nunlock k\r\nlock k\r\n")
	for _, want := range []string{"OK\r\n", "OK\r\n", "OK\r\n"} {
		if got := c.line(); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
	if n := svc.n.Load(); n != 1 {
		t.Fatalf("%d sessions opened by one connection's locks, want 1", n)
	}
	// The lock is the connection's: another connection is refused it, and
	// gets it once the first closes.
	c2 := dialLines(t, c.nc.RemoteAddr().String())
	c2.send("lock k\r\n")
	if got := c2.line(); got != "LOCKED\r\n" {
		t.Fatalf("lock of a key another connection holds: %q", got)
	}
	c.nc.Close()
	var got string
	for range 100 {
		c2.send("lock k\r\n")
		if got = c2.line(); got == "OK\r\n" {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got != "OK\r\n" {
		t.Fatalf("lock after its holder's connection closed: %q", got)
	}
}

// TestSlowSessionHoldsUpNoOne: a connection whose session takes long to
// open holds up no other connection, and locks once it opens.
func TestSlowSessionHoldsUpNoOne(t *testing.T) {
	svc := &slowOpens{hold: map[int32]bool{1: true}, release: make(chan struct{})}
	addr := serveSlowOpens(t, svc)
	released := false
	defer func() {
		if !released {
			close(svc.release)
		}
	}()
	first := dialLines(t, addr)
	first.send("set a 0 0 1\r\nx\r\nset b 0 0 1\r\nx\r\n")
	for range 2 {
		if got := first.line(); got != "STORED\r\n" {
			t.Fatalf("set: %q", got)
		}
	}
	first.send("lock a\r\n")
	for svc.n.Load() < 1 {
		time.Sleep(time.Millisecond)
	}
	second := dialLines(t, addr)
	second.send("lock b\r\n")
	if got := second.line(); got != "OK\r\n" {
		t.Fatalf("a lock while another connection's session opens: %q", got)
	}
	released = true
	close(svc.release)
	if got := first.line(); got != "OK\r\n" {
		t.Fatalf("the lock whose session opened late: %q", got)
	}
}

// TestSessionRefused: a lock whose session cannot be opened because the
// node cannot reach its cluster's leader is answered SERVER_ERROR, and
// the connection goes on.
func TestSessionRefused(t *testing.T) {
	c := dialLines(t, serveSlowOpens(t, &slowOpens{fail: fmt.Errorf("open session: no leader: %w", latch.ErrUnavailable)}))
	c.send("lock k\r\nversion\r\n")
	if got := c.line(); got != rUnavailable {
		t.Errorf("lock: %q, want %q", got, rUnavailable)
	}
	if got := c.line(); !strings.HasPrefix(got, "VERSION ") {
		t.Errorf("version after the refused lock: %q", got)
	}
}

// TestGetUnavailable: a get that the node cannot serve yet (it has not
// caught up with its cluster, and gave up waiting) is answered
// SERVER_ERROR, not as a miss.
func TestGetUnavailable(t *testing.T) {
	c := dialLines(t, serveSlowOpens(t, &slowOpens{getErr: fmt.Errorf("get: not caught up: %w", latch.ErrUnavailable)}))
	c.send("get a b\r\nversion\r\n")
	if got := c.line(); got != rUnavailable {
		t.Errorf("get: %q, want %q", got, rUnavailable)
	}
	if got := c.line(); !strings.HasPrefix(got, "VERSION ") {
		t.Errorf("version after the refused get: %q", got)
	}
}
