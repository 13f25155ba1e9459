package netserve

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/latchd/latch/internal/evloop"
	"github.com/latchd/latch/internal/peakmap"
	"github.com/latchd/latch/internal/refuse"
)

// A Protocol is what a front end brings to a Server: its codec, its
// handlers and its error table, behind one method per way a connection
// can be served.
type Protocol interface {
	// Name names the protocol in logs and errors, for example "memcache".
	Name() string
	// Refusal is what a connection over Config.MaxConns is told before it
	// is closed, in the protocol's own terms (memcached's SERVER_ERROR,
	// Redis's -ERR); nil closes it without a word.
	Refusal() []byte
	// ServeConn serves c on the calling goroutine, a goroutine of its own,
	// until the connection ends (through c's read path: Conn.Next). The
	// server closes the connection once ServeConn returns.
	ServeConn(c *Conn)
}

// A LoopProtocol is a Protocol whose connections an event loop can serve:
// every request is answered at once, without waiting on anything (see
// package evloop). The server gives it the plain TCP connections when it
// runs loops (Config.Loops); TLS connections still go to ServeConn.
type LoopProtocol interface {
	Protocol
	// LoopConn returns the handler of c, which an event loop serves from
	// now on. Its Closed is called once, when the connection has ended.
	LoopConn(c *Conn) evloop.Handler
}

// ErrServerClosed is returned by Serve and Start after Shutdown, and by a
// draining connection's reads once Shutdown has begun (Hooks.Drain).
var ErrServerClosed = errors.New("netserve: server closed")

// Refusal reasons, as counted (Stats, and the metrics' reason label).
const (
	ReasonMaxConns = "max_conns" // over Config.MaxConns
	ReasonAllow    = "allow"     // from outside Config.Allow
)

// Stats are a server's connection counters.
type Stats struct {
	// Accepted counts the connections served since the server started;
	// Open those open now.
	Accepted uint64
	Open     int
	// Looped counts the open connections event loops serve.
	Looped int
	// RefusedMaxConns and RefusedAllow count the connections turned away,
	// by reason.
	RefusedMaxConns uint64
	RefusedAllow    uint64
}

// Server serves one Protocol's connections. Create it with New, start it
// with Start (or Serve), stop it with Shutdown.
type Server struct {
	cfg    Config
	proto  Protocol
	loopP  LoopProtocol // proto, when it can be served by loops and loops run
	nloops int          // the loops to start
	name   string
	// allow holds the networks served (Config.Allow, SetAllow); nil or
	// empty: all.
	allow atomic.Pointer[[]netip.Prefix]
	log   *slog.Logger

	refuser *refuse.Refuser

	accepted, refusedMax, refusedAllow atomic.Uint64
	draining                           atomic.Bool

	mu        sync.Mutex
	ln        net.Listener
	conns     map[*Conn]struct{}
	connsPeak peakmap.Peak
	down      bool
	loops     []*evloop.Loop
	next      int // the loop of the next connection (accept's)
	wg        sync.WaitGroup
}

// New returns a server of p with cfg, not serving yet. loops is how many
// event loops to run for a LoopProtocol (DefaultLoops(cfg.Loops, ...), or 0
// where the protocol's requests may wait); it returns Validate's error for
// an invalid cfg.
func New(p Protocol, cfg Config, loops int) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", p.Name(), err)
	}
	allow, _ := ParseNetworks(cfg.Allow) // Validate parsed it
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		cfg:   cfg,
		proto: p,
		name:  p.Name(),
		log:   log,
		conns: make(map[*Conn]struct{}),
	}
	s.allow.Store(&allow)
	s.refuser = refuse.New(&s.wg)
	if lp, ok := p.(LoopProtocol); ok && loops > 0 {
		s.loopP, s.nloops = lp, loops
	}
	return s, nil
}

// startLoops starts the event loops of a LoopProtocol, where the system has
// them: Config.Loops of them, or none (goroutines serve every connection).
func (s *Server) startLoops() {
	if s.loopP == nil {
		return
	}
	lp := s.loopP
	s.loopP = nil
	cfg := evloop.Config{
		IdleTimeout:  s.cfg.IdleTimeout,
		ReadTimeout:  s.cfg.ReadTimeout,
		WriteTimeout: s.cfg.WriteTimeout,
	}
	if m, ok := lp.(interface{ MaxInput() int }); ok {
		cfg.MaxInput = m.MaxInput()
	}
	for range s.nloops {
		l, err := evloop.New(cfg)
		if err != nil {
			s.log.Info(s.name+": a goroutine per connection", "reason", err)
			break
		}
		s.loops = append(s.loops, l)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			l.Run()
		}()
	}
	if len(s.loops) > 0 {
		s.loopP = lp
	}
}

// Name names the server's protocol.
func (s *Server) Name() string { return s.name }

// Loops returns the number of event loops the server runs.
func (s *Server) Loops() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.loops)
}

// Start listens on the configured address and serves in the background.
func (s *Server) Start() error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("%s: %w", s.name, err)
	}
	if err := s.Serve(ln); err != nil {
		ln.Close()
		return err
	}
	return nil
}

// Serve serves the connections ln accepts, in the background, until
// Shutdown, which closes ln. It fails if the server already serves or was
// shut down.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.down:
		return fmt.Errorf("%s: %w", s.name, ErrServerClosed)
	case s.ln != nil:
		return fmt.Errorf("%s: already serving", s.name)
	}
	s.ln = ln
	s.startLoops()
	s.wg.Add(1)
	go s.accept(ln)
	s.log.Info("listening", "component", s.name, "addr", ln.Addr().String(), "tls", s.cfg.TLS != nil, "loops", len(s.loops))
	return nil
}

// Addr returns the address the server listens on, or nil before it serves.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// SetAllow replaces the networks served (Config.Allow, in its syntax;
// empty: all) for the connections accepted from now on. Connections open
// stay open. On a syntax error the networks in force stay.
func (s *Server) SetAllow(allow string) error {
	nets, err := ParseNetworks(allow)
	if err != nil {
		return fmt.Errorf("%s: allow %q: %w", s.name, allow, err)
	}
	s.allow.Store(&nets)
	return nil
}

// Stats returns the server's connection counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	open, loops := len(s.conns), s.loops
	s.mu.Unlock()
	looped := 0
	for _, l := range loops {
		looped += l.Len()
	}
	return Stats{
		Accepted:        s.accepted.Load(),
		Open:            open,
		Looped:          looped,
		RefusedMaxConns: s.refusedMax.Load(),
		RefusedAllow:    s.refusedAllow.Load(),
	}
}

// Range calls f for each open connection, until f returns false. The
// connections are those open when Range began; f must not call the server.
func (s *Server) Range(f func(*Conn) bool) {
	s.mu.Lock()
	conns := make([]*Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		if !f(c) {
			return
		}
	}
}

// accept is the accept loop: the only one of every front end.
func (s *Server) accept(ln net.Listener) {
	defer s.wg.Done()
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.draining.Load() {
				return
			}
			if errors.Is(err, net.ErrClosed) {
				s.log.Error(s.name+": listener closed", "err", err)
				return
			}
			// Out of file descriptors and the like: back off and retry,
			// as net/http does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.log.Warn(s.name+": accept failed; retrying", "err", err, "in", backoff)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		if allow := *s.allow.Load(); len(allow) > 0 && !Allowed(nc.RemoteAddr(), allow) {
			s.refusedAllow.Add(1)
			s.cfg.Metrics.ConnRefused(ReasonAllow)
			s.log.Debug(s.name+": connection from outside "+s.name+"-allow closed", "peer", nc.RemoteAddr().String())
			nc.Close()
			continue
		}
		s.serve(nc)
	}
}

// serve serves a new connection: refused over the limit, on an event loop
// when one runs and nc is a plain socket, on a goroutine of its own
// otherwise.
func (s *Server) serve(nc net.Conn) {
	_, plain := nc.(syscall.Conn)
	if s.cfg.TLS != nil {
		nc = tls.Server(nc, s.cfg.TLS)
		plain = false
	}
	looped := plain && s.loopP != nil
	c := &Conn{srv: s, peer: nc.RemoteAddr()}
	if !looped {
		c.nc = nc // before track: Shutdown may close it from then on
	}
	switch err := s.track(c); {
	case errors.Is(err, errFull):
		s.refusedMax.Add(1)
		s.cfg.Metrics.ConnRefused(ReasonMaxConns)
		s.log.Warn(s.name+": too many connections; refusing one", "peer", c.peer.String(), "max_conns", s.cfg.MaxConns)
		if msg := s.proto.Refusal(); msg != nil {
			s.refuser.Refuse(nc, msg)
		} else {
			nc.Close()
		}
		return
	case err != nil:
		nc.Close()
		return
	}
	if looped {
		l := s.loops[s.next%len(s.loops)]
		s.next++
		err := l.Add(nc, &loopHandler{c: c, h: s.loopP.LoopConn(c)})
		if err == nil {
			return
		}
		s.forget(c)
		nc.Close() // already closed, unless evloop.ErrNotSocket
		if !errors.Is(err, evloop.ErrClosed) {
			s.log.Warn(s.name+": serving a connection", "peer", c.peer.String(), "err", err)
		}
		return
	}
	c.init(nc)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer s.forget(c)
		defer c.finish()
		s.proto.ServeConn(c)
	}()
}

var errFull = errors.New("too many connections")

// ServeNetConn serves nc, a connection that came from no listener of the
// server (one end of a pipe in a test, an inherited socket), as if it had
// been accepted: counted, limited and shut down like the others, on the
// calling goroutine, with the protocol's ServeConn. It returns when the
// connection has ended, or at once with an error if the server is full or
// shut down.
func (s *Server) ServeNetConn(nc net.Conn) error {
	if s.cfg.TLS != nil {
		nc = tls.Server(nc, s.cfg.TLS)
	}
	c := &Conn{srv: s, peer: nc.RemoteAddr(), nc: nc}
	if err := s.track(c); err != nil {
		nc.Close()
		return fmt.Errorf("%s: %w", s.name, err)
	}
	c.init(nc)
	s.wg.Add(1)
	defer s.wg.Done()
	defer s.forget(c)
	defer c.finish()
	s.proto.ServeConn(c)
	return nil
}

// track adds c to the open connections, unless the server is full or
// shutting down. Only the accept loop adds connections, so a full server
// stays full until it adds one.
func (s *Server) track(c *Conn) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.down:
		return ErrServerClosed
	case s.cfg.MaxConns > 0 && len(s.conns) >= s.cfg.MaxConns:
		return errFull
	}
	s.conns[c] = struct{}{}
	s.accepted.Add(1)
	s.cfg.Metrics.ConnOpened()
	return nil
}

// forget removes an ended connection.
func (s *Server) forget(c *Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	if s.connsPeak.Due(len(s.conns)) {
		s.conns = peakmap.Rebuild(s.conns, &s.connsPeak)
	}
	s.mu.Unlock()
	s.cfg.Metrics.ConnClosed()
}

// Shutdown stops the server: it closes the listener, closes the event
// loops' connections, and ends every other connection: one whose protocol
// drains (Hooks.Drain) stops reading and ends once it has answered what
// it has pending; any other is closed at once. A loop's connection that
// drains is finished first (Hooks.Finish), and its loop then writes what
// it sent as far as the socket takes it at once. It returns when every
// goroutine of the server has ended. When ctx is done first, it closes
// every connection left and returns ctx's error once their goroutines have
// ended.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.down {
		s.mu.Unlock()
		return nil
	}
	s.down = true
	s.draining.Store(true)
	if s.ln != nil {
		s.ln.Close()
	}
	var finishing sync.WaitGroup
	for c := range s.conns {
		c.shutdown(&finishing)
	}
	s.mu.Unlock()
	closeLoops := func() {
		for _, l := range s.loops {
			l.Close()
		}
	}
	finished := make(chan struct{})
	go func() {
		finishing.Wait()
		closeLoops()
		close(finished)
	}()
	done := make(chan struct{})
	go func() {
		<-finished
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	closeLoops()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	<-done
	return fmt.Errorf("%s: shutdown: %w", s.name, ctx.Err())
}

// loopHandler is a loop connection's handler: the protocol's, and the
// server's tracking when it ends.
type loopHandler struct {
	c *Conn
	h evloop.Handler
}

func (l *loopHandler) Input(in, out []byte) ([]byte, int, bool) { return l.h.Input(in, out) }

func (l *loopHandler) Closed(err error) {
	l.h.Closed(err)
	l.c.srv.forget(l.c)
}
