package node

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/fsm"
)

// A node proposes the commands of its callers one batch at a time, under
// mu: command (or Do) starts the batch, add appends to it, and propose
// submits it and returns the result of its last command.
//
// replica.Local applies the batch inside Propose, so the result is in
// Node.batch when Propose returns and the caller never lets go of mu. A
// cluster replicator applies it later, from its own goroutine: propose
// then registers a proposal under the last command's sequence number, lets go
// of mu while it waits, and takes mu again once apply has answered the
// call (answer) or the node let go of its clients (letGo). Either way the
// caller holds mu before and after propose; what it read of the node's
// maps before may have changed when it returns.
//
// proposeFunc is propose for a caller that does not wait: the result goes
// to a function, called once mu is released (as the ends of AcquireFunc
// requests are, see Node.unlock), so that a front end can keep several
// requests of one connection in flight while they commit.

// proposal is a caller waiting for the result of its command: on ch, or,
// when done, grant or result is set (proposeFunc, proposeResult), by a
// call of it once mu is released (report).
type proposal struct {
	r      fsm.Result
	ch     chan struct{} // capacity 1: receives once, when r is set
	done   func(error)
	grant  func(latch.Grant, error)
	result func(fsm.Result)
}

func (n *Node) getProposal() *proposal {
	if cl, ok := n.callPool.Get().(*proposal); ok {
		return cl
	}
	return &proposal{ch: make(chan struct{}, 1)}
}

// command starts a new batch of one command of op, stamped with the time,
// this node's origin and its next sequence number, and returns it for the
// caller to fill in and propose. Called with mu held.
func (n *Node) command(op fsm.Op) *fsm.Command {
	n.batch.Cmds = n.batch.Cmds[:0]
	return n.add(op, n.now())
}

// add adds a command of op at instant at to the batch, stamped with this
// node's origin and its next sequence number. Called with mu held.
func (n *Node) add(op fsm.Op, at int64) *fsm.Command {
	n.seq++
	n.batch.Cmds = append(n.batch.Cmds, fsm.Command{Op: op, At: at, Origin: n.origin, Seq: n.seq})
	return &n.batch.Cmds[len(n.batch.Cmds)-1]
}

// propose has the batch applied and returns the result of its last
// command, waiting for it as long as it takes (see proposeCtx). Called
// with mu held.
func (n *Node) propose() fsm.Result { return n.proposeCtx(context.Background()) }

// proposeCtx has the batch applied and returns the result of its last
// command. A replicator that refuses the batch gives its error as the
// result. When the batch is applied later (a cluster), proposeCtx lets go
// of mu until it is, until the node lets go of its clients (the result is
// then latch.ErrUnavailable: the outcome is unknown), or until ctx is
// done. Called with mu held; returns with it held.
func (n *Node) proposeCtx(ctx context.Context) fsm.Result { return *n.proposeBatch(ctx, &n.batch) }

// proposeBatch is proposeCtx of b (Node.batch, or Node.items), but for the
// result, which it leaves in b.Results (the last one): valid while mu is
// held, so that Do copies it once, into its caller's. Called with mu held;
// returns with it held.
func (n *Node) proposeBatch(ctx context.Context, b *fsm.Batch) *fsm.Result {
	last := b.Cmds[len(b.Cmds)-1].Seq
	b.Results = b.Results[:0]
	err := n.rep.Propose(b)
	if err == nil && len(b.Results) == len(b.Cmds) {
		return &b.Results[len(b.Results)-1] // applied in Propose
	}
	var r fsm.Result
	if err != nil {
		n.unpark(b.Cmds[0].Seq, err)
		r = fsm.Result{Err: err}
	} else {
		r = n.await(ctx, last)
	}
	// Others may have proposed b while await let go of mu: b.Results
	// holds nothing of this batch's any more.
	b.Results = append(b.Results[:0], r)
	return &b.Results[0]
}

// await waits until this node's command seq is applied, and returns its
// result (see proposeCtx). Called with mu held; returns with it held.
func (n *Node) await(ctx context.Context, seq uint64) fsm.Result {
	cl := n.getProposal()
	n.calls[seq] = cl
	n.unlock()
	select {
	case <-cl.ch:
		n.mu.Lock()
	case <-ctx.Done():
		n.mu.Lock()
		if n.calls[seq] == cl {
			delete(n.calls, seq)
			// The batch may still be applied; the caller learns nothing.
			return fsm.Result{Err: fmt.Errorf("%w: %w", latch.ErrUnavailable, ctx.Err())}
		}
		<-cl.ch // answered as ctx ended
	}
	r := cl.r
	cl.r = fsm.Result{}
	n.callPool.Put(cl)
	return r
}

// proposeFunc has the batch applied and reports the result of its last
// command once mu is released: its error to done, or, when grant is set
// instead, the grant it made (token and lease end) or its error to grant.
// It reports with replica.Local when the caller lets go of mu (before the
// public method that proposed returns); in a cluster, from the node's
// reporter goroutine once the batch is applied, or with
// latch.ErrUnavailable when the node lets go of its clients. The function
// must not block. Called with mu held.
func (n *Node) proposeFunc(done func(error), grant func(latch.Grant, error)) {
	cl := n.getProposal()
	cl.done, cl.grant = done, grant
	n.proposeAsync(cl)
}

// proposeResult is proposeFunc for a caller that takes the whole result
// of the batch's last command. Called with mu held.
func (n *Node) proposeResult(result func(fsm.Result)) {
	cl := n.getProposal()
	cl.result = result
	n.proposeAsync(cl)
}

// proposeAsync has the batch applied and reports its last command's
// result to cl's function once mu is released (see proposeFunc). Called
// with mu held.
func (n *Node) proposeAsync(cl *proposal) {
	b := &n.batch
	last := b.Cmds[len(b.Cmds)-1].Seq
	b.Results = b.Results[:0]
	if err := n.rep.Propose(b); err != nil {
		n.unpark(b.Cmds[0].Seq, err)
		cl.r = fsm.Result{Err: err}
		n.ready = append(n.ready, ended{p: cl})
		return
	}
	if len(b.Results) == len(b.Cmds) {
		cl.r = b.Results[len(b.Results)-1] // applied in Propose
		n.ready = append(n.ready, ended{p: cl})
		return
	}
	n.calls[last] = cl
}

// send proposes the batch without waiting for its outcome: what time
// causes (ticks, heartbeats) and what the node does on its own behalf.
// Called with mu held.
func (n *Node) send() error { return n.sendBatch(&n.batch) }

// sendBatch is send of b: Node.batch, or Node.items. Called with mu held.
func (n *Node) sendBatch(b *fsm.Batch) error {
	b.Results = b.Results[:0]
	return n.rep.Propose(b)
}

// answer gives r to the caller waiting for this node's command seq, if
// one is. Called with mu held, by apply.
func (n *Node) answer(seq uint64, r *fsm.Result) {
	cl := n.calls[seq]
	if cl == nil {
		return
	}
	delete(n.calls, seq)
	cl.r = *r
	n.notify(cl)
}

// notify hands a proposal its result, set in cl.r: on its channel, or to
// unlock, which calls its function once mu is released. Called with mu
// held.
func (n *Node) notify(cl *proposal) {
	if cl.done != nil || cl.grant != nil || cl.result != nil {
		n.ready = append(n.ready, ended{p: cl})
		return
	}
	cl.ch <- struct{}{}
}

// unpark takes the requests registered from seq on out of Node.parked:
// their batch was refused with err. Those of AcquireFunc callers that do
// not wait for the outcome (parking.async) end with err. Called with mu
// held.
func (n *Node) unpark(seq uint64, err error) {
	i := len(n.parked)
	for i > 0 && n.parked[i-1].seq >= seq {
		i--
	}
	for _, p := range n.parked[i:] {
		if p.async {
			n.deliver(p.w, result{err: err})
		}
	}
	clear(n.parked[i:])
	n.parked = n.parked[:i]
}

// letGo ends everything this node holds for its clients, because it can
// no longer vouch for them: it cannot commit (its sessions may end
// elsewhere), or its state was replaced by a snapshot. Waiting callers get
// latch.ErrUnavailable (their outcome is unknown), parked requests and
// sessions end here (their OnEnd closes their connections), and the end
// of each session bound to a connection is proposed, for when the cluster
// can commit again: its parked requests fail with latch.ErrSessionEnded
// (and latch.ErrUnavailable), and its later calls with
// latch.ErrNoSession. A session with a TTL is left to the cluster, so that
// its client can resume it on another node: it has not ended, so its
// parked requests (which the lock table may still grant) and its later
// calls here fail with latch.ErrUnavailable alone (unvouched). Called
// with mu held.
func (n *Node) letGo(why string) {
	if len(n.calls) == 0 && len(n.sessions) == 0 && len(n.waiters) == 0 && len(n.parked) == 0 {
		return
	}
	n.log.Warn("node: letting go of this node's clients", "why", why,
		"sessions", len(n.sessions), "waiting", len(n.waiters), "calls", len(n.calls))
	for seq, cl := range n.calls {
		delete(n.calls, seq)
		cl.r = fsm.Result{Err: fmt.Errorf("%s: %w", why, latch.ErrUnavailable)}
		n.notify(cl)
	}
	n.unpark(0, fmt.Errorf("%s: %w", why, latch.ErrUnavailable))
	for id, w := range n.waiters {
		n.forget(id)
		err := fmt.Errorf("%s: %w (%w)", why, latch.ErrSessionEnded, latch.ErrUnavailable)
		if w.sess.opts.TTL > 0 {
			err = unvouched(why, w.sess.id)
		}
		n.deliver(w, result{err: err})
	}
	if len(n.sessions) == 0 {
		return
	}
	ids := slices.Sorted(maps.Keys(n.sessions))
	n.batch.Cmds = n.batch.Cmds[:0]
	at := n.now()
	for _, id := range ids {
		s := n.sessions[id]
		if s.opts.TTL > 0 {
			n.endSession(s, unvouched(why, id))
			continue
		}
		c := n.add(fsm.OpEndSession, at)
		c.Session, c.Token = id, latch.Token(s.gen)
		n.endSession(s, latch.ErrSessionEnded)
	}
	if len(n.batch.Cmds) == 0 {
		return
	}
	if err := n.send(); err != nil {
		n.log.Debug("node: the ends of the sessions were not proposed", "err", err)
	}
}

// unvouched is the error of the parked requests and later calls of session
// id, which has a TTL, once its node let go of it because of why (letGo):
// the session may live on in the cluster, and the outcome of its requests
// is unknown. It wraps latch.ErrUnavailable, and not
// latch.ErrSessionEnded: the session has not ended.
func unvouched(why string, id latch.SessionID) error {
	return fmt.Errorf("%s: this node no longer vouches for session %d, which may live on in the cluster (resume it on another node): %w", why, id, latch.ErrUnavailable)
}
