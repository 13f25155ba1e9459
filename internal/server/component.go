package server

import (
	"context"
	"fmt"
	"strconv"

	"github.com/latchd/latch/internal/dlock"
	"github.com/latchd/latch/internal/memcache"
	"github.com/latchd/latch/internal/netserve"
	"github.com/latchd/latch/internal/resp"
	"github.com/latchd/latch/internal/zookeeper"
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
		mc := s.cfg.Memcache.Config
		mc.Version = s.cfg.Server.Version
		mc.Logger = s.logger
		mc.Metrics = s.metrics.Protocol("memcache")
		mc.ExtraStats = s.lockStats
		mc.TLS = tlsCfg
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
			toks, err := netserve.LoadTokens(path)
			if err != nil {
				return nil, fmt.Errorf("server: dlock-tokens-file: %w", err)
			}
			dc.Tokens = toks
			s.dlockTokens = toks
		}
		dl, err := dlock.New(s.node, dc)
		if err != nil {
			return nil, fmt.Errorf("server: %w", err)
		}
		s.dlock = dl
		comps = append(comps, dl)
	}
	if s.cfg.Redis.Addr != "" {
		rc := s.cfg.Redis.Config
		rc.Version = s.cfg.Server.Version
		rc.Logger = s.logger
		rc.Metrics = s.metrics.Protocol("redis")
		rc.TLS = tlsCfg
		if path := s.cfg.Redis.TokensFile; path != "" {
			toks, err := netserve.LoadTokens(path)
			if err != nil {
				return nil, fmt.Errorf("server: redis-tokens-file: %w", err)
			}
			rc.Tokens = toks
			s.redisTokens = toks
		}
		rs, err := resp.New(s.node, rc)
		if err != nil {
			return nil, fmt.Errorf("server: %w", err)
		}
		s.redis = rs
		s.metrics.WatchRedisTracking(rs.Tracking)
		comps = append(comps, rs)
	}
	if s.cfg.ZooKeeper.Addr != "" {
		zc := s.cfg.ZooKeeper.Config
		zc.Version = s.cfg.Server.Version
		zc.Logger = s.logger
		zc.Metrics = s.metrics.Protocol("zookeeper")
		zc.TLS = tlsCfg
		zs, err := zookeeper.New(s.node, zc)
		if err != nil {
			return nil, fmt.Errorf("server: %w", err)
		}
		s.zookeeper = zs
		s.metrics.WatchZooKeeper(zs.Watches)
		comps = append(comps, zs)
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
