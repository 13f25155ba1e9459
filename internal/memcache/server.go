package memcache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/cache"
	"github.com/latchd/latch/internal/evloop"
	"github.com/latchd/latch/internal/metrics"
	"github.com/latchd/latch/internal/netserve"
)

// Config configures a Server. Start from DefaultConfig. The toml tags name
// the settings of the configuration file's [memcache] table
// (internal/config); the fields tagged "-" are set by the program.
type Config struct {
	// The server's settings: Addr, Allow, MaxConns (a connection over it
	// is answered "SERVER_ERROR too many connections" and closed;
	// memcached answers "ERROR Too many open connections", yrmcds has no
	// limit), the timeouts (IdleTimeout never closes a connection that
	// holds a lock, since closing it would release the lock; 0 means
	// never, as in memcached and yrmcds), Loops, TLS, Logger and Metrics.
	netserve.Config
	// Version is latch's version, which the version commands and stats
	// report after the memcached protocol version (wireVersion).
	Version string `toml:"-"`
	// MaxLine bounds a text request line; a longer one is answered ERROR
	// and skipped without being kept in memory. 0: 1 MiB.
	MaxLine int `toml:"-"`
	// SweepInterval is how often expired items are removed in the
	// background. 0: 1s.
	SweepInterval time.Duration `toml:"-"`
	// ExtraStats, when set, adds lines to the general stats: latch's lock
	// counters, reported next to yrmcds's item counters.
	ExtraStats func() []Stat `toml:"-"`
}

// DefaultConfig returns the defaults of latch serve: 127.0.0.1:11211, at
// most 4096 connections, no idle timeout, 30s to read a request and 10s
// to write a reply, 1 MiB lines, a sweep every second.
func DefaultConfig() Config {
	return Config{
		Config: netserve.Config{
			Addr:         "127.0.0.1:11211",
			MaxConns:     4096,
			ReadTimeout:  30 * time.Second,
			WriteTimeout: 10 * time.Second,
		},
		MaxLine:       1 << 20,
		SweepInterval: time.Second,
	}
}

// Validate reports every invalid setting of c, joined into one error. Each
// names its field.
func (c Config) Validate() error {
	var errs []error
	if err := c.Config.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("memcache: %w", err))
	}
	for _, v := range []struct {
		name     string
		value    any
		negative bool
	}{
		{"MaxLine", c.MaxLine, c.MaxLine < 0},
		{"SweepInterval", c.SweepInterval, c.SweepInterval < 0},
	} {
		if v.negative {
			errs = append(errs, fmt.Errorf("memcache: invalid %s %v: must not be negative", v.name, v.value))
		}
	}
	return errors.Join(errs...)
}

// Stat is one line of a stats reply.
type Stat struct{ Name, Value string }

// Server serves the memcached protocols over one lock service: their
// codecs, commands and replies; package netserve serves its connections.
type Server struct {
	cfg   Config
	svc   Service
	items cache.Config // the service's item cache's limits
	// version is what the version commands and stats report.
	version string
	log     *slog.Logger
	ns      *netserve.Server

	counters counters
	textCmds [len(textCommands)]*metrics.Command
	binCmds  [256]*metrics.Command
	// textInvalid counts text lines that named no known command, or that
	// could not be read as a command line at all.
	textInvalid *metrics.Command

	quit     chan struct{} // closed by Shutdown: sweep returns
	sweeping sync.WaitGroup
	stop     sync.Once
}

// rTooManyConns answers a connection over Config.MaxConns.
const rTooManyConns = "SERVER_ERROR too many connections\r\n"

// New returns a server for svc; Start makes it listen. It returns
// Validate's error for an invalid cfg. Its plain connections are served by
// event loops (Config.Loops) when svc answers at once (latch.Inline).
func New(svc Service, cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.MaxLine <= 0 {
		cfg.MaxLine = 1 << 20
	}
	if cfg.SweepInterval <= 0 {
		cfg.SweepInterval = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		cfg:     cfg,
		svc:     svc,
		items:   svc.ItemConfig(),
		version: wireVersion(cfg.Version),
		log:     cfg.Logger,
		quit:    make(chan struct{}),
	}
	s.counters.started = time.Now()
	for i, name := range textCommands {
		s.textCmds[i] = cfg.Metrics.Command(name)
	}
	for _, b := range binaryNames {
		s.binCmds[b.op] = cfg.Metrics.Command(b.name)
	}
	s.textInvalid = cfg.Metrics.Command("invalid")
	loops := 0 // a request waits for its commit: a loop would make its other connections wait too
	if svc.Execution() == latch.Inline {
		loops = netserve.DefaultLoops(cfg.Loops, runtime.GOMAXPROCS(0))
	}
	ns, err := netserve.New(s, cfg.Config, loops)
	if err != nil {
		return nil, err
	}
	s.ns = ns
	return s, nil
}

// Name names the front end in logs.
func (s *Server) Name() string { return "memcache" }

// Refusal is the answer to a connection over Config.MaxConns.
func (s *Server) Refusal() []byte { return []byte(rTooManyConns) }

// LoopConn returns the connection nc, served by an event loop (Input,
// loop.go): netserve's, for the plain connections of an inline service.
func (s *Server) LoopConn(nc *netserve.Conn) evloop.Handler {
	c := newLoopConn(s, nc.RemoteAddr())
	c.nc = nc
	nc.SetHooks(netserve.Hooks{Busy: c.holdsLocks})
	return c
}

// MaxInput bounds the incomplete request an event loop keeps: the parsers
// take longer requests as they arrive (nextRequest).
func (s *Server) MaxInput() int {
	return limits{maxLine: s.cfg.MaxLine, maxItem: s.items.MaxItemSize}.maxInput()
}

// Start listens on the configured address and serves in the background.
func (s *Server) Start() error {
	if err := s.ns.Start(); err != nil {
		return err
	}
	s.startSweep()
	return nil
}

// Serve serves connections accepted from ln in the background.
func (s *Server) Serve(ln net.Listener) error {
	if err := s.ns.Serve(ln); err != nil {
		return err
	}
	s.startSweep()
	return nil
}

func (s *Server) startSweep() {
	s.sweeping.Add(1)
	go s.sweep()
}

// SetAllow replaces the networks served (Config.Allow) for the
// connections accepted from now on; open ones stay (netserve.Server.SetAllow).
func (s *Server) SetAllow(allow string) error { return s.ns.SetAllow(allow) }

// Addr returns the address the server listens on, once started.
func (s *Server) Addr() net.Addr { return s.ns.Addr() }

// sweep removes expired items in the background, a bounded batch at a time.
func (s *Server) sweep() {
	defer s.sweeping.Done()
	t := time.NewTicker(s.cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-s.quit:
			return
		case <-t.C:
			start := time.Now()
			n := 0
			for {
				k := s.svc.SweepItems(1000)
				n += k
				if k < 1000 {
					break
				}
			}
			took := time.Since(start)
			s.counters.sweeps.Add(1)
			s.counters.lastSweep.Store(int64(n))
			s.counters.lastSweepNs.Store(int64(took))
			s.counters.sweepNs.Add(int64(took))
		}
	}
}

// Shutdown stops accepting, closes every connection (releasing its locks)
// and waits for the server's goroutines, or until ctx is done.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stop.Do(func() { close(s.quit) })
	err := s.ns.Shutdown(ctx)
	s.sweeping.Wait()
	return err
}
