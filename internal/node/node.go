package node

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/engine"
	"github.com/latchd/latch/internal/peakmap"
)

// Config configures a Node.
type Config struct {
	// MaxKeys limits the keys of one request; 0 means no limit.
	MaxKeys int
	// MaxWaitersPerKey and MaxWaiters limit the requests waiting on one
	// key and in all; 0 means no limit. A request that would wait beyond
	// them fails with latch.ErrTooManyWaiters.
	MaxWaitersPerKey, MaxWaiters int
	// LockDelay is the lock-delay of sessions whose options set none
	// (latch.SessionOptions.LockDelay == 0). A session that asks for a
	// negative LockDelay gets none.
	LockDelay time.Duration
	// FirstToken is the fencing-token counter's start. 0: seed it from the
	// start time (UnixNano), so that tokens keep growing across restarts.
	FirstToken latch.Token
	// Logger receives admin actions (info) and expiries (debug). nil: discard.
	Logger *slog.Logger
	// Observer, when set, is told about sessions, grants, releases,
	// timeouts and expiries, for metrics. nil: nobody is.
	Observer Observer
}

// Node is a single-node latch.Service: the lock engine behind one mutex,
// with sessions, parked waiters and one timer. Create it with New and stop
// it with Shutdown. It is safe for concurrent use.
type Node struct {
	mu  sync.Mutex
	eng *engine.Engine // guarded by mu

	start   time.Time // carries the monotonic reading now() is taken from
	startNs int64
	cfg     Config
	log     *slog.Logger
	obs     Observer

	sessions map[latch.SessionID]*session // live sessions; guarded by mu
	waiters  map[engine.WaiterID]*waiter  // parked requests; guarded by mu
	// The peaks of sessions and waiters, which are rebuilt when they
	// drain far below them (peakmap). Guarded by mu.
	sessionsPeak, waitersPeak peakmap.Peak

	timer    *time.Timer // created on first use; guarded by mu
	armed    int64       // the instant timer is armed for, when armedOK
	armedOK  bool
	shutdown bool // guarded by mu

	pool sync.Pool // of *waiter; per node, so that no channel crosses a synctest bubble

	// ready holds the ends of AcquireFunc requests that dispatch decided,
	// for unlock to report once mu is released. Guarded by mu.
	ready []ended
}

// ended is the end of an AcquireFunc request, to be reported.
type ended struct {
	w *waiter
	r result
}

var _ latch.Service = (*Node)(nil)

// New returns a running Node with an empty lock table.
func New(cfg Config) *Node {
	start := time.Now()
	n := &Node{
		start:    start,
		startNs:  start.UnixNano(),
		cfg:      cfg,
		log:      cfg.Logger,
		obs:      cfg.Observer,
		sessions: make(map[latch.SessionID]*session),
		waiters:  make(map[engine.WaiterID]*waiter),
	}
	if n.log == nil {
		n.log = slog.New(slog.DiscardHandler)
	}
	tok := cfg.FirstToken
	if tok == 0 {
		tok = latch.Token(n.startNs)
	}
	n.eng = engine.New(engine.Config{
		FirstToken:       tok,
		MaxKeys:          cfg.MaxKeys,
		MaxWaitersPerKey: cfg.MaxWaitersPerKey,
		MaxWaiters:       cfg.MaxWaiters,
		RecordDrops:      cfg.Observer != nil,
	})
	return n
}

// now is the engine's clock: wall-clock nanoseconds at start plus the
// monotonic time since.
func (n *Node) now() int64 {
	return n.startNs + int64(time.Since(n.start))
}

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
	eo := engine.SessionOptions{TTL: opts.TTL, LockDelay: opts.LockDelay}
	switch {
	case opts.LockDelay == 0:
		eo.LockDelay = n.cfg.LockDelay
	case opts.LockDelay < 0:
		eo.LockDelay = 0
	}
	if opts.TTL < 0 {
		return nil, fmt.Errorf("open session: negative TTL %v: %w", opts.TTL, latch.ErrInvalidRequest)
	}
	n.mu.Lock()
	defer n.unlock()
	if n.shutdown {
		return nil, fmt.Errorf("open session: %w", latch.ErrShutdown)
	}
	proto := NoProto
	if n.obs != nil {
		// The engine tags the session's drops with it (Observer.Released).
		proto = n.obs.SessionOpened(opts.Protocol)
		eo.Tag = uint32(proto)
	}
	now := n.now()
	id, evs := n.eng.OpenSession(now, eo)
	s := &session{n: n, id: id, opts: opts, proto: proto, done: make(chan struct{})}
	n.sessions[id] = s
	n.dispatch(evs)
	n.rearm(now)
	return s, nil
}

// Shutdown stops the node: it refuses new sessions (latch.ErrShutdown),
// answers every parked request with latch.ErrShutdown, ends every session
// (closing its Done channel) and stops the timer. It does not wait for
// anything, so ctx is not consulted; it returns nil. Shutdown is idempotent.
// The admin view still works afterwards and shows what was left (leased
// locks), frozen at the instant of the shutdown.
//
// Parked requests are withdrawn before any session ends, newest first: a
// request is then always the last of every queue it is in, so withdrawing it
// makes nobody grantable, and no lock released by an ending session is
// handed to a request that is about to be told the node shut down.
func (n *Node) Shutdown(ctx context.Context) error {
	n.mu.Lock()
	defer n.unlock()
	if n.shutdown {
		return nil
	}
	// What was due before the shutdown still happens normally.
	now := n.now()
	n.dispatch(n.eng.Tick(now))
	n.shutdown = true

	wids := make([]engine.WaiterID, 0, len(n.waiters))
	for id := range n.waiters {
		wids = append(wids, id)
	}
	slices.Sort(wids)
	for _, id := range slices.Backward(wids) {
		evs, err := n.eng.Cancel(now, id)
		if err != nil {
			n.log.Error("node: shutdown: engine lost a waiter", "waiter", id, "err", err)
		}
		if len(evs) > 0 {
			n.log.Error("node: shutdown: cancelling a waiter had effects", "waiter", id, "events", len(evs))
		}
		n.dispatch(evs)
		if w := n.waiters[id]; w != nil {
			delete(n.waiters, id)
			n.deliver(w, result{err: latch.ErrShutdown})
		}
	}

	sids := make([]latch.SessionID, 0, len(n.sessions))
	for id := range n.sessions {
		sids = append(sids, id)
	}
	slices.Sort(sids)
	for _, id := range sids {
		evs, err := n.eng.EndSession(now, id)
		n.dispatch(evs)
		if err != nil {
			n.log.Error("node: shutdown: engine lost a session", "session", id, "err", err)
		}
		n.endSession(n.sessions[id], latch.ErrShutdown)
	}
	if n.timer != nil {
		n.timer.Stop()
	}
	n.armedOK = false
	n.log.Info("node: shut down", "sessions", len(sids), "waiters", len(wids))
	return nil
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
		go f()
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
		done := c.w.done
		g, err := n.woken(c.w, c.r)
		done(g, err)
	}
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

// dispatch acts on what an engine call reports: it tells the Observer about
// the holds the call dropped, then acts on its events. It never blocks:
// every parked caller of Acquire has a one-slot channel that receives
// exactly one result, and the ends of AcquireFunc requests are reported
// after mu is released (unlock). Called with mu held.
func (n *Node) dispatch(evs []engine.Event) {
	if n.obs != nil {
		if drops := n.eng.Drops(); len(drops) > 0 {
			n.obs.Released(drops)
		}
	}
	for i := range evs {
		ev := &evs[i]
		switch ev.Kind {
		case engine.EventGranted:
			w := n.takeWaiter(ev)
			if w == nil {
				continue
			}
			g := latch.Grant{Token: ev.Token, Expires: toTime(ev.Expires)}
			w.granted = ev.At
			if n.obs != nil {
				n.obs.Granted(w.proto, w.nkeys, time.Duration(ev.At-w.since))
			}
			n.deliver(w, result{grant: g})
		case engine.EventTimedOut:
			w := n.takeWaiter(ev)
			if w == nil {
				continue
			}
			if n.obs != nil {
				n.obs.TimedOut(w.proto, w.nkeys)
			}
			n.deliver(w, result{err: &latch.BusyError{Err: latch.ErrTimeout, Keys: slices.Clone(ev.Keys)}})
		case engine.EventAborted:
			w := n.takeWaiter(ev)
			if w == nil {
				continue
			}
			err := latch.ErrSessionEnded
			if n.shutdown {
				err = latch.ErrShutdown
			}
			n.deliver(w, result{err: err})
		case engine.EventSessionExpired:
			if s := n.sessions[ev.Session]; s != nil {
				if n.obs != nil {
					n.obs.SessionExpired(s.proto)
				}
				n.endSession(s, latch.ErrSessionEnded)
			}
			if n.log.Enabled(context.Background(), slog.LevelDebug) {
				n.log.Debug("node: session expired", "session", ev.Session)
			}
		case engine.EventLeaseExpired:
			if n.log.Enabled(context.Background(), slog.LevelDebug) {
				n.log.Debug("node: lease expired", "key", ev.Key, "session", ev.Session, "token", ev.Token)
			}
		default:
			n.log.Error("node: unknown engine event", "kind", ev.Kind)
		}
	}
}

// Stats returns counts of the lock table, brought up to now.
func (n *Node) Stats() Stats {
	var st Stats
	n.WithStats(func(s Stats) { st = s })
	return st
}

// WithStats brings the lock table up to now and calls f with its counts,
// with the node's mutex held: what the Observer keeps (which it writes
// under that mutex) can be read inside f consistently with the counts. f
// must be quick and must not call the Node.
func (n *Node) WithStats(f func(Stats)) {
	n.mu.Lock()
	defer n.unlock()
	n.advance()
	es := n.eng.Stats()
	f(Stats{Keys: es.Keys, Holds: es.Holds, Waiters: es.Waiters, Sessions: es.Sessions, Token: es.Token})
}

// takeWaiter removes and returns the parked caller an event names.
func (n *Node) takeWaiter(ev *engine.Event) *waiter {
	w := n.waiters[ev.Waiter]
	if w == nil {
		// Every queued request is registered before mu is released, so
		// this is an engine or node bug.
		n.log.Error("node: event for an unknown waiter", "kind", ev.Kind, "waiter", ev.Waiter, "session", ev.Session)
		return nil
	}
	delete(n.waiters, ev.Waiter)
	if n.waitersPeak.Due(len(n.waiters)) {
		n.waiters = peakmap.Rebuild(n.waiters, &n.waitersPeak)
	}
	return w
}

// rearm points the timer at the engine's next deadline if it moved. Called
// with mu held, after every engine call.
func (n *Node) rearm(now int64) {
	next, ok := n.eng.NextDeadline()
	if !ok || n.shutdown {
		if n.armedOK {
			n.timer.Stop()
			n.armedOK = false
		}
		return
	}
	if n.armedOK && next == n.armed {
		return
	}
	n.armed, n.armedOK = next, true
	d := time.Duration(max(next-now, 0))
	if n.timer == nil {
		n.timer = time.AfterFunc(d, n.fire)
	} else {
		n.timer.Reset(d)
	}
}

// fire is the timer's callback: it brings the engine up to now. A callback
// that lost a race with a Reset (it ran early, or for an instant since
// moved) does no harm: Tick is a no-op before any deadline and rearm sets
// the timer again.
func (n *Node) fire() {
	n.mu.Lock()
	defer n.unlock()
	if n.shutdown {
		return
	}
	n.armedOK = false
	now := n.now()
	n.dispatch(n.eng.Tick(now))
	n.rearm(now)
}

// advance brings the engine up to now, for the read-only admin views.
// Called with mu held.
func (n *Node) advance() {
	if n.shutdown {
		return
	}
	now := n.now()
	n.dispatch(n.eng.Tick(now))
	n.rearm(now)
}
