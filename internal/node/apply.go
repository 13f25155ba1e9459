package node

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/engine"
	"github.com/latchd/latch/internal/fsm"
	"github.com/latchd/latch/internal/peakmap"
	"github.com/latchd/latch/internal/replica"
)

// parking is a request that may wait, registered before its OpAcquire is
// proposed (Node.parked), so that whichever goroutine applies the command
// can park it under the lock table's id before any later command grants it.
type parking struct {
	seq uint64
	w   *waiter // its session and done set; the caller's to recycle if unparked
	n   int     // keys
	// async is set for a cluster node's AcquireFunc request, whose caller
	// does not wait for the proposal: park reports its outcome to w.done
	// whatever it is (parkAsync), and w is the node's to recycle.
	async bool
}

// machine is the node as its Replicator sees it (replica.StateMachine):
// its mutex, and the one path by which its state changes.
type machine struct{ n *Node }

var _ replica.StateMachine = machine{}

func (m machine) Lock()                     { m.n.mu.Lock() }
func (m machine) Unlock()                   { m.n.unlockApplied() }
func (m machine) Apply(b *fsm.Batch)        { m.n.apply(b) }
func (m machine) Snapshot() *fsm.Capture    { return m.n.st.Capture() }
func (m machine) Restore(r io.Reader) error { return m.n.restore(r) }

// apply applies the commands of b to the state in order and acts on what
// each did: it parks this node's requests that were queued (matched by
// Seq with Node.parked) and dispatches the lock table's events. It is the
// only path by which the state changes. Called with mu held.
func (n *Node) apply(b *fsm.Batch) {
	if cap(b.Results) < len(b.Cmds) {
		b.Results = make([]fsm.Result, len(b.Cmds))
	}
	b.Results = b.Results[:len(b.Cmds)]
	var at int64
	for i := range b.Cmds {
		c, r := &b.Cmds[i], &b.Results[i]
		evs := n.st.Apply(c, r)
		if c.Origin == n.origin {
			if !n.isReady.Load() {
				n.caughtUp(c.Seq)
			}
			if c.Op == fsm.OpAcquire && len(n.parked) > 0 {
				n.park(c, r)
			}
			if c.Op == fsm.OpNodeAlive {
				n.beatApplied(c.Seq)
			}
			if c.Op == fsm.OpOpenSession && r.Err == nil && n.calls[c.Seq] == nil && n.cfg.NodeID != "" {
				n.orphans = append(n.orphans, r.Session)
			}
			if len(n.calls) > 0 {
				n.answer(c.Seq, r)
			}
		}
		n.dispatch(evs)
		n.zApplied(c, r)
		if n.kf != nil {
			n.keysApplied(c.Seq, c.Origin == n.origin, c.Client)
		}
		at = max(at, c.At)
	}
	n.rearm(at)
}

// park registers the request of this node's OpAcquire c, whose result is
// r, under its lock-table id if r says it was queued, and takes it off
// Node.parked either way. Called with mu held.
func (n *Node) park(c *fsm.Command, r *fsm.Result) {
	// Requests before c's that were never applied are lost (a replicator
	// dropped their batch); their proposers have had the error.
	i := 0
	for i < len(n.parked) && n.parked[i].seq < c.Seq {
		if p := n.parked[i]; p.async {
			n.deliver(p.w, result{err: fmt.Errorf("acquire: the request was lost on its way to the leader: %w", latch.ErrUnavailable)})
		}
		i++
	}
	if i == len(n.parked) || n.parked[i].seq != c.Seq {
		n.parked = append(n.parked[:0], n.parked[i:]...)
		if r.Waiter != 0 {
			n.log.Error("node: a queued request was not registered", "seq", c.Seq, "waiter", r.Waiter)
		}
		return
	}
	p := n.parked[i]
	n.parked = append(n.parked[:0], n.parked[i+1:]...)
	if p.async {
		n.parkAsync(p, c, r)
		return
	}
	if r.Err != nil || r.Waiter == 0 {
		return
	}
	w := p.w
	w.since, w.nkeys, w.proto = c.At, p.n, w.sess.proto
	n.waiters[r.Waiter] = w
}

// parkAsync acts on the outcome r of the request p of a cluster node's
// AcquireFunc: it reports a grant or refusal to the waiter's done, or
// parks the waiter under its lock-table id (and its seq, for Cancel).
// Called with mu held.
func (n *Node) parkAsync(p parking, c *fsm.Command, r *fsm.Result) {
	w := p.w
	switch {
	case r.Err != nil:
		n.deliver(w, result{err: r.Err})
	case r.Granted:
		if n.obs != nil {
			n.obs.Granted(w.sess.proto, p.n, 0)
		}
		n.deliver(w, result{grant: latch.Grant{Token: r.Token, Expires: toTime(r.Expires)}})
	case r.Waiter == 0:
		n.deliver(w, result{err: fmt.Errorf("acquire: the lock table neither granted nor queued the request: %w", latch.ErrInvalidRequest)})
	default:
		w.since, w.nkeys, w.proto = c.At, p.n, w.sess.proto
		n.waiters[r.Waiter] = w
		n.bySeq[w.seq] = r.Waiter
	}
}

// isParked reports whether this node's OpAcquire seq waits in
// Node.parked to be applied. Called with mu held.
func (n *Node) isParked(seq uint64) bool {
	for _, p := range n.parked {
		if p.seq == seq {
			return true
		}
	}
	return false
}

// dispatch acts on what a command reports: it tells the Observer about
// the holds the command dropped, then acts on its events. It never blocks:
// every parked caller of Acquire has a one-slot channel that receives
// exactly one result, and the ends of AcquireFunc requests are reported
// after mu is released (unlock). Events about requests and sessions of
// other replicas are not this node's to act on. Called with mu held.
func (n *Node) dispatch(evs []engine.Event) {
	if n.obs != nil {
		if drops := n.st.Drops(); len(drops) > 0 {
			n.released(drops)
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

// released tells the Observer about drops, each tagged with the proto of
// its session (the protocol is this node's knowledge, not the state's).
func (n *Node) released(drops []engine.Drop) {
	n.drops = n.drops[:0]
	for _, d := range drops {
		tag := NoProto
		if s := n.sessions[d.Session]; s != nil {
			tag = s.proto
		} else if d.Owned {
			tag = OwnedProto
		}
		n.drops = append(n.drops, Drop{Session: d.Session, Tag: uint32(tag), Acquired: d.Acquired, At: d.At, Cause: d.Cause})
	}
	n.obs.Released(n.drops)
}

// takeWaiter removes and returns the parked caller an event names, or nil
// when the request is not this node's.
func (n *Node) takeWaiter(ev *engine.Event) *waiter {
	w := n.waiters[ev.Waiter]
	if w == nil {
		return nil
	}
	n.forget(ev.Waiter)
	return w
}

// forget removes a parked request from Node.waiters. Called with mu held.
func (n *Node) forget(id engine.WaiterID) {
	if w := n.waiters[id]; w != nil && w.seq != 0 {
		delete(n.bySeq, w.seq)
	}
	delete(n.waiters, id)
	if n.waitersPeak.Due(len(n.waiters)) {
		n.waiters = peakmap.Rebuild(n.waiters, &n.waitersPeak)
	}
}

// rearm points the timer at the lock table's next deadline if it moved.
// Called with mu held, after every batch applied; now is the batch's time.
func (n *Node) rearm(now int64) {
	next, ok := n.st.Engine().NextDeadline()
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

// fire is the timer's callback: the proposer's deadline duty. It proposes
// a Tick, which brings the state up to now. A callback that lost a race
// with a Reset (it ran early, or for an instant since moved) does no harm:
// a Tick before any deadline changes nothing, and Apply re-arms the timer.
func (n *Node) fire() {
	n.mu.Lock()
	defer n.unlock()
	if n.shutdown {
		return
	}
	n.armedOK = false
	if n.rep == nil {
		return // still in New: the replicator is replaying its log
	}
	if _, self, _ := n.rep.Leader(); !self {
		return // the leader's node ticks; every apply re-arms this timer
	}
	n.command(fsm.OpTick)
	n.send()
}

// restore replaces the node's state with a snapshot read from r. The
// node's own sessions, parked requests and waiting callers are not in a
// snapshot, and the events that concerned them between the old state and
// the new one are lost: a node that restores while it serves (a follower
// sent the leader's snapshot) lets go of its clients first, as when it
// cannot commit. Called with mu held.
func (n *Node) restore(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("node: restore: %w", err)
	}
	st, err := fsm.Restore(n.st.Config(), b)
	if err != nil {
		return fmt.Errorf("node: restore: %w", err)
	}
	n.letGo("restored a snapshot")
	n.st = st
	if n.kf != nil {
		st.RecordChanged(true)
		n.kf(nil, 0)
	}
	n.rearm(st.Now())
	return nil
}
