package raftrep

import (
	"sync"
	"time"
)

// Stats are the replicator's counters, for metrics.
type Stats struct {
	// Entries is how many entries this node proposed as leader, Batches how
	// many batches they carried, Bytes their size.
	Entries, Batches, Bytes uint64
	// Forwarded is how many batches this node forwarded to a leader.
	Forwarded uint64
	// Commits and CommitSeconds sum the time from proposing an entry to
	// its commit, as leader.
	Commits       uint64
	CommitSeconds float64
	// LeaderChanges counts the leaders this node saw take over.
	LeaderChanges uint64
	// AppliedIndex is the index of the last entry applied here, and
	// CommitIndex the last this node knows committed.
	AppliedIndex, CommitIndex uint64
}

// stats guards the counters.
type stats struct {
	mu sync.Mutex
	s  Stats
}

func (s *stats) entry(batches, bytes int) {
	s.mu.Lock()
	s.s.Entries++
	s.s.Batches += uint64(batches)
	s.s.Bytes += uint64(bytes)
	s.mu.Unlock()
}

func (s *stats) forwarded(batches int) {
	s.mu.Lock()
	s.s.Forwarded += uint64(batches)
	s.mu.Unlock()
}

func (s *stats) committed(d time.Duration) {
	s.mu.Lock()
	s.s.Commits++
	s.s.CommitSeconds += d.Seconds()
	s.mu.Unlock()
}

func (s *stats) leaderChanged() {
	s.mu.Lock()
	s.s.LeaderChanges++
	s.mu.Unlock()
}

func (s *stats) applied(index uint64) {
	s.mu.Lock()
	s.s.AppliedIndex = max(s.s.AppliedIndex, index)
	s.mu.Unlock()
}

// Counters returns the counters.
func (r *Replicator) Counters() Stats {
	r.stats.mu.Lock()
	c := r.stats.s
	r.stats.mu.Unlock()
	c.CommitIndex = r.raft.CommitIndex()
	return c
}
