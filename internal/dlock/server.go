package dlock

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/latchd/latch"
	pb "github.com/latchd/latch/dlockpb"
	"github.com/latchd/latch/internal/frame"
	"github.com/latchd/latch/internal/metrics"
	"github.com/latchd/latch/internal/netserve"
)

// Server serves a latch.Service over the dlock protocol: its codec,
// handlers and error table; package netserve serves its connections.
// Create it with New, start it with Start (or Serve), stop it with
// Shutdown.
type Server struct {
	cfg Config
	svc latch.Service
	log *slog.Logger
	ns  *netserve.Server
	// exec is svc.Execution(), read once by New. When Replicated, the
	// version 3 requests that change the state are answered through the
	// session's callbacks (handle.go), so that the reader goes on while
	// they commit.
	exec latch.Execution

	// cmds are the metrics of each request type, by type; cmds[0]
	// (Invalid) also counts unknown types and frames that did not decode.
	cmds [pb.RequestType_Session + 1]*metrics.Command

	// refusal answers a connection over MaxConns.
	refusal []byte

	// tokens are the access tokens in force (Config.Tokens, SetTokens).
	tokens atomic.Pointer[[]netserve.Token]
}

// New returns a Server of svc with cfg, not serving yet. Its plain
// connections are served by event loops (Config.Loops, loop.go) when svc
// answers at once (latch.Inline), by a goroutine each otherwise.
func New(svc latch.Service, cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, svc: svc, log: log, exec: svc.Execution()}
	s.tokens.Store(&cfg.Tokens)
	for i := range s.cmds {
		s.cmds[i] = cfg.Metrics.Command(strings.ToLower(pb.RequestType(i).String()))
	}
	refusal, err := encodeRefusal(cfg.MaxConns)
	if err != nil {
		return nil, err
	}
	s.refusal = refusal
	loops := 0 // a request waits for its commit: a loop would make its other connections wait too
	if s.exec == latch.Inline {
		loops = netserve.DefaultLoops(cfg.Loops, runtime.GOMAXPROCS(0))
	}
	ns, err := netserve.New(s, cfg.Config, loops)
	if err != nil {
		return nil, err
	}
	s.ns = ns
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

// Refusal is the answer to a connection over Config.MaxConns.
func (s *Server) Refusal() []byte { return s.refusal }

// encodeRefusal returns the frame that answers a connection over max
// connections: one Response, version 2, request_id 0, status General,
// error_text "TooManyConnections: ...".
func encodeRefusal(max int) ([]byte, error) {
	resp := newResponse(0, time.Now(), false)
	setError(resp, fmt.Errorf("%w (at most %d)", errTooManyConns, max), false)
	buf, off := frame.Start(nil)
	buf, err := proto.MarshalOptions{}.MarshalAppend(buf, resp)
	if err == nil {
		err = frame.Finish(buf, off)
	}
	if err != nil {
		return nil, fmt.Errorf("dlock: encoding the refusal: %w", err)
	}
	return buf, nil
}

// Start listens on the configured address and serves in the background.
func (s *Server) Start() error { return s.ns.Start() }

// Serve serves the connections ln accepts, in the background, until
// Shutdown, which closes ln. It fails if the server already serves or was
// shut down.
func (s *Server) Serve(ln net.Listener) error { return s.ns.Serve(ln) }

// SetTokens replaces the access tokens (Config.Tokens; none: every
// request is served) for the requests read from now on, those of open
// connections included: a dlock request carries its token. On an invalid
// list (netserve.CheckTokens) the tokens in force stay.
func (s *Server) SetTokens(toks []netserve.Token) error {
	if err := netserve.CheckTokens(toks); err != nil {
		return fmt.Errorf("dlock: %w", err)
	}
	s.tokens.Store(&toks)
	return nil
}

// SetAllow replaces the networks served (Config.Allow) for the
// connections accepted from now on; open ones stay (netserve.Server.SetAllow).
func (s *Server) SetAllow(allow string) error { return s.ns.SetAllow(allow) }

// Addr returns the address the server listens on, or nil before it serves.
func (s *Server) Addr() net.Addr { return s.ns.Addr() }

// Shutdown stops the server: it closes the listener, stops reading
// requests, lets every connection answer what it has pending, and closes
// the connections. Waiting Locks end when the lock service shuts down
// (which the server does first) or, if it does not, when the connection's
// session is closed; either way they are answered before the connection
// closes. When ctx is done first, Shutdown closes every connection at once
// and returns ctx's error after their goroutines have ended.
func (s *Server) Shutdown(ctx context.Context) error { return s.ns.Shutdown(ctx) }
