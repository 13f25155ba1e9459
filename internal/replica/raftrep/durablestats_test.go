package raftrep_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/replica/raftrep"
)

// TestDurableNodeStats: a durable single node counts every commit of its
// entries in the commit-time histogram, knows its one member, and
// describes its newest snapshot, the one it found in its data dir after a
// restart included.
func TestDurableNodeStats(t *testing.T) {
	c := newCluster(t, 1, true)
	id := c.leader()
	r := c.reps[id]
	if _, ok := r.LastSnapshot(); ok {
		t.Errorf("LastSnapshot() ok before any snapshot")
	}
	if n, err := r.Members(); err != nil || n != 1 {
		t.Errorf("Members() = %d, %v; want 1", n, err)
	}

	sess := c.open(id, latch.SessionOptions{Protocol: "test"})
	const locks = 10
	for i := range locks {
		if _, err := sess.Acquire(context.Background(), latch.LockRequest{Keys: []string{fmt.Sprint("k", i)}, Lease: time.Minute}); err != nil {
			t.Fatalf("Acquire(k%d): %v", i, err)
		}
	}
	// The grant comes with the entry's apply; the commit is counted
	// once Raft answers the proposal, just after.
	var st raftrep.Stats
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if st = r.Counters(); st.Commits >= locks || time.Now().After(deadline) {
			break
		}
	}
	if st.Commits < locks {
		t.Errorf("Commits = %d after %d grants, want at least %[2]d", st.Commits, locks)
	}
	if len(st.CommitBuckets) != len(raftrep.CommitBounds)+1 {
		t.Fatalf("%d commit buckets, want %d", len(st.CommitBuckets), len(raftrep.CommitBounds)+1)
	}
	var counted uint64
	for _, n := range st.CommitBuckets {
		counted += n
	}
	if counted != st.Commits || st.CommitSeconds <= 0 {
		t.Errorf("commit buckets count %d commits of %v s in all, want Commits %d and some time", counted, st.CommitSeconds, st.Commits)
	}

	before := time.Now().Truncate(time.Millisecond)
	if err := raftrep.TakeSnapshot(r); err != nil {
		t.Fatalf("TakeSnapshot: %v", err)
	}
	after := time.Now()
	info, ok := r.LastSnapshot()
	if !ok {
		t.Fatal("LastSnapshot() not ok after a snapshot")
	}
	if applied := r.Counters().AppliedIndex; info.Index == 0 || info.Index > applied || info.Term == 0 {
		t.Errorf("LastSnapshot() index %d term %d, want a term and an index up to the applied %d", info.Index, info.Term, applied)
	}
	if info.Taken.Before(before) || info.Taken.After(after) {
		t.Errorf("LastSnapshot() taken at %v, want between %v and %v", info.Taken, before, after)
	}
	files, err := filepath.Glob(filepath.Join(c.dirs[id], "snap", "*.snap"))
	if err != nil || len(files) != 1 {
		t.Fatalf("snapshot files %q, %v; want one", files, err)
	}
	fi, err := os.Stat(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if info.Size != fi.Size() {
		t.Errorf("LastSnapshot() size %d, want its file's %d", info.Size, fi.Size())
	}

	c.stop(id)
	c.start(id)
	again, ok := c.reps[id].LastSnapshot()
	if !ok || again != info {
		t.Errorf("LastSnapshot() after a restart = %+v, %v; want %+v", again, ok, info)
	}
}
