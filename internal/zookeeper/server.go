package zookeeper

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/fsm"
	"github.com/latchd/latch/internal/jute"
	"github.com/latchd/latch/internal/metrics"
	"github.com/latchd/latch/internal/netserve"
	"github.com/latchd/latch/internal/node"
	"github.com/latchd/latch/internal/znode"
)

// Service is what the front end needs of a latch node: ZooKeeper sessions
// and the data tree (node.Node's ZooKeeper calls; see there for each
// one's contract).
type Service interface {
	ZOpen(timeout time.Duration, passwd [fsm.PasswordLen]byte) (latch.SessionID, int64, error)
	ZAttach(id latch.SessionID, passwd [fsm.PasswordLen]byte) (gen uint64, timeout time.Duration, zxid int64, err error)
	ZClose(id latch.SessionID, gen uint64) (int64, error)
	ZWriteFunc(id latch.SessionID, gen uint64, ops []znode.Op, multi bool, done func([]znode.Result, int64, error))
	ZTouch(ctx context.Context, ids []latch.SessionID, gens []uint64) error
	ZVouched() bool
	ZSync(ctx context.Context) (int64, error)
	ZReap() (int, error)
	ZRead(read func(t *znode.Tree)) error
	SetZListener(l node.ZListener)
	// ZMode names the node's part for the four-letter words:
	// standalone, leader or follower.
	ZMode() string
}

// Server serves a Service over ZooKeeper's protocol: the handshake,
// sessions, one FIFO of requests per connection, watches, and the
// four-letter words. Package netserve serves its connections, each on a
// goroutine of its own. Create it with New, start it with Start (or
// Serve), stop it with Shutdown.
type Server struct {
	cfg Config
	svc Service
	log *slog.Logger
	ns  *netserve.Server
	m   *metrics.Protocol
	// cmds are the metrics of each op (commandMetrics), when m is set.
	cmds map[jute.Op]*metrics.Command

	w watches // the watches of every connection; a node.ZListener

	// sessions maps a session to the connection that speaks for it on
	// this server, for the listener to close it when the session ends or
	// moves. touched holds the sessions that had traffic since the last
	// touch. Guarded by mu.
	mu       sync.Mutex
	sessions map[latch.SessionID]*conn
	touched  map[latch.SessionID]uint64 // session -> generation

	stats stats
	// unvouched is set while the node cannot vouch for its clients'
	// sessions (vouch).
	unvouched atomic.Bool
	stop      chan struct{}
	done      sync.WaitGroup
	down      atomic.Bool
}

// stats are the counters of the four-letter words.
type stats struct {
	received, sent atomic.Uint64
	latencyNs      atomic.Uint64 // the sum of requests' latencies
	latencyMax     atomic.Int64
}

// New returns a Server of svc with cfg, not serving yet.
func New(svc Service, cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		cfg:      cfg,
		svc:      svc,
		log:      log,
		sessions: make(map[latch.SessionID]*conn),
		touched:  make(map[latch.SessionID]uint64),
		stop:     make(chan struct{}),
	}
	s.w.init(s)
	if cfg.Metrics != nil {
		s.m = cfg.Metrics
		s.cmds = commandMetrics(s.m)
	}
	ns, err := netserve.New(s, cfg.Config, 0)
	if err != nil {
		return nil, err
	}
	s.ns = ns
	svc.SetZListener(&s.w)
	return s, nil
}

// Name names the protocol.
func (s *Server) Name() string { return "zookeeper" }

// Refusal is nil: a connection over MaxConns is closed without a word, as
// ZooKeeper closes one over maxClientCnxns.
func (s *Server) Refusal() []byte { return nil }

// Start listens on the configured address and serves in the background.
func (s *Server) Start() error {
	if err := s.ns.Start(); err != nil {
		return err
	}
	s.startTimers()
	return nil
}

// Serve serves the connections ln accepts, in the background.
func (s *Server) Serve(ln net.Listener) error {
	if err := s.ns.Serve(ln); err != nil {
		return err
	}
	s.startTimers()
	return nil
}

// SetAllow replaces the networks served (Config.Allow) for the
// connections accepted from now on; open ones stay (netserve.Server.SetAllow).
func (s *Server) SetAllow(allow string) error { return s.ns.SetAllow(allow) }

// Addr returns the address the server listens on, or nil.
func (s *Server) Addr() net.Addr { return s.ns.Addr() }

// Shutdown stops the server: it stops listening and closes every
// connection. The sessions live on in the state, until their timeouts
// lapse or their clients attach them elsewhere (or here, restarted).
func (s *Server) Shutdown(ctx context.Context) error {
	if s.down.CompareAndSwap(false, true) {
		close(s.stop)
	}
	err := s.ns.Shutdown(ctx)
	s.done.Wait()
	s.svc.SetZListener(nil)
	return err
}

// Watches returns how many watches the server's connections hold, a
// watch set by two connections counting twice (mntr's zk_watch_count).
func (s *Server) Watches() int { return s.w.count() }

// Stats returns the server's connection counters.
func (s *Server) Stats() netserve.Stats { return s.ns.Stats() }

// startTimers starts the touch and container loops, once.
func (s *Server) startTimers() {
	s.done.Add(1)
	go s.timers()
}

// reapEvery is how often empty containers are deleted, as ZooKeeper's
// container manager checks (znode.containerMaxAge... the tree decides
// which are due).
const reapEvery = 60 * time.Second

// timers touches the sessions that had traffic every TouchEvery, and
// reaps empty containers every reapEvery, until Shutdown.
func (s *Server) timers() {
	defer s.done.Done()
	touch := time.NewTicker(s.cfg.TouchEvery)
	defer touch.Stop()
	reap := time.NewTicker(reapEvery)
	defer reap.Stop()
	var ids []latch.SessionID
	var gens []uint64
	for {
		select {
		case <-s.stop:
			return
		case <-touch.C:
			if !s.vouch() {
				continue
			}
			ids, gens = s.touchTouched(ids[:0], gens[:0])
		case <-reap.C:
			if n, err := s.svc.ZReap(); err != nil {
				s.log.Debug("zookeeper: reap containers", "err", err)
			} else if n > 0 {
				s.log.Debug("zookeeper: containers reaped", "count", n)
			}
		}
	}
}

// vouch checks that the node can vouch for its clients' sessions
// (Service.ZVouched). While it cannot, the server closes every
// connection, and refuses new ones at their handshake, so that their
// clients try another node. It reports whether the node vouches.
func (s *Server) vouch() bool {
	ok := s.svc.ZVouched()
	if was := s.unvouched.Swap(!ok); !ok && !was {
		s.log.Warn("zookeeper: this node cannot commit: closing its ZooKeeper connections, for their clients to move")
	} else if ok && was {
		s.log.Info("zookeeper: this node commits again: serving ZooKeeper clients")
	}
	if !ok {
		s.ns.Range(func(nc *netserve.Conn) bool {
			nc.Close()
			return true
		})
	}
	return ok
}

// touchTouched touches the sessions that had traffic since the last time
// (their ids and gens appended to ids and gens, which it returns), waiting
// at most TouchEvery for the touch to apply. A connection records when
// the last touch of its session that applied was sent (conn.vouched): the
// session's timeout in the cluster runs from no earlier. A touch that does
// not apply in time (the node cannot commit: it has no leader, or it is
// cut off from its cluster) is tried again the next time, and the
// connection of every session whose liveness has not reached the cluster
// for half its timeout is closed: its client moves the session to another
// node before it lapses there, as it does when a ZooKeeper follower that
// lost its leader closes its clients' connections. Answering its pings
// here would let the session lapse, and its locks go to others, while the
// client believes all is well.
func (s *Server) touchTouched(ids []latch.SessionID, gens []uint64) ([]latch.SessionID, []uint64) {
	ids, gens = s.takeTouched(ids, gens)
	if len(ids) == 0 {
		return ids, gens
	}
	sent := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.TouchEvery)
	err := s.svc.ZTouch(ctx, ids, gens)
	cancel()
	if err == nil {
		s.mu.Lock()
		for i, id := range ids {
			if c := s.sessions[id]; c != nil && c.gen == gens[i] && sent.After(c.vouched) {
				c.vouched = sent
			}
		}
		s.mu.Unlock()
		return ids, gens
	}
	s.log.Debug("zookeeper: touch", "sessions", len(ids), "err", err)
	now := time.Now()
	var lapsing []*conn
	s.mu.Lock()
	for i, id := range ids {
		if _, ok := s.touched[id]; !ok {
			if c := s.sessions[id]; c != nil && c.gen == gens[i] {
				s.touched[id] = gens[i]
			}
		}
	}
	for _, c := range s.sessions {
		if now.Sub(c.vouched) > c.timeout/2 {
			lapsing = append(lapsing, c)
		}
	}
	s.mu.Unlock()
	for _, c := range lapsing {
		s.log.Debug("zookeeper: closing the connection of a session whose liveness this node cannot commit",
			"session", c.sess, "since", now.Sub(c.vouched), "timeout", c.timeout, "err", err)
		c.closeFor("its session's liveness was not committed for half its timeout")
	}
	return ids, gens
}

// touch records that session id (of generation gen) had traffic.
func (s *Server) touch(id latch.SessionID, gen uint64) {
	s.mu.Lock()
	s.touched[id] = gen
	s.mu.Unlock()
}

// takeTouched appends the sessions touched since the last call to ids and
// gens, and forgets them.
func (s *Server) takeTouched(ids []latch.SessionID, gens []uint64) ([]latch.SessionID, []uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, gen := range s.touched {
		ids = append(ids, id)
		gens = append(gens, gen)
	}
	clear(s.touched)
	return ids, gens
}

// bind makes c the connection of its session on this server; an older
// connection of it here is closed.
func (s *Server) bind(c *conn) {
	s.mu.Lock()
	old := s.sessions[c.sess]
	s.sessions[c.sess] = c
	s.touched[c.sess] = c.gen
	s.mu.Unlock()
	if old != nil && old != c {
		old.moved()
	}
}

// unbind forgets c as its session's connection, if it still is.
func (s *Server) unbind(c *conn) {
	s.mu.Lock()
	if s.sessions[c.sess] == c {
		delete(s.sessions, c.sess)
	}
	delete(s.touched, c.sess)
	s.mu.Unlock()
}

// sessionEnded closes the connection of session id here, if any: the
// session expired or was ended. Called under the node's lock.
func (s *Server) sessionEnded(id latch.SessionID) {
	s.mu.Lock()
	c := s.sessions[id]
	delete(s.sessions, id)
	delete(s.touched, id)
	s.mu.Unlock()
	if c != nil {
		c.expired()
	}
}

// sessionMoved closes the connection of session id here if it is of an
// older generation than gen. Called under the node's lock.
func (s *Server) sessionMoved(id latch.SessionID, gen uint64) {
	s.mu.Lock()
	c := s.sessions[id]
	if c != nil && c.gen < gen {
		delete(s.sessions, id)
		delete(s.touched, id)
	} else {
		c = nil
	}
	s.mu.Unlock()
	if c != nil {
		c.moved()
	}
}

// version is the version the server reports.
func (s *Server) version() string {
	v := s.cfg.Version
	if v == "" {
		v = "dev"
	}
	return fmt.Sprintf("3.8.0-latch-%s", v)
}
