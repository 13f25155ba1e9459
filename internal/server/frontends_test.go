package server

import (
	"bytes"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/internal/config"
)

// TestFrontEndsRefuse: every front end has the same allow-list and
// connection limit (netserve), each refusing in its own protocol's terms,
// and counts its refusals by reason in the metrics.
func TestFrontEndsRefuse(t *testing.T) {
	frontEnds := []struct {
		name  string
		set   func(c *config.Config, allow string, maxConns int)
		addr  func(s *Server) net.Addr
		probe probe
		// refusal is a part of what a connection over the limit reads.
		refusal string
	}{
		{"memcache", func(c *config.Config, allow string, n int) { c.Memcache.Allow, c.Memcache.MaxConns = allow, n },
			(*Server).MemcacheAddr, memcacheProbe, "SERVER_ERROR too many connections\r\n"},
		{"dlock", func(c *config.Config, allow string, n int) { c.DLock.Allow, c.DLock.MaxConns = allow, n },
			(*Server).DLockAddr, dlockProbe, "TooManyConnections"},
		{"redis", func(c *config.Config, allow string, n int) { c.Redis.Allow, c.Redis.MaxConns = allow, n },
			(*Server).RedisAddr, redisProbe, "-ERR max number of clients reached\r\n"},
	}
	for _, fe := range frontEnds {
		t.Run(fe.name, func(t *testing.T) {
			cfg := testConfig()
			fe.set(&cfg, "10.0.0.0/8", 0)
			s := newServer(t, cfg)
			if err := try(fe.addr(s), nil, fe.probe); err == nil {
				t.Errorf("a client from outside %s-allow: answered", fe.name)
			}

			cfg = testConfig()
			fe.set(&cfg, "127.0.0.1", 1)
			s = newServer(t, cfg)
			first, err := net.Dial("tcp", fe.addr(s).String())
			if err != nil {
				t.Fatal(err)
			}
			defer first.Close()
			first.SetDeadline(time.Now().Add(10 * time.Second))
			if err := fe.probe(first); err != nil {
				t.Fatalf("the first connection: %v", err)
			}
			second, err := net.Dial("tcp", fe.addr(s).String())
			if err != nil {
				t.Fatal(err)
			}
			defer second.Close()
			second.SetDeadline(time.Now().Add(10 * time.Second))
			got, _ := io.ReadAll(second)
			if !bytes.Contains(got, []byte(fe.refusal)) {
				t.Errorf("a connection over max-conns read %q, want %q", got, fe.refusal)
			}
			snap := s.metrics.Snapshot()
			refused := uint64(0)
			for _, p := range snap.Protocols {
				if p.Protocol == fe.name {
					refused = p.ConnectionsRefused
				}
			}
			if refused != 1 {
				t.Errorf("%d connections refused in the metrics, want 1", refused)
			}
		})
	}
}

// redisProbe sends PING and expects PONG.
func redisProbe(nc net.Conn) error {
	if _, err := io.WriteString(nc, "PING\r\n"); err != nil {
		return err
	}
	buf := make([]byte, 7)
	if _, err := io.ReadFull(nc, buf); err != nil {
		return err
	}
	if !strings.HasPrefix(string(buf), "+PONG") {
		return io.ErrUnexpectedEOF
	}
	return nil
}
