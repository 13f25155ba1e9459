package raftrep

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/hashicorp/raft"

	"github.com/latchd/latch/internal/fsm"
)

// watch follows Raft's leadership: a node that becomes leader promotes
// itself (promote) in a new epoch; a node that loses it starts one in
// which it leads nothing (demote); a node that sees a new leader sends
// its unapplied batches again, to whoever leads now. Raft drops the
// observations that find obs full: once it has, watch goes by Raft's
// state instead (resync).
func (r *Replicator) watch() {
	defer r.wg.Done()
	var dropped uint64
	for {
		select {
		case <-r.stop:
			return
		case o := <-r.obs:
			r.step(stepWatch)
			if n := r.observer.GetNumDropped(); n != dropped {
				dropped = n
				r.resync()
				continue
			}
			switch d := o.Data.(type) {
			case raft.RaftState:
				if d == raft.Leader {
					r.lead()
				} else {
					r.demote()
				}
			case raft.LeaderObservation:
				r.leaderChanged(string(d.LeaderID))
			}
		}
	}
}

// lead starts promoting this node, which Raft just made leader.
func (r *Replicator) lead() {
	e := r.elected()
	r.wg.Add(1)
	go r.promote(e)
}

// resync follows Raft's leadership as it is now, when some of its changes
// were not observed (obs was full). The observations left in obs are
// dropped too: Raft's state, read after them, supersedes them. Whatever
// this node took up ends (demote), and it promotes itself again if it
// leads (a leadership it may have lost and got again since, unseen). A
// change after the state is read here is observed, in obs, which now has
// room.
func (r *Replicator) resync() {
drain:
	for {
		select {
		case <-r.obs:
		default:
			break drain
		}
	}
	r.log.Warn("raftrep: changes of the leadership were not observed; going by Raft's state")
	r.demote()
	if r.raft.State() == raft.Leader {
		r.lead()
	}
	_, id := r.raft.LeaderWithID()
	r.leaderChanged(string(id))
}

// leaderChanged resends the outbox to a new leader, and marks the time a
// leader was lost.
func (r *Replicator) leaderChanged(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if id == "" {
		if r.leaderless.IsZero() {
			r.leaderless = time.Now()
		}
	} else {
		r.leaderless = time.Time{}
		r.stats.leaderChanged()
	}
	r.sent = 0
	if r.fwdConn != nil {
		r.fwdConn.Close()
		r.fwdConn = nil
	}
	r.kick()
}

// elected starts the epoch of a leadership that Raft just gave this node,
// for promote to take up, and returns it. The batches forwarded to the
// node are kept: Raft made it leader before watch heard of it, and
// receive took them for this epoch.
func (r *Replicator) elected() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.epoch++
	r.leading, r.ready, r.refused = false, false, false
	return r.epoch
}

// demote starts an epoch in which this node leads nothing: whatever an
// earlier promote took up ends, and one still under way sets nothing more.
func (r *Replicator) demote() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.demoteLocked()
}

// demoteLocked is demote, with mu held.
func (r *Replicator) demoteLocked() {
	r.epoch++
	r.dropForwarded() // their nodes send them again to the next leader
	if r.leading {
		r.sent = 0
	}
	r.leading, r.ready = false, false
}

// The steps that depend on the epoch, at which stepHook is called.
const (
	stepBarrier = "barrier" // promote's barrier answered: leading is set next
	stepApplied = "applied" // promote's OpPromote committed: ready is set next
	stepPack    = "pack"    // the leader's sender had its turn: it packs an entry next
	stepReceive = "receive" // a forwarded batch arrived: a leader keeps it next
	stepWatch   = "watch"   // watch has an observation: it handles it next
)

// errStale is takeUp's error once its epoch has ended.
var errStale = errors.New("raftrep: the leadership ended while it was taken up")

// promote makes this new leader ready to stamp, for epoch e (takeUp): it
// takes up the leadership until it has, or e has ended, or Raft no longer
// makes this node leader (the watcher then starts the next epoch). A
// failed try while Raft still makes it leader is a leadership transfer
// under way, which refuses entries until it ends: promote tries again,
// as a transfer that fails leaves this node leading.
func (r *Replicator) promote(e uint64) {
	defer r.wg.Done()
	for {
		err := r.takeUp(e)
		if err == nil || errors.Is(err, errStale) {
			return
		}
		// The try failed: what it set is cleared, so that no failed try
		// leaves the node leading and not ready (it would neither pack
		// its batches nor forward them).
		r.mu.Lock()
		current := r.epoch == e
		if current {
			if r.leading {
				r.sent = 0
			}
			r.leading, r.ready = false, false
		}
		r.mu.Unlock()
		if !current || r.raft.State() != raft.Leader {
			r.log.Warn("raftrep: lost the leadership while taking it up", "err", err)
			return
		}
		r.log.Info("raftrep: the leadership not taken up yet; trying again", "err", err)
		t := time.NewTimer(r.cfg.HeartbeatTimeout / 4)
		select {
		case <-t.C:
		case <-r.stop:
			t.Stop()
			return
		}
	}
}

// takeUp takes up the leadership of epoch e: once everything committed
// before its term is applied (Barrier), its clock resumes from the last
// stamp applied, and its first entry extends every session and lease by
// the grace period (fsm.OpPromote): the time without a leader counts for
// nothing, and a failover never ends a session or a lease by itself. It
// sets leading, then ready, each only while e is the current epoch, and
// fails with errStale once it is not: Raft's answers may come after the
// node lost the leadership (a barrier committed in time answers once the
// log is applied, which after a restart takes long), and must not set
// anything for the epoch that followed.
func (r *Replicator) takeUp(e uint64) error {
	r.mu.Lock()
	stale := r.epoch != e // a try again, after e ended
	r.mu.Unlock()
	if stale {
		return errStale
	}
	if err := r.raft.Barrier(0).Error(); err != nil {
		return fmt.Errorf("raftrep: barrier: %w", err)
	}
	r.step(stepBarrier)
	r.mu.Lock()
	if r.epoch != e {
		r.mu.Unlock()
		return errStale
	}
	r.leading = true
	// The barrier applied every entry of the log: the clock goes on from
	// the last stamp applied. Not from this node's own last stamp, whose
	// entry may have been lost (a leader stopped, deposed, and elected
	// again: its stamps after it continued counted the time it was
	// stopped).
	r.base, r.last = r.applStamp, r.applStamp
	r.promotedAt = time.Now()
	stamp := r.stamp()
	r.mu.Unlock()
	promote := fsm.Command{Op: fsm.OpPromote, TTL: r.cfg.Grace}
	entry := appendEntryHeader(nil, stamp, 1)
	entry = appendUnit(entry, fsm.AppendBatch(nil, []fsm.Command{promote}))
	if err := r.raft.Apply(entry, 0).Error(); err != nil {
		return fmt.Errorf("raftrep: promote: %w", err)
	}
	r.step(stepApplied)
	r.mu.Lock()
	if r.epoch != e || !r.leading {
		r.mu.Unlock()
		return errStale
	}
	r.ready = true
	r.sent = 0
	r.log.Info("raftrep: leading", "id", r.cfg.ID, "stamp", stamp, "grace", r.cfg.Grace)
	r.mu.Unlock()
	r.kick()
	return nil
}

// step calls the stepHook, when one is set, at step s.
func (r *Replicator) step(s string) {
	if h := r.stepHook.Load(); h != nil {
		(*h)(s)
	}
}

// send moves batches toward the leader: the promoted leader packs its own
// and the forwarded ones into entries (one in flight at a time, so that
// the next one fills while one commits); a follower writes its own to the
// leader's forward connection. Batches not seen applied after a while
// are sent again (the state applies a command once).
func (r *Replicator) send() {
	defer r.wg.Done()
	tick := time.NewTicker(r.cfg.HeartbeatTimeout / 4)
	defer tick.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-r.wake:
		case <-tick.C:
			r.mu.Lock()
			r.refused = false
			if r.leading && r.raft.State() != raft.Leader {
				// Raft no longer makes this node leader, and watch did
				// not hear of it (an observation Raft dropped, with none
				// after it to tell): the leadership ends here. Under mu,
				// so that a leadership Raft gave since (elected, which
				// clears leading) is not the one that ends.
				r.log.Warn("raftrep: leading, though Raft does not make this node leader; stepping down")
				r.demoteLocked()
			}
			r.mu.Unlock()
			r.resendStale()
		}
		for r.sendOnce() {
		}
	}
}

// resendStale sends the whole outbox again if its oldest batch was sent
// more than an election timeout ago and is still not applied (a leader
// that lost it: its term ended, or it was not leading yet).
func (r *Replicator) resendStale() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sent > 0 && time.Since(r.outbox[0].sent) > r.cfg.ElectionTimeout {
		r.log.Debug("raftrep: sending unapplied batches again", "batches", len(r.outbox))
		r.sent = 0
		if r.fwdConn != nil {
			r.fwdConn.Close()
			r.fwdConn = nil
		}
	}
}

// sendOnce sends what it can and reports whether to go on at once.
func (r *Replicator) sendOnce() bool {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return false
	}
	if r.leading {
		if !r.ready || r.refused || (r.sent == len(r.outbox) && len(r.fwd) == 0) {
			r.mu.Unlock()
			return false
		}
		e := r.epoch
		r.mu.Unlock()
		select {
		case r.inflight <- struct{}{}:
		case <-r.stop:
			return false
		}
		r.gather()
		r.step(stepPack)
		r.mu.Lock()
		if r.epoch != e {
			// The leadership ended while the entry waited for its turn:
			// its stamp would be of that leadership's clock, and it
			// would go ahead of the next one's OpPromote. Start over,
			// as the node now is.
			r.mu.Unlock()
			<-r.inflight
			return true
		}
		before := r.waiting()
		fwdBefore := len(r.fwd)
		entry, n := r.pack()
		forwarded := fwdBefore - len(r.fwd)
		answers := before - r.waiting()
		r.mu.Unlock()
		if n == 0 {
			<-r.inflight
			return false
		}
		r.stats.entry(n, len(entry))
		f := r.raft.Apply(entry, 0)
		start := time.Now()
		go func() {
			err := f.Error()
			if err != nil {
				// Raft lost the entry or refused it: the leadership ended,
				// or is being handed over. Its batches go again to the
				// next leader (leaderChanged), or from here at the
				// sender's next tick if a hand-over fails; not at once,
				// which would spin for as long as a hand-over lasts.
				r.log.Debug("raftrep: an entry was not committed", "err", err)
				r.mu.Lock()
				r.sent = 0
				r.refused = true
				if forwarded > 0 {
					r.dropForwarded()
				}
				r.mu.Unlock()
				<-r.inflight
				return
			}
			took := time.Since(start)
			r.mu.Lock()
			r.gathering.committed(r.waiting()+answers, took)
			r.mu.Unlock()
			<-r.inflight
			r.stats.committed(took)
			r.tellCommit(f.Index())
			r.kick()
		}()
		return true
	}
	if r.sent == len(r.outbox) || r.cfg.Network == nil {
		r.mu.Unlock()
		return false
	}
	addr, _ := r.raft.LeaderWithID()
	if addr == "" {
		r.mu.Unlock()
		return false
	}
	conn := r.fwdConn
	if conn != nil && r.fwdAddr != string(addr) {
		conn.Close()
		conn, r.fwdConn, r.sent = nil, nil, 0
	}
	units := make([][]byte, 0, len(r.outbox)-r.sent)
	now := time.Now()
	for i := r.sent; i < len(r.outbox); i++ {
		r.outbox[i].sent = now
		units = append(units, r.outbox[i].data)
	}
	r.sent = len(r.outbox)
	r.mu.Unlock()

	if conn == nil {
		ctx, cancel := context.WithTimeout(context.Background(), r.cfg.HeartbeatTimeout)
		c, err := r.cfg.Network.DialForward(ctx, string(addr))
		cancel()
		if err != nil {
			r.log.Debug("raftrep: cannot reach the leader", "addr", addr, "err", err)
			r.mu.Lock()
			r.sent = 0
			r.mu.Unlock()
			return false
		}
		if _, err := c.Write([]byte{kindBatches}); err != nil {
			c.Close()
			return false
		}
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			c.Close()
			return false
		}
		conn, r.fwdConn, r.fwdAddr = c, c, string(addr)
		r.mu.Unlock()
	}
	var buf []byte
	for _, u := range units {
		buf = appendUnit(buf, u)
	}
	conn.SetWriteDeadline(time.Now().Add(r.cfg.HeartbeatTimeout))
	if _, err := conn.Write(buf); err != nil {
		r.mu.Lock()
		if r.fwdConn == conn {
			r.fwdConn.Close()
			r.fwdConn, r.sent = nil, 0
		}
		r.mu.Unlock()
		return false
	}
	r.stats.forwarded(len(units))
	return true
}

// pack builds the next entry from the unsent outbox and the forwarded
// batches, stamps it, and returns it with the count of batches. Called
// with mu held.
func (r *Replicator) pack() ([]byte, int) {
	var units [][]byte
	size := 0
	now := time.Now()
	for r.sent < len(r.outbox) && size < maxEntry {
		u := &r.outbox[r.sent]
		u.sent = now
		units = append(units, u.data)
		size += len(u.data)
		r.sent++
	}
	i := 0
	for i < len(r.fwd) && size < maxEntry {
		units = append(units, r.fwd[i])
		size += len(r.fwd[i])
		r.fwdCmds -= fsm.BatchLen(r.fwd[i])
		i++
	}
	clear(r.fwd[:i])
	r.fwd = r.fwd[i:]
	if len(units) == 0 {
		return nil, 0
	}
	entry := appendEntryHeader(make([]byte, 0, size+16+4*len(units)), r.stamp(), len(units))
	for _, u := range units {
		entry = appendUnit(entry, u)
	}
	return entry, len(units)
}

// The kinds of forward connection, its first byte.
const (
	kindBatches = 'B' // a stream of batches, each a uvarint length and the batch
	kindAdmin   = 'A' // one membership request and its answer (members.go)
)

// accept serves the connections of other nodes.
func (r *Replicator) accept(ln net.Listener) {
	defer r.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			defer c.Close()
			stop := context.AfterFunc(r.ctx, func() { c.Close() })
			defer stop()
			br := bufio.NewReader(c)
			kind, err := br.ReadByte()
			if err != nil {
				return
			}
			switch kind {
			case kindBatches:
				ic := r.addIn(c)
				if ic == nil {
					return
				}
				defer r.removeIn(ic)
				r.receive(br, ic)
			case kindAdmin:
				r.serveAdmin(br, c)
			}
		}()
	}
}

// inConn is a connection another node forwards its batches on.
type inConn struct {
	c    net.Conn
	dead bool // its batches were dropped: take nothing more from it
}

// addIn registers a connection batches arrive on; nil once the
// replicator closed.
func (r *Replicator) addIn(c net.Conn) *inConn {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	if r.in == nil {
		r.in = make(map[*inConn]struct{})
	}
	ic := &inConn{c: c}
	r.in[ic] = struct{}{}
	return ic
}

func (r *Replicator) removeIn(ic *inConn) {
	r.mu.Lock()
	delete(r.in, ic)
	r.mu.Unlock()
}

// dropForwarded drops the batches other nodes forwarded and this node has
// not packed, and closes every connection they arrive on, so that what
// their nodes send next comes, on a new connection, after everything of
// theirs not yet applied (see Replicator.in). Called with mu held.
func (r *Replicator) dropForwarded() {
	r.fwd, r.fwdCmds = nil, 0
	for ic := range r.in {
		ic.dead = true
		ic.c.Close()
		delete(r.in, ic)
	}
}

// receive queues the batches a follower forwards on connection ic, for
// this leader to pack once it is promoted. A node that does not lead
// drops them, and closes the connections batches arrive on
// (dropForwarded): the follower sends them again, with all that followed.
func (r *Replicator) receive(br *bufio.Reader, ic *inConn) {
	for {
		size, err := binary.ReadUvarint(br)
		if err != nil {
			return
		}
		if size > maxEntry*2 {
			r.log.Warn("raftrep: a forwarded batch too large", "bytes", size)
			return
		}
		b := make([]byte, size)
		if _, err := io.ReadFull(br, b); err != nil {
			return
		}
		r.step(stepReceive)
		// Raft's state is read under mu: a node already demoted (which
		// dropped fwd) reads the change that demoted it, and drops the
		// batch too; one that Raft made leader keeps it, for its promote.
		r.mu.Lock()
		if ic.dead {
			r.mu.Unlock()
			return
		}
		if !r.leading && r.raft.State() != raft.Leader {
			r.dropForwarded()
			r.mu.Unlock()
			return
		}
		r.fwd = append(r.fwd, b)
		r.fwdCmds += fsm.BatchLen(b)
		r.kick()
		r.mu.Unlock()
	}
}

var errNotLeader = errors.New("raftrep: not the leader")
