package latchtest

import (
	"context"
	"testing"
	"time"

	"github.com/latchd/latch/internal/config"
	"github.com/latchd/latch/internal/server"
)

// StartLatch starts an in-process latch server with its default
// configuration, its memcached front end on a free loopback port and its
// other listeners off (so that tests never bind well-known ports and may
// run in parallel), and returns the memcached front end's address. It is
// shut down when the test ends.
func StartLatch(t testing.TB) string {
	t.Helper()
	cfg := config.DefaultConfig()
	cfg.Memcache.Addr = "127.0.0.1:0"
	cfg.DLock.Addr = ""
	cfg.Redis.Addr = ""
	cfg.Admin.Addr = ""
	s, err := server.New(cfg, nil)
	if err != nil {
		t.Fatalf("latchtest: starting latch: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("latchtest: shutting latch down: %v", err)
		}
	})
	return s.MemcacheAddr().String()
}
