package client

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latchd/latch"
)

// The server measures the session TTL in real time, and a minute does not
// pass during these tests: only the Client's (fake) clock decides.
const silentTTL, silentMargin = time.Minute, 15 * time.Second

// silentInterval is the keepalive interval of a Client with silentTTL and
// silentMargin: (ttl-margin)/3.
const silentInterval = (silentTTL - silentMargin) / 3

// dialSilent dials a Client to addrs, in order, with silentTTL and
// silentMargin, on a fake clock it returns.
func dialSilent(t *testing.T, addrs ...string) (*Client, *fakeClock) {
	t.Helper()
	clk := newFakeClock()
	return dial(t, strings.Join(addrs, ","), SessionTTL(silentTTL), SafetyMargin(silentMargin), withClock(clk)), clk
}

// A server that stops answering but keeps the connection open (a stopped
// process, a partition that drops packets) is given up two keepalive
// intervals after the keepalive it answered last: the Client resumes its
// session on the next server and keeps its locks, long past the TTL.
func TestSilentServerResumesElsewhere(t *testing.T) {
	srv := startServer(t, 0)
	silent, other := startProxy(t, srv.addr), startProxy(t, srv.addr)
	c, clk := dialSilent(t, silent.addr, other.addr)
	l := mustLock(t, c, "k")
	settle(t, clk, c, silentInterval) // the keepalive answered last was sent now

	silent.partitioned.Store(true)
	clk.Advance(2*silentInterval - time.Nanosecond)
	if got := c.server(); got != silent.addr {
		t.Fatalf("server %q before two keepalive intervals without an answer, want %q still", got, silent.addr)
	}
	clk.Advance(time.Nanosecond)
	eventually(t, "the session is resumed on the other server", func() bool { return c.server() == other.addr })
	// The old connection is closed once the session has moved; the
	// server's end of it must not end the session.
	eventually(t, "the server sees the old connection close", func() bool {
		return strings.Contains(srv.Logs.String(), "dlock: connection closed")
	})

	settle(t, clk, c, 2*silentTTL)
	checkMoved(t, srv, c, l, "k")
	mustLock(t, c, "k2")
}

// checkMoved fails t unless l, c's lock of key, outlived the move of c's
// session: not done, and key held by the session on srv.
func checkMoved(t *testing.T, srv *testServer, c *Client, l *Lock, key string) {
	t.Helper()
	if isDone(l.Done()) || c.Err() != nil {
		t.Fatalf("lock lost after the move: %v (Client: %v)", l.Err(), c.Err())
	}
	if got := srv.holders(key); !slices.Equal(got, []latch.SessionID{c.SessionID()}) {
		t.Fatalf("holders of %s = %v, want the moved session %d", key, got, c.SessionID())
	}
}

// A server that is slow rather than gone (its answers held back for two
// keepalive intervals) is given up as silent too, but its connection stays
// open until the session is resumed, here on the same server: had the
// server seen it close first, it would have ended the session. What it
// answers late on the old connection is ignored.
func TestSlowServerKeepsSession(t *testing.T) {
	srv := startServer(t, 0)
	p := startProxy(t, srv.addr)
	c, clk := dialSilent(t, p.addr)
	l := mustLock(t, c, "k")
	settle(t, clk, c, silentInterval)

	p.hold()
	var release sync.Once
	t.Cleanup(func() { release.Do(p.release) }) // before the proxy's own
	clk.Advance(2*silentInterval - time.Nanosecond)
	if got := c.server(); got != p.addr {
		t.Fatalf("server %q before two keepalive intervals without an answer, want %q still", got, p.addr)
	}
	clk.Advance(time.Nanosecond)
	// The resume reaches the server; its answer is held back with the
	// keepalive's.
	eventually(t, "the server resumes the session", func() bool {
		return strings.Contains(srv.Logs.String(), "node: session resumed")
	})
	release.Do(p.release)
	eventually(t, "the Client resumes the session", func() bool { return c.server() == p.addr })
	eventually(t, "the server sees the old connection close", func() bool {
		return strings.Contains(srv.Logs.String(), "dlock: connection closed")
	})
	if isDone(l.Done()) || c.Err() != nil {
		t.Fatalf("lock lost: %v (Client: %v)", l.Err(), c.Err())
	}
	if got := srv.holders("k"); !slices.Equal(got, []latch.SessionID{c.SessionID()}) {
		t.Fatalf("holders of k = %v, want the session %d", got, c.SessionID())
	}
	settle(t, clk, c, 2*silentTTL)
	if isDone(l.Done()) {
		t.Fatalf("lock lost after the resume: %v", l.Err())
	}
	mustLock(t, c, "k2")
}
