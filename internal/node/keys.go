package node

import "github.com/latchd/latch"

// The lock table's keys as they change: for the Redis front end's
// client-side caching, which must tell the clients that read a key when
// it changes, by whatever means (a lock taken, released, renewed, taken
// over, expired or force-released; over any protocol; proposed by any
// node). Every node applies every command, so each hears of every change
// from its own apply path, in the order applied, including the expiries
// that the leader's Tick applies at about the lease's end.

// KeysFunc hears of the keys that one applied command changed. It is
// called under the node's lock, in apply order: it must not block or call
// the node, and keys is valid only during the call (a key may be listed
// more than once). client is the proposer's fsm.Command.Client when this
// node proposed the command, else 0. keys nil means any key may have
// changed: the node replaced its state (a snapshot restored).
//
// It is a plain func type so that a front end can name WatchKeys in an
// interface of its own without importing this package.
type KeysFunc = func(keys []string, client uint64)

// WatchKeys makes f hear of the lock table's changes from now on (nil:
// nobody, and the lock table stops recording them).
func (n *Node) WatchKeys(f KeysFunc) {
	n.mu.Lock()
	defer n.unlock()
	n.kf = f
	n.st.RecordChanged(f != nil)
	if f == nil {
		clear(n.kclients)
	}
}

// keysApplied tells the KeysFunc which keys command c changed. Called
// with mu held, after each command applied.
func (n *Node) keysApplied(seq uint64, own bool, client uint64) {
	n.kchanged = n.st.TakeChanged(n.kchanged[:0])
	if own && client == 0 && len(n.kclients) > 0 {
		// A cluster's command comes back decoded, without its Client.
		client = n.kclients[seq]
		for s := range n.kclients {
			if s <= seq { // this one, and those lost on the way
				delete(n.kclients, s)
			}
		}
	}
	if len(n.kchanged) == 0 {
		return
	}
	if !own {
		client = 0
	}
	n.kf(n.kchanged, client)
	clear(n.kchanged)
}

// keysClient remembers the client of the command seq that this node
// proposes, for keysApplied, when it is applied from its encoding (a
// cluster). Called with mu held.
func (n *Node) keysClient(seq, client uint64) {
	if client == 0 || n.kf == nil || n.exec != latch.Replicated {
		return
	}
	if n.kclients == nil {
		n.kclients = make(map[uint64]uint64)
	}
	n.kclients[seq] = client
}
