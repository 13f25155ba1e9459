package memcache

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/cache"
	"github.com/latchd/latch/internal/evloop"
	"github.com/latchd/latch/internal/metrics"
	"github.com/latchd/latch/internal/peakmap"
	"github.com/latchd/latch/internal/refuse"
)

// Config configures a Server. Start from DefaultConfig. The toml tags name
// the settings of the configuration file's [memcache] table
// (internal/config); the fields tagged "-" are set by the program.
type Config struct {
	// Addr is the TCP address to listen on, "host:port".
	Addr string `toml:"addr"`
	// Version is latch's version, which the version commands and stats
	// report after the memcached protocol version (wireVersion).
	Version string `toml:"-"`
	// MaxLine bounds a text request line; a longer one is answered ERROR
	// and skipped without being kept in memory. 0: 1 MiB.
	MaxLine int `toml:"-"`
	// SweepInterval is how often expired items are removed in the
	// background. 0: 1s.
	SweepInterval time.Duration `toml:"-"`
	// MaxConns limits the open connections; 0 means no limit. A connection
	// over the limit is answered "SERVER_ERROR too many connections" and
	// closed (memcached answers "ERROR Too many open connections"; yrmcds
	// has no limit).
	MaxConns int `toml:"max-conns"`
	// IdleTimeout closes a connection that sends nothing for this long
	// between requests, unless it holds a lock (closing it would release
	// the lock); 0 means never, as in memcached and yrmcds.
	IdleTimeout time.Duration `toml:"idle-timeout"`
	// ReadTimeout bounds the time a request may take to arrive once its
	// first byte has: a client that stalls in the middle of a request (a
	// slow-loris) is disconnected. 0 means no bound.
	ReadTimeout time.Duration `toml:"read-timeout"`
	// WriteTimeout bounds each write of replies: a client that does not
	// read its replies for this long is disconnected. 0 means no bound.
	WriteTimeout time.Duration `toml:"write-timeout"`
	// Logger receives lifecycle and error logs; nil discards them.
	Logger *slog.Logger `toml:"-"`
	// Metrics counts the front end's connections and requests; nil
	// counts nothing.
	Metrics *metrics.Protocol `toml:"-"`
	// ExtraStats, when set, adds lines to the general stats: latch's lock
	// counters, reported next to yrmcds's item counters.
	ExtraStats func() []Stat `toml:"-"`
	// TLS, when set, makes Start serve TLS only, with this configuration.
	TLS *tls.Config `toml:"-"`
	// Allow, when not empty, limits the clients Start serves to those
	// whose address is in one of these networks: a connection from
	// elsewhere is closed at once, before any TLS handshake.
	Allow []netip.Prefix `toml:"-"`
	// Loops is the number of event loops (package evloop) that serve the
	// plain TCP connections, on Linux; 0, TLS connections, and other
	// systems get a goroutine per connection. Only for a Service whose
	// calls return at once (a node in memory): a loop's connections all
	// wait while one of its requests does.
	Loops int `toml:"-"`
}

// DefaultConfig returns the defaults of latch serve: 127.0.0.1:11211, at
// most 4096 connections, no idle timeout, 30s to read a request and 10s
// to write a reply, 1 MiB lines, a sweep every second.
func DefaultConfig() Config {
	return Config{
		Addr:          "127.0.0.1:11211",
		MaxLine:       1 << 20,
		SweepInterval: time.Second,
		MaxConns:      4096,
		ReadTimeout:   30 * time.Second,
		WriteTimeout:  10 * time.Second,
	}
}

// Validate reports every invalid setting of c, joined into one error. Each
// names its field.
func (c Config) Validate() error {
	var errs []error
	for _, v := range []struct {
		name     string
		value    any
		negative bool
	}{
		{"MaxLine", c.MaxLine, c.MaxLine < 0},
		{"SweepInterval", c.SweepInterval, c.SweepInterval < 0},
		{"MaxConns", c.MaxConns, c.MaxConns < 0},
		{"IdleTimeout", c.IdleTimeout, c.IdleTimeout < 0},
		{"ReadTimeout", c.ReadTimeout, c.ReadTimeout < 0},
		{"WriteTimeout", c.WriteTimeout, c.WriteTimeout < 0},
		{"Loops", c.Loops, c.Loops < 0},
	} {
		if v.negative {
			errs = append(errs, fmt.Errorf("memcache: invalid %s %v: must not be negative", v.name, v.value))
		}
	}
	return errors.Join(errs...)
}

// Stat is one line of a stats reply.
type Stat struct{ Name, Value string }

// Server serves the memcached protocols over one lock service.
type Server struct {
	cfg   Config
	svc   Service
	items cache.Config // the service's item cache's limits
	// version is what the version commands and stats report.
	version string
	log     *slog.Logger

	counters counters
	textCmds [len(textCommands)]*metrics.Command
	binCmds  [256]*metrics.Command
	// textInvalid counts text lines that named no known command, or that
	// could not be read as a command line at all.
	textInvalid *metrics.Command

	ln        net.Listener
	mu        sync.Mutex
	conns     map[*conn]struct{}
	connsPeak peakmap.Peak // conns is rebuilt when it drains (peakmap)
	quit      chan struct{}
	wg        sync.WaitGroup
	down      bool

	// refuser answers the connections over MaxConns.
	refuser *refuse.Refuser

	loops []*evloop.Loop // Config.Loops; empty: a goroutine per connection
	next  int            // the loop of the next connection (accept's)
}

// rTooManyConns answers a connection over Config.MaxConns.
const rTooManyConns = "SERVER_ERROR too many connections\r\n"

// New returns a server for svc; Start makes it listen. It returns
// Validate's error for an invalid cfg.
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
		conns:   make(map[*conn]struct{}),
		quit:    make(chan struct{}),
	}
	s.refuser = refuse.New(&s.wg)
	s.counters.started = time.Now()
	for i, name := range textCommands {
		s.textCmds[i] = cfg.Metrics.Command(name)
	}
	for _, b := range binaryNames {
		s.binCmds[b.op] = cfg.Metrics.Command(b.name)
	}
	s.textInvalid = cfg.Metrics.Command("invalid")
	return s, nil
}

// Name names the front end in logs.
func (s *Server) Name() string { return "memcache" }

// Start listens on the configured address and serves in the background.
func (s *Server) Start() error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("memcache: %w", err)
	}
	ln = refuse.AllowList(ln, s.cfg.Allow, "memcache-allow", s.log)
	if s.cfg.TLS != nil {
		ln = tls.NewListener(ln, s.cfg.TLS)
	}
	s.Serve(ln)
	return nil
}

// Serve serves connections accepted from ln in the background.
func (s *Server) Serve(ln net.Listener) {
	s.ln = ln
	s.log.Info("memcache: listening", "addr", ln.Addr().String())
	s.startLoops()
	s.wg.Add(2)
	go s.accept()
	go s.sweep()
}

// startLoops starts Config.Loops event loops, where the system has them.
func (s *Server) startLoops() {
	cfg := evloop.Config{
		IdleTimeout:  s.cfg.IdleTimeout,
		ReadTimeout:  s.cfg.ReadTimeout,
		WriteTimeout: s.cfg.WriteTimeout,
		// The parsers take longer requests as they arrive (nextRequest).
		MaxInput: limits{maxLine: s.cfg.MaxLine, maxItem: s.items.MaxItemSize}.maxInput(),
	}
	for range s.cfg.Loops {
		l, err := evloop.New(cfg)
		if err != nil {
			s.log.Info("memcache: a goroutine per connection", "reason", err)
			return
		}
		s.loops = append(s.loops, l)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			l.Run()
		}()
	}
}

// serve serves nc: on an event loop if there is one and nc is a plain
// socket, on a goroutine of its own otherwise.
func (s *Server) serve(nc net.Conn) {
	if _, plain := nc.(syscall.Conn); plain && len(s.loops) > 0 {
		c := newLoopConn(s, nc.RemoteAddr())
		if !s.track(c) {
			nc.Close()
			return
		}
		l := s.loops[s.next%len(s.loops)]
		s.next++
		if err := l.Add(nc, c); err != nil {
			nc.Close() // already closed, unless evloop.ErrNotSocket
			s.forget(c)
			if !errors.Is(err, evloop.ErrClosed) {
				s.log.Warn("memcache: serving a connection", "peer", c.peer.String(), "err", err)
			}
		}
		return
	}
	c, err := s.newConn(nc)
	if err != nil {
		s.log.Warn("memcache: refusing connection", "peer", nc.RemoteAddr().String(), "err", err)
		nc.Close()
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		c.serve()
	}()
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
		if s.full() {
			s.refuse(nc)
			continue
		}
		s.serve(nc)
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

// full reports whether the server has Config.MaxConns connections. Only
// the accept loop adds connections, so the answer stays true or turns false
// until it adds one.
func (s *Server) full() bool {
	if s.cfg.MaxConns <= 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns) >= s.cfg.MaxConns
}

// refuse answers a connection over Config.MaxConns with rTooManyConns and
// closes it, in the background (package refuse).
func (s *Server) refuse(nc net.Conn) {
	s.counters.rejectedConns.Add(1)
	s.log.Warn("memcache: too many connections; refusing one", "peer", nc.RemoteAddr().String(), "max_conns", s.cfg.MaxConns)
	s.refuser.Refuse(nc, []byte(rTooManyConns))
}

// newConn adds nc to the server's connections. Its session is opened with
// its first lock (conn.openSession): in a cluster that takes a commit, and
// most connections never lock.
func (s *Server) newConn(nc net.Conn) (*conn, error) {
	c := newConn(s, nc)
	if !s.track(c) {
		return nil, latch.ErrShutdown
	}
	return c, nil
}

// track adds c to the open connections, unless the server is shutting
// down.
func (s *Server) track(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return false
	}
	s.conns[c] = struct{}{}
	s.counters.currConns.Add(1)
	s.counters.totalConns.Add(1)
	s.cfg.Metrics.ConnOpened()
	return true
}

func (s *Server) forget(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	if s.connsPeak.Due(len(s.conns)) {
		s.conns = peakmap.Rebuild(s.conns, &s.connsPeak)
	}
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
		if c.nc != nil {
			c.nc.Close()
		}
	}
	s.mu.Unlock()
	for _, l := range s.loops {
		l.Close()
	}
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
