package memcache

import (
	"bytes"
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/cache"
	"github.com/latchd/latch/internal/node"
)

// testServer is a memcache Server over a fresh node, with no listener:
// tests attach connections to it through net.Pipe.
type testServer struct {
	t   testing.TB
	svc *node.Node
	srv *Server
}

func newTestServer(t testing.TB) *testServer {
	t.Helper()
	svc, err := node.New(node.Config{Cache: cache.Config{MemoryLimit: 64 << 20, MaxItemSize: 1 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(svc, Config{
		Version: "test",
		MaxLine: 64 << 10,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Shutdown(context.Background()) })
	return &testServer{t: t, svc: svc, srv: srv}
}

// pipeConn is the client end of one connection to a testServer.
type pipeConn struct {
	t       testing.TB
	client  net.Conn
	out     chan []byte   // everything the server sent, once it closed
	drained bool          // out is filled by a background reader
	served  chan struct{} // closed when the server side's serve returned
}

// dial attaches a new connection to the server whose replies are drained
// in the background and returned by finish.
func (ts *testServer) dial() *pipeConn {
	pc := ts.dialInteractive()
	pc.drained = true
	go func() {
		b, _ := io.ReadAll(pc.client)
		pc.out <- b
	}()
	return pc
}

// dialInteractive attaches a new connection whose replies the test reads
// with exchange.
func (ts *testServer) dialInteractive() *pipeConn {
	ts.t.Helper()
	client, server := net.Pipe()
	c := serveOne{ts.srv, server}
	pc := &pipeConn{t: ts.t, client: client, out: make(chan []byte, 1), served: make(chan struct{})}
	go func() {
		defer close(pc.served)
		c.serve()
	}()
	return pc
}

// send writes b; it fails the test only if the server is gone too early
// for a test that expects it alive (fuzz inputs may close it any time).
func (pc *pipeConn) send(b []byte) error {
	pc.client.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_, err := pc.client.Write(b)
	return err
}

// finish closes the client's side of the connection and, for a drained
// connection, returns what the server sent. The server must end the
// connection promptly.
func (pc *pipeConn) finish() []byte {
	pc.t.Helper()
	pc.client.Close()
	select {
	case <-pc.served:
	case <-time.After(10 * time.Second):
		pc.t.Fatal("the server did not end a closed connection")
	}
	if !pc.drained {
		return nil
	}
	return <-pc.out
}

// versionTest is the reply to version of a server whose Config.Version is
// "test".
const versionTest = "VERSION 1.6.0 latch-test\r\n"

// exchange sends b, then a version request as a marker, and returns the
// replies before the marker's.
func (pc *pipeConn) exchange(b []byte) []byte {
	pc.t.Helper()
	if err := pc.send(append(append([]byte(nil), b...), "version\r\n"...)); err != nil {
		pc.t.Fatalf("send: %v", err)
	}
	var got []byte
	buf := make([]byte, 64<<10)
	pc.client.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		n, err := pc.client.Read(buf)
		got = append(got, buf[:n]...)
		if i := bytes.LastIndex(got, []byte(versionTest)); i >= 0 && i+len(versionTest) == len(got) {
			return got[:i]
		}
		if err != nil {
			pc.t.Fatalf("read: %v (got %q)", err, got)
		}
	}
}

// noLocksLeft checks that nobody holds or waits for a key: every
// connection ended, so every lock it took must be gone.
func (ts *testServer) noLocksLeft() {
	ts.t.Helper()
	if locks := ts.svc.Locks("", "", 0); len(locks) != 0 {
		ts.t.Fatalf("locks left after every connection ended: %+v", locks)
	}
	if st := ts.svc.ItemStats(); st.LockedItems != 0 {
		ts.t.Fatalf("items left locked after every connection ended: %d", st.LockedItems)
	}
	var _ latch.Service = ts.svc
}

// serveOne is a connection that no listener accepted, served by its
// server's goroutine path when serve is called.
type serveOne struct {
	srv *Server
	nc  net.Conn
}

func (c serveOne) serve() {
	if err := c.srv.ns.ServeNetConn(c.nc); err != nil {
		panic(err)
	}
}
