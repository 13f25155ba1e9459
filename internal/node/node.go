package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/cache"
	"github.com/latchd/latch/internal/engine"
	"github.com/latchd/latch/internal/fsm"
	"github.com/latchd/latch/internal/peakmap"
	"github.com/latchd/latch/internal/replica"
	"github.com/latchd/latch/internal/znode"
	"github.com/latchd/latch/internal/zset"
)

// Config configures a Node. Start from DefaultConfig; the zero value is
// valid too, with no limits. The toml tags name the settings of the
// configuration file's [lock] table (internal/config); the fields tagged
// "-" are set by the program.
type Config struct {
	// MaxKeys limits the keys of one request; 0 means no limit.
	MaxKeys int `toml:"max-keys"`
	// MaxWaitersPerKey and MaxWaiters limit the requests waiting on one
	// key and in all; 0 means no limit (for MaxWaitersPerKey:
	// engine.MaxQueue, its most). A request that would wait beyond them
	// fails with latch.ErrTooManyWaiters.
	MaxWaitersPerKey int `toml:"max-waiters-per-key"`
	MaxWaiters       int `toml:"max-waiters"`
	// LockDelay is the lock-delay of sessions whose options set none
	// (latch.SessionOptions.LockDelay == 0). A session that asks for a
	// negative LockDelay gets none.
	LockDelay time.Duration `toml:"lock-delay"`
	// FirstToken seeds the fencing-token counter of a new state. 0: the
	// start time (UnixNano), so that tokens keep growing across restarts.
	FirstToken latch.Token `toml:"-"`
	// Cache configures the memcached item cache; the zero value means
	// cache.DefaultConfig().
	Cache cache.Config `toml:"-"`
	// ZNode limits the ZooKeeper data tree; the zero value means
	// znode's defaults.
	ZNode znode.Config `toml:"-"`
	// ZSet limits the Redis front end's sorted sets; the zero value means
	// no limit.
	ZSet zset.Limits `toml:"-"`
	// Logger receives admin actions (info) and expiries (debug). nil: discard.
	Logger *slog.Logger `toml:"-"`
	// Observer, when set, is told about sessions, grants, releases,
	// timeouts and expiries, for metrics. nil: nobody is.
	Observer Observer `toml:"-"`

	// Replicator, when set, makes the node's replicator over the node's
	// state machine (raftrep's, for a durable single node or a cluster
	// member); New calls it once. nil: replica.Local, the in-memory single
	// node.
	Replicator func(replica.StateMachine) (replica.Replicator, error) `toml:"-"`
	// NodeID names the node in its cluster; it is required with
	// Replicator. The node owns its connection-bound sessions under this
	// name (see cluster.go).
	NodeID string `toml:"-"`
	// NodeTTL is how long a cluster node's connection-bound sessions
	// outlive its last committed heartbeat. 0: 10 s.
	NodeTTL time.Duration `toml:"-"`
}

// DefaultConfig returns the limits of latch serve: 1000 keys per request,
// 10,000 waiters per key and 100,000 in all, no lock-delay, and the
// default item cache.
func DefaultConfig() Config {
	return Config{
		MaxKeys:          1000,
		MaxWaitersPerKey: 10_000,
		MaxWaiters:       100_000,
	}
}

// Validate reports every invalid setting of c, joined into one error. Each
// names its field.
func (c Config) Validate() error {
	var errs []error
	if c.MaxKeys < 0 {
		errs = append(errs, fmt.Errorf("node: invalid MaxKeys %d: must not be negative (0: no limit)", c.MaxKeys))
	}
	if n := c.MaxWaitersPerKey; n < 0 || n > engine.MaxQueue {
		errs = append(errs, fmt.Errorf("node: invalid MaxWaitersPerKey %d: want 0 to %d (0: %[2]d)", n, engine.MaxQueue))
	}
	if c.MaxWaiters < 0 {
		errs = append(errs, fmt.Errorf("node: invalid MaxWaiters %d: must not be negative (0: no limit)", c.MaxWaiters))
	}
	if c.LockDelay < 0 {
		errs = append(errs, fmt.Errorf("node: invalid LockDelay %v: must not be negative", c.LockDelay))
	}
	if c.Replicator != nil && c.NodeID == "" {
		errs = append(errs, errors.New("node: a cluster node (Replicator set) needs a NodeID"))
	}
	if c.NodeTTL < 0 {
		errs = append(errs, fmt.Errorf("node: invalid NodeTTL %v: must not be negative (0: 10s)", c.NodeTTL))
	}
	if c.Cache != (cache.Config{}) {
		if err := c.Cache.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("node: invalid Cache: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Node is one node's latch.Service: an in-memory single node, a durable
// single node or a cluster member, as its Replicator makes it. It holds
// the replicated state (internal/fsm) behind one mutex, changed only by
// the commands it proposes through its Replicator, with sessions, parked
// waiters and one timer. Create it with New and stop it with Shutdown. It
// is safe for concurrent use.
type Node struct {
	mu  sync.Mutex
	st  *fsm.State // guarded by mu; changed only by Apply
	rep replica.Replicator

	start   time.Time // carries the monotonic reading now() is taken from
	startNs int64
	cfg     Config
	log     *slog.Logger
	obs     Observer

	// origin names this node's commands and seq numbers them (fsm.Command).
	origin, seq uint64
	// batch is the batch being proposed; guarded by mu.
	batch fsm.Batch
	// items is the batch of item commands (Do, SweepItems), apart from
	// batch so that it holds nothing else: a slot is reused by setting
	// only the fields item commands read (addItem), without copying or
	// clearing a whole fsm.Command per request. Guarded by mu.
	items fsm.Batch
	// parked holds the requests that may wait, registered before their
	// OpAcquire is proposed, in Seq order: Apply moves one to waiters when
	// its command queues it. Guarded by mu.
	parked []parking
	// drops and victims are scratch, for the Observer's Released and for
	// eviction plans; guarded by mu.
	drops   []Drop
	victims []cache.Victim

	sessions map[latch.SessionID]*session // this node's live sessions; guarded by mu
	// orphans are sessions a cluster node opened for callers that had
	// stopped waiting (letGo): the next heartbeat ends them, as nobody
	// will, and one bound to the node would live as long as it does.
	// Guarded by mu.
	orphans []latch.SessionID
	waiters map[engine.WaiterID]*waiter // parked requests; guarded by mu
	// bySeq finds the lock-table id of a cluster node's parked AcquireFunc
	// request by its seq (its latch.WaitID). Guarded by mu.
	bySeq map[uint64]engine.WaiterID
	// The peaks of sessions and waiters, which are rebuilt when they
	// drain far below them (peakmap). Guarded by mu.
	sessionsPeak, waitersPeak peakmap.Peak

	timer    *time.Timer // created on first use; guarded by mu
	armed    int64       // the instant timer is armed for, when armedOK
	armedOK  bool
	shutdown bool // guarded by mu

	// calls holds the callers waiting for their commands to be applied,
	// by Seq (propose.go); guarded by mu.
	calls map[uint64]*proposal
	// A cluster node's heartbeat (cluster.go): the timer, the heartbeats
	// proposed and not yet applied, and when the last one applied was
	// sent. Guarded by mu.
	beatTimer *time.Timer
	beats     []beat
	vouched   time.Time

	// A replicated node serves the reads of its clients (Get, OwnedGet)
	// from its own state once that holds what its cluster committed
	// before it started: when a command it proposed after starting
	// (seq readyFrom or later) is applied (cluster.go). readable is
	// closed then, or when the node lets go of its clients first
	// (readyErr is set then, until the command is applied). Guarded by mu
	// but readable, which readers wait on without it.
	readable  chan struct{}
	readyFrom uint64
	isReady   atomic.Bool // set under mu; read without it by awaitReady
	readyErr  error

	// exec is how the node answers (Execution): Inline with
	// replica.Local, which applies in the proposer's goroutine;
	// Replicated with Config.Replicator's. Set by New.
	exec latch.Execution
	// reports runs the done functions of AcquireFunc requests that a
	// cluster replicator's goroutine ended; nil with replica.Local.
	reports *reporter

	pool     sync.Pool // of *waiter; per node, so that no channel crosses a synctest bubble
	callPool sync.Pool // of *proposal, likewise

	// ready holds the ends of AcquireFunc requests that dispatch decided,
	// for unlock to report once mu is released. Guarded by mu.
	ready []ended

	// The ZooKeeper front end's (zookeeper.go): its listener, scratch for
	// the tree's events and ended sessions, and the encoding of znode
	// operations being proposed. Guarded by mu.
	zl     ZListener
	zevs   []znode.Event
	zended []latch.SessionID
	zbuf   []byte
}

// ended is what unlock reports once mu is released: the end r of an
// AcquireFunc request w, or the result of a proposal whose caller did not
// wait (p, proposeFunc).
type ended struct {
	w *waiter
	r result
	p *proposal
}

// report calls the function that waits for e. Called without mu.
func (n *Node) report(e ended) {
	if cl := e.p; cl != nil {
		done, grant, result, r := cl.done, cl.grant, cl.result, cl.r
		cl.done, cl.grant, cl.result, cl.r = nil, nil, nil, fsm.Result{}
		n.callPool.Put(cl)
		switch {
		case result != nil:
			result(r)
		case grant == nil:
			done(r.Err)
		case r.Err != nil:
			grant(latch.Grant{}, r.Err)
		default:
			grant(latch.Grant{Token: r.Token, Expires: toTime(r.Expires)}, nil)
		}
		return
	}
	done := e.w.done
	g, err := n.woken(e.w, e.r)
	done(g, err)
}

var _ latch.Service = (*Node)(nil)

// localOrigin is the Origin of a Local node's commands: it is the only proposer.
const localOrigin = 1

// StateConfig is the configuration of the replicated state of a node
// configured by cfg: what New builds its state with, and what a tool that
// replays a node's log outside the node (raftrep.Recover) must build it
// with to get the same state.
func StateConfig(cfg Config) fsm.Config {
	if cfg.Cache == (cache.Config{}) {
		cfg.Cache = cache.DefaultConfig()
	}
	return fsm.Config{
		Engine: engine.Config{
			MaxKeys:          cfg.MaxKeys,
			MaxWaitersPerKey: cfg.MaxWaitersPerKey,
			MaxWaiters:       cfg.MaxWaiters,
			RecordDrops:      cfg.Observer != nil,
		},
		Cache: cfg.Cache,
		ZNode: cfg.ZNode,
		ZSet:  cfg.ZSet,
	}
}

// New returns a running Node with an empty state, replicated by nothing
// but itself (replica.Local), or by the replicator cfg.Replicator makes,
// which may restore the state from its log before New returns. It returns
// Validate's error for an invalid cfg.
func New(cfg Config) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Cache == (cache.Config{}) {
		cfg.Cache = cache.DefaultConfig()
	}
	if cfg.NodeTTL <= 0 {
		cfg.NodeTTL = defaultNodeTTL
	}
	st, err := fsm.New(StateConfig(cfg))
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	start := time.Now()
	n := &Node{
		st:       st,
		start:    start,
		startNs:  start.UnixNano(),
		cfg:      cfg,
		log:      cfg.Logger,
		obs:      cfg.Observer,
		origin:   localOrigin,
		sessions: make(map[latch.SessionID]*session),
		waiters:  make(map[engine.WaiterID]*waiter),
		calls:    make(map[uint64]*proposal),
		bySeq:    make(map[uint64]engine.WaiterID),
		readable: make(chan struct{}),
	}
	if n.log == nil {
		n.log = slog.New(slog.DiscardHandler)
	}
	tok := cfg.FirstToken
	if tok == 0 {
		tok = latch.Token(n.startNs)
	}
	if cfg.Replicator == nil {
		n.rep = replica.NewLocal(machine{n})
		n.isReady.Store(true)
		close(n.readable)
		n.mu.Lock()
		c := n.command(fsm.OpSeed)
		c.Token = tok
		n.propose()
		n.unlock()
		return n, nil
	}
	// A cluster node's commands are told apart from those of its other
	// incarnations by a random origin (the sequence numbers start again).
	for n.origin <= localOrigin {
		n.origin = rand.Uint64()
	}
	n.exec = latch.Replicated
	n.reports = newReporter(n)
	rep, err := cfg.Replicator(machine{n})
	if err != nil {
		n.reports.stop()
		return nil, fmt.Errorf("node: %w", err)
	}
	n.mu.Lock()
	n.rep = rep
	n.startCluster(tok)
	n.unlock()
	return n, nil
}

// Execution reports how the node answers its sessions' calls; see
// latch.Execution. A node with replica.Local (no Config.Replicator)
// answers inline; a node with a replicator, durable or in a cluster,
// answers once a change is applied from its log, which the replicator's
// goroutine does: replicated.
func (n *Node) Execution() latch.Execution { return n.exec }

// now is the node's clock, which it stamps into the commands it proposes:
// the replicator's (replica.Local: wall-clock nanoseconds at start plus
// the monotonic time since).
func (n *Node) now() int64 { return n.rep.Now() }

// toTime converts an engine instant to a time; 0 (none) gives the zero time.
func toTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// OpenSession starts a session. It fails with latch.ErrShutdown once
// Shutdown has begun.
func (n *Node) OpenSession(opts latch.SessionOptions) (latch.Session, error) {
	ttl, delay := opts.TTL, opts.LockDelay
	switch {
	case delay == 0:
		delay = n.cfg.LockDelay
	case delay < 0:
		delay = 0
	}
	if ttl < 0 {
		return nil, fmt.Errorf("open session: negative TTL %v: %w", ttl, latch.ErrInvalidRequest)
	}
	n.mu.Lock()
	defer n.unlock()
	if n.shutdown {
		return nil, fmt.Errorf("open session: %w", latch.ErrShutdown)
	}
	proto := NoProto
	if n.obs != nil {
		proto = n.obs.SessionOpened(opts.Protocol)
	}
	c := n.command(fsm.OpOpenSession)
	c.TTL, c.LockDelay = ttl, delay
	if n.cfg.NodeID != "" && ttl == 0 {
		// Bound to its connection: it lives while this node does.
		c.TTL, c.Key = n.cfg.NodeTTL, []byte(n.cfg.NodeID)
	}
	r := n.propose()
	if r.Err != nil {
		if n.obs != nil {
			n.obs.SessionEnded(proto)
		}
		return nil, fmt.Errorf("open session: %w", r.Err)
	}
	s := &session{n: n, id: r.Session, opts: opts, proto: proto, done: make(chan struct{})}
	n.sessions[s.id] = s
	return s, nil
}

// ResumeSession takes over session id on this node; see latch.Service.
func (n *Node) ResumeSession(id latch.SessionID, opts latch.SessionOptions) (latch.Session, error) {
	n.mu.Lock()
	defer n.unlock()
	if n.shutdown {
		if n.cfg.Replicator != nil {
			// The session may live on: not this node's to answer for.
			return nil, fmt.Errorf("resume session %d: this node is shutting down; resume it on another node: %w", id, latch.ErrUnavailable)
		}
		return nil, fmt.Errorf("resume session %d: %w", id, latch.ErrShutdown)
	}
	proto := NoProto
	if n.obs != nil {
		proto = n.obs.SessionOpened(opts.Protocol)
	}
	c := n.command(fsm.OpResume)
	c.Session = id
	r := n.propose()
	if r.Err != nil {
		if n.obs != nil {
			n.obs.SessionEnded(proto)
		}
		return nil, fmt.Errorf("resume session %d: %w", id, r.Err)
	}
	if old := n.sessions[id]; old != nil {
		// Its old connection was on this node: that record lets go of it
		// without ending it.
		old.moved, old.closing = true, true
		n.endSession(old, latch.ErrSessionEnded)
	}
	st, _ := n.st.Engine().Session(id)
	opts.TTL = st.TTL
	s := &session{n: n, id: id, opts: opts, proto: proto, gen: uint64(r.Count), done: make(chan struct{})}
	n.sessions[id] = s
	n.log.Info("node: session resumed", "session", id, "generation", r.Count, "protocol", opts.Protocol, "peer", opts.Peer)
	return s, nil
}

// Shutdown stops the node: it refuses new sessions (latch.ErrShutdown),
// answers every parked request with latch.ErrShutdown, ends every session
// of its own (closing its Done channel) and stops the timer. A replicated
// node (a cluster's, or a durable one) ends only its sessions bound to
// connections in the lock table: a session with a TTL lives on there, so
// this node lets go of it as letGo does, its parked requests and later
// calls failing with an error that wraps latch.ErrUnavailable alone
// (shutdownErr), for its client to resume it on another node (or on this
// one restarted); ResumeSession then fails likewise. The proposals of
// the last tick, the withdrawals and the ends wait for their commit at
// most until ctx is done (a replicated node that cannot commit gives up
// then, and its connection-bound sessions end a node TTL later, as a dead
// node's do); it returns nil. Shutdown is idempotent. The admin view
// still works afterwards and shows what was left (leased locks), frozen
// at the instant of the shutdown.
//
// Parked requests are withdrawn before any session ends, newest first: a
// request is then always the last of every queue it is in, so withdrawing it
// makes nobody grantable, and no lock released by an ending session is
// handed to a request that is about to be told the node shut down.
func (n *Node) Shutdown(ctx context.Context) error {
	if !n.shutdownLocked(ctx) {
		return nil
	}
	// The replicator's goroutines may be waiting for mu: close it without.
	_ = n.rep.Close()
	n.mu.Lock()
	n.giveUp("shut down") // callers still waiting will wait for nothing
	n.unlock()
	if n.reports != nil {
		n.reports.stop() // after unlock queued the last ends
	}
	return nil
}

// shutdownLocked is Shutdown but for closing the replicator and the
// reporter; it reports false if another Shutdown came first.
func (n *Node) shutdownLocked(ctx context.Context) bool {
	n.mu.Lock()
	defer n.unlock()
	if n.shutdown {
		return false
	}
	// What was due before the shutdown still happens normally.
	n.command(fsm.OpTick)
	n.proposeCtx(ctx)
	if n.shutdown {
		return false // a concurrent Shutdown ran while this one waited
	}
	n.shutdown = true

	// One batch: the parked requests, newest first, then the sessions.
	wids := slices.Sorted(maps.Keys(n.waiters))
	sids := slices.Sorted(maps.Keys(n.sessions))
	n.batch.Cmds = n.batch.Cmds[:0]
	at := n.now()
	for _, id := range slices.Backward(wids) {
		c := n.add(fsm.OpCancel, at)
		c.Waiter = id
	}
	for _, id := range sids {
		s := n.sessions[id]
		if s.survives() {
			continue // lives on in the cluster, for its client to resume elsewhere
		}
		c := n.add(fsm.OpEndSession, at)
		c.Session, c.Token = id, latch.Token(s.gen)
	}
	if len(n.batch.Cmds) > 0 {
		if r := n.proposeCtx(ctx); r.Err != nil && !errors.Is(r.Err, latch.ErrNoSession) && !errors.Is(r.Err, latch.ErrNotHeld) {
			n.log.Warn("node: shutdown: the lock table did not take the ends of this node's sessions", "err", r.Err)
		}
	}
	for _, id := range slices.Backward(wids) {
		if w := n.waiters[id]; w != nil {
			n.forget(id)
			n.deliver(w, result{err: w.sess.shutdownErr()})
		}
	}
	for _, id := range sids {
		s := n.sessions[id]
		n.endSession(s, s.shutdownErr())
	}
	// Requests parked while the batch was applied (their sessions ended
	// with it) have been aborted by it; none is left.
	if n.timer != nil {
		n.timer.Stop()
	}
	if n.beatTimer != nil {
		n.beatTimer.Stop()
	}
	n.armedOK = false
	n.log.Info("node: shut down", "sessions", len(sids), "waiters", len(wids))
	return true
}

// endSession marks s ended, closes its Done channel and, unless its Close
// ends it, starts its OnEnd, once. Called with mu held.
func (n *Node) endSession(s *session, why error) {
	if s == nil || s.ended != nil {
		return
	}
	s.ended = why
	delete(n.sessions, s.id)
	if n.sessionsPeak.Due(len(n.sessions)) {
		n.sessions = peakmap.Rebuild(n.sessions, &n.sessionsPeak)
	}
	close(s.done)
	if f := s.opts.OnEnd; f != nil && !s.closing {
		go f(why)
	}
	if n.obs != nil {
		n.obs.SessionEnded(s.proto)
	}
}

// unlock releases mu, then reports the ends of the AcquireFunc requests
// that the work done under mu decided (deliver queued them), calling their
// done functions outside mu: they may write to a socket and call the node.
// Every holder of mu lets go of it through unlock.
func (n *Node) unlock() {
	if len(n.ready) == 0 {
		n.mu.Unlock()
		return
	}
	var buf [2]ended
	calls := append(buf[:0], n.ready...)
	clear(n.ready)
	n.ready = n.ready[:0]
	n.mu.Unlock()
	for _, c := range calls {
		n.report(c)
	}
}

// unlockApplied is unlock for the replicator's goroutine, after it
// applied batches: with replica.Local it is the proposer's goroutine and
// reports the ends as unlock does; a cluster replicator's goroutine hands
// them to the reporter instead.
func (n *Node) unlockApplied() {
	if n.reports == nil || len(n.ready) == 0 {
		n.unlock()
		return
	}
	n.reports.add(n.ready)
	clear(n.ready)
	n.ready = n.ready[:0]
	n.mu.Unlock()
}

// deliver ends the parked request w with r: a caller of Acquire receives r
// on w.ch; the done function of an AcquireFunc request gets it from unlock.
// Called with mu held, by whoever removed w from Node.waiters.
func (n *Node) deliver(w *waiter, r result) {
	if w.done != nil {
		n.ready = append(n.ready, ended{w: w, r: r})
		return
	}
	w.ch <- r
}

// Stats returns counts of the lock table and of the data tree.
func (n *Node) Stats() Stats {
	var st Stats
	n.WithStats(func(s Stats) { st = s })
	return st
}

// WithStats calls f with the lock table's and the data tree's counts,
// with the node's mutex held: what the Observer keeps (which it writes
// under that mutex) can be read inside f consistently with the counts. f must be quick and must not
// call the Node. It reads only: what is due but not yet ticked still counts.
func (n *Node) WithStats(f func(Stats)) {
	n.mu.Lock()
	defer n.unlock()
	es := n.st.Engine().Stats()
	t := n.st.Tree()
	znodes, ephemerals := t.Count()
	f(Stats{
		Keys: es.Keys, Holds: es.Holds, Waiters: es.Waiters, Sessions: es.Sessions, Token: es.Token,
		ZSessions: t.NumSessions(), Znodes: znodes, Ephemerals: ephemerals, Zxid: t.Zxid(),
	})
}
