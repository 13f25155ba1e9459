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

// slowOpens is a node whose OpenSession, for the connections numbered in
// hold, waits until release is closed (as a cluster node's waits for a
// commit), and fails with fail when it is set.
type slowOpens struct {
	*node.Node
	n       atomic.Int32
	hold    map[int32]bool
	release chan struct{}
	fail    error
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
	srv, err := New(svc, Config{Version: "test", MaxLine: 1 << 10, MaxConns: 2})
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

// ask sends req on a new connection to addr and returns the first line of
// the answer.
func ask(t *testing.T, addr, req string) (net.Conn, string) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := nc.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(nc).ReadString('\n')
	if err != nil {
		return nc, fmt.Sprintf("error: %v", err)
	}
	return nc, line
}

// TestSessionOpenedAside: a connection whose session takes long to open
// holds up neither the connections accepted after it nor itself once it
// opens, and counts against MaxConns meanwhile.
func TestSessionOpenedAside(t *testing.T) {
	svc := &slowOpens{hold: map[int32]bool{1: true}, release: make(chan struct{})}
	addr := serveSlowOpens(t, svc)
	released := false
	defer func() {
		if !released {
			close(svc.release)
		}
	}()
	first, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	first.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := first.Write([]byte("version\r\n")); err != nil {
		t.Fatal(err)
	}
	for svc.n.Load() < 1 {
		time.Sleep(time.Millisecond)
	}
	if _, line := ask(t, addr, "version\r\n"); !strings.HasPrefix(line, "VERSION ") {
		t.Fatalf("a connection accepted while another's session opens: %q", line)
	}
	// Two connections now (MaxConns): the one opening and the one above.
	if _, line := ask(t, addr, "version\r\n"); line != rTooManyConns {
		t.Errorf("a connection over MaxConns, one of them opening: %q, want %q", line, rTooManyConns)
	}
	released = true
	close(svc.release)
	if line, err := bufio.NewReader(first).ReadString('\n'); err != nil || !strings.HasPrefix(line, "VERSION ") {
		t.Fatalf("the connection whose session opened late: %q, %v", line, err)
	}
}

// TestSessionRefused: a connection whose session cannot be opened is told
// why in a SERVER_ERROR line, then closed.
func TestSessionRefused(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("open session: no leader: %w", latch.ErrUnavailable), "SERVER_ERROR unavailable: this node cannot reach its cluster's leader\r\n"},
		{fmt.Errorf("open session: %w", latch.ErrShutdown), "SERVER_ERROR shutting down\r\n"},
		{fmt.Errorf("open session: disk on fire"), "SERVER_ERROR cannot open a session\r\n"},
	} {
		addr := serveSlowOpens(t, &slowOpens{fail: tt.err})
		nc, line := ask(t, addr, "set k 0 0 1\r\nx\r\n")
		if line != tt.want {
			t.Errorf("%v: %q, want %q", tt.err, line, tt.want)
		}
		if n, err := nc.Read(make([]byte, 1)); n != 0 || err == nil {
			t.Errorf("%v: the connection stays open (%d, %v)", tt.err, n, err)
		}
	}
}
