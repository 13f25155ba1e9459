package node

import (
	"context"
	"testing"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/fsm"
)

// TestSnapshot: a node's snapshot holds its committed state, counted,
// and decodes to the same summary; the node goes on serving.
func TestSnapshot(t *testing.T) {
	n := newNode(t, Config{})
	s := open(t, n, latch.SessionOptions{})
	ctx := context.Background()
	if _, err := s.Acquire(ctx, latch.LockRequest{Keys: []string{"a"}}); err != nil {
		t.Fatal(err)
	}
	g, err := s.Acquire(ctx, latch.LockRequest{Keys: []string{"leased"}, Lease: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if r := n.Do(nil, &fsm.Command{Op: fsm.OpItemSet, Key: []byte("item"), Value: []byte("v")}); r.Err != nil {
		t.Fatal(r.Err)
	}
	snap, err := n.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sum := snap.Summary
	if sum.Locks != 2 || sum.Leases != 1 || sum.Sessions != 1 || sum.Items != 1 || sum.Token != g.Token {
		t.Errorf("summary %+v", sum)
	}
	if snap.Time.IsZero() {
		t.Error("no capture time")
	}
	st, err := fsm.Restore(fsm.OfflineConfig(), snap.State)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Summary(); got != sum {
		t.Errorf("decoded %+v, want %+v", got, sum)
	}
	if _, err := s.Acquire(ctx, latch.LockRequest{Keys: []string{"b"}}); err != nil {
		t.Errorf("after the snapshot: %v", err)
	}
}
