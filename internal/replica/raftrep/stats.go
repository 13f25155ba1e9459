package raftrep

import (
	"slices"
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
	// its commit, as leader: from handing it to Raft to Raft answering
	// that it is applied here, after a quorum stored it (this node's
	// fsync included). CommitBuckets counts those times by CommitBounds:
	// CommitBuckets[i] the commits that took at most CommitBounds[i] and
	// more than CommitBounds[i-1], the last one those longer than every
	// bound (len(CommitBounds)+1 buckets, not cumulative).
	Commits       uint64
	CommitSeconds float64
	CommitBuckets []uint64
	// LeaderChanges counts the leaders this node saw take over.
	LeaderChanges uint64
	// AppliedIndex is the index of the last entry applied here, and
	// CommitIndex the last this node knows committed.
	AppliedIndex, CommitIndex uint64
}

// CommitBounds are the upper bounds of the buckets of Stats.CommitBuckets:
// from 100µs (a node alone on a fast disk) to 10s (a cluster that cannot
// reach a quorum for a while), in steps of 1, 2.5, 5.
var CommitBounds = []time.Duration{
	100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
	10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second,
}

// stats guards the counters.
type stats struct {
	mu      sync.Mutex
	s       Stats
	buckets [17]uint64 // len(CommitBounds)+1; s.CommitBuckets is nil
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
	s.buckets[commitBucket(d)]++
	s.mu.Unlock()
}

// commitBucket returns the index of the bucket of CommitBounds that d
// falls in.
func commitBucket(d time.Duration) int {
	i, _ := slices.BinarySearch(CommitBounds, d)
	return i
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
	c.CommitBuckets = slices.Clone(r.stats.buckets[:])
	r.stats.mu.Unlock()
	c.CommitIndex = r.raft.CommitIndex()
	return c
}

func init() {
	if len(CommitBounds)+1 != len(stats{}.buckets) || !slices.IsSorted(CommitBounds) {
		panic("raftrep: CommitBounds does not match the buckets of stats")
	}
}
