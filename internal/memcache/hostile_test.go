package memcache_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/internal/config"
	"github.com/latchd/latch/internal/latchtest"
)

// eventWait bounds the waits for something the server must do (close a
// connection, answer); tests never assert how fast it happens.
const eventWait = 10 * time.Second

// tcpServer is a whole latch server (latchtest.Start) whose memcached
// front end the test talks to.
type tcpServer struct {
	t    *testing.T
	addr string
}

// newTCPServer starts a server with the memcache settings that set makes
// of the defaults; it stops when the test ends.
func newTCPServer(t *testing.T, set func(*config.MemcacheConfig)) *tcpServer {
	t.Helper()
	srv := latchtest.Start(t, func(c *config.Config) { set(&c.Memcache) })
	return &tcpServer{t: t, addr: srv.Memcache}
}

// dial opens a connection whose every operation fails after eventWait.
func (ts *tcpServer) dial() *textClient {
	ts.t.Helper()
	nc, err := net.Dial("tcp", ts.addr)
	if err != nil {
		ts.t.Fatal(err)
	}
	ts.t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(eventWait))
	return &textClient{t: ts.t, nc: nc, r: bufio.NewReader(nc)}
}

// textClient speaks the text protocol, one request at a time.
type textClient struct {
	t  *testing.T
	nc net.Conn
	r  *bufio.Reader
}

// do sends req and returns the first line of the reply.
func (c *textClient) do(req string) string {
	c.t.Helper()
	c.nc.SetDeadline(time.Now().Add(eventWait))
	if _, err := io.WriteString(c.nc, req); err != nil {
		c.t.Fatalf("send %q: %v", req, err)
	}
	line, err := c.r.ReadString('\n')
	if err != nil {
		c.t.Fatalf("reply to %q: %v", req, err)
	}
	return line
}

// expectClosed waits until the server closes the connection, discarding
// what it sends meanwhile.
func (c *textClient) expectClosed(why string) {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(eventWait))
	_, err := io.Copy(io.Discard, c.r)
	var ne net.Error
	if err != nil && errors.As(err, &ne) && ne.Timeout() {
		c.t.Fatalf("%s: the server did not close the connection within %v", why, eventWait)
	}
}

// stat returns the value of the general stat name.
func (c *textClient) stat(name string) uint64 {
	c.t.Helper()
	c.nc.SetDeadline(time.Now().Add(eventWait))
	if _, err := io.WriteString(c.nc, "stats\r\n"); err != nil {
		c.t.Fatal(err)
	}
	var n uint64
	found := false
	for {
		line, err := c.r.ReadString('\n')
		if err != nil {
			c.t.Fatalf("stats: %v", err)
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "END" {
			break
		}
		if v, ok := strings.CutPrefix(line, "STAT "+name+" "); ok {
			if n, err = strconv.ParseUint(v, 10, 64); err != nil {
				c.t.Fatalf("stats: %s: %v", name, err)
			}
			found = true
		}
	}
	if !found {
		c.t.Fatalf("stats: no %s", name)
	}
	return n
}

// expectOpen checks that the connection still answers.
func (c *textClient) expectOpen(why string) {
	c.t.Helper()
	if got := c.do("version\r\n"); !strings.HasPrefix(got, "VERSION") {
		c.t.Fatalf("%s: version answered %q", why, got)
	}
}

// bystander is a client holding a lock on "held" while hostile clients
// act; check verifies that it still holds it and that the server still
// serves others.
type bystander struct {
	c  *textClient
	ts *tcpServer
}

func newBystander(ts *tcpServer) *bystander {
	c := ts.dial()
	if got := c.do("set held 0 0 1\r\nx\r\n"); got != "STORED\r\n" {
		ts.t.Fatalf("set: %q", got)
	}
	if got := c.do("lock held\r\n"); got != "OK\r\n" {
		ts.t.Fatalf("lock: %q", got)
	}
	return &bystander{c: c, ts: ts}
}

func (b *bystander) check() {
	b.ts.t.Helper()
	other := b.ts.dial()
	if got := other.do("lock held\r\n"); got != "LOCKED\r\n" {
		b.ts.t.Errorf("another client locking held: %q, want LOCKED", got)
	}
	if got := other.do("set free 0 0 1\r\nx\r\n"); got != "STORED\r\n" {
		b.ts.t.Errorf("set free: %q", got)
	}
	if got := other.do("lock free\r\n"); got != "OK\r\n" {
		b.ts.t.Errorf("lock free: %q", got)
	}
	if got := other.do("unlock free\r\n"); got != "OK\r\n" {
		b.ts.t.Errorf("unlock free: %q", got)
	}
	b.c.expectOpen("bystander")
}

// TestHostileInput sends garbage, truncated and oversized requests: each
// is answered or closes its own connection, and harms no other client.
func TestHostileInput(t *testing.T) {
	big := strings.Repeat("x", 2<<20)
	tests := []struct {
		name  string
		input string
		want  string // the reply's first line; "" when the server closes
	}{
		{"garbage", "\x01\x02\xff garbage\r\n", "ERROR\r\n"},
		{"unknown command", "frobnicate a b c\r\n", "ERROR\r\n"},
		{"line over MaxLine", "get " + big + "\r\n", "ERROR\r\n"},
		{"item over max size", fmt.Sprintf("set k 0 0 %d\r\n%s\r\n", len(big), big), "SERVER_ERROR object too large for cache\r\n"},
		{"size over the request limit", "set k 0 0 999999999999\r\n", "ERROR\r\n"},
		{"negative size", "set k 0 0 -1\r\n", "ERROR\r\n"},
		{"block without CRLF", "set k 0 0 1\r\nxyz\r\n", "ERROR\r\n"},
		{"key too long", "lock " + strings.Repeat("k", 300) + "\r\n", ""},
		{"truncated line", "get k", ""},
		{"truncated block", "set k 0 0 100\r\nabc", ""},
		{"binary: bad magic body", "\x80\x01\x00\x05\x08\x00\x00\x00\x00\x00\x00\x02", ""},
		{"binary: huge body", "\x80\x01\x00\x05\x08\x00\x00\x00\x7f\xff\xff\xff\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00", ""},
		{"binary: key longer than body", "\x80\x40\x01\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00k", ""},
	}
	ts := newTCPServer(t, func(c *config.MemcacheConfig) {
		c.ReadTimeout, c.WriteTimeout = 500*time.Millisecond, time.Second
	})
	by := newBystander(ts)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ts.dial()
			io.WriteString(c.nc, tt.input)
			if tt.want != "" {
				line, err := c.r.ReadString('\n')
				if err != nil || line != tt.want {
					t.Errorf("reply: %q, %v; want %q", line, err, tt.want)
				}
			}
			// Whatever happened, the server either still answers or
			// closes the connection (a truncated request within the
			// read timeout).
			c.nc.(*net.TCPConn).CloseWrite()
			c.expectClosed(tt.name)
			by.check()
		})
	}
}

// TestSlowLoris checks that a request that stops arriving half-way is cut
// off after the read timeout, while a connection silent between requests
// is not (no idle timeout).
func TestSlowLoris(t *testing.T) {
	ts := newTCPServer(t, func(c *config.MemcacheConfig) { c.ReadTimeout = 200 * time.Millisecond })
	by := newBystander(ts)
	for _, partial := range []string{"get k", "set k 0 0 10\r\nabc", "\x80\x00\x00\x01"} {
		c := ts.dial()
		io.WriteString(c.nc, partial)
		c.expectClosed(fmt.Sprintf("%q", partial))
	}
	idle := ts.dial()
	idle.expectOpen("before")
	time.Sleep(600 * time.Millisecond) // three read timeouts, silent
	idle.expectOpen("a connection silent between requests")
	by.check()
}

// TestIdleTimeout checks that silent connections are closed after the idle
// timeout, except those holding a lock.
func TestIdleTimeout(t *testing.T) {
	ts := newTCPServer(t, func(c *config.MemcacheConfig) { c.IdleTimeout = 200 * time.Millisecond })
	holder := ts.dial()
	if got := holder.do("set k 0 0 1\r\nx\r\nlock k\r\n"); got != "STORED\r\n" {
		t.Fatalf("set: %q", got)
	}
	if got, _ := holder.r.ReadString('\n'); got != "OK\r\n" {
		t.Fatalf("lock: %q", got)
	}
	var silent []*textClient
	for range 20 {
		silent = append(silent, ts.dial())
	}
	for _, c := range silent {
		c.expectClosed("a silent connection")
	}
	holder.expectOpen("a silent connection holding a lock")
	if got := ts.dial().do("lock k\r\n"); got != "LOCKED\r\n" {
		t.Errorf("lock k by another: %q, want LOCKED", got)
	}
	// Once it lets the lock go, the holder is idle like the others.
	if got := holder.do("unlock k\r\n"); got != "OK\r\n" {
		t.Fatalf("unlock: %q", got)
	}
	holder.expectClosed("an idle connection that held a lock")
}

// TestMaxConns checks that connections beyond MaxConns are answered and
// closed, and that the limit frees up when connections leave.
func TestMaxConns(t *testing.T) {
	ts := newTCPServer(t, func(c *config.MemcacheConfig) { c.MaxConns = 3 })
	by := newBystander(ts) // one
	held := []*textClient{ts.dial(), ts.dial()}
	for _, c := range held {
		c.expectOpen("under the limit")
	}
	for range 5 {
		c := ts.dial()
		line, err := c.r.ReadString('\n')
		if want := "SERVER_ERROR too many connections\r\n"; line != want {
			t.Errorf("over the limit: %q, %v; want %q", line, err, want)
		}
		c.expectClosed("over the limit")
	}
	held[0].nc.Close()
	// The server notices the close in its own time.
	deadline := time.Now().Add(eventWait)
	for {
		c := ts.dial()
		io.WriteString(c.nc, "version\r\n")
		line, _ := c.r.ReadString('\n')
		if strings.HasPrefix(line, "VERSION") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a closed connection never made room: %q", line)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := by.c.stat("rejected_connections"); got < 5 {
		t.Errorf("rejected_connections = %d, want at least 5", got)
	}
	by.c.expectOpen("bystander")
}

// TestClientNeverReads checks that a client that pipelines requests and
// never reads the replies is disconnected after the write timeout, and
// that meanwhile other clients' requests and locks work: the server never
// writes while holding the node's mutex.
func TestClientNeverReads(t *testing.T) {
	ts := newTCPServer(t, func(c *config.MemcacheConfig) { c.WriteTimeout = 300 * time.Millisecond })
	by := newBystander(ts)
	val := bytes.Repeat([]byte("v"), 512<<10)
	setup := ts.dial()
	if got := setup.do(fmt.Sprintf("set big 0 0 %d\r\n%s\r\n", len(val), val)); got != "STORED\r\n" {
		t.Fatalf("set big: %q", got)
	}

	hog := ts.dial()
	// Each get answers 512 KiB: the replies fill the socket buffers at
	// once, the server stops reading, then the requests fill them too.
	// Once the server gives up on the hog, its writes fail.
	sent := make(chan error, 1)
	go func() {
		req := []byte(strings.Repeat("get big\r\n", 100))
		hog.nc.SetWriteDeadline(time.Now().Add(eventWait))
		for {
			if _, err := hog.nc.Write(req); err != nil {
				sent <- err
				return
			}
		}
	}()
	// While the hog's replies are stuck, everyone else is served.
	for range 5 {
		by.check()
	}
	var ne net.Error
	if err := <-sent; errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server did not disconnect a client that never reads within %v", eventWait)
	}
	by.check()
}
