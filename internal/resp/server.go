package resp

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/latchd/latch/internal/evloop"
	"github.com/latchd/latch/internal/metrics"
	"github.com/latchd/latch/internal/peakmap"
	"github.com/latchd/latch/internal/refuse"
)

// Server serves the Redis protocol over one lock service.
type Server struct {
	cfg     Config
	svc     Service
	log     *slog.Logger
	started time.Time

	cmds    map[string]*command // by lower-case name
	unknown *metrics.Command

	// loaded holds the scripts SCRIPT LOAD or EVAL recognised, by the SHA1
	// of their text (knownScripts need no loading).
	scriptsMu sync.RWMutex
	loaded    map[string]loadedScript

	lastID atomic.Int64 // CLIENT ID

	ln        net.Listener
	mu        sync.Mutex
	conns     map[*conn]struct{}
	connsPeak peakmap.Peak
	quit      chan struct{}
	wg        sync.WaitGroup
	down      bool
	refuser   *refuse.Refuser

	loops []*evloop.Loop // Config.Loops; empty: a goroutine per connection
	next  int            // the loop of the next connection (accept's)
}

// rTooManyConns answers a connection over Config.MaxConns, as Redis does.
const rTooManyConns = "-ERR max number of clients reached\r\n"

// New returns a server for svc; Start makes it listen.
func New(svc Service, cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		cfg:     cfg,
		svc:     svc,
		log:     cfg.Logger,
		started: time.Now(),
		loaded:  make(map[string]loadedScript),
		conns:   make(map[*conn]struct{}),
		quit:    make(chan struct{}),
	}
	s.refuser = refuse.New(&s.wg)
	s.cmds = make(map[string]*command, len(commandTable))
	for i := range commandTable {
		c := commandTable[i]
		c.metric = cfg.Metrics.Command(c.name)
		s.cmds[c.name] = &c
	}
	s.unknown = cfg.Metrics.Command("unknown")
	return s, nil
}

// Name names the front end in logs.
func (s *Server) Name() string { return "redis" }

// Start listens on the configured address and serves in the background.
func (s *Server) Start() error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	ln = refuse.AllowList(ln, s.cfg.Allow, "redis-allow", s.log)
	if s.cfg.TLS != nil {
		ln = tls.NewListener(ln, s.cfg.TLS)
	}
	s.Serve(ln)
	return nil
}

// Serve serves connections accepted from ln in the background.
func (s *Server) Serve(ln net.Listener) {
	s.ln = ln
	s.log.Info("redis: listening", "addr", ln.Addr().String())
	s.startLoops()
	s.wg.Add(1)
	go s.accept()
}

// startLoops starts Config.Loops event loops, where the system has them.
func (s *Server) startLoops() {
	cfg := evloop.Config{
		IdleTimeout:  s.cfg.IdleTimeout,
		ReadTimeout:  s.cfg.ReadTimeout,
		WriteTimeout: s.cfg.WriteTimeout,
		// The Reader refuses longer requests before they are complete.
		MaxInput: max(s.cfg.Limits.MaxInline, s.cfg.Limits.MaxArgs*(s.cfg.Limits.MaxBulk+2*headerMax)) + headerMax,
	}
	for range s.cfg.Loops {
		l, err := evloop.New(cfg)
		if err != nil {
			s.log.Info("redis: a goroutine per connection", "reason", err)
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
				s.log.Warn("redis: serving a connection", "peer", c.peer.String(), "err", err)
			}
		}
		return
	}
	c := newConn(s, nc)
	if !s.track(c) {
		nc.Close()
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		c.serve()
	}()
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
	s.cfg.Metrics.ConnOpened()
	return true
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
				s.log.Error("redis: listener closed", "err", err)
				return
			}
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			s.log.Warn("redis: accept", "err", err, "retry_in", delay)
			time.Sleep(delay)
			continue
		}
		delay = 0
		if s.full() {
			s.log.Warn("redis: too many connections; refusing one", "peer", nc.RemoteAddr().String(), "max_conns", s.cfg.MaxConns)
			s.refuser.Refuse(nc, []byte(rTooManyConns))
			continue
		}
		s.serve(nc)
	}
}

// full reports whether the server has Config.MaxConns connections.
func (s *Server) full() bool {
	if s.cfg.MaxConns <= 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns) >= s.cfg.MaxConns
}

// clients counts the open connections (INFO).
func (s *Server) clients() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

func (s *Server) forget(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	if s.connsPeak.Due(len(s.conns)) {
		s.conns = peakmap.Rebuild(s.conns, &s.connsPeak)
	}
	s.mu.Unlock()
	s.cfg.Metrics.ConnClosed()
}

// Shutdown stops accepting, closes every connection and waits for the
// server's goroutines, or until ctx is done. Locks are not connections':
// they stay in the lock table.
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
		return fmt.Errorf("redis: shutdown: %w", ctx.Err())
	}
}

// loadedScript is a recognised script loaded by its text: its template,
// and the line of its first read of a key as a string (readLine).
type loadedScript struct {
	t    template
	line int
}

// script returns the template of the script named sha (lower case), known
// or loaded, and the line of its first string read.
func (s *Server) script(sha []byte) (template, int, bool) {
	if t, ok := knownScripts[string(sha)]; ok {
		return t, knownLines[string(sha)], true
	}
	s.scriptsMu.RLock()
	defer s.scriptsMu.RUnlock()
	l, ok := s.loaded[string(sha)]
	return l.t, l.line, ok
}

// load records a recognised script, body, under the SHA1 of its text and
// returns the line of its first string read.
func (s *Server) load(sha string, t template, body []byte) int {
	if _, ok := knownScripts[sha]; ok {
		return knownLines[sha]
	}
	line := readLine(body)
	s.scriptsMu.Lock()
	defer s.scriptsMu.Unlock()
	if len(s.loaded) < maxLoaded {
		s.loaded[sha] = loadedScript{t, line}
	}
	return line
}

// maxLoaded bounds the recognised scripts remembered by their text's SHA1
// (variants of the known ones); beyond it a variant still runs by EVAL.
const maxLoaded = 4096
