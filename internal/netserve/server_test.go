package netserve

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/latchd/latch/internal/evloop"
	"github.com/latchd/latch/internal/idleread"
	"github.com/latchd/latch/internal/metrics"
	"github.com/latchd/latch/internal/tlsconf"
	"github.com/latchd/latch/internal/tlsconf/tlstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testTimeout bounds every wait of these tests.
const testTimeout = 10 * time.Second

// lines is a protocol of lines: each request is a line, answered with the
// line upper-cased. "QUIT" ends the connection. A draining connection
// answers "BYE" and ends.
type lines struct {
	busy  atomic.Bool // Hooks.Busy
	drain bool        // Hooks.Drain
	stall bool        // ServeConn ignores the shutdown: it reads until closed
}

func (p *lines) Name() string    { return "lines" }
func (p *lines) Refusal() []byte { return []byte("FULL\n") }

func (p *lines) ServeConn(c *Conn) {
	c.SetHooks(Hooks{Busy: p.busy.Load, Drain: p.drain || p.stall})
	if p.stall {
		// Reads on through the drain's deadline, until the connection is
		// closed.
		for {
			if _, err := c.NetConn().Read(make([]byte, 1)); errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
	for {
		err := c.Next()
		if errors.Is(err, ErrServerClosed) && p.drain {
			c.W.WriteString("BYE\n")
			c.W.Flush()
			return
		}
		if err != nil {
			return
		}
		line, err := c.R.ReadString('\n')
		if err != nil {
			return
		}
		if line == "QUIT\n" {
			return
		}
		c.W.WriteString(strings.ToUpper(line))
	}
}

// loopLines is lines served by event loops as well.
type loopLines struct{ lines }

func (p *loopLines) LoopConn(c *Conn) evloop.Handler {
	c.SetHooks(Hooks{Busy: p.busy.Load})
	return lineHandler{}
}

type lineHandler struct{}

func (lineHandler) Input(in, out []byte) ([]byte, int, bool) {
	used := 0
	for {
		i := bytes.IndexByte(in[used:], '\n')
		if i < 0 {
			return out, used, true
		}
		line := in[used : used+i+1]
		used += i + 1
		if string(line) == "QUIT\n" {
			return out, used, false
		}
		out = append(out, bytes.ToUpper(line)...)
	}
}

func (lineHandler) Closed(error) {}

// drainingLines is loopLines whose loop connections drain: Finish sends
// "BYE" through the loop, once the connection is Draining.
type drainingLines struct {
	loopLines
	finished atomic.Int64
}

func (p *drainingLines) LoopConn(c *Conn) evloop.Handler {
	h := &drainingLine{}
	c.SetHooks(Hooks{Drain: true, Finish: func() {
		if !c.Draining() {
			panic("Finish before the connection drains")
		}
		p.finished.Add(1)
		h.lc.Load().Send([]byte("BYE\n"))
	}})
	return h
}

type drainingLine struct {
	lineHandler
	lc atomic.Pointer[evloop.Conn]
}

func (h *drainingLine) Attach(lc *evloop.Conn) { h.lc.Store(lc) }

// start serves p with cfg on a loopback port until the test ends.
func start(t *testing.T, p Protocol, cfg Config, loops int) *Server {
	t.Helper()
	cfg.Addr = "127.0.0.1:0"
	s, err := New(p, cfg, loops)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		s.Shutdown(ctx)
	})
	return s
}

type client struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

func dial(t *testing.T, s *Server, tlsCfg *tls.Config) *client {
	t.Helper()
	var nc net.Conn
	var err error
	if tlsCfg != nil {
		nc, err = tls.Dial("tcp", s.Addr().String(), tlsCfg)
	} else {
		nc, err = net.Dial("tcp", s.Addr().String())
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(testTimeout))
	return &client{t: t, nc: nc, br: bufio.NewReader(nc)}
}

// do sends req and reads one line.
func (c *client) do(req, want string) {
	c.t.Helper()
	if _, err := io.WriteString(c.nc, req); err != nil {
		c.t.Fatal(err)
	}
	got, err := c.br.ReadString('\n')
	if err != nil || got != want {
		c.t.Fatalf("%q: got %q, %v; want %q", req, got, err, want)
	}
}

// closed checks that the server closed the connection, after what it reads
// first (nothing: "").
func (c *client) closed(first string) {
	c.t.Helper()
	got, err := io.ReadAll(c.br)
	if string(got) != first || (err != nil && !isReset(err)) {
		c.t.Fatalf("read %q, %v before the end; want %q", got, err, first)
	}
}

func isReset(err error) bool { return strings.Contains(err.Error(), "reset") }

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(testTimeout); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// modes are the ways a connection is served.
var modes = []struct {
	name  string
	proto func() Protocol
	loops int
}{
	{"goroutines", func() Protocol { return &lines{} }, 0},
	{"event loops", func() Protocol { return &loopLines{} }, 2},
}

// TestServe: requests are answered, pipelined ones in one batch, either
// way, and the connections are counted.
func TestServe(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			met := metrics.New()
			s := start(t, m.proto(), Config{Metrics: met.Protocol("lines")}, m.loops)
			c := dial(t, s, nil)
			c.do("hello\n", "HELLO\n")
			io.WriteString(c.nc, "a\nb\nc")
			c.do("\n", "A\n")
			c.do("", "B\n")
			c.do("", "C\n")
			st := s.Stats()
			if st.Accepted != 1 || st.Open != 1 || st.Looped != min(m.loops, 1) {
				t.Errorf("stats %+v, want 1 accepted and open, %d looped", st, min(m.loops, 1))
			}
			io.WriteString(c.nc, "QUIT\n")
			c.closed("")
		})
	}
}

// TestMaxConns: a connection over the limit gets the protocol's refusal
// and is counted; once a connection ends, another is served.
func TestMaxConns(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			met := metrics.New()
			s := start(t, m.proto(), Config{MaxConns: 1, Metrics: met.Protocol("lines")}, m.loops)
			a := dial(t, s, nil)
			a.do("a\n", "A\n")
			b := dial(t, s, nil)
			b.closed("FULL\n")
			if st := s.Stats(); st.RefusedMaxConns != 1 || st.Open != 1 {
				t.Errorf("stats %+v, want one refused, one open", st)
			}
			snap := met.Snapshot()
			if got := snap.Total().ConnectionsRefused; got != 1 {
				t.Errorf("metrics: %d refused, want 1", got)
			}
			a.nc.Close()
			waitFor(t, "the first connection to end", func() bool { return s.Stats().Open == 0 })
			dial(t, s, nil).do("c\n", "C\n")
		})
	}
}

// TestAllow: a client from outside the allow-list is closed without a
// byte and counted; one inside is served.
func TestAllow(t *testing.T) {
	for _, tt := range []struct {
		allow  string
		served bool
	}{
		{"10.0.0.0/8", false},
		{"10.0.0.0/8, 127.0.0.1", true},
		{"::1, 127.0.0.0/8", true},
	} {
		s := start(t, &lines{}, Config{Allow: tt.allow, MaxConns: 5}, 0)
		c := dial(t, s, nil)
		if tt.served {
			c.do("x\n", "X\n")
			continue
		}
		c.closed("")
		if st := s.Stats(); st.RefusedAllow != 1 || st.Accepted != 0 {
			t.Errorf("allow %q: stats %+v, want one refused by the allow-list", tt.allow, st)
		}
	}
	if _, err := New(&lines{}, Config{Allow: "10.0.0.0/33"}, 0); err == nil {
		t.Error("New with an invalid allow-list: no error")
	}
}

// TestSetAllow: a new allow-list applies to the connections accepted
// after it; one open before stays served; a bad list keeps the one in
// force.
func TestSetAllow(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			s := start(t, m.proto(), Config{Allow: "127.0.0.0/8"}, m.loops)
			before := dial(t, s, nil)
			before.do("a\n", "A\n")
			steps := []struct {
				allow  string
				err    bool
				served bool
			}{
				{allow: "10.0.0.0/8", served: false},
				{allow: "10.0.0.0/33", err: true, served: false}, // kept: 10.0.0.0/8
				{allow: "", served: true},
				{allow: "10.0.0.0/8", served: false},
				{allow: "10.0.0.0/8,127.0.0.1", served: true},
			}
			for i, st := range steps {
				if err := s.SetAllow(st.allow); (err != nil) != st.err {
					t.Fatalf("step %d: SetAllow(%q) = %v, want error %v", i, st.allow, err, st.err)
				}
				c := dial(t, s, nil)
				if st.served {
					c.do("b\n", "B\n")
				} else {
					c.closed("")
				}
				before.do("c\n", "C\n") // the connection open before is untouched
			}
			if got := s.Stats().RefusedAllow; got != 3 {
				t.Errorf("%d refused by the allow-list, want 3", got)
			}
		})
	}
}

// TestTLSFiles: over a tlsconf.Files configuration, a certificate rotated
// on disk and reloaded is presented to the next connection, while the one
// open before goes on.
func TestTLSFiles(t *testing.T) {
	pki := tlstest.New(t)
	files, err := tlsconf.NewFiles("tls", pki.ServerCertFile, pki.ServerKeyFile, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, &loopLines{}, Config{TLS: files.Server()}, 2)
	serial := func(c *client) string {
		return c.nc.(*tls.Conn).ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	before := dial(t, s, pki.ClientConfig(false))
	before.do("a\n", "A\n")
	old := serial(before)
	rotated := pki.Reissue(t, false).Leaf.SerialNumber.String()
	if changed, err := files.Reload(); err != nil || !changed {
		t.Fatalf("Reload() = %v, %v", changed, err)
	}
	after := dial(t, s, pki.ClientConfig(false))
	after.do("b\n", "B\n")
	if got := serial(after); got != rotated || old == rotated {
		t.Errorf("after the reload, served serial %s, want %s (before: %s)", got, rotated, old)
	}
	before.do("c\n", "C\n")
}

// TestTLS: TLS connections are served by goroutines beside event loops,
// and refused in TLS.
func TestTLS(t *testing.T) {
	pki := tlstest.New(t)
	s := start(t, &loopLines{}, Config{TLS: pki.ServerConfig(false), MaxConns: 1}, 2)
	c := dial(t, s, pki.ClientConfig(false))
	c.do("secret\n", "SECRET\n")
	if st := s.Stats(); st.Looped != 0 || st.Open != 1 {
		t.Errorf("stats %+v: want the TLS connection on a goroutine", st)
	}
	dial(t, s, pki.ClientConfig(false)).closed("FULL\n")
}

// TestTimeouts: the idle timeout closes a connection that is not busy,
// and keeps one that is; the read timeout closes one inside a request.
func TestTimeouts(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			p := m.proto()
			cfg := Config{IdleTimeout: 100 * time.Millisecond, ReadTimeout: 100 * time.Millisecond}
			s := start(t, p, cfg, m.loops)
			busy := func(b bool) {
				switch p := p.(type) {
				case *lines:
					p.busy.Store(b)
				case *loopLines:
					p.busy.Store(b)
				}
			}

			idle := dial(t, s, nil)
			idle.do("a\n", "A\n")
			idle.closed("")

			busy(true)
			kept := dial(t, s, nil)
			kept.do("a\n", "A\n")
			time.Sleep(4 * cfg.IdleTimeout)
			kept.do("b\n", "B\n")
			busy(false)
			kept.closed("")

			slow := dial(t, s, nil)
			io.WriteString(slow.nc, "half a li")
			slow.closed("")
		})
	}
}

// TestIdleBuffers: a connection that waits without its buffers serves on:
// a request split across an idle pause, a batch larger than a buffer.
func TestIdleBuffers(t *testing.T) {
	s := start(t, &lines{}, Config{}, 0)
	c := dial(t, s, nil)
	c.do("a\n", "A\n")
	time.Sleep(3 * idleread.After)
	io.WriteString(c.nc, "spl")
	time.Sleep(3 * idleread.After)
	c.do("it\n", "SPLIT\n")
	var batch, want strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&batch, "line %d\n", i)
		fmt.Fprintf(&want, "LINE %d\n", i)
	}
	time.Sleep(3 * idleread.After)
	io.WriteString(c.nc, batch.String())
	got := make([]byte, want.Len())
	if _, err := io.ReadFull(c.br, got); err != nil || string(got) != want.String() {
		t.Fatalf("batch: %v, %d bytes", err, len(got))
	}
}

// TestShutdown: without drain, every connection is closed; with it, the
// protocol answers and ends; a protocol that does not end is closed when
// Shutdown's context is done. Serve fails afterwards.
func TestShutdown(t *testing.T) {
	shutdown := func(t *testing.T, s *Server, d time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		return s.Shutdown(ctx)
	}
	t.Run("close", func(t *testing.T) {
		for _, m := range modes {
			s := start(t, m.proto(), Config{}, m.loops)
			c := dial(t, s, nil)
			c.do("a\n", "A\n")
			if err := shutdown(t, s, testTimeout); err != nil {
				t.Fatal(err)
			}
			c.closed("")
			if err := s.Serve(nil); !errors.Is(err, ErrServerClosed) {
				t.Errorf("%s: Serve after Shutdown: %v", m.name, err)
			}
		}
	})
	t.Run("drain", func(t *testing.T) {
		s := start(t, &lines{drain: true}, Config{}, 0)
		c := dial(t, s, nil)
		c.do("a\n", "A\n")
		if err := shutdown(t, s, testTimeout); err != nil {
			t.Fatal(err)
		}
		c.closed("BYE\n")
	})
	t.Run("drain on a loop", func(t *testing.T) {
		p := &drainingLines{}
		s := start(t, p, Config{}, 1)
		c := dial(t, s, nil)
		c.do("a\n", "A\n")
		if err := shutdown(t, s, testTimeout); err != nil {
			t.Fatal(err)
		}
		c.closed("BYE\n")
		if n := p.finished.Load(); n != 1 {
			t.Errorf("Finish called %d times, want 1", n)
		}
	})
	t.Run("deadline", func(t *testing.T) {
		s := start(t, &lines{stall: true}, Config{}, 0)
		c := dial(t, s, nil)
		waitFor(t, "the connection", func() bool { return s.Stats().Open == 1 })
		if err := shutdown(t, s, 50*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Shutdown: %v, want the context's deadline", err)
		}
		c.closed("")
	})
}

// TestServeNetConn: a connection from no listener is served, counted and
// refused like the others.
func TestServeNetConn(t *testing.T) {
	s, err := New(&lines{}, Config{MaxConns: 1}, 0)
	if err != nil {
		t.Fatal(err)
	}
	cnc, snc := net.Pipe()
	done := make(chan error, 1)
	go func() { done <- s.ServeNetConn(snc) }()
	c := &client{t: t, nc: cnc, br: bufio.NewReader(cnc)}
	c.do("pipe\n", "PIPE\n")
	waitFor(t, "the connection", func() bool { return s.Stats().Open == 1 })
	other, _ := net.Pipe()
	if err := s.ServeNetConn(other); err == nil {
		t.Error("a second connection over the limit: served")
	}
	cnc.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}
