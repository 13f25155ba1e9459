package node

import (
	"fmt"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/engine"
	"github.com/latchd/latch/internal/fsm"
)

// Locks lists the keys that are held, waited for or under lock-delay, in key
// order; see latch.Admin. The admin views read only: a lease or lock-delay
// that is due shows until the node's timer has proposed the Tick that ends
// it, moments later.
func (n *Node) Locks(prefix, after string, limit int) []latch.KeyInfo {
	n.mu.Lock()
	defer n.unlock()
	sts := n.st.Engine().Keys(prefix, after, limit)
	out := make([]latch.KeyInfo, len(sts))
	for i := range sts {
		out[i] = n.keyInfo(&sts[i])
	}
	return out
}

// Lock describes one key; see latch.Admin.
func (n *Node) Lock(key string) (latch.KeyInfo, bool) {
	n.mu.Lock()
	defer n.unlock()
	st, ok := n.st.Engine().Key(key)
	if !ok {
		return latch.KeyInfo{}, false
	}
	return n.keyInfo(&st), true
}

// keyInfo converts an engine key state, filling in each session's protocol
// and peer. Called with mu held.
func (n *Node) keyInfo(st *engine.KeyState) latch.KeyInfo {
	ki := latch.KeyInfo{
		Key:          st.Key,
		Mode:         st.Mode,
		Limit:        st.Limit,
		DelayedUntil: toTime(st.DelayedUntil),
	}
	if len(st.Holders) > 0 {
		ki.Holders = make([]latch.HolderInfo, len(st.Holders))
		for i, h := range st.Holders {
			hi := latch.HolderInfo{
				Session:  h.Session,
				Token:    h.Token,
				Acquired: toTime(h.Acquired),
				Expires:  toTime(h.Expires),
			}
			if s := n.sessions[h.Session]; s != nil {
				hi.Protocol, hi.Peer = s.opts.Protocol, s.opts.Peer
			}
			if h.Owned {
				hi.Protocol, hi.Owner = OwnedProtocol, h.Owner
			}
			ki.Holders[i] = hi
		}
	}
	if len(st.Waiters) > 0 {
		ki.Waiters = make([]latch.WaiterInfo, len(st.Waiters))
		for i, w := range st.Waiters {
			wi := latch.WaiterInfo{
				Session:  w.Session,
				Mode:     w.Mode,
				Position: w.Position,
				Since:    toTime(w.Since),
				Deadline: toTime(w.Deadline),
				Keys:     len(w.Keys),
			}
			if s := n.sessions[w.Session]; s != nil {
				wi.Protocol, wi.Peer = s.opts.Protocol, s.opts.Peer
			}
			ki.Waiters[i] = wi
		}
	}
	return ki
}

// Sessions lists the live sessions in ID order. A ZooKeeper session (one
// the data tree knows, on any node) has protocol ZooKeeperProtocol and its
// ephemeral znodes.
func (n *Node) Sessions() []latch.SessionInfo {
	n.mu.Lock()
	defer n.unlock()
	sts := n.st.Engine().Sessions()
	tree := n.st.Tree()
	out := make([]latch.SessionInfo, 0, len(sts))
	for _, st := range sts {
		si := latch.SessionInfo{
			ID:      st.ID,
			Opened:  toTime(st.Opened),
			TTL:     st.TTL,
			Expires: toTime(st.Expires),
			Held:    st.Held,
			Waiting: st.Waiting,
		}
		if node, ok := n.st.Owner(st.ID); ok {
			// Its TTL in the state is its node's: to its client it has none.
			si.Node, si.TTL, si.Expires = node, 0, time.Time{}
		}
		if s := n.sessions[st.ID]; s != nil {
			si.Protocol, si.Peer = s.opts.Protocol, s.opts.Peer
		}
		if _, _, ok := tree.Session(int64(st.ID)); ok {
			si.Protocol = ZooKeeperProtocol
			si.Ephemerals = tree.Ephemerals(int64(st.ID))
			if si.Ephemerals == nil {
				si.Ephemerals = []string{}
			}
		}
		out = append(out, si)
	}
	return out
}

// ForceRelease releases every holder of key, leased ones included, any
// lock-delay on it and the memcached lock mark of its item, and returns how
// many holders it removed. The next waiters are granted at once. It is
// logged at info level.
func (n *Node) ForceRelease(key string) (int, error) {
	if err := latch.CheckKey(key); err != nil {
		return 0, fmt.Errorf("force release: %w", err)
	}
	n.mu.Lock()
	defer n.unlock()
	if n.shutdown {
		return 0, fmt.Errorf("force release %q: %w", key, latch.ErrShutdown)
	}
	c := n.command(fsm.OpForceRelease)
	c.Key = []byte(key)
	r := n.propose()
	if r.Err != nil {
		return 0, fmt.Errorf("force release %q: %w", key, r.Err)
	}
	n.log.Info("node: admin force-release", "key", key, "holders", r.Count)
	return r.Count, nil
}

// EndSession ends a session as if it had died: its waiting requests fail
// with latch.ErrSessionEnded, its non-leased locks (memcached item locks
// included) are released with its lock-delay and its Done channel is
// closed. It ends a ZooKeeper session too, wherever its connection is:
// its ephemeral znodes are deleted and the ZListener of every node hears
// of its end (ZSessionEnded), so that its connection is closed. It fails
// with latch.ErrNoSession for a session that is neither this node's nor
// a ZooKeeper one. It is logged at info level.
func (n *Node) EndSession(id latch.SessionID) error {
	n.mu.Lock()
	defer n.unlock()
	s := n.sessions[id]
	if s == nil {
		if _, _, ok := n.st.Tree().Session(int64(id)); ok {
			return n.endZSession(id)
		}
		return fmt.Errorf("end session %d: %w", id, latch.ErrNoSession)
	}
	c := n.command(fsm.OpEndSession)
	c.Session, c.Token = id, latch.Token(s.gen) // not superseded if it was resumed here
	if err := n.propose().Err; err != nil {
		// The lock table ended it first (TTL lapsed at an instant now
		// passed); dispatch has closed Done.
		return err
	}
	n.endSession(s, latch.ErrSessionEnded)
	n.log.Info("node: admin end-session", "session", id, "protocol", s.opts.Protocol, "peer", s.opts.Peer)
	return nil
}

// endZSession ends ZooKeeper session id, of the generation the state
// holds now (a connection that attached it since makes the end
// superseded: the operator may try again). Called with mu held.
func (n *Node) endZSession(id latch.SessionID) error {
	if n.shutdown {
		return fmt.Errorf("end ZooKeeper session %d: %w", id, n.shutdownErr())
	}
	c := n.command(fsm.OpEndSession)
	c.Session, c.Token = id, latch.Token(n.st.Gen(id))
	if err := n.propose().Err; err != nil {
		return fmt.Errorf("end ZooKeeper session %d: %w", id, err)
	}
	n.log.Info("node: admin end-session", "session", id, "protocol", ZooKeeperProtocol)
	return nil
}
