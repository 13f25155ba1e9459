package raftrep

import (
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// A follower learns that an entry committed from the leader's next
// AppendEntries: Raft sends one with the next entry, after the follower
// has stored that entry (a sync), or else a CommitTimeout after the last.
// A follower answers its clients when it applies their batches, and its
// reads (memcached get, Redis GET) see what it has applied. So when an
// entry applies on the leader, the leader sends each other node a commit
// notice: an AppendEntries of its own with no entries, whose previous
// entry is the committed one and whose commit index is that entry's
// index; the message Raft's timer would send, sent at once, and without a
// sync on any node (a barrier entry, used before, cost one on each).
// Raft's timer is then only a fallback, and runs at Raft's default
// (commitTimeout): at 1 ms, as it was when only entries carrying other
// nodes' batches sent notices, an idle 3-node cluster spent a third of a
// core of this repository's 2-core test machine on it.
//
// Naming the committed entry as the previous one keeps it safe: a node
// applies the commit index only up to an entry it holds with the
// leader's term, and by Raft's log matching its log up to there is the
// leader's (a stale tail from an older term is never taken as
// committed). A node that has not received the entry yet refuses the
// notice (Raft logs that at debug level, hclogger); it is sent again
// (noticeTries), and else the node learns of the commit from Raft.

// commitTimeout is Raft's CommitTimeout: how long a follower that a
// notice missed may wait to hear of a commit when no entry follows.
const commitTimeout = 50 * time.Millisecond

// A node that refuses a notice because it has not stored the entry yet
// (its AppendEntries is on the way, or its sync is slow, and the other
// node's answer committed the entry) is sent it again: noticeRetry later,
// then twice as long each time, noticeTries times in all (3.1 ms from
// the first), unless a newer notice for it is asked for meanwhile, which
// takes its place.
const (
	noticeTries = 6
	noticeRetry = 100 * time.Microsecond
)

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

// notify sends the commit notices, each node's in order on a line of its
// own (noticeLine): a node slow to answer, or unreachable, holds up only
// its own.
func (r *Replicator) notify() {
	defer r.wg.Done()
	self := raft.ServerID(r.cfg.ID)
	lines := make(map[raft.ServerID]*noticeLine)
	for {
		var index uint64
		select {
		case <-r.stop:
			return
		case index = <-r.notices:
		}
		// The latest configuration, read at each notice (Raft keeps it
		// in an atomic value), so that a member just added, or added
		// again at another address, is told too.
		f := r.raft.GetConfiguration()
		if err := f.Error(); err != nil {
			continue
		}
		// The notice names the entry's own term, which this node led: it
		// appended the entry as leader, so the notice is that leader's
		// word, whatever happened since. (Raft's current term, read
		// apart from its state, could be one that another node led, or
		// that this node led later, with the entry of an earlier one.) A
		// node that no longer leads that term sends nothing: the others
		// refuse it, or learn of the commit from their leader.
		var entry raft.Log
		if err := r.logs.GetLog(index, &entry); err != nil {
			continue
		}
		term := entry.Term
		if r.raft.State() != raft.Leader || r.raft.CurrentTerm() != term {
			continue
		}
		for _, s := range f.Configuration().Servers {
			if s.ID == self {
				continue
			}
			l := lines[s.ID]
			if l == nil {
				l = new(noticeLine)
				lines[s.ID] = l
			}
			if l.ask(s, term, index) {
				r.wg.Add(1)
				go r.carry(l)
			}
		}
	}
}

// A noticeLine carries the notices to one node, one at a time: those
// asked for while one is on its way wait, and only the latest of them is
// sent.
type noticeLine struct {
	mu          sync.Mutex
	to          raft.Server // the node, at its latest address
	term, index uint64      // the latest notice asked for
	sent        uint64      // the index of the last one sent
	running     bool        // a goroutine carries the line (carry)
}

// ask asks for the notice of index, committed in term, to node to, and
// reports whether the line needs a goroutine to carry it.
func (l *noticeLine) ask(to raft.Server, term, index uint64) (start bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.to, l.term, l.index = to, term, index
	start = !l.running
	l.running = true
	return start
}

// carry sends the line's notices until none is left to send.
func (r *Replicator) carry(l *noticeLine) {
	defer r.wg.Done()
	for {
		l.mu.Lock()
		to, term, index := l.to, l.term, l.index
		if index == l.sent || r.ctx.Err() != nil {
			l.running = false
			l.mu.Unlock()
			return
		}
		l.mu.Unlock()
		r.tell(l, to, term, index)
		l.mu.Lock()
		l.sent = index
		l.mu.Unlock()
	}
}

// superseded reports whether a notice newer than index was asked for.
func (l *noticeLine) superseded(index uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.index != index
}

// tell sends node to, on line l, the notice that the entry at index, of
// term, committed.
func (r *Replicator) tell(l *noticeLine, to raft.Server, term, index uint64) {
	t := r.cfg.Transport
	self := raft.ServerID(r.cfg.ID)
	leader := t.EncodePeer(self, t.LocalAddr())
	req := raft.AppendEntriesRequest{
		RPCHeader:         raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(self), Addr: leader},
		Term:              term,
		PrevLogEntry:      index,
		PrevLogTerm:       term,
		LeaderCommitIndex: index,
	}
	wait := noticeRetry
	for try := 1; ; try++ {
		var resp raft.AppendEntriesResponse
		if err := t.AppendEntries(to.ID, to.Address, &req, &resp); err != nil {
			r.log.Debug("raftrep: a commit notice was not delivered", "to", to.ID, "err", err)
			return
		}
		// Refused with the entry stored, or by a newer term: Raft's own
		// replication sorts that out.
		if resp.Success || resp.LastLog >= index || resp.Term > term || try == noticeTries {
			return
		}
		select {
		case <-time.After(wait):
		case <-r.ctx.Done():
			return
		}
		if l.superseded(index) {
			return
		}
		wait *= 2
	}
}
