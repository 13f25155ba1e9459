package memcache

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/idleread"
)

// TestOneLockTable shows that a memcached lock is the lock every protocol
// sees: a session of the lock service waits for it and is granted the key
// the moment the memcached client unlocks it.
func TestOneLockTable(t *testing.T) {
	ts := newTestServer(t)
	mc := ts.dialInteractive()
	defer mc.finish()
	if got := mc.exchange([]byte("set job 0 0 1\r\nx\r\nlock job\r\n")); string(got) != "STORED\r\nOK\r\n" {
		t.Fatalf("lock: %q", got)
	}
	other, err := ts.svc.OpenSession(latch.SessionOptions{Protocol: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.Acquire(context.Background(), latch.LockRequest{Keys: []string{"job"}}); err == nil {
		t.Fatal("another session took a key locked over memcached")
	}
	granted := make(chan error, 1)
	go func() {
		_, err := other.Acquire(context.Background(), latch.LockRequest{Keys: []string{"job"}, Wait: latch.WaitForever})
		granted <- err
	}()
	waitFor(t, "the waiter to queue", func() bool {
		k, _ := ts.svc.Lock("job")
		return len(k.Waiters) == 1
	})
	if got := mc.exchange([]byte("unlock job\r\n")); string(got) != "OK\r\n" {
		t.Fatalf("unlock: %q", got)
	}
	if err := <-granted; err != nil {
		t.Fatalf("waiter: %v", err)
	}
	// Now the key is held elsewhere: memcached's lock says LOCKED.
	if got := mc.exchange([]byte("lock job\r\n")); string(got) != "LOCKED\r\n" {
		t.Fatalf("lock of a key held over another protocol: %q", got)
	}
}

// TestLockTableAnswersFirst checks the order in which a lock consults the
// lock table and the item: the table first, so a key held over another
// protocol is LOCKED even without an item; and that a lock the item then
// refuses (no item) gives the key back to the table.
func TestLockTableAnswersFirst(t *testing.T) {
	ts := newTestServer(t)
	tableEmpty := func(when string) {
		t.Helper()
		if locks := ts.svc.Locks("", "", 0); len(locks) != 0 {
			t.Fatalf("%s: the lock table kept %+v", when, locks)
		}
	}
	a := ts.dialInteractive()
	defer a.finish()
	b := ts.dialInteractive()
	defer b.finish()

	other, err := ts.svc.OpenSession(latch.SessionOptions{Protocol: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Acquire(context.Background(), latch.LockRequest{Keys: []string{"held"}}); err != nil {
		t.Fatal(err)
	}
	if got := a.exchange([]byte("lock held\r\n")); string(got) != "LOCKED\r\n" {
		t.Fatalf("lock of a key held elsewhere, without an item: %q", got)
	}
	other.Close()

	if got := a.exchange([]byte("lock missing\r\n")); string(got) != "NOT_FOUND\r\n" {
		t.Fatalf("lock without an item: %q", got)
	}
	tableEmpty("after a lock without an item")

	// A held item is LOCKED to others, and free again after its unlock.
	if got := a.exchange([]byte("set k 0 0 1\r\nx\r\nlock k\r\n")); string(got) != "STORED\r\nOK\r\n" {
		t.Fatalf("set and lock: %q", got)
	}
	if got := b.exchange([]byte("lock k\r\n")); string(got) != "LOCKED\r\n" {
		t.Fatalf("lock of a held item: %q", got)
	}
	if got := a.exchange([]byte("unlock k\r\n")); string(got) != "OK\r\n" {
		t.Fatalf("unlock: %q", got)
	}
	tableEmpty("after the unlock")
	// (An operator's force-release frees the item too: TestAdminFreesItemLock.)
	if got := b.exchange([]byte("lock k\r\ndelete k\r\n")); string(got) != "OK\r\nDELETED\r\n" {
		t.Fatalf("lock and delete: %q", got)
	}
	ts.noLocksLeft()
}

// TestHolderDeleteReleasesTheKey checks that the holder's delete drops the
// lock in the lock table too.
func TestHolderDeleteReleasesTheKey(t *testing.T) {
	ts := newTestServer(t)
	mc := ts.dialInteractive()
	defer mc.finish()
	if got := mc.exchange([]byte("set k 0 0 1\r\nx\r\nlock k\r\ndelete k\r\n")); string(got) != "STORED\r\nOK\r\nDELETED\r\n" {
		t.Fatalf("got %q", got)
	}
	if locks := ts.svc.Locks("", "", 0); len(locks) != 0 {
		t.Fatalf("the lock survived the holder's delete: %+v", locks)
	}
}

// TestResetReleasesLocksAtOnce checks that a connection that ends with a
// reset (SO_LINGER 0) releases its locks as part of its teardown, not
// seconds later as yrmcds does: once the server has dropped the
// connection, the key is free.
func TestResetReleasesLocksAtOnce(t *testing.T) {
	ts := newTestServer(t)
	addr := ts.listen()

	a := dialTCP(t, addr)
	a.do(t, "set k 0 0 1\r\nx\r\n", "STORED\r\n")
	a.do(t, "lock k\r\n", "OK\r\n")
	b := dialTCP(t, addr)
	defer b.c.Close()
	b.do(t, "lock k\r\n", "LOCKED\r\n")

	a.c.(*net.TCPConn).SetLinger(0)
	a.c.Close()
	waitFor(t, "the server to drop the reset connection", func() bool { return ts.srv.ns.Stats().Open == 1 })
	b.do(t, "lock k\r\n", "OK\r\n")
}

// TestPipelinedRepliesFlushOnce checks that a pipelined batch of requests
// gets its replies in one write.
func TestPipelinedRepliesFlushOnce(t *testing.T) {
	ts := newTestServer(t)
	client, server := net.Pipe()
	counted := &countingConn{Conn: server}
	c := serveOne{ts.srv, counted}
	done := make(chan struct{})
	go func() { c.serve(); close(done) }()
	var batch strings.Builder
	batch.WriteString("set k 0 0 5\r\nhello\r\n")
	for range 100 {
		batch.WriteString("get k\r\n")
	}
	go client.Write([]byte(batch.String()))
	want := "STORED\r\n" + strings.Repeat("VALUE k 0 5\r\nhello\r\nEND\r\n", 100)
	got := make([]byte, len(want))
	r := bufio.NewReader(client)
	if _, err := io.ReadFull(r, got); err != nil || string(got) != want {
		t.Fatalf("replies: %q, %v", got, err)
	}
	client.Close()
	<-done
	if n := counted.writes.Load(); n != 1 {
		t.Fatalf("%d writes for one pipelined batch, want 1", n)
	}
}

// TestSessionEndClosesConnection checks that an operator ending a
// memcached session closes its connection, which releases its items' locks.
func TestSessionEndClosesConnection(t *testing.T) {
	ts := newTestServer(t)
	pc := ts.dialInteractive()
	if got := pc.exchange([]byte("set k 0 0 1\r\nx\r\nlock k\r\n")); string(got) != "STORED\r\nOK\r\n" {
		t.Fatalf("got %q", got)
	}
	sessions := ts.svc.Sessions()
	if len(sessions) != 1 || sessions[0].Protocol != "memcache" {
		t.Fatalf("sessions = %+v", sessions)
	}
	if err := ts.svc.EndSession(sessions[0].ID); err != nil {
		t.Fatal(err)
	}
	select {
	case <-pc.served:
	case <-time.After(10 * time.Second):
		t.Fatal("the connection outlived its session")
	}
	ts.noLocksLeft()
}

type countingConn struct {
	net.Conn
	writes atomic.Int64
}

func (c *countingConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

type tcpClient struct {
	c net.Conn
	r *bufio.Reader
}

func dialTCP(t *testing.T, addr string) *tcpClient {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return &tcpClient{c: c, r: bufio.NewReader(c)}
}

// do sends req and reads a reply of len(want) bytes.
func (tc *tcpClient) do(t *testing.T, req, want string) {
	t.Helper()
	tc.c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprint(tc.c, req); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(want))
	if _, err := io.ReadFull(tc.r, got); err != nil || string(got) != want {
		t.Fatalf("%q: got %q, %v; want %q", req, got, err, want)
	}
}

// listen makes ts serve TCP on a free loopback port until the test ends,
// and returns its address.
func (ts *testServer) listen() string {
	ts.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		ts.t.Fatal(err)
	}
	ts.srv.Serve(ln)
	ts.t.Cleanup(func() { ts.srv.Shutdown(context.Background()) })
	return ln.Addr().String()
}

// waitFor polls cond until it holds, failing the test after a generous
// bound. It waits for the server's goroutines to act, not for time to pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestIdleConnectionDropsBuffers checks that a TCP connection serves on
// after waiting without its buffers (waitIdle: every TCP connection's first
// wait, and each wait after one of idleread.After or more): whole requests, a
// request split across an idle pause, and a pipelined batch larger than one
// buffer. That the buffers are gone meanwhile shows in the memory per idle
// connection (latch bench --workload idle), not here.
func TestIdleConnectionDropsBuffers(t *testing.T) {
	ts := newTestServer(t)
	addr := ts.listen()
	a := dialTCP(t, addr)
	defer a.c.Close()
	waitFor(t, "the connection to be served", func() bool { return ts.srv.ns.Stats().Open == 1 })
	a.do(t, "set k 0 0 1\r\nx\r\n", "STORED\r\n")
	// Idle for longer than idleread.After: the next wait drops the buffers.
	time.Sleep(3 * idleread.After)
	a.do(t, "get k\r\n", "VALUE k 0 1\r\nx\r\nEND\r\n")
	time.Sleep(3 * idleread.After)
	fmt.Fprint(a.c, "set k2 0 0 5\r\nhel")
	time.Sleep(3 * idleread.After)
	a.do(t, "lo\r\n", "STORED\r\n")
	var batch, want strings.Builder
	for i := range 400 { // about 9 KiB of requests, 3 KiB of replies
		fmt.Fprintf(&batch, "set key-%03d 0 0 5\r\nvalue\r\n", i)
		want.WriteString("STORED\r\n")
	}
	time.Sleep(3 * idleread.After)
	a.do(t, batch.String(), want.String())
}
