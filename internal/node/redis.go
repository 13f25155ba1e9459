package node

import (
	"fmt"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/fsm"
)

// Locks owned by a value (fsm's OpOwned): the Redis front end's locks.
// They belong to no session, so none of them is this node's to wait for
// or to end: each operation is one command, proposed as it comes.

// OwnedProtocol is the protocol the admin views give the holders of owned
// locks: only the Redis front end takes them.
const OwnedProtocol = "redis"

// Owned applies the owned-lock command in (fsm.OpOwned or fsm.OpOwnedTx,
// with the fields it reads set) at the node's time, and returns its
// result. in is borrowed for the call only.
func (n *Node) Owned(in *fsm.Command) fsm.Result {
	if in.Op != fsm.OpOwned && in.Op != fsm.OpOwnedTx {
		return fsm.Result{Err: fmt.Errorf("node: %v is not an owned-lock command: %w", in.Op, fsm.ErrUnknownOp)}
	}
	n.mu.Lock()
	defer n.unlock()
	if n.shutdown {
		return fsm.Result{Err: fmt.Errorf("%v: %w", in.Op, latch.ErrShutdown)}
	}
	c := n.command(in.Op)
	c.Req.Keys, c.Req.Lease, c.Value = in.Req.Keys, in.Req.Lease, in.Value
	c.Owned, c.OwnedFlags, c.Prefix = in.Owned, in.OwnedFlags, in.Prefix
	c.Tx, c.Watch, c.TxResults = in.Tx, in.Watch, in.TxResults
	c.ZSet = in.ZSet
	r := n.propose()
	if n.obs != nil {
		n.ownedGrants(in, &r)
	}
	return r
}

// ownedGrants tells the Observer about the grants that the owned-lock
// command in made, whose result is r. Called with mu held.
func (n *Node) ownedGrants(in *fsm.Command, r *fsm.Result) {
	if in.Op == fsm.OpOwned {
		if r.Granted {
			n.obs.Granted(OwnedProto, len(in.Req.Keys), 0)
		}
		return
	}
	for i := range r.Tx {
		if r.Tx[i].Granted && i < len(in.Tx) {
			n.obs.Granted(OwnedProto, len(in.Tx[i].Req.Keys), 0)
		}
	}
}

// OwnedGet reads key's holder at the node's time, as an fsm.OwnedGet
// command would answer, without proposing anything; at is that time.
func (n *Node) OwnedGet(key string) (r fsm.Result, at int64) {
	if !n.isReady.Load() {
		if err := n.awaitReady(); err != nil {
			return fsm.Result{Err: fmt.Errorf("get: %w", err)}, n.now()
		}
	}
	n.mu.Lock()
	defer n.unlock()
	at = n.now()
	return n.st.OwnedGet(at, key), at
}

// OwnedZGet reads key's sorted set at the node's time, as an
// fsm.OwnedZGet command would answer (Result.ZSet is a copy the caller
// owns; an error wrapping fsm.ErrWrongType on a lock), without proposing
// anything; at is that time. The copy is made under the node's lock: it
// costs what copying the set's members costs.
func (n *Node) OwnedZGet(key string) (r fsm.Result, at int64) {
	if !n.isReady.Load() {
		if err := n.awaitReady(); err != nil {
			return fsm.Result{Err: fmt.Errorf("zget: %w", err)}, n.now()
		}
	}
	n.mu.Lock()
	defer n.unlock()
	at = n.now()
	return n.st.OwnedZGet(at, key), at
}
