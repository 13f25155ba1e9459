// Package replica is the seam between the node and how its state is
// replicated: the Replicator interface, which carries batches of commands
// (internal/fsm) to every replica of the state in one order, and Local, the
// replicator of a single in-memory node.
//
// The node is the proposer: it stamps each command with its time, its
// origin and a sequence number, registers whatever waits for the command's
// outcome, and proposes the batch. The Replicator then has the batch
// applied to the StateMachine of every replica, in log order; each replica
// computes the results itself, and the proposer learns the outcome of its
// own commands when it applies them, matched by (Origin, Seq). Nothing but
// commands changes the state, so replicas that apply the same batches hold
// the same state.
package replica

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/fsm"
)

// ErrClosed is returned by a Replicator after Close.
var ErrClosed = errors.New("replica: closed")

// ErrUnavailable is returned by Propose when the replicator cannot have a
// batch applied in time: a cluster replica that has had no leader for
// longer than an election should take. It wraps latch.ErrUnavailable.
var ErrUnavailable = fmt.Errorf("replica: no leader: %w", latch.ErrUnavailable)

// StateMachine is what a Replicator applies batches to: the node, which
// holds the fsm.State and acts on each command's result and events.
//
// Apply, Snapshot and Restore are called with the StateMachine's Locker
// held, and so are the Step and Close of a snapshot's capture. A Replicator that applies from its own goroutine takes the lock
// itself; Local applies in the goroutine of Propose, whose caller already
// holds it.
type StateMachine interface {
	sync.Locker

	// Apply applies the commands of b in order, filling b.Results, and
	// acts on them: it delivers the results of the commands it proposed
	// itself and the events (grants, timeouts) of every command. It must
	// not block and must not call the Replicator.
	Apply(b *fsm.Batch)

	// Snapshot captures the whole state at this instant
	// (fsm.State.Capture). Its caller encodes the capture in steps
	// (Step, with the lock held, released between them so that Apply
	// goes on), writes it without the lock (AppendTo), and closes it
	// (Close, with the lock held).
	Snapshot() *fsm.Capture
	// Restore replaces the whole state with one read from r.
	Restore(r io.Reader) error
}

// Replicator has batches of commands applied, in one order, to every
// replica of a StateMachine. Implementations are safe for concurrent use.
type Replicator interface {
	// Propose submits b to be applied on every replica, after every batch
	// proposed before it on this replica. It is called with the
	// StateMachine's lock held and never blocks waiting for the batch to
	// be applied: a replicator that cannot apply it at once encodes b and
	// returns, and b may be reused as soon as Propose returns. The
	// proposer learns each command's outcome when its own StateMachine
	// applies it, matched by (Origin, Seq): Local has applied b (and
	// filled b.Results) before Propose returns; a cluster replicator
	// applies it later, from its own goroutine, and never fills b.Results.
	// A replicator that is not sure a batch was applied sends it again:
	// the state applies a command once (fsm.ErrDuplicate). An error
	// (ErrClosed, ErrUnavailable, or a replicator's own) means that b will
	// not be applied.
	Propose(b *fsm.Batch) error

	// Leader reports the current leader's id and whether this replica is
	// it. The leader alone stamps time and proposes the commands that time
	// causes (Tick, Evict). ok is false while there is no leader.
	Leader() (id string, self bool, ok bool)

	// Now reads the replicated clock as this replica knows it: on the
	// leader, the instant it would stamp into a batch now; elsewhere, an
	// estimate from the last batch applied. It never goes back.
	Now() int64

	// Barrier returns once every batch proposed before it on any replica
	// and committed has been applied here, or ctx is done.
	Barrier(ctx context.Context) error

	// Close stops replicating. Propose then fails with ErrClosed. Close is
	// idempotent.
	Close() error
}

// Positioner is implemented by a Replicator whose replicas apply a log:
// Position reports the index and term of the last log entry that changed
// the state (0, 0 when it does not know: none since the state was last
// restored from a snapshot). Called with the StateMachine's lock held, it
// describes the state as it is then.
type Positioner interface {
	Position() (index, term uint64)
}
