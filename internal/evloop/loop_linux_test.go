//go:build linux

package evloop

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// lines is a Handler of a line protocol: each complete line is answered
// upper-cased; "quit" answers "BYE" and closes; "big N" answers N bytes.
// It stops once its replies reach ReplyLimit.
type lines struct {
	closed chan error
	inputs atomic.Int64 // calls of Input
}

func (h *lines) Input(in, out []byte) ([]byte, int, bool) {
	h.inputs.Add(1)
	used := 0
	for {
		i := bytes.IndexByte(in[used:], '\n')
		if i < 0 || len(out) >= ReplyLimit {
			return out, used, true
		}
		line := string(in[used : used+i])
		used += i + 1
		switch {
		case line == "quit":
			return append(out, "BYE\n"...), used, false
		case strings.HasPrefix(line, "big "):
			var n int
			for _, d := range line[4:] {
				n = 10*n + int(d-'0')
			}
			out = append(out, bytes.Repeat([]byte{'x'}, n)...)
		default:
			out = append(out, strings.ToUpper(line)+"\n"...)
		}
	}
}

func (h *lines) Closed(err error) { h.closed <- err }

// serve starts a loop with cfg and a listener whose connections it
// serves with lines handlers, and returns the listener's address and the
// channel of the handlers' Closed errors.
func serve(t *testing.T, cfg Config) (*Loop, string, chan error) {
	t.Helper()
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 16)
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		l.Run()
	}()
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			if err := l.Add(nc, &lines{closed: closed}); err != nil && !errors.Is(err, ErrClosed) {
				t.Errorf("Add: %v", err)
			}
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		l.Close()
		<-ran
	})
	return l, ln.Addr().String(), closed
}

func dial(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(30 * time.Second))
	return nc, bufio.NewReader(nc)
}

func readLine(t *testing.T, br *bufio.Reader) string {
	t.Helper()
	s, err := br.ReadString('\n')
	if err != nil {
		t.Fatalf("read: %v (got %q)", err, s)
	}
	return s
}

func closedWith(t *testing.T, closed chan error) error {
	t.Helper()
	select {
	case err := <-closed:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the handler was not closed")
		return nil
	}
}

func TestRequestsAcrossReads(t *testing.T) {
	_, addr, _ := serve(t, Config{})
	nc, br := dial(t, addr)
	// One request in three writes, then two in one write: the loop
	// keeps the incomplete start and answers each complete request once.
	for _, part := range []string{"hel", "lo\nwor", "ld\nagain\n"} {
		if _, err := nc.Write([]byte(part)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond) // let each part be its own read
	}
	for _, want := range []string{"HELLO\n", "WORLD\n", "AGAIN\n"} {
		if got := readLine(t, br); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
}

func TestCloseByHandlerAndPeer(t *testing.T) {
	_, addr, closed := serve(t, Config{})
	nc, br := dial(t, addr)
	nc.Write([]byte("quit\nnot answered\n"))
	if got := readLine(t, br); got != "BYE\n" {
		t.Fatalf("got %q", got)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("after quit: %v, want EOF", err)
	}
	if err := closedWith(t, closed); err != nil {
		t.Fatalf("Closed(%v), want nil", err)
	}

	nc, _ = dial(t, addr)
	nc.Close()
	if err := closedWith(t, closed); !errors.Is(err, io.EOF) {
		t.Fatalf("Closed(%v), want EOF", err)
	}
}

func TestBackpressure(t *testing.T) {
	_, addr, _ := serve(t, Config{WriteTimeout: 10 * time.Second})
	nc, br := dial(t, addr)
	// 32 MiB of replies fill the socket's buffers: the loop must keep the
	// rest, wait for room, and answer the next request after it.
	const n = 32 << 20
	nc.Write([]byte("big 33554432\nafter\n"))
	time.Sleep(50 * time.Millisecond)
	got, err := io.ReadFull(br, make([]byte, n))
	if err != nil {
		t.Fatalf("read %d of %d: %v", got, n, err)
	}
	if got := readLine(t, br); got != "AFTER\n" {
		t.Fatalf("got %q", got)
	}
}

func TestTimeouts(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		send string
		want error
	}{
		{"idle", Config{IdleTimeout: 50 * time.Millisecond}, "", ErrIdle},
		{"idle after a request", Config{IdleTimeout: 50 * time.Millisecond}, "hi\n", ErrIdle},
		{"read", Config{ReadTimeout: 50 * time.Millisecond, IdleTimeout: time.Hour}, "incomplete", ErrReadTimeout},
		{"write", Config{WriteTimeout: 50 * time.Millisecond}, "big 67108864\n", ErrWriteTimeout},
		// The handler stops on each long reply (ReplyLimit): the loop
		// waits for room to give it the rest, under the write timeout,
		// even when the socket took every reply so far.
		{"write, stopping on long replies", Config{WriteTimeout: 50 * time.Millisecond}, strings.Repeat("big 524288\n", 256), ErrWriteTimeout},
		{"input too long", Config{MaxInput: 8}, "0123456789", ErrInputTooLong},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, addr, closed := serve(t, tt.cfg)
			nc, _ := dial(t, addr)
			nc.Write([]byte(tt.send))
			if err := closedWith(t, closed); !errors.Is(err, tt.want) {
				t.Fatalf("Closed(%v), want %v", err, tt.want)
			}
		})
	}
}

func TestLoopClose(t *testing.T) {
	l, addr, closed := serve(t, Config{})
	nc, br := dial(t, addr)
	nc.Write([]byte("ping\n"))
	readLine(t, br)
	if l.Len() != 1 {
		t.Fatalf("Len() = %d, want 1", l.Len())
	}
	l.Close()
	if err := closedWith(t, closed); !errors.Is(err, ErrClosed) {
		t.Fatalf("Closed(%v), want ErrClosed", err)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("after Close: %v, want EOF", err)
	}
	c1, c2 := net.Pipe()
	defer c2.Close()
	if err := l.Add(c1, &lines{closed: closed}); !errors.Is(err, ErrNotSocket) {
		t.Fatalf("Add(pipe) = %v, want ErrNotSocket", err)
	}
	tc, _ := dial(t, addr) // accepted and refused: the loop is closed
	if _, err := bufio.NewReader(tc).ReadByte(); err != io.EOF {
		t.Fatalf("a connection after Close: %v, want EOF", err)
	}
}

// TestReadTimeoutCountsFromLastRequest: the read timeout bounds one
// request's arrival, not a stream of them that always ends in the middle
// of one.
func TestReadTimeoutCountsFromLastRequest(t *testing.T) {
	_, addr, closed := serve(t, Config{ReadTimeout: 150 * time.Millisecond})
	nc, br := dial(t, addr)
	nc.Write([]byte("a"))
	for i := range 8 { // 400 ms in all, every write ending in a request's start
		time.Sleep(50 * time.Millisecond)
		if _, err := nc.Write([]byte("\na")); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		if got := readLine(t, br); got != "A\n" {
			t.Fatalf("got %q", got)
		}
	}
	if err := closedWith(t, closed); !errors.Is(err, ErrReadTimeout) {
		t.Fatalf("Closed(%v), want ErrReadTimeout once the stream stops", err)
	}
}

// TestBusyLoopYields: a loop that never waits still passes through Go's
// scheduler every yieldEvery or so, so that the runtime does not take its
// P away during a system call (see yieldEvery).
func TestBusyLoopYields(t *testing.T) {
	var yields atomic.Int64
	gosched = func() { yields.Add(1) }
	t.Cleanup(func() { gosched = runtime.Gosched })
	_, addr, _ := serve(t, Config{})
	nc, br := dial(t, addr)
	for start := time.Now(); time.Since(start) < 4*yieldEvery || yields.Load() == 0; {
		if time.Since(start) > 5*time.Second {
			t.Fatal("no yield in 5 s of requests")
		}
		if _, err := nc.Write([]byte("ping\n")); err != nil {
			t.Fatal(err)
		}
		if got := readLine(t, br); got != "PING\n" {
			t.Fatalf("got %q", got)
		}
	}
}

// attached is a lines handler that hands its Conn over (Attacher) and may
// keep its connection past the idle timeout (IdleKeeper) while keep is
// set, counting the loop's questions.
type attached struct {
	lines
	conns chan *Conn
	keep  atomic.Bool
	asked atomic.Int64
}

func (h *attached) Attach(c *Conn) { h.conns <- c }

func (h *attached) KeepIdle() bool {
	h.asked.Add(1)
	return h.keep.Load()
}

// serveAttached is serve for attached handlers: it returns the loop's
// address, the channel of their Conns and that of their Closed errors, and
// the handlers in the order of their connections.
func serveAttached(t *testing.T, cfg Config) (string, chan *Conn, chan error, chan *attached) {
	t.Helper()
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conns, closed, handlers := make(chan *Conn, 16), make(chan error, 16), make(chan *attached, 16)
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		l.Run()
	}()
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			h := &attached{lines: lines{closed: closed}, conns: conns}
			handlers <- h
			if err := l.Add(nc, h); err != nil && !errors.Is(err, ErrClosed) {
				t.Errorf("Add: %v", err)
			}
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		l.Close()
		<-ran
	})
	return ln.Addr().String(), conns, closed, handlers
}

// TestConnClose: another goroutine closes a connection through its Conn;
// the handler is told ErrConnClosed and the peer sees the end. A Conn
// closed again, or after its descriptor went to another connection, does
// nothing.
func TestConnClose(t *testing.T) {
	addr, conns, closed, _ := serveAttached(t, Config{})
	nc, br := dial(t, addr)
	c := <-conns
	nc.Write([]byte("ping\n"))
	readLine(t, br)
	go c.Close()
	if err := closedWith(t, closed); !errors.Is(err, ErrConnClosed) {
		t.Fatalf("Closed(%v), want ErrConnClosed", err)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("after Conn.Close: %v, want EOF", err)
	}
	c.Close() // after the end: nothing

	// A Conn whose descriptor now serves another connection (a stale
	// handle; in-process the kernel need not reuse c's) must not touch
	// that one.
	nc2, br2 := dial(t, addr)
	c2 := <-conns
	stale := &Conn{l: c2.l, fd: c2.fd, h: c.h}
	stale.Close()
	c.Close()
	nc2.Write([]byte("still here\n"))
	if got := readLine(t, br2); got != "STILL HERE\n" {
		t.Fatalf("got %q", got)
	}
}

// TestConnCloseWhileWriting: a connection whose replies wait for the peer
// to read them is closed by Conn.Close too.
func TestConnCloseWhileWriting(t *testing.T) {
	addr, conns, closed, _ := serveAttached(t, Config{})
	nc, _ := dial(t, addr)
	c := <-conns
	nc.Write([]byte("big 67108864\n")) // never read: the loop waits for room
	time.Sleep(50 * time.Millisecond)
	c.Close()
	if err := closedWith(t, closed); !errors.Is(err, ErrConnClosed) {
		t.Fatalf("Closed(%v), want ErrConnClosed", err)
	}
}

// TestIdleKeeper: an idle connection whose handler keeps it survives the
// idle timeout, asked again every timeout, and is closed once it no longer
// keeps it.
func TestIdleKeeper(t *testing.T) {
	const idle = 40 * time.Millisecond
	addr, _, closed, handlers := serveAttached(t, Config{IdleTimeout: idle})
	nc, br := dial(t, addr)
	h := <-handlers
	h.keep.Store(true)
	nc.Write([]byte("ping\n"))
	readLine(t, br)
	time.Sleep(8 * idle)
	select {
	case err := <-closed:
		t.Fatalf("a kept connection was closed: %v", err)
	default:
	}
	if n := h.asked.Load(); n < 2 {
		t.Fatalf("KeepIdle asked %d times in 8 idle timeouts, want at least 2", n)
	}
	nc.Write([]byte("still\n"))
	if got := readLine(t, br); got != "STILL\n" {
		t.Fatalf("got %q", got)
	}
	h.keep.Store(false)
	if err := closedWith(t, closed); !errors.Is(err, ErrIdle) {
		t.Fatalf("Closed(%v), want ErrIdle once no longer kept", err)
	}
}

// TestStopOnLongReplies: a handler that stops on long replies is given the
// rest of its input once they are written, without more input, until it
// has answered every request, in order.
func TestStopOnLongReplies(t *testing.T) {
	addr, _, _, handlers := serveAttached(t, Config{})
	nc, br := dial(t, addr)
	h := <-handlers
	const n = 50
	nc.Write([]byte(strings.Repeat("big 65536\n", n) + "after\n"))
	for i := range n {
		if _, err := io.ReadFull(br, make([]byte, 65536)); err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		if i == 0 {
			time.Sleep(20 * time.Millisecond) // let the replies fill the socket
		}
	}
	if got := readLine(t, br); got != "AFTER\n" {
		t.Fatalf("got %q", got)
	}
	if got := h.inputs.Load(); got < n {
		t.Fatalf("Input called %d times for %d long replies, want one each", got, n)
	}
}
