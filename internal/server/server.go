package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/admin"
	"github.com/latchd/latch/internal/config"
	"github.com/latchd/latch/internal/dlock"
	"github.com/latchd/latch/internal/memcache"
	"github.com/latchd/latch/internal/metrics"
	"github.com/latchd/latch/internal/netserve"
	"github.com/latchd/latch/internal/node"
	"github.com/latchd/latch/internal/replica/raftrep"
	"github.com/latchd/latch/internal/resp"
	"github.com/latchd/latch/internal/tlsconf"
	"github.com/latchd/latch/internal/zookeeper"
)

// Server is one running latch node: the lock service and its front ends.
type Server struct {
	cfg    config.Config
	logger *slog.Logger
	node   *node.Node
	// rep replicates the node's state (durable or clustered); nil for the
	// in-memory single node.
	rep *raftrep.Replicator

	memcache  *memcache.Server  // nil when disabled
	dlock     *dlock.Server     // nil when disabled
	redis     *resp.Server      // nil when disabled
	zookeeper *zookeeper.Server // nil when disabled
	admin     *admin.Server     // nil when disabled

	// metrics observes the node; front ends take their handles from it.
	metrics *metrics.Metrics
	// ready is true from the end of New to the start of Shutdown
	// (/readyz).
	ready atomic.Bool

	// started holds the components that started, in start order.
	started []component

	// tls and peerFiles are the certificates of the listeners and of the
	// connections between nodes; nil without TLS.
	tls, peerFiles *tlsconf.Files
	// reloadMu serializes reloads (reload.go); it guards cfg after New,
	// and the tokens in force.
	reloadMu                 sync.Mutex
	dlockTokens, redisTokens []netserve.Token
	adminToken               string

	shutdownOnce sync.Once
	shutdownErr  error
}

// New validates cfg, builds the lock service and starts every front end
// cfg enables. When New returns without error the server is serving; the
// caller must call Shutdown. logger receives the server's log; nil
// discards it.
func New(cfg config.Config, logger *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	m := metrics.New()
	nc := nodeConfig(cfg)
	nc.Logger = logger
	nc.Observer = m.Observer()
	s := &Server{cfg: cfg, logger: logger, metrics: m}
	if err := s.replicated(cfg.Cluster, &nc); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	n, err := node.New(nc)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	s.node = n
	m.Watch(s.node)
	m.WatchItems(s.node.ItemStats)
	m.SetVersion(cfg.Server.Version)
	m.SetCommit(cfg.Server.Commit)
	m.SetLimits(limits(cfg))
	if s.rep != nil {
		m.Registry().MustRegister(raftCollector{s.rep})
	}

	comps, err := s.frontEnds()
	if err == nil {
		err = s.start(comps)
	}
	if err != nil {
		// Undo what started; the caller has no Server to shut down.
		ctx, cancel := context.WithTimeout(context.Background(), cfg.Server.ShutdownTimeout)
		defer cancel()
		if serr := s.Shutdown(ctx); serr != nil {
			err = errors.Join(err, serr)
		}
		return nil, err
	}
	if len(s.started) == 0 {
		s.logger.Info("no front end to serve: the lock service is reachable in process only")
	}
	s.ready.Store(true)
	return s, nil
}

// start starts comps in order. If one fails, start returns its error and
// leaves s.started holding the ones that started, for Shutdown to stop.
func (s *Server) start(comps []component) error {
	for _, c := range comps {
		if err := c.Start(); err != nil {
			return fmt.Errorf("server: starting %s: %w", c.Name(), err)
		}
		s.started = append(s.started, c)
		s.logger.Debug("started", "component", c.Name())
	}
	return nil
}

// Service returns the lock service the front ends serve. Tests and
// in-process users may call it directly.
func (s *Server) Service() latch.Service {
	return s.node
}

// MemcacheAddr returns the address the memcached front end listens on, or
// nil when it is disabled.
func (s *Server) MemcacheAddr() net.Addr {
	if s.memcache == nil {
		return nil
	}
	return s.memcache.Addr()
}

// RedisAddr returns the address the Redis front end listens on, or nil
// when it is disabled.
func (s *Server) RedisAddr() net.Addr {
	if s.redis == nil {
		return nil
	}
	return s.redis.Addr()
}

// ZooKeeperAddr returns the address the ZooKeeper front end listens on,
// or nil when it is disabled.
func (s *Server) ZooKeeperAddr() net.Addr {
	if s.zookeeper == nil {
		return nil
	}
	return s.zookeeper.Addr()
}

// DLockAddr returns the address the dlock front end listens on, or nil
// when it is disabled.
func (s *Server) DLockAddr() net.Addr {
	if s.dlock == nil {
		return nil
	}
	return s.dlock.Addr()
}

// Shutdown stops the server gracefully and returns when it has stopped, or
// when ctx is done, whichever comes first.
//
// The lock service shuts down first: it answers every waiting request with
// latch.ErrShutdown, ends every session and refuses new ones, so that the
// front ends can still send those answers to their clients. Then the front
// ends shut down, last started first, each closing its listener and
// connections. When ctx is done, what is left is closed at once.
//
// In memory, every lock is lost with the process; with a data dir, what
// was committed stays in the log for the next start. Shutdown returns the
// errors of every part that failed to stop in time, joined. Calling it
// again returns the same result.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutdownOnce.Do(func() {
		s.shutdownErr = s.shutdown(ctx)
	})
	return s.shutdownErr
}

func (s *Server) shutdown(ctx context.Context) error {
	var errs []error
	s.ready.Store(false)
	if err := s.node.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("server: shutting down the lock service: %w", err))
	}
	for i := len(s.started) - 1; i >= 0; i-- {
		c := s.started[i]
		if err := c.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("server: shutting down %s: %w", c.Name(), err))
			continue
		}
		s.logger.Debug("stopped", "component", c.Name())
	}
	return errors.Join(errs...)
}
