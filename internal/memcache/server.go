package memcache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/cache"
	"github.com/latchd/latch/internal/metrics"
)

// Config configures a Server.
type Config struct {
	// Addr is the TCP address to listen on, "host:port".
	Addr string
	// Cache configures the item store: memory limit and max item size.
	Cache cache.Config
	// Version is what the version command reports after "latch ".
	Version string
	// MaxLine bounds a text request line; a longer one is answered ERROR
	// and skipped without being kept in memory. Default 1 MiB.
	MaxLine int
	// SweepInterval is how often expired items are removed in the
	// background; default 1s.
	SweepInterval time.Duration
	// Logger receives lifecycle and error logs; nil discards them.
	Logger *slog.Logger
	// Metrics counts the front end's connections and requests; nil
	// counts nothing.
	Metrics *metrics.Protocol
	// ExtraStats, when set, adds lines to the general stats: latch's lock
	// counters, reported next to yrmcds's item counters.
	ExtraStats func() []Stat
}

// Stat is one line of a stats reply.
type Stat struct{ Name, Value string }

// Server serves the memcached protocols over one lock service.
type Server struct {
	cfg   Config
	svc   latch.Service
	store *Store
	log   *slog.Logger

	counters counters
	textCmds [len(textCommands)]*metrics.Command
	binCmds  [256]*metrics.Command

	ln    net.Listener
	mu    sync.Mutex
	conns map[*conn]struct{}
	quit  chan struct{}
	wg    sync.WaitGroup
	down  bool
}

// New returns a server for svc; Start makes it listen.
func New(svc latch.Service, cfg Config) (*Server, error) {
	if cfg.MaxLine <= 0 {
		cfg.MaxLine = 1 << 20
	}
	if cfg.SweepInterval <= 0 {
		cfg.SweepInterval = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	st, err := NewStore(cfg.Cache, nil)
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg:   cfg,
		svc:   svc,
		store: st,
		log:   cfg.Logger,
		conns: make(map[*conn]struct{}),
		quit:  make(chan struct{}),
	}
	s.counters.started = time.Now()
	for i, name := range textCommands {
		s.textCmds[i] = cfg.Metrics.Command(name)
	}
	for _, b := range binaryNames {
		s.binCmds[b.op] = cfg.Metrics.Command(b.name)
	}
	return s, nil
}

// Name names the front end in logs.
func (s *Server) Name() string { return "memcache" }

// Store returns the server's item store.
func (s *Server) Store() *Store { return s.store }

// Start listens on the configured address and serves in the background.
func (s *Server) Start() error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("memcache: %w", err)
	}
	s.Serve(ln)
	return nil
}

// Serve serves connections accepted from ln in the background.
func (s *Server) Serve(ln net.Listener) {
	s.ln = ln
	s.log.Info("memcache: listening", "addr", ln.Addr().String())
	s.wg.Add(2)
	go s.accept()
	go s.sweep()
}

// Addr returns the address the server listens on, once started.
func (s *Server) Addr() net.Addr {
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

func (s *Server) accept() {
	defer s.wg.Done()
	var delay time.Duration
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			select {
			case <-s.quit:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				s.log.Error("memcache: listener closed", "err", err)
				return
			}
			// Out of file descriptors and the like: back off and retry.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			s.log.Warn("memcache: accept", "err", err, "retry_in", delay)
			time.Sleep(delay)
			continue
		}
		delay = 0
		c, err := s.newConn(nc)
		if err != nil {
			s.log.Warn("memcache: refusing connection", "peer", nc.RemoteAddr().String(), "err", err)
			nc.Close()
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			c.serve()
		}()
	}
}

// sweep removes expired items in the background, a bounded batch at a time.
func (s *Server) sweep() {
	defer s.wg.Done()
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
				k := s.store.sweep(1000)
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

func (s *Server) newConn(nc net.Conn) (*conn, error) {
	peer := nc.RemoteAddr().String()
	sess, err := s.svc.OpenSession(latch.SessionOptions{Protocol: "memcache", Peer: peer})
	if err != nil {
		return nil, err
	}
	c := newConn(s, nc, sess)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		sess.Close()
		return nil, latch.ErrShutdown
	}
	s.conns[c] = struct{}{}
	s.counters.currConns.Add(1)
	s.counters.totalConns.Add(1)
	s.cfg.Metrics.ConnOpened()
	return c, nil
}

func (s *Server) forget(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.counters.currConns.Add(-1)
	s.cfg.Metrics.ConnClosed()
}

// Shutdown stops accepting, closes every connection (releasing its locks)
// and waits for the server's goroutines, or until ctx is done.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.down {
		s.mu.Unlock()
		return nil
	}
	s.down = true
	close(s.quit)
	if s.ln != nil {
		s.ln.Close()
	}
	for c := range s.conns {
		c.nc.Close()
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("memcache: shutdown: %w", ctx.Err())
	}
}
