package replica

import (
	"context"
	"sync/atomic"

	"github.com/latchd/latch/internal/fsm"
)

// Local is the Replicator of a single in-memory node: the only replica, and
// always the leader. Propose applies the batch at once, in process and
// without encoding it, so the single-node path costs a call, not a log.
type Local struct {
	sm     StateMachine
	closed atomic.Bool
}

// LocalID is the leader id that Local reports.
const LocalID = "local"

// NewLocal returns the replicator of sm alone.
func NewLocal(sm StateMachine) *Local { return &Local{sm: sm} }

// Propose applies b to the StateMachine before it returns, in the caller's
// goroutine, which holds the StateMachine's lock (see Replicator).
func (l *Local) Propose(b *fsm.Batch) error {
	if l.closed.Load() {
		return ErrClosed
	}
	l.sm.Apply(b)
	return nil
}

// Leader reports Local itself.
func (l *Local) Leader() (string, bool, bool) { return LocalID, true, true }

// Barrier returns at once: every batch proposed was applied by Propose.
func (l *Local) Barrier(ctx context.Context) error {
	if l.closed.Load() {
		return ErrClosed
	}
	return ctx.Err()
}

// Close stops Propose.
func (l *Local) Close() error {
	l.closed.Store(true)
	return nil
}

var _ Replicator = (*Local)(nil)
