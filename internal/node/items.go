package node

import (
	"context"
	"fmt"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/cache"
	"github.com/latchd/latch/internal/fsm"
)

// The memcached item cache is part of the node's state, beside the lock
// table: a memcached lock is one command that takes the key in the lock
// table and marks the item, so that an operator's force-release or
// end-session frees both.
//
// Reads (Get, ItemKeys, ItemStats, ItemSizes) read the state at the
// node's time without changing it; what a get may change is only what the
// cache keeps per process (hit counters, the LRU position, which steers
// only this node's eviction choices). Eviction is the proposer's decision:
// before a write that would not fit, Do proposes an OpItemEvict for each
// item the cache's LRU order gives up, in the same batch as the write; and
// SweepItems proposes the eviction of expired items.

// Do applies the item command in on behalf of sess and returns its result:
// in.Op is one of the fsm's item commands but OpItemEvict, and the
// fields it reads are set (fsm.Command.SetItem: Do reads no other). in.At
// is its time, a reading of Now that a front end takes once per batch of
// requests (0: Do reads the clock); Do stamps the origin, the sequence
// number and the session. in is borrowed for the call; the result's
// Item.Value may be kept (a stored value is never written again).
func (n *Node) Do(sess latch.Session, in *fsm.Command) fsm.Result {
	if !in.Op.IsItem() || in.Op == fsm.OpItemEvict {
		return fsm.Result{Err: fmt.Errorf("node: %v is not an item command: %w", in.Op, fsm.ErrUnknownOp)}
	}
	var s *session
	var id latch.SessionID
	n.mu.Lock()
	defer n.unlock()
	if sess != nil {
		var ok bool
		if s, ok = sess.(*session); !ok || s.n != n {
			return fsm.Result{Err: fmt.Errorf("%v: %w: not this node's session", in.Op, latch.ErrNoSession)}
		}
		if s.ended != nil {
			return fsm.Result{Err: s.gone(in.Op.String())}
		}
		id = s.id
	}
	if n.shutdown {
		return fsm.Result{Err: fmt.Errorf("%v: %w", in.Op, latch.ErrShutdown)}
	}
	n.items.Cmds = n.items.Cmds[:0]
	at := in.At
	if at == 0 {
		at = n.now()
	}
	if bound, ok := growBound(in); ok && !n.st.Cache().Fits(bound) {
		n.evictions(at, in)
	}
	c := n.addItem()
	c.SetItem(in)
	c.At, c.Session = at, id
	r := n.proposeBatch(context.Background(), &n.items)
	if in.Op == fsm.OpItemLock && r.Err == nil && n.obs != nil && s != nil {
		n.obs.Granted(s.proto, 1, 0)
	}
	return *r
}

// addItem adds a slot to Node.items, stamped with this node's origin and
// its next sequence number, for the caller to make an item command
// (fsm.Command.SetItem or ResetItem). Node.items holds nothing but item
// commands, so the fields of a reused slot that no item command reads are
// still zero: setting the item fields is enough. Called with mu held.
func (n *Node) addItem() *fsm.Command {
	b := &n.items
	if len(b.Cmds) < cap(b.Cmds) {
		b.Cmds = b.Cmds[:len(b.Cmds)+1]
	} else {
		b.Cmds = append(b.Cmds, fsm.Command{})
	}
	n.seq++
	c := &b.Cmds[len(b.Cmds)-1]
	c.Origin, c.Seq = n.origin, n.seq
	return c
}

// growBound returns the most that in's write can grow the cache by, and
// false for a command that stores nothing new: a cheap bound, checked
// before every write, so that the exact growth (a second look-up) is
// computed only near the memory limit.
func growBound(in *fsm.Command) (int64, bool) {
	switch in.Op {
	case fsm.OpItemSet, fsm.OpItemAdd, fsm.OpItemReplace, fsm.OpItemCAS, fsm.OpItemReplaceAndUnlock:
		return int64(len(in.Key)+len(in.Value)) + cache.ItemOverhead, true
	case fsm.OpItemAppend, fsm.OpItemPrepend:
		return int64(len(in.Value)), true
	case fsm.OpItemIncr, fsm.OpItemDecr:
		// The longer result, or a new item of the initial value.
		return int64(len(in.Key)) + maxDigits + cache.ItemOverhead, true
	}
	return 0, false
}

// maxDigits is the length of the largest uint64 in decimal.
const maxDigits = 20

// evictions adds to Node.items an OpItemEvict for each item that must go
// for in's write to fit. When even that would not do, it adds nothing: the
// write itself then fails with cache.ErrNoMemory. Called with mu held.
func (n *Node) evictions(at int64, in *fsm.Command) {
	ch := n.st.Cache()
	var grow int64
	switch in.Op {
	case fsm.OpItemAppend, fsm.OpItemPrepend:
		grow = ch.Grow(at, in.Key, len(in.Value), true)
	case fsm.OpItemIncr, fsm.OpItemDecr:
		grow = ch.Grow(at, in.Key, maxDigits, false)
	default:
		grow = ch.Grow(at, in.Key, len(in.Value), false)
	}
	victims, err := ch.PlanRoom(n.victims[:0], at, in.Key, grow)
	if err != nil {
		return
	}
	n.addEvictions(at, victims)
}

// addEvictions adds an OpItemEvict of each victim to Node.items. Called
// with mu held.
func (n *Node) addEvictions(at int64, victims []cache.Victim) {
	for _, v := range victims {
		c := n.addItem()
		c.ResetItem(fsm.OpItemEvict, at, []byte(v.Key))
		c.CAS = v.CAS
	}
	clear(victims)
	n.victims = victims[:0]
}

// SweepItems proposes the removal of expired items among the next limit
// unlocked items of the LRU list, oldest first, and returns how many went
// (in a cluster, where only the leader sweeps: how many it proposed):
// the proposer's share of expiry (memcached's LRU crawler), so that dead
// items nobody reads give their memory back on every replica.
func (n *Node) SweepItems(limit int) int {
	n.mu.Lock()
	defer n.unlock()
	if n.shutdown {
		return 0
	}
	at := n.now()
	victims := n.st.Cache().Expired(n.victims[:0], at, limit)
	if len(victims) == 0 {
		return 0
	}
	n.items.Cmds = n.items.Cmds[:0]
	n.addEvictions(at, victims)
	proposed := len(n.items.Cmds)
	if _, self, _ := n.rep.Leader(); !self {
		return 0 // expiry is the leader's to propose
	}
	if err := n.sendBatch(&n.items); err != nil {
		return 0
	}
	if len(n.items.Results) < proposed {
		return proposed // applied later; the cache's CAS check decides each
	}
	removed := 0
	for i := range n.items.Results {
		removed += n.items.Results[i].Count
	}
	return removed
}

// Now reads the node's clock: wall-clock nanoseconds at its start plus the
// monotonic time since, the time it stamps into its commands.
func (n *Node) Now() int64 { return n.now() }

// Get returns the live item of key at now, a reading of Now (memcached
// get). It reads only.
func (n *Node) Get(now int64, key []byte) (cache.Item, error) {
	if !n.isReady.Load() {
		if err := n.awaitReady(); err != nil {
			return cache.Item{}, fmt.Errorf("get: %w", err)
		}
	}
	n.mu.Lock()
	defer n.unlock()
	return n.st.Cache().Get(now, key)
}

// ItemLive reports whether key has a live item at now, a reading of Now,
// without counting a get or moving the item in the LRU list (the unlock
// of a memcached connection that holds no lock answers from it). It reads
// only.
func (n *Node) ItemLive(now int64, key []byte) (bool, error) {
	if !n.isReady.Load() {
		if err := n.awaitReady(); err != nil {
			return false, fmt.Errorf("get: %w", err)
		}
	}
	n.mu.Lock()
	defer n.unlock()
	_, live, _ := n.st.Cache().Name(now, key)
	return live, nil
}

// ItemKeys returns the keys of the live items that start with prefix, in
// no order (yrmcds's keys command). It reads only.
func (n *Node) ItemKeys(prefix []byte) []string {
	n.mu.Lock()
	defer n.unlock()
	return n.st.Cache().AppendKeys(nil, n.now(), prefix)
}

// ItemEntries lists up to limit live items (limit <= 0: all), in no order
// (memcached's stats cachedump). It reads only.
func (n *Node) ItemEntries(limit int) []cache.Entry {
	n.mu.Lock()
	defer n.unlock()
	return n.st.Cache().AppendEntries(nil, n.now(), limit)
}

// ItemStats returns the item cache's counters.
func (n *Node) ItemStats() cache.Stats {
	n.mu.Lock()
	defer n.unlock()
	return n.st.Cache().Stats()
}

// ItemSizes counts the live items by size (cache.CountSizes).
func (n *Node) ItemSizes(bounds []int64) []uint64 {
	n.mu.Lock()
	defer n.unlock()
	return n.st.Cache().CountSizes(n.now(), bounds)
}

// ItemConfig returns the item cache's limits.
func (n *Node) ItemConfig() cache.Config { return n.cfg.Cache }

// HoldsItemLocks reports whether sess holds a memcached item lock.
func (n *Node) HoldsItemLocks(sess latch.Session) bool {
	n.mu.Lock()
	defer n.unlock()
	return n.st.Cache().Locks(sess.ID()) > 0
}
