package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/fsm"
	"github.com/latchd/latch/internal/znode"
)

// ZooKeeper sessions and the data tree (fsm's OpZ commands): the
// ZooKeeper front end's. A ZooKeeper session is a lock-table session with
// a TTL that the tree knows, so it outlives its connection and moves to
// another node as a dlock session does, but this node keeps no session
// record for it: the front end keeps its connection, and the tree its
// ephemerals. Writes are commands; reads are local (ZRead), under the
// node's lock, which the tree's changes are applied under too, so that a
// watch registered by a read is registered before or after a change,
// never across it.

// ZooKeeperProtocol is the protocol the admin views give ZooKeeper
// sessions, which the tree knows on every node.
const ZooKeeperProtocol = "zookeeper"

// ZListener hears of the data tree's changes on this node as they are
// applied, in order, under the node's lock: it must not block or call the
// node. The ZooKeeper front end delivers watches from it.
type ZListener interface {
	// ZChanged reports the watch triggers of one command, applied at the
	// tree's zxid.
	ZChanged(zxid int64, evs []znode.Event)
	// ZSessionEnded reports that a ZooKeeper session ended (closed,
	// expired, or ended by an operator): its ephemerals are gone.
	ZSessionEnded(id latch.SessionID)
	// ZSessionMoved reports that a session was attached to a connection
	// (on any node), whose generation is now gen: a connection of an
	// older generation no longer speaks for it.
	ZSessionMoved(id latch.SessionID, gen uint64)
}

// SetZListener makes l hear of the tree's changes from now on (nil: none).
func (n *Node) SetZListener(l ZListener) {
	n.mu.Lock()
	defer n.unlock()
	n.zl = l
}

// zApplied tells the listener what command c (result r) did to the tree,
// and what the tree's sessions did. Called with mu held, after each
// command applied.
func (n *Node) zApplied(c *fsm.Command, r *fsm.Result) {
	if !n.st.ZPending() && c.Op != fsm.OpZAttach {
		return // the usual case (every memcached command): the tree is as it was
	}
	n.zevs, n.zended = n.st.TakeZ(n.zevs[:0], n.zended[:0])
	if n.zl == nil {
		return
	}
	if len(n.zevs) > 0 {
		n.zl.ZChanged(n.st.Tree().Zxid(), n.zevs)
	}
	for _, id := range n.zended {
		n.zl.ZSessionEnded(id)
	}
	if c.Op == fsm.OpZAttach && r.Err == nil {
		n.zl.ZSessionMoved(c.Session, uint64(r.Count))
	}
}

// zReady waits, if the node is replicated, until its state holds what its
// cluster committed before it started, as reads do.
func (n *Node) zReady(what string) error {
	if n.isReady.Load() {
		return nil
	}
	if err := n.awaitReady(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// wallMillis is the proposer's wall clock that ZooKeeper commands carry
// (znodes' ctime and mtime).
func wallMillis() int64 { return time.Now().UnixMilli() }

// ZOpen opens a ZooKeeper session with the timeout and password given,
// and returns its id and the tree's zxid.
func (n *Node) ZOpen(timeout time.Duration, passwd [fsm.PasswordLen]byte) (latch.SessionID, int64, error) {
	n.mu.Lock()
	defer n.unlock()
	if n.shutdown {
		return 0, 0, fmt.Errorf("open ZooKeeper session: %w", latch.ErrShutdown)
	}
	c := n.command(fsm.OpZOpen)
	c.TTL, c.Value, c.Exptime = timeout, passwd[:], wallMillis()
	r := n.propose()
	if r.Err != nil {
		return 0, r.Zxid, fmt.Errorf("open ZooKeeper session: %w", r.Err)
	}
	return r.Session, r.Zxid, nil
}

// ZAttach moves session id to a connection of this node if passwd is its
// password, and returns its new generation, its timeout and the tree's
// zxid. A session the tree does not know, or a wrong password, fails with
// fsm.ErrZSession; one attached elsewhere since this node last applied
// (its attach there overtook this one) with fsm.ErrSuperseded.
func (n *Node) ZAttach(id latch.SessionID, passwd [fsm.PasswordLen]byte) (gen uint64, timeout time.Duration, zxid int64, err error) {
	n.mu.Lock()
	defer n.unlock()
	if n.shutdown {
		return 0, 0, 0, fmt.Errorf("attach ZooKeeper session: %w", n.shutdownErr())
	}
	c := n.command(fsm.OpZAttach)
	c.Session, c.Gen, c.Value = id, n.st.Gen(id), passwd[:]
	r := n.propose()
	if r.Err != nil {
		return 0, 0, r.Zxid, r.Err
	}
	return uint64(r.Count), r.TTL, r.Zxid, nil
}

// shutdownErr is the error of a call on a node that is shutting down: a
// replicated node's sessions live on elsewhere (latch.ErrUnavailable).
func (n *Node) shutdownErr() error {
	if n.cfg.Replicator != nil {
		return latch.ErrUnavailable
	}
	return latch.ErrShutdown
}

// ZClose ends session id, of generation gen, with its ephemerals, and
// returns the tree's zxid.
func (n *Node) ZClose(id latch.SessionID, gen uint64) (int64, error) {
	n.mu.Lock()
	defer n.unlock()
	if n.shutdown {
		return 0, fmt.Errorf("close ZooKeeper session: %w", n.shutdownErr())
	}
	c := n.command(fsm.OpEndSession)
	c.Session, c.Token = id, latch.Token(gen)
	r := n.propose()
	zxid := n.st.Tree().Zxid()
	if r.Err != nil {
		return zxid, fmt.Errorf("close ZooKeeper session: %w", r.Err)
	}
	return zxid, nil
}

// ZWrite applies ops (one, or a multi) on behalf of session id of
// generation gen, and returns their results and the tree's zxid after
// them. ops' slices are borrowed for the call.
func (n *Node) ZWrite(id latch.SessionID, gen uint64, ops []znode.Op, multi bool) ([]znode.Result, int64, error) {
	type outcome struct {
		rs   []znode.Result
		zxid int64
		err  error
	}
	ch := make(chan outcome, 1)
	n.ZWriteFunc(id, gen, ops, multi, func(rs []znode.Result, zxid int64, err error) { ch <- outcome{rs, zxid, err} })
	o := <-ch
	return o.rs, o.zxid, o.err
}

// ZWriteFunc is ZWrite for a caller that does not wait: done gets the
// outcome once the operations are applied on this node (with a node in
// memory, before ZWriteFunc returns), from a goroutine that must not
// block, so that a connection keeps several writes in flight while they
// commit. The node applies the writes of one caller in the order they were
// proposed.
func (n *Node) ZWriteFunc(id latch.SessionID, gen uint64, ops []znode.Op, multi bool, done func([]znode.Result, int64, error)) {
	n.mu.Lock()
	if n.shutdown {
		n.unlock()
		done(nil, 0, fmt.Errorf("znode write: %w", n.shutdownErr()))
		return
	}
	n.zbuf = fsm.AppendZOps(n.zbuf[:0], ops)
	c := n.command(fsm.OpZWrite)
	c.Session, c.Gen, c.Value, c.Exptime = id, gen, n.zbuf, wallMillis()
	if multi {
		c.Flags = fsm.ZMulti
	}
	n.proposeResult(func(r fsm.Result) { done(r.Z, r.Zxid, r.Err) })
	n.unlock()
}

// ZTouch restarts the timeouts of the sessions ids (each of the
// generation gens holds at its index), in one batch: the liveness of
// sessions that had traffic since the last touch, without a command per
// ping. A session that moved or ended is left alone. It waits for the
// batch to apply until ctx is done (an error wrapping
// latch.ErrUnavailable: the touch may still apply later).
func (n *Node) ZTouch(ctx context.Context, ids []latch.SessionID, gens []uint64) error {
	if len(ids) == 0 {
		return nil
	}
	n.mu.Lock()
	defer n.unlock()
	if n.shutdown {
		return fmt.Errorf("touch ZooKeeper sessions: %w", n.shutdownErr())
	}
	at := n.now()
	n.batch.Cmds = n.batch.Cmds[:0]
	for i, id := range ids {
		c := n.add(fsm.OpKeepAlive, at)
		c.Session, c.Gen = id, gens[i]
	}
	r := n.proposeCtx(ctx)
	if errors.Is(r.Err, latch.ErrNoSession) || errors.Is(r.Err, fsm.ErrSuperseded) {
		return nil // the last one ended or moved: its connection hears of it
	}
	if r.Err != nil {
		return fmt.Errorf("touch ZooKeeper sessions: %w", r.Err)
	}
	return nil
}

// ZVouched reports whether this node can vouch for the sessions of its
// ZooKeeper clients, whose liveness it carries: a single node always; a
// cluster member while a heartbeat of its own sent within the last three
// heartbeat intervals (at least 2 s) was committed. A member cut off from
// its cluster stops vouching within that time, and its front end closes
// its connections, so that their clients move to a node that can (as a
// ZooKeeper server that loses its quorum stops serving), well before the
// cluster ends their sessions.
func (n *Node) ZVouched() bool {
	if n.cfg.NodeID == "" {
		return true
	}
	n.mu.Lock()
	defer n.unlock()
	return time.Since(n.vouched) < max(3*n.cfg.NodeTTL/10, 2*time.Second)
}

// ZSync waits until a command proposed now is applied on this node (a
// barrier: everything committed before is then applied here too), and
// returns the tree's zxid.
func (n *Node) ZSync(ctx context.Context) (int64, error) {
	n.mu.Lock()
	defer n.unlock()
	if n.shutdown {
		return 0, fmt.Errorf("sync: %w", n.shutdownErr())
	}
	n.command(fsm.OpTick)
	r := n.proposeCtx(ctx)
	if r.Err != nil {
		return 0, fmt.Errorf("sync: %w", r.Err)
	}
	return n.st.Tree().Zxid(), nil
}

// ZReap deletes the containers that are empty, if there are any, and
// returns how many it deleted.
func (n *Node) ZReap() (int, error) {
	n.mu.Lock()
	defer n.unlock()
	if n.shutdown {
		return 0, nil
	}
	c := n.command(fsm.OpZReap)
	c.Exptime = wallMillis()
	r := n.propose()
	return r.Count, r.Err
}

// ZRead calls read with the data tree, under the node's lock, once the
// node's state is readable: read must only read the tree, and may
// register watches (which ZListener then fires), but must not block or
// call the node.
func (n *Node) ZRead(read func(t *znode.Tree)) error {
	if err := n.zReady("znode read"); err != nil {
		return err
	}
	n.mu.Lock()
	defer n.unlock()
	read(n.st.Tree())
	return nil
}

// ZMode names this node's part as ZooKeeper's four-letter words do:
// "standalone" for a single node (in memory or durable), "leader" or
// "follower" for a cluster member.
func (n *Node) ZMode() string {
	if n.cfg.NodeID == "" {
		return "standalone"
	}
	n.mu.Lock()
	defer n.unlock()
	if n.rep == nil {
		return "follower"
	}
	if _, self, _ := n.rep.Leader(); self {
		return "leader"
	}
	return "follower"
}
