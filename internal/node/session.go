package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/engine"
	"github.com/latchd/latch/internal/fsm"
)

// session is the node-side record of an engine session: what the front end
// holds as a latch.Session.
type session struct {
	n    *Node
	id   latch.SessionID
	opts latch.SessionOptions
	// proto is what the Observer's SessionOpened returned for the session.
	proto int
	done  chan struct{}
	// ended is why the session ended on this node (latch.ErrSessionEnded,
	// latch.ErrShutdown, or, for a session with a TTL that the node let
	// go of, an error wrapping latch.ErrUnavailable: see letGo), nil
	// while it lives. Guarded by n.mu.
	ended error
	// closing is set by Close, whose caller needs no opts.OnEnd call.
	// Guarded by n.mu.
	closing bool
	// gen is the session's generation on this record's connection: 0 when
	// opened, the resume's when resumed (fsm.OpResume). moved is set when
	// the session was resumed on another record of this node. Guarded by
	// n.mu.
	gen   uint64
	moved bool
}

var _ latch.Session = (*session)(nil)

// waiter is a parked request. The caller of Acquire blocks on ch, which
// receives exactly one result, sent under the node's mutex by whoever
// removes the waiter from Node.waiters; an AcquireFunc request has done
// instead, called once with that result after the mutex is released
// (Node.deliver, Node.unlock).
type waiter struct {
	ch      chan result // capacity 1
	done    func(latch.Grant, error)
	sess    *session
	since   int64 // when it was queued
	granted int64 // when it was granted, if it was
	nkeys   int
	proto   int // its session's, for the Observer
	// seq is the OpAcquire's sequence number of an AcquireFunc request of
	// a cluster node, which names it to Cancel (its latch.WaitID); 0
	// otherwise.
	seq uint64
}

type result struct {
	grant latch.Grant
	err   error
}

func (n *Node) getWaiter() *waiter {
	if w, ok := n.pool.Get().(*waiter); ok {
		return w
	}
	return &waiter{ch: make(chan result, 1)}
}

// putWaiter recycles w; its channel must be empty.
func (n *Node) putWaiter(w *waiter) {
	w.done, w.sess, w.seq, w.granted = nil, nil, 0, 0
	n.pool.Put(w)
}

func (s *session) ID() latch.SessionID { return s.id }

// command starts a batch of one command of op on the session's behalf, for
// the caller to fill in and propose: it names the session and carries its
// generation on this record's connection (fsm.Command.Gen). If the session
// moves to another connection (fsm.OpResume, on this node or another)
// before the command is applied, the state machine refuses it
// (fsm.ErrSuperseded): a request that was in flight on the old connection,
// whose client learnt no outcome, neither takes nor releases a key after
// the move. Every op of the session's own requests carries it (acquire,
// release, release all, renew, keepalive); OpCancel names a waiter, not a
// session, and OpEndSession carries the generation in Token. Called with
// n.mu held.
func (s *session) command(op fsm.Op) *fsm.Command {
	c := s.n.command(op)
	c.Session, c.Gen = s.id, s.gen
	return c
}

func (s *session) Done() <-chan struct{} { return s.done }

// gone returns the error of a call on an ended session: it wraps
// latch.ErrNoSession and, when the node shut down, latch.ErrShutdown too.
// A session the node let go of but that may live on in the cluster
// (letGo) has not ended: its error wraps latch.ErrUnavailable alone.
// Called with n.mu held.
func (s *session) gone(op string) error {
	switch {
	case s.ended == latch.ErrShutdown:
		return fmt.Errorf("%s: session %d: %w (%w)", op, s.id, latch.ErrNoSession, latch.ErrShutdown)
	case errors.Is(s.ended, latch.ErrUnavailable):
		return fmt.Errorf("%s: %w", op, s.ended)
	}
	return fmt.Errorf("%s: session %d: %w", op, s.id, latch.ErrNoSession)
}

// refused returns the error of a call op of s that the node does not
// take: s ended (gone), or the node is shutting down (shutdownErr).
// Called with n.mu held.
func (s *session) refused(op string) error {
	if s.ended != nil {
		return s.gone(op)
	}
	return fmt.Errorf("%s: %w", op, s.shutdownErr())
}

// survives reports whether s outlives this node's shutdown: it has a TTL
// and lives in replicated state (a cluster's, or a durable node's on
// disk), which the node leaves it in, so that its client can resume it on
// another node, or on this one restarted within the TTL.
func (s *session) survives() bool { return s.opts.TTL > 0 && s.n.cfg.Replicator != nil }

// shutdownErr is why s ends on this node when the node shuts down, and the
// error of its parked requests then: latch.ErrShutdown, or, for a session
// that survives the shutdown, the error of a session the node let go of
// without ending it (unvouched), which wraps latch.ErrUnavailable alone.
// s may be nil.
func (s *session) shutdownErr() error {
	if s != nil && s.survives() {
		return unvouched("shutting down", s.id)
	}
	return latch.ErrShutdown
}

// Acquire takes the keys of req. A request the engine cannot grant at once
// and may wait is parked: the caller blocks until the engine reports the
// request's end (granted, timed out at req.Wait, aborted because the session
// ended or the node shut down) or until ctx is done. On ctx done the request
// is cancelled and the error wraps latch.ErrCanceled and ctx.Err() - unless
// the grant won the race (it was granted before the cancellation took the
// mutex), in which case Acquire returns the grant and the caller holds the
// keys. A ctx that is already done fails the request before it reaches the
// lock table.
func (s *session) Acquire(ctx context.Context, req latch.LockRequest) (latch.Grant, error) {
	if err := ctx.Err(); err != nil {
		return latch.Grant{}, fmt.Errorf("%w: %w", latch.ErrCanceled, err)
	}
	g, id, w, err := s.start(req, nil)
	if w == nil {
		return g, err
	}
	done := ctx.Done()
	if done == nil {
		return s.n.woken(w, <-w.ch)
	}
	select {
	case r := <-w.ch:
		return s.n.woken(w, r)
	case <-done:
	}
	return s.cancel(ctx, id, w)
}

// AcquireFunc takes the keys of req as Acquire does, without blocking; see
// latch.Session. done must not be nil. On a node that answers replicated
// (latch.Replicated), every request that reaches the lock table is
// answered through done, since its outcome is known only once its command
// is applied; its WaitID is then the command's sequence number.
func (s *session) AcquireFunc(req latch.LockRequest, done func(latch.Grant, error)) (latch.Grant, latch.WaitID, error) {
	if s.n.exec == latch.Replicated {
		id, err := s.startAsync(req, done)
		return latch.Grant{}, id, err
	}
	g, id, w, err := s.start(req, done)
	if w == nil {
		return g, 0, err
	}
	return latch.Grant{}, latch.WaitID(id), nil
}

// startAsync proposes req for a cluster node's AcquireFunc: park reports
// its outcome, decided at once or not, to done. It returns an error, and
// done is never called, only when the request could not be proposed.
func (s *session) startAsync(req latch.LockRequest, done func(latch.Grant, error)) (latch.WaitID, error) {
	n := s.n
	n.mu.Lock()
	defer n.unlock()
	if s.ended != nil || n.shutdown {
		return 0, s.refused("acquire")
	}
	c := s.command(fsm.OpAcquire)
	c.Req = req
	seq := c.Seq
	w := n.getWaiter()
	w.sess, w.done, w.seq = s, done, seq
	n.parked = append(n.parked, parking{seq: seq, w: w, n: len(req.Keys), async: true})
	if err := n.send(); err != nil {
		n.parked = n.parked[:len(n.parked)-1]
		n.putWaiter(w)
		return 0, err
	}
	return latch.WaitID(seq), nil
}

// start runs req through the lock table. A request decided at once returns
// its grant or error and a nil waiter; one that waits returns its id and its
// waiter, parked with done (nil: the caller receives on the waiter's ch).
func (s *session) start(req latch.LockRequest, done func(latch.Grant, error)) (latch.Grant, engine.WaiterID, *waiter, error) {
	n := s.n
	n.mu.Lock()
	if s.ended != nil || n.shutdown {
		err := s.refused("acquire")
		n.unlock()
		return latch.Grant{}, 0, nil, err
	}
	c := s.command(fsm.OpAcquire)
	c.Req = req
	var w *waiter
	if req.Wait != latch.NoWait {
		w = n.getWaiter()
		w.sess, w.done = s, done
		n.parked = append(n.parked, parking{seq: c.Seq, w: w, n: len(req.Keys)})
	}
	r := n.propose()
	if r.Err != nil || r.Granted || r.Waiter == 0 {
		g, err := latch.Grant{Token: r.Token, Expires: toTime(r.Expires)}, r.Err
		if err == nil && !r.Granted {
			err = fmt.Errorf("acquire: the lock table neither granted nor queued the request: %w", latch.ErrInvalidRequest)
		}
		if err == nil && n.obs != nil {
			n.obs.Granted(s.proto, len(req.Keys), 0)
		}
		n.unlock()
		if w != nil {
			n.putWaiter(w)
		}
		if err != nil {
			return latch.Grant{}, 0, nil, err
		}
		return g, 0, nil, nil
	}
	// Parked by apply under r.Waiter; a later command may have ended it
	// already (a cluster applies while propose waits): its result is then
	// in w.ch, or with unlock for an AcquireFunc request.
	n.unlock()
	return latch.Grant{}, r.Waiter, w, nil
}

// woken finishes a parked Acquire that received r: it reports the hand-off
// of a grant to the Observer and recycles w. (A cluster node's AcquireFunc
// request granted at once was never handed off: granted is 0.)
func (n *Node) woken(w *waiter, r result) (latch.Grant, error) {
	if r.err == nil && n.obs != nil && w.granted != 0 {
		n.obs.HandedOff(time.Duration(n.now() - w.granted))
	}
	n.putWaiter(w)
	return r.grant, r.err
}

// cancel withdraws a parked Acquire whose context is done.
func (s *session) cancel(ctx context.Context, id engine.WaiterID, w *waiter) (latch.Grant, error) {
	n := s.n
	n.mu.Lock()
	if !n.withdraw(s, id) {
		// Its end was dispatched first: the result is in w.ch.
		n.unlock()
		return n.woken(w, <-w.ch)
	}
	n.unlock()
	n.putWaiter(w)
	return latch.Grant{}, fmt.Errorf("%w: %w", latch.ErrCanceled, ctx.Err())
}

// Cancel withdraws a waiting AcquireFunc request of the session; see
// latch.Session.
func (s *session) Cancel(id latch.WaitID) bool {
	n := s.n
	n.mu.Lock()
	defer n.unlock()
	wid := engine.WaiterID(id)
	if n.exec == latch.Replicated {
		// The id is the OpAcquire's seq (AcquireFunc): wait until it is
		// applied, then find its lock-table id if it waits.
		seq := uint64(id)
		if n.isParked(seq) && n.calls[seq] == nil {
			n.await(context.Background(), seq)
		}
		wid = n.bySeq[seq]
	}
	w := n.waiters[wid]
	if w == nil || w.sess != s || w.done == nil {
		return false
	}
	if !n.withdraw(s, wid) {
		return false // granted or timed out as the engine caught up
	}
	n.deliver(w, result{err: fmt.Errorf("acquire: %w by the caller", latch.ErrCanceled)})
	return true
}

// withdraw takes the queued request id of s out of the lock table and of
// Node.waiters, and reports true, unless bringing the lock table up to now
// ended it first (granted, or timed out at an instant already past): then
// its end has been dispatched, and it reports false. Called with mu held.
func (n *Node) withdraw(s *session, id engine.WaiterID) bool {
	if _, queued := n.waiters[id]; !queued {
		return false
	}
	c := n.command(fsm.OpCancel)
	c.Waiter = id
	r := n.propose()
	if _, queued := n.waiters[id]; !queued {
		return false
	}
	n.forget(id)
	if r.Err != nil {
		n.log.Error("node: cancel: lock table lost a waiter", "waiter", id, "session", s.id, "err", r.Err)
	}
	if n.obs != nil {
		n.obs.Canceled(s.proto)
	}
	return true
}

// Release releases keys the session holds; see latch.Session.
func (s *session) Release(keys ...string) error {
	n := s.n
	n.mu.Lock()
	defer n.unlock()
	if s.ended != nil {
		return s.gone("release")
	}
	c := s.command(fsm.OpRelease)
	c.Req.Keys = keys
	return n.propose().Err
}

// ReleaseFunc is Release answered through done; see latch.Session.
func (s *session) ReleaseFunc(keys []string, done func(error)) {
	c, err := s.funcCommand(fsm.OpRelease, "release")
	if err != nil {
		done(err)
		return
	}
	c.Req.Keys = keys
	s.n.proposeFunc(done, nil)
	s.n.unlock()
}

// RenewFunc is Renew answered through done; see latch.Session.
func (s *session) RenewFunc(lease time.Duration, keys []string, done func(latch.Grant, error)) {
	c, err := s.funcCommand(fsm.OpRenew, "renew")
	if err != nil {
		done(latch.Grant{}, err)
		return
	}
	c.Req.Keys, c.Req.Lease = keys, lease
	s.n.proposeFunc(nil, done)
	s.n.unlock()
}

// KeepAliveFunc is KeepAlive answered through done; see latch.Session.
func (s *session) KeepAliveFunc(done func(error)) {
	if _, err := s.funcCommand(fsm.OpKeepAlive, "keepalive"); err != nil {
		done(err)
		return
	}
	s.n.proposeFunc(done, nil)
	s.n.unlock()
}

// funcCommand starts the command op of a Func call of the session, with
// n.mu held, which the caller proposes (proposeFunc) and then releases. On
// a session that has ended it returns the error to report instead, with
// n.mu released.
func (s *session) funcCommand(op fsm.Op, what string) (*fsm.Command, error) {
	n := s.n
	n.mu.Lock()
	if s.ended != nil {
		err := s.gone(what)
		n.unlock()
		return nil, err
	}
	return s.command(op), nil
}

// ReleaseAll releases every lock the session holds, leased ones included.
func (s *session) ReleaseAll() (int, error) {
	n := s.n
	n.mu.Lock()
	defer n.unlock()
	if s.ended != nil {
		return 0, s.gone("release all")
	}
	s.command(fsm.OpReleaseAll)
	r := n.propose()
	return r.Count, r.Err
}

// Renew resets the lease of keys the session holds. The Grant carries the
// newest token among the keys and the new lease end (zero for lease 0).
func (s *session) Renew(lease time.Duration, keys ...string) (latch.Grant, error) {
	n := s.n
	n.mu.Lock()
	defer n.unlock()
	if s.ended != nil {
		return latch.Grant{}, s.gone("renew")
	}
	c := s.command(fsm.OpRenew)
	c.Req.Keys, c.Req.Lease = keys, lease
	r := n.propose()
	if r.Err != nil {
		return latch.Grant{}, r.Err
	}
	return latch.Grant{Token: r.Token, Expires: toTime(r.Expires)}, nil
}

// KeepAlive restarts the session's TTL.
func (s *session) KeepAlive() error {
	n := s.n
	n.mu.Lock()
	defer n.unlock()
	if s.ended != nil {
		return s.gone("keepalive")
	}
	s.command(fsm.OpKeepAlive)
	return n.propose().Err
}

// Leave lets go of a session with a TTL on this node without ending it,
// as letGo does: it lives on in the lock table until its TTL lapses or a
// client resumes it (ResumeSession), and its handle ends here with an
// error wrapping latch.ErrUnavailable. A session without a TTL, or with a
// request parked on this node, is Closed instead.
//
// A front end leaves, rather than closes, a session that its connection
// resumed when the client went away without a request after the resume:
// the client may have given that resume up, its answer late, and taken the
// session back on another node, where ending it now would end it (the
// resume here, applied last, made this connection's generation the
// session's).
func (s *session) Leave() {
	n := s.n
	n.mu.Lock()
	if s.ended != nil {
		n.unlock()
		return
	}
	if s.opts.TTL == 0 || n.parkedOf(s) {
		n.unlock()
		s.Close()
		return
	}
	s.closing = true
	n.log.Info("node: session left by its connection", "session", s.id, "generation", s.gen)
	n.endSession(s, unvouched("left by its connection", s.id))
	n.unlock()
}

// parkedOf reports whether s has a request parked on this node. Called
// with n.mu held.
func (n *Node) parkedOf(s *session) bool {
	for _, w := range n.waiters {
		if w.sess == s {
			return true
		}
	}
	return false
}

// Close ends the session as EndSession does: its waiting requests fail with
// latch.ErrSessionEnded, its locks without a lease are released at once
// (memcached item locks included) and its leased locks stay until their
// lease ends. The lock table cannot tell a clean close from a lost
// connection, so the session's lock-delay applies to the keys it still
// holds; a client that leaves cleanly releases them first. Close is
// idempotent and returns nil on an ended session.
func (s *session) Close() error {
	n := s.n
	n.mu.Lock()
	defer n.unlock()
	if s.ended != nil {
		return nil
	}
	s.closing = true
	c := n.command(fsm.OpEndSession)
	c.Session, c.Token = s.id, latch.Token(s.gen)
	if err := n.propose().Err; err != nil && !errors.Is(err, latch.ErrNoSession) && !errors.Is(err, fsm.ErrSuperseded) {
		n.log.Error("node: close session", "session", s.id, "err", err)
	}
	// If the lock table had already ended it (TTL lapsed at an instant
	// now passed), dispatch has just closed Done; endSession is a no-op
	// then.
	n.endSession(s, latch.ErrSessionEnded)
	return nil
}
