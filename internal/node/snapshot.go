package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/latchd/latch/internal/fsm"
	"github.com/latchd/latch/internal/replica"
)

// Snapshot is a copy of the node's committed state, for a backup.
type Snapshot struct {
	// State is the state in the encoding of fsm snapshots.
	State []byte
	// Index and Term are the Raft index and term of the last log entry
	// applied to it; 0 for a node without a log (in memory).
	Index, Term uint64
	// Time is when it was captured, by this node's clock.
	Time time.Time
	// Summary counts what it holds.
	Summary fsm.Summary
}

// snapshotStep is how many entries of the lock table Snapshot encodes per
// hold of the node's lock, as a Raft snapshot does.
const snapshotStep = 1024

// Snapshot captures the committed state, without stopping the node. It
// first proposes a command and waits until it is applied here (a
// barrier: everything committed before it, on any node, is then applied
// here too, so a follower's copy is as recent as the leader's at that
// instant), then captures the state and encodes it a step at a time, the
// commands applied meanwhile waiting for a step, not for the whole state.
// The copy is then decoded again, off the lock, to count what it holds
// and so to check it.
//
// The lock table has one capture open at a time: a Raft snapshot that
// begins while this one encodes gives it up, and Snapshot starts again
// (a few times at most); one that this capture overtakes fails, and Raft
// takes it again later.
func (n *Node) Snapshot(ctx context.Context) (Snapshot, error) {
	for try := 1; ; try++ {
		snap, err := n.snapshot(ctx)
		if err != errGivenUp || try == 3 {
			return snap, err
		}
	}
}

// errGivenUp is snapshot's when another capture took the lock table's.
var errGivenUp = errors.New("node: snapshot: the capture was given up for another one (a Raft snapshot)")

func (n *Node) snapshot(ctx context.Context) (Snapshot, error) {
	var snap Snapshot
	n.mu.Lock()
	pos, _ := n.rep.(replica.Positioner)
	// The position is unknown right after a snapshot was restored here,
	// until a command entry is applied: a second barrier gives one.
	for try := 0; ; try++ {
		if n.shutdown {
			n.unlock()
			return snap, fmt.Errorf("node: snapshot: %w", n.shutdownErr())
		}
		n.command(fsm.OpTick)
		if r := n.proposeCtx(ctx); r.Err != nil {
			n.unlock()
			return snap, fmt.Errorf("node: snapshot: barrier: %w", r.Err)
		}
		if pos == nil {
			break
		}
		if snap.Index, snap.Term = pos.Position(); snap.Index != 0 {
			break
		}
		if try == 2 {
			n.unlock()
			return snap, fmt.Errorf("node: snapshot: the log position of the state is unknown")
		}
	}
	c := n.st.Capture()
	snap.Time = time.Now()
	cfg := n.st.Config()
	n.unlock()
	for done := false; !done; {
		n.mu.Lock()
		done = c.Step(snapshotStep)
		givenUp := c.GivenUp()
		n.unlock()
		if givenUp {
			return snap, errGivenUp
		}
		if err := ctx.Err(); err != nil && !done {
			n.mu.Lock()
			c.Close()
			n.unlock()
			return snap, fmt.Errorf("node: snapshot: %w", err)
		}
	}
	snap.State = c.AppendTo(nil)
	n.mu.Lock()
	c.Close()
	n.unlock()
	st, err := fsm.Restore(cfg, snap.State)
	if err != nil {
		return snap, fmt.Errorf("node: snapshot: the copy does not decode: %w", err)
	}
	snap.Summary = st.Summary()
	return snap, nil
}
