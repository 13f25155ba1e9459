package raftrep_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/fsm"
	"github.com/latchd/latch/internal/replica/raftrep"
)

// TestSnapshotRestore: a follower's snapshot (node.Snapshot), reissued
// (fsm.Reissue) and seeded into new data dirs (SeedDir), starts a new
// 3-node cluster that holds the leased locks, the TTL session's lock and
// the items of the old one, not the lock of a connection-bound session,
// and grants tokens above the raised counter.
func TestSnapshotRestore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		old := newCluster(t, 3, true)
		lead := old.leader()
		f1 := old.other(lead)
		ctx := context.Background()
		bound := old.open(f1, latch.SessionOptions{})                 // owned by f1
		ttl := old.open(lead, latch.SessionOptions{TTL: time.Minute}) // a resumable one
		leased, err := bound.Acquire(ctx, latch.LockRequest{Keys: []string{"leased"}, Lease: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := bound.Acquire(ctx, latch.LockRequest{Keys: []string{"bound"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := ttl.Acquire(ctx, latch.LockRequest{Keys: []string{"ttl"}}); err != nil {
			t.Fatal(err)
		}
		if r := old.nodes[lead].Do(nil, &fsm.Command{Op: fsm.OpItemSet, Key: []byte("item"), Value: []byte("v")}); r.Err != nil {
			t.Fatal(r.Err)
		}
		snap, err := old.nodes[f1].Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if snap.Index == 0 || snap.Term == 0 {
			t.Errorf("snapshot at index %d, term %d", snap.Index, snap.Term)
		}
		if s := snap.Summary; s.Locks != 3 || s.Leases != 1 || s.Owned != 1 || s.Items != 1 {
			t.Errorf("snapshot summary %+v", s)
		}
		// The old cluster goes on granting after the snapshot.
		after, err := ttl.Acquire(ctx, latch.LockRequest{Keys: []string{"after"}})
		if err != nil {
			t.Fatal(err)
		}

		st, err := fsm.Restore(fsm.OfflineConfig(), snap.State)
		if err != nil {
			t.Fatal(err)
		}
		floor := after.Token + 1_000_000
		st.Reissue(floor, 0)
		state := st.AppendSnapshot(nil)

		// The old cluster stops; the new one starts half an hour later,
		// which counts for nothing: its clock resumes from the backup's.
		for _, id := range []string{"n1", "n2", "n3"} {
			old.stop(id)
		}
		time.Sleep(30 * time.Minute)

		fresh := makeCluster(t, 3, true)
		for _, p := range fresh.peers {
			seed := raftrep.Seed{Dir: fresh.dirs[p.ID], ID: p.ID, Peers: fresh.peers, Index: snap.Index, Stamp: st.Now(), State: state}
			if err := raftrep.SeedDir(seed); err != nil {
				t.Fatal(err)
			}
			// Seeding twice is refused: the dir holds a state.
			if err := raftrep.SeedDir(seed); err == nil || !strings.Contains(err.Error(), "holds a node's state") {
				t.Errorf("second seed of %s: %v", p.ID, err)
			}
		}
		fresh.startAll()
		lead2 := fresh.leader()
		f2 := fresh.other(lead2)
		time.Sleep(time.Second)
		for _, n := range []string{lead2, f2} {
			for key, want := range map[string]int{"leased": 1, "ttl": 1, "bound": 0} {
				info, _ := fresh.nodes[n].Lock(key)
				if len(info.Holders) != want {
					t.Errorf("%s on %s: %d holders, want %d", key, n, len(info.Holders), want)
				}
			}
			if info, _ := fresh.nodes[n].Lock("leased"); len(info.Holders) == 1 {
				h := info.Holders[0]
				if h.Token != leased.Token {
					t.Errorf("leased token %d, want %d", h.Token, leased.Token)
				}
				if left := h.Expires.Sub(time.Unix(0, fresh.nodes[n].Now())); left < 55*time.Minute {
					t.Errorf("the hour's lease has %v left after the restore, want more than 55m: the time between backup and restore counted", left)
				}
			}
			if it, err := fresh.nodes[n].Get(fresh.nodes[n].Now(), []byte("item")); err != nil || string(it.Value) != "v" {
				t.Errorf("item on %s: %q, %v", n, it.Value, err)
			}
		}
		s := fresh.open(f2, latch.SessionOptions{})
		g, err := s.Acquire(ctx, latch.LockRequest{Keys: []string{"new"}})
		if err != nil {
			t.Fatal(err)
		}
		if g.Token <= floor {
			t.Errorf("first token after the restore %d, want above %d", g.Token, floor)
		}
		s.Close()
	})
}
