package latchtest

import (
	"context"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/latchd/latch/internal/config"
	"github.com/latchd/latch/internal/server"
)

// Server is a whole latch server (internal/server) started in process for
// a test: the lock service, every front end and the admin HTTP server,
// each on a free loopback port, and its log.
type Server struct {
	*server.Server

	// Memcache, DLock, Redis, ZooKeeper and Admin are the host:port
	// addresses of the memcached, dlock, Redis and ZooKeeper front ends
	// and of the admin HTTP server; "" for one the test turned off.
	Memcache, DLock, Redis, ZooKeeper, Admin string
	// Logs holds the server's log, as JSON lines, from the debug level up.
	Logs *SyncBuffer
}

// Start starts a latch server with its default configuration, except that
// every listener binds a free loopback port (so that tests never bind
// well-known ports and may run in parallel) and the log goes to Logs. Each
// of set then changes the configuration, in order: setting an address to
// "" turns that listener off. The server is shut down when the test ends,
// and a failed shutdown fails the test.
//
// A configuration that server.New refuses fails the test at once.
//
// The memcached, Redis and dlock front ends run on event loops, as a node
// in memory serves them, unless the environment says otherwise as it does
// to latch serve: LATCH_MEMCACHE_LOOPS=-1, LATCH_REDIS_LOOPS=-1 and
// LATCH_DLOCK_LOOPS=-1 run a package's suites on a goroutine per
// connection.
func Start(t testing.TB, set ...func(*config.Config)) *Server {
	t.Helper()
	cfg := config.DefaultConfig()
	cfg.Memcache.Addr = "127.0.0.1:0"
	cfg.DLock.Addr = "127.0.0.1:0"
	cfg.Redis.Addr = "127.0.0.1:0"
	cfg.ZooKeeper.Addr = "127.0.0.1:0"
	cfg.Admin.Addr = "127.0.0.1:0"
	for env, loops := range map[string]*int{"LATCH_MEMCACHE_LOOPS": &cfg.Memcache.Loops, "LATCH_REDIS_LOOPS": &cfg.Redis.Loops, "LATCH_DLOCK_LOOPS": &cfg.DLock.Loops} {
		if v := os.Getenv(env); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("latchtest: %s=%q: %v", env, v, err)
			}
			*loops = n
		}
	}
	for _, f := range set {
		f(&cfg)
	}
	logs := new(SyncBuffer)
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s, err := server.New(cfg, logger)
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
	ts := &Server{Server: s, Logs: logs}
	if a := s.MemcacheAddr(); a != nil {
		ts.Memcache = a.String()
	}
	if a := s.DLockAddr(); a != nil {
		ts.DLock = a.String()
	}
	if a := s.RedisAddr(); a != nil {
		ts.Redis = a.String()
	}
	if a := s.ZooKeeperAddr(); a != nil {
		ts.ZooKeeper = a.String()
	}
	if a := s.AdminAddr(); a != nil {
		ts.Admin = a.String()
	}
	return ts
}

// StartLatch starts a latch server as Start does and returns its memcached
// front end's address: the server a memcached peer's place is taken by in
// the tests that compare them.
func StartLatch(t testing.TB) string {
	t.Helper()
	return Start(t).Memcache
}
