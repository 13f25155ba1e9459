package memcache

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/cache"
	"github.com/latchd/latch/internal/fsm"
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
	// dos counts the item commands proposed (Do); while unavailable is
	// set, each fails with latch.ErrUnavailable, as a cluster node's that
	// cannot commit.
	dos         atomic.Int32
	unavailable atomic.Bool
}

// Execution is a cluster node's: a session takes long to open, and a
// request waits for it, so no event loop serves it.
func (s *slowOpens) Execution() latch.Execution { return latch.Replicated }

func (s *slowOpens) Do(sess latch.Session, c *fsm.Command) fsm.Result {
	s.dos.Add(1)
	if s.unavailable.Load() {
		return fsm.Result{Err: fmt.Errorf("%v: no leader: %w", c.Op, latch.ErrUnavailable)}
	}
	return s.Node.Do(sess, c)
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

// expect reads the next lines of the answer, and fails the test at the
// first that is not the one wanted.
func (c *lineConn) expect(want ...string) {
	c.t.Helper()
	for _, w := range want {
		if got := c.line(); got != w {
			c.t.Fatalf("got %q, want %q", got, w)
		}
	}
}

// TestSessionOnFirstLock: a connection opens its session with its first
// lock, once, and a connection that never locks opens none (in a cluster
// each open and end is a commit).
func TestSessionOnFirstLock(t *testing.T) {
	svc := &slowOpens{}
	c := dialLines(t, serveSlowOpens(t, svc))
	c.send("set k 0 0 1\r\nx\r\nget k\r\ndelete k\r\nset k 0 0 1\r\nx\r\nunlock k\r\n")
	c.expect("STORED\r\n", "VALUE k 0 1\r\n", "x\r\n", "END\r\n", "DELETED\r\n", "STORED\r\n", rNotLocked)
	if n := svc.n.Load(); n != 0 {
		t.Fatalf("%d sessions opened by a connection that did not lock", n)
	}
	c.send("lock k\r\nunlock k\r\nlock k\r\n")
	c.expect("OK\r\n", "OK\r\n", "OK\r\n")
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

// TestNoSessionProposesNothing: a connection that never locked holds no
// lock, so its unlock, unlock_all and quit propose nothing (in a cluster
// each would be a commit, and wait without a leader), and answer as the
// lock table would.
func TestNoSessionProposesNothing(t *testing.T) {
	svc := &slowOpens{}
	addr := serveSlowOpens(t, svc)
	c := dialLines(t, addr)
	c.send("set k 0 0 1\r\nx\r\nunlock k\r\nunlock missing\r\nunlock_all\r\n")
	c.expect("STORED\r\n", rNotLocked, rNotLocked, "OK\r\n")
	// The lookups the unlocks made are not gets.
	c.send("stats\r\n")
	for line := c.line(); line != "END\r\n"; line = c.line() {
		if strings.HasPrefix(line, "error: ") {
			t.Fatalf("stats: %s", line)
		}
		if strings.HasPrefix(line, "STAT cmd_get ") && line != "STAT cmd_get 0\r\n" {
			t.Errorf("after two unlocks: %q, want no get counted", line)
		}
	}
	c.send("quit\r\n")
	if got := c.line(); !strings.HasPrefix(got, "error: ") {
		t.Fatalf("after quit: %q, want the connection closed", got)
	}
	// Binary: Unlock tells a missing item (NotFound) from one not locked.
	bc := dialLines(t, addr)
	bc.send(string(binReq(opUnlock, []byte("k"), nil, nil, 1, 0)) + string(binReq(opUnlock, []byte("missing"), nil, nil, 2, 0)) +
		string(binReq(opUnlockAll, nil, nil, nil, 3, 0)) + string(binReq(opQuit, nil, nil, nil, 4, 0)))
	for _, want := range []uint16{stNotLocked, stNotFound, 0, 0} {
		if got := binStatus(t, bc); got != want {
			t.Fatalf("binary status %#x, want %#x", got, want)
		}
	}
	if n := svc.dos.Load(); n != 1 {
		t.Errorf("%d item commands proposed, want 1 (the set)", n)
	}
	if n := svc.n.Load(); n != 0 {
		t.Errorf("%d sessions opened, want none", n)
	}
}

// TestChangesUnavailable: every change a node cannot commit is answered
// SERVER_ERROR unavailable (binary: Temporary failure), even with
// noreply, never as a miss or as done.
func TestChangesUnavailable(t *testing.T) {
	svc := &slowOpens{}
	addr := serveSlowOpens(t, svc)
	c := dialLines(t, addr)
	c.send("set k 0 0 1\r\nx\r\nlock k\r\n")
	c.expect("STORED\r\n", "OK\r\n")
	svc.unavailable.Store(true)
	reqs := []string{"touch k 10", "touch k 10 noreply", "unlock k", "unlock_all", "flush_all", "flush_all noreply", "set k 0 0 1\r\ny", "delete k", "incr n 1"}
	for _, req := range reqs {
		c.send(req + "\r\n")
		if got := c.line(); got != rUnavailable {
			t.Errorf("%q: %q, want %q", req, got, rUnavailable)
		}
	}
	bc := dialLines(t, addr)
	bc.send(string(binReq(opLock, []byte("b"), nil, nil, 0, 0)))
	binStatus(t, bc) // NotFound: no such item; the connection has a session now
	for i, req := range [][]byte{
		binReq(opTouch, []byte("k"), []byte{0, 0, 0, 10}, nil, 1, 0),
		binReq(opUnlock, []byte("k"), nil, nil, 2, 0),
		binReq(opUnlockAll, nil, nil, nil, 3, 0),
		binReq(opUnlockAllQ, nil, nil, nil, 4, 0),
		binReq(opFlush, nil, nil, nil, 5, 0),
		binReq(opFlushQ, nil, nil, nil, 6, 0),
	} {
		bc.send(string(req))
		if got := binStatus(t, bc); got != stTempFailure {
			t.Errorf("binary request %d: status %#x, want %#x", i, got, stTempFailure)
		}
	}
}

// binStatus reads one binary response from c and returns its status.
func binStatus(t *testing.T, c *lineConn) uint16 {
	t.Helper()
	var h [24]byte
	if _, err := io.ReadFull(c.r, h[:]); err != nil {
		t.Fatalf("read a binary response: %v", err)
	}
	body := binary.BigEndian.Uint32(h[8:12])
	if _, err := io.CopyN(io.Discard, c.r, int64(body)); err != nil {
		t.Fatalf("read a binary response's body: %v", err)
	}
	return binary.BigEndian.Uint16(h[6:8])
}
