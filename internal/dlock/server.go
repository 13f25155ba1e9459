package dlock

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/latchd/latch"
	pb "github.com/latchd/latch/dlockpb"
	"github.com/latchd/latch/internal/frame"
	"github.com/latchd/latch/internal/metrics"
	"github.com/latchd/latch/internal/peakmap"
	"github.com/latchd/latch/internal/refuse"
)

// Server serves a latch.Service over the dlock protocol. Create it with New,
// start it with Start (or Serve), stop it with Shutdown.
type Server struct {
	cfg Config
	svc latch.Service
	log *slog.Logger
	// exec is svc.Execution(), read once by New. When Replicated, the
	// version 3 requests that change the state are answered through the
	// session's callbacks (handle.go), so that the reader goes on while
	// they commit.
	exec latch.Execution

	// draining is set when Shutdown begins: readers stop, and connections
	// close once their answers are written.
	draining atomic.Bool

	// cmds are the metrics of each request type, by type; cmds[0]
	// (Invalid) also counts unknown types and frames that did not decode.
	cmds [pb.RequestType_Session + 1]*metrics.Command

	// refuser answers the connections over MaxConns.
	refuser *refuse.Refuser

	mu        sync.Mutex
	ln        net.Listener
	conns     map[*conn]struct{}
	connsPeak peakmap.Peak   // conns is rebuilt when it drains (peakmap)
	wg        sync.WaitGroup // the accept loop and every connection
}

// New returns a Server of svc with cfg, not serving yet.
func New(svc latch.Service, cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, svc: svc, log: log, exec: svc.Execution(), conns: make(map[*conn]struct{})}
	s.refuser = refuse.New(&s.wg)
	for i := range s.cmds {
		s.cmds[i] = cfg.Metrics.Command(strings.ToLower(pb.RequestType(i).String()))
	}
	return s, nil
}

// command returns the metrics of a request type.
func (s *Server) command(t pb.RequestType) *metrics.Command {
	if t < 0 || int(t) >= len(s.cmds) {
		t = pb.RequestType_Invalid
	}
	return s.cmds[t]
}

// Name names the front end.
func (s *Server) Name() string { return "dlock" }

// Start listens on the configured address and serves in the background.
func (s *Server) Start() error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("dlock: %w", err)
	}
	if s.cfg.TLS != nil {
		ln = tls.NewListener(ln, s.cfg.TLS)
	}
	if err := s.Serve(ln); err != nil {
		ln.Close()
		return err
	}
	s.log.Info("listening", "component", "dlock", "addr", ln.Addr().String(), "tls", s.cfg.TLS != nil)
	return nil
}

// Serve serves the connections ln accepts, in the background, until
// Shutdown, which closes ln. It fails if the server already serves or was
// shut down.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		return errors.New("dlock: already serving")
	}
	if s.draining.Load() {
		return errors.New("dlock: server shut down")
	}
	s.ln = ln
	s.wg.Add(1)
	go s.accept(ln)
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

// accept is the accept loop.
func (s *Server) accept(ln net.Listener) {
	defer s.wg.Done()
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.draining.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: wait and retry, as
			// net/http does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.log.Error("dlock: accept failed; retrying", "err", err, "in", backoff)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		s.mu.Lock()
		if s.draining.Load() {
			s.mu.Unlock()
			nc.Close()
			return
		}
		if s.cfg.MaxConns > 0 && len(s.conns) >= s.cfg.MaxConns {
			s.mu.Unlock()
			s.refuse(nc)
			continue
		}
		c := newConn(s, nc)
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		s.cfg.Metrics.ConnOpened()
		s.log.Debug("dlock: connection opened", "peer", c.peer)
		go func() {
			defer s.wg.Done()
			c.serve()
		}()
	}
}

// refuse answers a connection over Config.MaxConns with errTooManyConns
// and closes it, in the background (package refuse).
func (s *Server) refuse(nc net.Conn) {
	s.log.Warn("dlock: too many connections; refusing one", "peer", nc.RemoteAddr().String(), "max_conns", s.cfg.MaxConns)
	resp := newResponse(0, time.Now(), false)
	setError(resp, fmt.Errorf("%w (at most %d)", errTooManyConns, s.cfg.MaxConns), false)
	buf, off := frame.Start(nil)
	buf, err := proto.MarshalOptions{}.MarshalAppend(buf, resp)
	if err == nil {
		err = frame.Finish(buf, off)
	}
	if err != nil {
		nc.Close()
		return
	}
	s.refuser.Refuse(nc, buf)
}

// forget removes a closed connection.
func (s *Server) forget(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	if s.connsPeak.Due(len(s.conns)) {
		s.conns = peakmap.Rebuild(s.conns, &s.connsPeak)
	}
	s.mu.Unlock()
	s.cfg.Metrics.ConnClosed()
}

// Shutdown stops the server: it closes the listener, stops reading
// requests, lets every connection answer what it has pending, and closes
// the connections. Waiting Locks end when the lock service shuts down
// (which the server does first) or, if it does not, when the connection's
// session is closed; either way they are answered before the connection
// closes. When ctx is done first, Shutdown closes every connection at once
// and returns ctx.Err() after their goroutines have ended.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.draining.Store(true)
	if s.ln != nil {
		s.ln.Close()
	}
	for c := range s.conns {
		c.stopReading()
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
	}
	s.mu.Lock()
	for c := range s.conns {
		c.nc.Close()
	}
	s.mu.Unlock()
	<-done
	return ctx.Err()
}
