package node

import (
	"fmt"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/fsm"
)

// A node of a cluster (Config.NodeID set) owns the sessions that are bound
// to its clients' connections (memcached, dlock version 2, version 3
// without a TTL): it opens them owned by its id, with Config.NodeTTL as
// their TTL in the replicated state, and keeps them alive with one
// heartbeat command (fsm.OpNodeAlive) every NodeTTL/10. If the node dies,
// its heartbeats stop, and the cluster ends its sessions (releasing their
// locks, with their lock-delay) a NodeTTL after the last one that
// committed. When it starts, it ends what a previous incarnation owned
// (fsm.OpEndOwner), before any session of its own.
//
// The node also watches its own heartbeats: if none of those sent in the
// last NodeTTL - NodeTTL/5 has been applied, the cluster may be about to
// end its sessions, so the node lets go of its clients first (letGo): it
// closes their connections rather than let them believe they hold locks
// that may already be another's. The margin covers the rate difference of
// two machines' clocks and the time a heartbeat takes to be stamped.

// defaultNodeTTL is Config.NodeTTL's default.
const defaultNodeTTL = 10 * time.Second

// beat is a heartbeat proposed and not yet applied.
type beat struct {
	seq  uint64
	sent time.Time
}

// startCluster proposes the seed of the token counter (which only ever
// raises it) and the end of a previous incarnation's sessions, and starts
// the heartbeat. Called with mu held, from New.
func (n *Node) startCluster(token latch.Token) {
	c := n.command(fsm.OpSeed)
	c.Token = token
	n.readyFrom = c.Seq
	c = n.add(fsm.OpEndOwner, c.At)
	c.Key = []byte(n.cfg.NodeID)
	if err := n.send(); err != nil {
		n.log.Warn("node: could not propose the end of a previous incarnation's sessions", "err", err)
	}
	n.vouched = time.Now()
	n.beatTimer = time.AfterFunc(n.cfg.NodeTTL/10, n.heartbeat)
}

// heartbeat proposes this node's heartbeat and checks that one sent
// recently enough was applied; it runs every NodeTTL/10.
func (n *Node) heartbeat() {
	n.mu.Lock()
	defer n.unlock()
	if n.shutdown {
		return
	}
	now := time.Now()
	if now.Sub(n.vouched) > n.cfg.NodeTTL-n.cfg.NodeTTL/5 {
		// Also the callers still waiting for a commit, sessions or not,
		// and the reads waiting for this node to catch up.
		n.giveUp("no heartbeat of this node committed within its node TTL")
	}
	c := n.command(fsm.OpNodeAlive)
	c.Key = []byte(n.cfg.NodeID)
	for _, id := range n.orphans {
		end := n.add(fsm.OpEndSession, c.At)
		end.Session = id
	}
	if err := n.send(); err == nil {
		n.beats = append(n.beats, beat{seq: n.batch.Cmds[0].Seq, sent: now})
		n.orphans = n.orphans[:0]
	}
	n.beatTimer.Reset(n.cfg.NodeTTL / 10)
}

// beatApplied records that this node's heartbeat seq was applied: the
// sessions it owns live at least a NodeTTL from when it was sent. Called
// with mu held, by apply.
func (n *Node) beatApplied(seq uint64) {
	i := 0
	for i < len(n.beats) && n.beats[i].seq <= seq {
		if n.beats[i].seq == seq {
			n.vouched = n.beats[i].sent
		}
		i++
	}
	n.beats = append(n.beats[:0], n.beats[i:]...)
}

// caughtUp records that this node applied its own command seq: if it was
// proposed after the node started, the node's state holds what the
// cluster committed before, and its reads may be served. Called with mu
// held, by apply.
func (n *Node) caughtUp(seq uint64) {
	if n.isReady.Load() || seq < n.readyFrom {
		return
	}
	n.readyErr = nil
	n.isReady.Store(true)
	n.closeReady()
}

// giveUp lets go of this node's clients (letGo) and fails the reads
// waiting for it to catch up: it cannot reach its cluster, or it shuts
// down. A snapshot restored as the node starts, or sent to it before it
// caught up, lets go of its clients but not of those reads, which wait
// until it catches up. Called with mu held.
func (n *Node) giveUp(why string) {
	n.notReady(fmt.Errorf("%s, before it caught up with its cluster: %w", why, latch.ErrUnavailable))
	n.letGo(why)
}

// notReady fails the reads waiting for this node to catch up (and later
// ones, until it does) with err. Called with mu held.
func (n *Node) notReady(err error) {
	if n.isReady.Load() {
		return
	}
	n.readyErr = err
	n.closeReady()
}

func (n *Node) closeReady() {
	select {
	case <-n.readable:
	default:
		close(n.readable)
	}
}

// CaughtUp reports whether the node serves its clients' reads: always in
// memory; for a replicated node, once it holds what its cluster committed
// before it started (see Node.readable).
func (n *Node) CaughtUp() bool { return n.isReady.Load() }

// awaitReady waits until this node may serve its clients' reads (see
// Node.readable), and returns why it may not if it gave up. Callers check
// isReady first, the usual case. Called without mu.
func (n *Node) awaitReady() error {
	<-n.readable
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.isReady.Load() {
		return n.readyErr
	}
	return nil
}

// NodeAlive returns the instant of the last heartbeat of the cluster node
// id that this node applied (false: none), and now on the same clock.
func (n *Node) NodeAlive(id string) (at, now int64, ok bool) {
	n.mu.Lock()
	defer n.unlock()
	at, ok = n.st.Alive(id)
	return at, n.now(), ok
}

// NodeTTL returns how long a cluster node's connection-bound sessions
// outlive its last heartbeat.
func (n *Node) NodeTTL() time.Duration { return n.cfg.NodeTTL }
