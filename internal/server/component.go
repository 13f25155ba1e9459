package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"runtime"
	"strconv"

	"github.com/latchd/latch/internal/config"
	"github.com/latchd/latch/internal/dlock"
	"github.com/latchd/latch/internal/memcache"
	"github.com/latchd/latch/internal/resp"
)

// A component is a front end the server runs beside the lock service: the
// listener of one protocol, or the admin HTTP server.
//
// The server calls Start once, in order, before New returns; and Shutdown
// once, in reverse order, for every component whose Start succeeded.
type component interface {
	// Name names the component in logs and errors, for example "memcache".
	Name() string

	// Start begins serving and returns once the component is ready (its
	// listener bound) or has failed. It does not block while serving: the
	// component runs its own goroutines.
	Start() error

	// Shutdown stops the component: it stops accepting, closes its
	// connections, and returns when its goroutines have ended. When ctx is
	// done first, it closes what is left at once and returns ctx.Err().
	Shutdown(ctx context.Context) error
}

// frontEnds returns the components s's configuration enables, in start
// order, each built over s.node.
func (s *Server) frontEnds() ([]component, error) {
	var comps []component
	tlsCfg, err := s.tlsConfig()
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	if s.cfg.Memcache.Addr != "" {
		allow, err := config.ParseNetworks(s.cfg.Memcache.Allow)
		if err != nil {
			return nil, fmt.Errorf("server: memcache-allow: %w", err)
		}
		mc := s.cfg.Memcache.Config
		mc.Version = s.cfg.Server.Version
		mc.Logger = s.logger
		mc.Metrics = s.metrics.Protocol("memcache")
		mc.ExtraStats = s.lockStats
		mc.TLS = tlsCfg
		mc.Allow = allow
		mc.Loops = 0
		if s.rep == nil {
			// In memory, a request is answered at once: event loops serve
			// the connections. Replicated, it waits for its commit, and a
			// loop would make its other connections wait too.
			mc.Loops = loops(s.cfg.Memcache.Loops, runtime.GOMAXPROCS(0))
		}
		ms, err := memcache.New(s.node, mc)
		if err != nil {
			return nil, fmt.Errorf("server: %w", err)
		}
		s.memcache = ms
		comps = append(comps, ms)
	}
	if s.cfg.DLock.Addr != "" {
		dc := s.cfg.DLock.Config
		dc.MaxKeys = s.cfg.Lock.MaxKeys
		dc.Logger = s.logger
		dc.Metrics = s.metrics.Protocol("dlock")
		dc.TLS = tlsCfg
		if path := s.cfg.DLock.TokensFile; path != "" {
			toks, err := dlock.LoadTokens(path)
			if err != nil {
				return nil, fmt.Errorf("server: %w", err)
			}
			dc.Tokens = toks
		}
		dl, err := dlock.New(s.node, dc)
		if err != nil {
			return nil, fmt.Errorf("server: %w", err)
		}
		s.dlock = dl
		comps = append(comps, dl)
	}
	if addr := s.cfg.Redis.Addr; addr != "" {
		rs, err := s.redisServer(addr, tlsCfg)
		if err != nil {
			return nil, fmt.Errorf("server: %w", err)
		}
		s.redis = rs
		comps = append(comps, rs)
	}
	if s.cfg.Admin.Addr != "" {
		ad, err := s.adminServer(tlsCfg)
		if err != nil {
			return nil, fmt.Errorf("server: %w", err)
		}
		comps = append(comps, ad)
	}
	return comps, nil
}

// redisServer builds the Redis front end.
func (s *Server) redisServer(addr string, tlsCfg *tls.Config) (*resp.Server, error) {
	allow, err := config.ParseNetworks(s.cfg.Redis.Allow)
	if err != nil {
		return nil, fmt.Errorf("redis-allow: %w", err)
	}
	rc := resp.DefaultConfig()
	rc.Addr = addr
	rc.Version = s.cfg.Server.Version
	rc.MaxConns = s.cfg.Redis.MaxConns
	rc.IdleTimeout = s.cfg.Redis.IdleTimeout
	rc.ReadTimeout = s.cfg.Redis.ReadTimeout
	rc.WriteTimeout = s.cfg.Redis.WriteTimeout
	rc.MaxValue = s.cfg.Redis.MaxValue
	rc.Logger = s.logger
	rc.Metrics = s.metrics.Protocol("redis")
	rc.TLS = tlsCfg
	rc.Allow = allow
	if s.rep == nil {
		// In memory, a request is answered at once: event loops serve
		// the connections. Replicated, it waits for its commit, and a
		// loop would make its other connections wait too.
		rc.Loops = loops(s.cfg.Redis.Loops, runtime.GOMAXPROCS(0))
	}
	if path := s.cfg.Redis.TokensFile; path != "" {
		toks, err := dlock.LoadTokens(path)
		if err != nil {
			return nil, fmt.Errorf("redis-tokens-file: %w", err)
		}
		for _, t := range toks {
			rc.Tokens = append(rc.Tokens, resp.Token{Value: t.Value, ReadOnly: t.ReadOnly, Prefixes: t.Prefixes})
		}
	}
	return resp.New(s.node, rc)
}

// loops returns the event loops of a front end (memcached, Redis), for
// the setting n and procs CPUs: by default half of them. The lock table is
// one critical section, so more loops add only parsing and socket work in
// parallel, and the other CPUs are left to the other front ends and the
// clients (on a benchmark's machine, to the load generator).
func loops(n, procs int) int {
	switch {
	case n < 0:
		return 0
	case n == 0:
		return max(1, procs/2)
	}
	return n
}

// lockStats are latch's lock counters, for the memcached stats command.
func (s *Server) lockStats() []memcache.Stat {
	snap := s.metrics.Snapshot()
	t := snap.Total()
	n := func(v int) string { return strconv.Itoa(v) }
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	return []memcache.Stat{
		{Name: "lock_keys", Value: n(snap.Keys)},
		{Name: "lock_holds", Value: n(snap.Held)},
		{Name: "lock_waiters", Value: n(snap.Waiters)},
		{Name: "lock_sessions", Value: n(snap.Sessions)},
		{Name: "lock_grants", Value: u(t.Grants)},
		{Name: "lock_releases", Value: u(t.Releases + t.SessionEndReleases)},
		{Name: "lock_lease_expiries", Value: u(t.LeaseExpiries)},
		{Name: "lock_forced_releases", Value: u(t.ForcedReleases)},
		{Name: "lock_wait_timeouts", Value: u(t.Timeouts)},
	}
}
