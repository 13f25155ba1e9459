package memcache

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latchd/latch/internal/cache"
	"github.com/latchd/latch/internal/evloop"
	"github.com/latchd/latch/internal/netserve"
	"github.com/latchd/latch/internal/node"
	"github.com/latchd/latch/internal/tlsconf/tlstest"
)

// diffServer is a memcache Server over a fresh node with the limits above,
// whose log fails the test on an error (the loop's framing disagreeing
// with its parse is one).
func diffServer(t testing.TB) *testServer {
	t.Helper()
	svc, err := node.New(node.Config{Cache: cache.Config{MemoryLimit: 1 << 20, MaxItemSize: diffMaxItem}})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(svc, Config{
		Config:  netserve.Config{Logger: slog.New(failOnError{t})},
		Version: "test",
		MaxLine: diffMaxLine,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Shutdown(context.Background()) })
	return &testServer{t: t, svc: svc, srv: srv}
}

// failOnError is a slog handler that fails its test on an error record.
type failOnError struct{ t testing.TB }

func (h failOnError) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelError }
func (h failOnError) Handle(_ context.Context, r slog.Record) error {
	h.t.Errorf("logged an error: %s", r.Message)
	return nil
}
func (h failOnError) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h failOnError) WithGroup(string) slog.Handler      { return h }

// loopReplay gives input to a connection of ts served as an event loop
// serves it, in the pieces cuts makes (ascending offsets), and returns its
// replies until it closed, or the input ended.
func loopReplay(t testing.TB, ts *testServer, input []byte, cuts []int) []byte {
	c := newLoopConn(ts.srv, pipeAddr{})
	var out, pending []byte
	prev := 0
	for _, cut := range append(cuts, len(input)) {
		if cut <= prev {
			continue
		}
		in := append(pending, input[prev:cut]...)
		prev = cut
		for {
			reply, used, open := c.Input(in, nil)
			out = append(out, reply...)
			if !open {
				c.Closed(nil)
				return out
			}
			pending = append([]byte(nil), in[used:]...)
			// The loop's part (evloop.ReplyLimit): a handler that
			// stopped on long replies is given the rest again.
			if len(reply) < evloop.ReplyLimit || len(pending) == 0 {
				break
			}
			in = pending
		}
	}
	c.Closed(io.EOF)
	return out
}

// pipeAddr is the address of a connection with none.
type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// serveReplay gives input to a connection of ts served by serve, as its
// goroutine does, in the pieces cuts makes, then the end of input, and
// returns its replies.
func serveReplay(ts *testServer, input []byte, cuts []int) []byte {
	nc := &scriptConn{in: input, cuts: cuts}
	ts.srv.ns.ServeNetConn(nc)
	return nc.out
}

// scriptConn is a net.Conn whose reads return its input, a piece at a
// time, then io.EOF, and whose writes are kept.
type scriptConn struct {
	in   []byte
	cuts []int // offsets in in where a read stops
	pos  int
	out  []byte
}

func (c *scriptConn) Read(p []byte) (int, error) {
	if c.pos == len(c.in) {
		return 0, io.EOF
	}
	end := len(c.in)
	for _, cut := range c.cuts {
		if cut > c.pos {
			end = min(end, cut)
			break
		}
	}
	n := copy(p, c.in[c.pos:end])
	c.pos += n
	return n, nil
}

func (c *scriptConn) Write(p []byte) (int, error) {
	c.out = append(c.out, p...)
	return len(p), nil
}

func (c *scriptConn) Close() error                     { return nil }
func (c *scriptConn) LocalAddr() net.Addr              { return pipeAddr{} }
func (c *scriptConn) RemoteAddr() net.Addr             { return pipeAddr{} }
func (c *scriptConn) SetDeadline(time.Time) error      { return nil }
func (c *scriptConn) SetReadDeadline(time.Time) error  { return nil }
func (c *scriptConn) SetWriteDeadline(time.Time) error { return nil }

// deterministic rewrites input so that its replies depend on it alone:
// stats (text "stats", binary Stat) report clocks and counts of the
// process.
func deterministic(input []byte) []byte {
	b := bytes.ReplaceAll(input, []byte("stats"), []byte("statz"))
	for i := range b {
		if b[i] == opStat {
			b[i] = opSetQ
		}
	}
	return b
}

// checkLoopAgrees replays input on a connection served by a goroutine and
// on one served as an event loop would, split at the cuts of each of
// splits, each on a fresh server, and fails unless every replay answers
// the same bytes and leaves no lock.
func checkLoopAgrees(t testing.TB, input []byte, splits [][]int) {
	t.Helper()
	ts := diffServer(t)
	want := serveReplay(ts, input, nil)
	ts.noLocksLeft()
	for i, cuts := range splits {
		ts := diffServer(t)
		got := loopReplay(t, ts, input, cuts)
		if !bytes.Equal(got, want) {
			t.Fatalf("input %.300q cut at %.100v:\nevent loop answered %.300q\ngoroutine answered  %.300q", input, cuts, got, want)
		}
		ts.noLocksLeft()
		if i%2 == 1 {
			// serve, read in the same pieces, answers the same too.
			ts := diffServer(t)
			if got := serveReplay(ts, input, cuts); !bytes.Equal(got, want) {
				t.Fatalf("input %.300q cut at %.100v:\nserve answered %.300q\nuncut, %.300q", input, cuts, got, want)
			}
		}
	}
}

// splitsOf returns ways to cut input: whole, at every byte, and a few at
// random from seed.
func splitsOf(input []byte, seed uint64) [][]int {
	every := make([]int, len(input))
	for i := range every {
		every[i] = i + 1
	}
	splits := [][]int{nil, every}
	r := rand.New(rand.NewPCG(seed, seed>>32|1))
	for range 3 {
		var cuts []int
		for i := 1; i < len(input); i++ {
			if r.IntN(8) == 0 {
				cuts = append(cuts, i)
			}
		}
		splits = append(splits, cuts)
	}
	return splits
}

// loopSeeds are inputs that reach the event loop's own paths: requests
// over the limits, skipped as they arrive.
func loopSeeds() [][]byte {
	big := bytes.Repeat([]byte("v"), diffMaxItem+1)
	longLine := bytes.Repeat([]byte("k"), diffMaxLine+10)
	ex := storeExtras(1, 0)
	return [][]byte{
		append(append([]byte("set k 0 0 65\r\n"), big...), "\r\nget k\r\nset k 0 0 1 noreply\r\nx\r\nget k\r\n"...),
		append(append([]byte("get "), longLine...), "\r\nversion\r\n"...),
		append(longLine, "\r\nset a 0 0 1\r\nb\r\nget a\r\n"...),
		append(append(binReq(opSet, []byte("k"), ex, big, 1, 0), binReq(opGet, []byte("k"), nil, nil, 2, 0)...), binReq(opNoop, nil, nil, nil, 3, 0)...),
		append(binReq(opGet, bytes.Repeat([]byte("k"), 251), nil, nil, 4, 0), binReq(opNoop, nil, nil, nil, 5, 0)...),
		append(binReq(opQuit, nil, nil, big, 6, 0), binReq(opNoop, nil, nil, nil, 7, 0)...),
		append(binReq(0x30, []byte("k"), nil, big, 8, 0), binReq(opNoop, nil, nil, nil, 9, 0)...),
		append(binReq(opSet, []byte("k k"), ex, big, 10, 0), "version\r\n"...),
		[]byte("set k 0 0 40000000\r\nversion\r\n"),
		append(binReq(opSet, []byte("k"), ex, nil, 11, 0)[:headerLen], 0xff),
		append(binReq(opLock, []byte("k"), nil, nil, 12, 0), "lock k\r\nunlock_all\r\n"...),
		[]byte("\x00\x00\x00\x05hello"),
		[]byte("set big 0 0 60\r\n" + strings.Repeat("v", 60) + "\r\n" + strings.Repeat("get big\r\n", 2000)),
	}
}

// TestLoopAgreesWithServe: an event loop's connection answers what a
// goroutine's answers, byte for byte, however the input is cut.
func TestLoopAgreesWithServe(t *testing.T) {
	var seeds [][]byte
	seeds = append(seeds, textSeeds()...)
	seeds = append(seeds, binarySeeds()...)
	seeds = append(seeds, loopSeeds()...)
	for i, s := range seeds {
		s = deterministic(s)
		splits := splitsOf(s, uint64(i))
		if len(s) > 64<<10 {
			splits = [][]int{nil, splits[2]} // not every byte of the longest
		}
		checkLoopAgrees(t, s, splits)
	}
}

// FuzzLoopAgreesWithServe is TestLoopAgreesWithServe for any input, cut at
// random.
func FuzzLoopAgreesWithServe(f *testing.F) {
	for i, s := range append(append(textSeeds(), binarySeeds()...), loopSeeds()...) {
		f.Add(s, uint64(i))
	}
	var mu sync.Mutex
	f.Fuzz(func(t *testing.T, input []byte, seed uint64) {
		mu.Lock() // one server pair at a time: the node's goroutines add up
		defer mu.Unlock()
		input = deterministic(input)
		splits := splitsOf(input, seed)
		if len(input) > 256 {
			// Cut at every byte, a long input costs the minimizer
			// minutes.
			splits = append(splits[:1], splits[2:]...)
		}
		checkLoopAgrees(t, input, splits)
	})
}

// TestServedEitherWay: a connection is served the same by an event loop
// and by a goroutine of its own, TLS ones by a goroutine whatever Loops
// says: the read timeout ends an incomplete request, the idle timeout
// spares a connection holding a lock, an operator ending a session closes
// its connection, and Shutdown closes the rest, every lock released.
func TestServedEitherWay(t *testing.T) {
	pki := tlstest.New(t)
	for _, tt := range []struct {
		name  string
		loops int
		tls   bool
	}{
		{"goroutines", -1, false},
		{"event loops", 2, false},
		{"TLS beside event loops", 2, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			svc, err := node.New(node.Config{Cache: cache.Config{MemoryLimit: 64 << 20, MaxItemSize: 1 << 20}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { svc.Shutdown(context.Background()) })
			cfg := DefaultConfig()
			cfg.Addr = "127.0.0.1:0"
			cfg.Loops = tt.loops
			cfg.IdleTimeout = 600 * time.Millisecond
			cfg.ReadTimeout = 150 * time.Millisecond
			if tt.tls {
				cfg.TLS = pki.ServerConfig(false)
			}
			s, err := New(svc, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Shutdown(context.Background()) })
			ts := &testServer{t: t, svc: svc, srv: s}
			dial := func() (net.Conn, *bufio.Reader) {
				t.Helper()
				var nc net.Conn
				var err error
				if tt.tls {
					nc, err = tls.Dial("tcp", s.Addr().String(), pki.ClientConfig(false))
				} else {
					nc, err = net.Dial("tcp", s.Addr().String())
				}
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { nc.Close() })
				nc.SetDeadline(time.Now().Add(10 * time.Second))
				return nc, bufio.NewReader(nc)
			}
			expect := func(br *bufio.Reader, want ...string) {
				t.Helper()
				for _, w := range want {
					if got, err := br.ReadString('\n'); got != w {
						t.Fatalf("got %q, %v; want %q", got, err, w)
					}
				}
			}
			closed := func(br *bufio.Reader, what string) {
				t.Helper()
				if _, err := br.ReadByte(); err != io.EOF {
					t.Fatalf("%s: %v, want EOF", what, err)
				}
			}

			nc, br := dial()
			nc.Write([]byte("set k 0 0 1\r\nv\r\nget k\r\nset k 0 0 5\r\nab"))
			expect(br, "STORED\r\n", "VALUE k 0 1\r\n", "v\r\n", "END\r\n")
			closed(br, "an incomplete request past the read timeout")
			// A value over the item size is skipped as it arrives, under
			// the read timeout all the same, stalled or trickling.
			for _, trickle := range []bool{false, true} {
				nc, br = dial()
				start := time.Now()
				nc.Write([]byte("get k\r\nset k 0 0 2000000\r\n" + strings.Repeat("x", 100<<10)))
				expect(br, "VALUE k 0 1\r\n", "v\r\n", "END\r\n")
				for i := 0; trickle && i < 100; i++ {
					time.Sleep(cfg.ReadTimeout / 10)
					if _, err := nc.Write([]byte("x")); err != nil {
						break
					}
				}
				closed(br, fmt.Sprintf("an oversized request past the read timeout (trickling: %v)", trickle))
				if took := time.Since(start); took >= cfg.IdleTimeout {
					t.Fatalf("an oversized request (trickling: %v) closed after %v: not by the read timeout", trickle, took)
				}
			}

			holder, hr := dial()
			holder.Write([]byte("lock k\r\n"))
			expect(hr, "OK\r\n")
			served := s.ns.Stats().Looped
			if want := map[bool]int{true: 1, false: 0}[tt.loops > 0 && !tt.tls]; served != want {
				t.Fatalf("event loops serve %d connections, want %d", served, want)
			}
			time.Sleep(cfg.IdleTimeout * 3 / 2)
			holder.Write([]byte("version\r\n"))
			expect(hr, versionLine(s))
			sessions := svc.Sessions()
			if len(sessions) != 1 {
				t.Fatalf("sessions = %+v", sessions)
			}
			if err := svc.EndSession(sessions[0].ID); err != nil {
				t.Fatal(err)
			}
			closed(hr, "a connection whose session an operator ended")
			waitFor(t, "the ended connection's end", func() bool { return s.ns.Stats().Open == 0 })
			ts.noLocksLeft()

			// Shutdown closes the open connections and releases their
			// locks.
			nc, br = dial()
			nc.Write([]byte("lock k\r\n"))
			expect(br, "OK\r\n")
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := s.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			closed(br, "after Shutdown")
			if n := s.ns.Stats().Open; n != 0 {
				t.Fatalf("%d connections after Shutdown", n)
			}
			if n := s.ns.Stats().Accepted; n != 5 {
				t.Fatalf("%d connections counted, want 5", n)
			}
			ts.noLocksLeft()
		})
	}
}

// versionLine is the reply to version of s.
func versionLine(s *Server) string { return "VERSION " + s.version + "\r\n" }
