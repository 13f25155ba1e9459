//go:build linux

package evloop

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// relay is a Handler of a line protocol whose answers are sent
// (Conn.Send) rather than returned by Input:
//
//   - "later X": a goroutine of the test's sends "X\n";
//   - "now X": Input sends "X\n" itself, on the loop's goroutine, and
//     returns the reply "+X\n" too;
//   - "wait": Input pauses the connection's input, and the test resumes it
//     (resume);
//   - anything else is answered "X\n" by the relay's one worker, in order.
type relay struct {
	conn   atomic.Pointer[Conn]
	attach chan *Conn
	work   chan string
	paused chan struct{} // told of each pause
	closed chan error
	inputs atomic.Int64
}

func newRelay() *relay {
	return &relay{attach: make(chan *Conn, 1), work: make(chan string, 1<<16), paused: make(chan struct{}, 16), closed: make(chan error, 1)}
}

func (h *relay) Attach(c *Conn) {
	h.conn.Store(c)
	h.attach <- c
}

func (h *relay) Input(in, out []byte) ([]byte, int, bool) {
	h.inputs.Add(1)
	used := 0
	for {
		i := bytes.IndexByte(in[used:], '\n')
		if i < 0 {
			return out, used, true
		}
		line := string(in[used : used+i])
		switch {
		case line == "wait":
			h.conn.Load().Pause()
			h.paused <- struct{}{}
			return out, used + i + 1, true
		case strings.HasPrefix(line, "now "):
			h.conn.Load().Send([]byte(line[4:] + "\n"))
			out = append(out, "+"+line[4:]+"\n"...)
		case strings.HasPrefix(line, "later "):
			go h.conn.Load().Send([]byte(line[6:] + "\n"))
		default:
			h.work <- line
		}
		used += i + 1
	}
}

func (h *relay) Closed(err error) {
	close(h.work)
	h.closed <- err
}

// serve answers the relay's work in order until it is closed.
func (h *relay) serve() {
	c := <-h.attach
	h.attach <- c
	for line := range h.work {
		c.Send([]byte(line + "\n"))
	}
}

// serveRelays starts a loop whose connections are relays, and returns its
// address and the channel of the relays, one per connection.
func serveRelays(t *testing.T, cfg Config) (*Loop, string, chan *relay) {
	t.Helper()
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	relays := make(chan *relay, 16)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		l.Run()
	}()
	go func() {
		defer wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			h := newRelay()
			wg.Add(1)
			go func() {
				defer wg.Done()
				h.serve()
			}()
			relays <- h
			if err := l.Add(nc, h); err != nil {
				h.Closed(err)
			}
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		l.Close()
		wg.Wait()
	})
	return l, ln.Addr().String(), relays
}

// countWakes counts the loops' wake-ups through their eventfd until the
// test ends.
func countWakes(t *testing.T) *atomic.Int64 {
	var n atomic.Int64
	prev := wakeLoop
	wakeLoop = func(fd int) {
		n.Add(1)
		prev(fd)
	}
	t.Cleanup(func() { wakeLoop = prev })
	return &n
}

// TestSendInOrder: what other goroutines send reaches the peer whole and
// in the order it was sent, mixed with requests that arrive meanwhile, and
// a Send to a sleeping loop wakes it.
func TestSendInOrder(t *testing.T) {
	wakes := countWakes(t)
	_, addr, _ := serveRelays(t, Config{})
	nc, br := dial(t, addr)
	const n = 5000
	var batch strings.Builder
	for i := range n {
		fmt.Fprintf(&batch, "line %d\n", i)
	}
	go nc.Write([]byte(batch.String()))
	for i := range n {
		if got, want := readLine(t, br), fmt.Sprintf("line %d\n", i); got != want {
			t.Fatalf("answer %d: %q, want %q", i, got, want)
		}
	}
	// One request at a time: the loop sleeps when the worker sends.
	before := wakes.Load()
	for i := range 20 {
		fmt.Fprintf(nc, "again %d\n", i)
		if got, want := readLine(t, br), fmt.Sprintf("again %d\n", i); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
	if wakes.Load() == before {
		t.Error("sends to a sleeping loop never woke it through its eventfd")
	}
}

// TestSendFromInput: what Input sends goes before its replies, and costs
// the loop no wake-up.
func TestSendFromInput(t *testing.T) {
	wakes := countWakes(t)
	_, addr, _ := serveRelays(t, Config{})
	nc, br := dial(t, addr)
	nc.Write([]byte("now a\nnow b\n"))
	for _, want := range []string{"a\n", "b\n", "+a\n", "+b\n"} {
		if got := readLine(t, br); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
	for i := range 50 {
		fmt.Fprintf(nc, "now %d\n", i)
		for _, want := range []string{fmt.Sprintf("%d\n", i), fmt.Sprintf("+%d\n", i)} {
			if got := readLine(t, br); got != want {
				t.Fatalf("got %q, want %q", got, want)
			}
		}
	}
	if n := wakes.Load(); n != 0 {
		t.Errorf("sends from Input woke the loop %d times, want none", n)
	}
}

// TestSendBackpressure: what is sent waits for room in the socket, after
// the replies that wait already, under the write timeout; while it waits
// the loop reads nothing more from the connection.
func TestSendBackpressure(t *testing.T) {
	_, addr, relays := serveRelays(t, Config{WriteTimeout: 10 * time.Second})
	nc, br := dial(t, addr)
	h := <-relays
	c := <-h.attach
	h.attach <- c
	big := bytes.Repeat([]byte{'x'}, 16<<20)
	big[len(big)-1] = '\n'
	if !c.Send(big) {
		t.Fatal("Send() = false on an open connection")
	}
	c.Send([]byte("after\n"))
	time.Sleep(20 * time.Millisecond)
	nc.Write([]byte("now reply\n"))
	time.Sleep(20 * time.Millisecond)
	if n := h.inputs.Load(); n != 0 {
		t.Errorf("Input called %d times while sent bytes waited for room, want 0", n)
	}
	if _, err := io.ReadFull(br, make([]byte, len(big))); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"after\n", "reply\n", "+reply\n"} {
		if got := readLine(t, br); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}

	// A peer that does not read what is sent is closed at the write
	// timeout.
	_, addr, relays = serveRelays(t, Config{WriteTimeout: 50 * time.Millisecond})
	dial(t, addr)
	h = <-relays
	c = <-h.attach
	h.attach <- c
	c.Send(make([]byte, 64<<20))
	if err := closedWith(t, h.closed); !errors.Is(err, ErrWriteTimeout) {
		t.Fatalf("Closed(%v), want ErrWriteTimeout", err)
	}
}

// TestSendAfterClose: Send reports false and writes nothing once the
// connection is closed, by its peer, by Conn.Close or by the loop's
// Close; sends racing with either close are written whole or not at all,
// and never after the handler's Closed.
func TestSendAfterClose(t *testing.T) {
	for _, how := range []string{"peer", "Conn.Close", "Loop.Close"} {
		t.Run(how, func(t *testing.T) {
			l, addr, relays := serveRelays(t, Config{})
			nc, br := dial(t, addr)
			h := <-relays
			c := <-h.attach
			h.attach <- c
			var (
				stop     atomic.Bool
				wg       sync.WaitGroup
				failures atomic.Int64
			)
			for g := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; !stop.Load(); i++ {
						if !c.Send([]byte(fmt.Sprintf("sender %d message %d\n", g, i))) {
							failures.Add(1)
						}
					}
				}()
			}
			readLine(t, br)
			switch how {
			case "peer":
				nc.Close()
			case "Conn.Close":
				go c.Close()
			case "Loop.Close":
				go l.Close()
			}
			closedWith(t, h.closed)
			if c.Send([]byte("late\n")) {
				t.Error("Send() after Closed = true")
			}
			stop.Store(true)
			wg.Wait()
			if how == "peer" {
				return
			}
			// What the peer got is whole lines, each sender's in order.
			nc.SetReadDeadline(time.Now().Add(10 * time.Second))
			rest, _ := io.ReadAll(br)
			next := map[int]int{}
			for _, line := range strings.Split(string(rest), "\n") {
				if line == "" {
					continue
				}
				var g, i int
				if _, err := fmt.Sscanf(line, "sender %d message %d", &g, &i); err != nil {
					if strings.HasSuffix(string(rest), line) {
						break // cut by the close: Conn.Close drops, it does not cut in order
					}
					t.Fatalf("line %q: %v", line, err)
				}
				if i < next[g] {
					t.Fatalf("sender %d: message %d after %d", g, i, next[g])
				}
				next[g] = i + 1
			}
		})
	}
}

// TestLoopCloseWritesSent: what was sent before Loop.Close is written
// before the socket closes.
func TestLoopCloseWritesSent(t *testing.T) {
	l, addr, relays := serveRelays(t, Config{})
	_, br := dial(t, addr)
	h := <-relays
	c := <-h.attach
	h.attach <- c
	c.Send([]byte("last words\n"))
	l.Close()
	if got := readLine(t, br); got != "last words\n" {
		t.Fatalf("got %q", got)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("after the last words: %v, want EOF", err)
	}
	if err := closedWith(t, h.closed); !errors.Is(err, ErrClosed) {
		t.Fatalf("Closed(%v), want ErrClosed", err)
	}
}

// TestPauseResume: a paused connection's input waits, unread, until
// Resume, which gives the handler the rest; requests sent meanwhile are
// served after it, in order.
func TestPauseResume(t *testing.T) {
	_, addr, relays := serveRelays(t, Config{})
	nc, br := dial(t, addr)
	h := <-relays
	c := <-h.attach
	h.attach <- c
	nc.Write([]byte("now a\nwait\nnow b\n"))
	<-h.paused
	for _, want := range []string{"a\n", "+a\n"} {
		if got := readLine(t, br); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
	nc.Write([]byte("now c\n"))
	time.Sleep(50 * time.Millisecond)
	if n := h.inputs.Load(); n != 1 {
		t.Fatalf("Input called %d times, want 1: the input is paused", n)
	}
	c.Send([]byte("while paused\n"))
	if got := readLine(t, br); got != "while paused\n" {
		t.Fatalf("got %q: what is sent is written while the input is paused", got)
	}
	c.Resume()
	for _, want := range []string{"b\n", "+b\n", "c\n", "+c\n"} {
		if got := readLine(t, br); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
	c.Resume() // not paused: nothing
	nc.Write([]byte("now d\n"))
	for _, want := range []string{"d\n", "+d\n"} {
		if got := readLine(t, br); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}

	// Resumed at once, from another goroutine, while the pausing Input
	// still runs or just after.
	for i := range 100 {
		fmt.Fprintf(nc, "wait\nnow %d\n", i)
		<-h.paused
		go c.Resume()
		for _, want := range []string{fmt.Sprintf("%d\n", i), fmt.Sprintf("+%d\n", i)} {
			if got := readLine(t, br); got != want {
				t.Fatalf("got %q, want %q", got, want)
			}
		}
	}

	// A paused connection learns that its peer left once resumed: the
	// peer may only have shut its side down, waiting for the answers.
	nc.Write([]byte("wait\n"))
	<-h.paused
	nc.Close()
	time.Sleep(20 * time.Millisecond)
	select {
	case err := <-h.closed:
		t.Fatalf("Closed(%v) while paused", err)
	default:
	}
	c.Resume()
	if err := closedWith(t, h.closed); !errors.Is(err, io.EOF) {
		t.Fatalf("Closed(%v), want EOF", err)
	}
}

// TestPausedReadTimeout: input kept while paused is an incomplete request
// to the read timeout.
func TestPausedReadTimeout(t *testing.T) {
	_, addr, relays := serveRelays(t, Config{ReadTimeout: 50 * time.Millisecond})
	nc, _ := dial(t, addr)
	h := <-relays
	nc.Write([]byte("wait\nkept\n"))
	if err := closedWith(t, h.closed); !errors.Is(err, ErrReadTimeout) {
		t.Fatalf("Closed(%v), want ErrReadTimeout", err)
	}
}

// BenchmarkSend measures a Send from another goroutine to a sleeping loop
// and back: the round trip of a grant posted by the goroutine that
// released a lock.
func BenchmarkSend(b *testing.B) {
	l, err := New(Config{})
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go l.Run()
	defer l.Close()
	h := newRelay()
	go h.serve()
	go func() {
		nc, err := ln.Accept()
		if err == nil {
			l.Add(nc, h)
		}
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	br := bufio.NewReader(nc)
	b.ResetTimer()
	for range b.N {
		nc.Write([]byte("x\n"))
		if _, err := br.ReadString('\n'); err != nil {
			b.Fatal(err)
		}
	}
}
