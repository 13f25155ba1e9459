package raftrep

import (
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// A follower learns that an entry committed from the leader's next
// AppendEntries: Raft sends one with the next entry, after the follower
// has stored that entry (a sync), or else a CommitTimeout (1 to 2 ms)
// after the last. A follower answers its clients when it applies their
// batches, and the leader's next entry waits for those clients' next
// requests (gather). So when an entry that carried other nodes' batches
// applies, the leader sends each other node a commit notice: an
// AppendEntries of its own with no entries, whose previous entry is the
// committed one and whose commit index is that entry's index; the message
// Raft's timer would send, sent at once, and without a sync on any node
// (a barrier entry, used before, cost one on each).
//
// Naming the committed entry as the previous one keeps it safe: a node
// applies the commit index only up to an entry it holds with the
// leader's term, and by Raft's log matching its log up to there is the
// leader's (a stale tail from an older term is never taken as
// committed). A node that has not received the entry yet refuses the
// notice (Raft logs that at debug level, hclogger) and learns of the
// commit with the entry itself.

// noticeServers is how long the leader keeps the list of servers it
// sends notices to before reading Raft's configuration again.
const noticeServers = time.Second

// tellCommit asks the notifier to tell the other nodes that the entry at
// index committed. A notice not sent yet is replaced.
func (r *Replicator) tellCommit(index uint64) {
	for {
		select {
		case r.notices <- index:
			return
		default:
		}
		select {
		case <-r.notices:
		default:
		}
	}
}

// notify sends the commit notices, one in flight per node at most: a
// node slow to answer, or unreachable, misses those sent meanwhile and
// learns of the commit from Raft.
func (r *Replicator) notify() {
	defer r.wg.Done()
	t := r.cfg.Transport
	self := raft.ServerID(r.cfg.ID)
	busy := make(map[raft.ServerID]*atomic.Bool)
	var servers []raft.Server
	var read time.Time
	for {
		var index uint64
		select {
		case <-r.stop:
			return
		case index = <-r.notices:
		}
		if time.Since(read) > noticeServers {
			f := r.raft.GetConfiguration()
			if err := f.Error(); err != nil {
				continue
			}
			servers, read = f.Configuration().Servers, time.Now()
		}
		// The entry was appended in this leader's term: a leader that
		// lost its term since has its future fail, and sends nothing.
		term := r.raft.CurrentTerm()
		if r.raft.State() != raft.Leader {
			continue
		}
		leader := t.EncodePeer(self, t.LocalAddr())
		for _, s := range servers {
			if s.ID == self {
				continue
			}
			b := busy[s.ID]
			if b == nil {
				b = new(atomic.Bool)
				busy[s.ID] = b
			}
			if !b.CompareAndSwap(false, true) {
				continue
			}
			r.wg.Add(1)
			go func() {
				defer r.wg.Done()
				defer b.Store(false)
				req := raft.AppendEntriesRequest{
					RPCHeader:         raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(self), Addr: leader},
					Term:              term,
					PrevLogEntry:      index,
					PrevLogTerm:       term,
					LeaderCommitIndex: index,
				}
				var resp raft.AppendEntriesResponse
				if err := t.AppendEntries(s.ID, s.Address, &req, &resp); err != nil {
					r.log.Debug("raftrep: a commit notice was not delivered", "to", s.ID, "err", err)
				}
			}()
		}
	}
}
