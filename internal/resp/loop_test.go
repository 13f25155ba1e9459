package resp

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/internal/metrics"
	"github.com/latchd/latch/internal/node"
	"github.com/latchd/latch/internal/tlsconf/tlstest"
)

// newMemServer returns a Redis front end with the default configuration
// over a new in-memory node, both shut down when tb ends; nothing listens.
func newMemServer(tb testing.TB) (*node.Node, *Server) {
	tb.Helper()
	n, err := node.New(node.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	s, err := New(n, DefaultConfig())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		s.Shutdown(context.Background())
		n.Shutdown(context.Background())
	})
	return n, s
}

// startServer serves a node in memory with cfg on a loopback port.
func startServer(t *testing.T, cfg Config) *Server {
	t.Helper()
	n, err := node.New(node.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Addr = "127.0.0.1:0"
	s, err := New(n, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Error(err)
		}
		n.Shutdown(ctx)
	})
	return s
}

// TestServedEitherWay: a connection is served the same by an event loop
// and by a goroutine of its own, TLS ones by a goroutine whatever Loops
// says; the timeouts close connections either way.
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
			cfg := DefaultConfig()
			cfg.Loops = tt.loops
			m := metrics.New()
			cfg.Metrics = m.Protocol("redis")
			cfg.IdleTimeout = 200 * time.Millisecond
			cfg.ReadTimeout = 200 * time.Millisecond
			if tt.tls {
				cfg.TLS = pki.ServerConfig(false)
			}
			s := startServer(t, cfg)
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
			// reply reads a simple string or a bulk string.
			reply := func(br *bufio.Reader) string {
				t.Helper()
				line, err := br.ReadString('\n')
				if err != nil {
					t.Fatal(err)
				}
				if line[0] != '$' {
					return line
				}
				n, _ := strconv.Atoi(strings.TrimSpace(line[1:]))
				b := make([]byte, n+2)
				if _, err := io.ReadFull(br, b); err != nil {
					t.Fatal(err)
				}
				return string(b)
			}

			nc, br := dial()
			nc.Write([]byte("*1\r\n$4\r\nPING\r\n*6\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n$2\r\nNX\r\n$2\r\nPX\r\n"))
			if got := reply(br); got != "+PONG\r\n" {
				t.Fatalf("PING: %q", got)
			}
			// The SET is incomplete (6 arguments announced, 5 sent): the
			// read timeout ends it.
			if _, err := br.ReadByte(); err != io.EOF {
				t.Fatalf("an incomplete request past the read timeout: %v, want EOF", err)
			}

			nc, br = dial()
			nc.Write([]byte("*2\r\n$6\r\nCLIENT\r\n$4\r\nINFO\r\n"))
			if got := reply(br); !strings.Contains(got, "addr="+nc.LocalAddr().String()+" ") {
				t.Fatalf("CLIENT INFO: %q lacks addr=%s", got, nc.LocalAddr())
			}
			served := s.ns.Stats().Looped
			if want := map[bool]int{true: 1, false: 0}[tt.loops > 0 && !tt.tls]; served != want {
				t.Fatalf("event loops serve %d connections, want %d", served, want)
			}
			if _, err := br.ReadByte(); err != io.EOF {
				t.Fatalf("an idle connection past the idle timeout: %v, want EOF", err)
			}

			// Shutdown closes the open connections.
			nc, br = dial()
			nc.Write([]byte("PING\r\n"))
			reply(br)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := s.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := br.ReadByte(); err != io.EOF {
				t.Fatalf("after Shutdown: %v, want EOF", err)
			}
			if n := s.clients(); n != 0 {
				t.Fatalf("%d connections after Shutdown", n)
			}
			// Each connection counted once, whichever way it was served.
			for _, p := range m.Snapshot().Protocols {
				if p.Protocol == "redis" && (p.ConnectionsTotal != 3 || p.Connections != 0) {
					t.Fatalf("connections counted: %d in all, %d open; want 3, 0", p.ConnectionsTotal, p.Connections)
				}
			}
		})
	}
}
