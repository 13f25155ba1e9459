package fsm

import (
	"maps"
	"math"
	"slices"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/cache"
)

// Summary counts what a state holds, for a backup's metadata and for
// checking a restored state against it.
type Summary struct {
	// Locks is the number of keys held; Holds the holds on them (a
	// shared key may have several); Leases the holds with a lease (they
	// outlive their session); Waiters the queued requests.
	Locks, Holds, Leases, Waiters int
	// Sessions is the number of sessions of the lock table; Owned those
	// a cluster node owns (bound to one of its client connections).
	Sessions, Owned int
	// Items is the number of cached items (memcached), dead ones not yet
	// removed included; Znodes the ZooKeeper data tree's nodes.
	Items, Znodes int
	// Token is the fencing-token counter, the highest token granted (or
	// seeded); Zxid the ZooKeeper transaction id; Now the replicated
	// clock, in Unix nanoseconds.
	Token latch.Token
	Zxid  int64
	Now   int64
}

// Summary counts the state.
func (s *State) Summary() Summary {
	sum := Summary{
		Token:    s.eng.Stats().Token,
		Zxid:     s.tree.Zxid(),
		Now:      s.now,
		Sessions: s.eng.Stats().Sessions,
		Owned:    len(s.owners.of),
		Items:    int(s.cache.Stats().CurrItems),
	}
	sum.Znodes, _ = s.tree.Count()
	for _, k := range s.eng.Keys("", "", 0) {
		if len(k.Holders) > 0 {
			sum.Locks++
		}
		sum.Holds += len(k.Holders)
		sum.Waiters += len(k.Waiters)
		for _, h := range k.Holders {
			if h.Expires != 0 {
				sum.Leases++
			}
		}
	}
	return sum
}

// Reissue makes a state restored from a backup the first state of a new
// cluster, at the state's own instant (its replicated clock, which the new
// cluster's leader resumes from):
//   - it ends every session a node owns, as the node's death would: those
//     sessions were bound to client connections of the old cluster, which
//     no longer exist (their locks are released; the leased ones stay until
//     their lease ends);
//   - it raises the fencing-token counter to token and the ZooKeeper zxid
//     to zxid, when they are below: the caller picks values above anything
//     the old cluster may have issued after the backup, so that no client
//     sees a token or a zxid go back (and a lower one leaves the counter
//     alone: they never go down).
//
// Everything else (sessions with a TTL, leases, items, znodes) is kept,
// with the time it had left. It returns how many sessions it ended.
func (s *State) Reissue(token latch.Token, zxid int64) int {
	ended := 0
	var r Result
	for _, name := range slices.Sorted(maps.Keys(s.owners.nodes)) {
		s.Apply(&Command{Op: OpEndOwner, At: s.now, Key: []byte(name)}, &r)
		ended += r.Count
		// The node's record goes too: no node of the new cluster is it.
		delete(s.owners.nodes, name)
	}
	s.Apply(&Command{Op: OpSeed, At: s.now, Token: token}, &r)
	s.tree.SeedZxid(zxid)
	return ended
}

// OfflineConfig is the configuration of a state read off any node (a
// backup checked or restored by the latch command): no limit of the
// node's configuration refuses what the state holds. A node that
// restores the state later applies its own.
func OfflineConfig() Config {
	return Config{Cache: cache.Config{MemoryLimit: math.MaxInt64, MaxItemSize: math.MaxInt32}}
}
