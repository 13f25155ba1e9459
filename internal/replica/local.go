package replica

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/latchd/latch/internal/fsm"
)

// Local is the Replicator of a single in-memory node: the only replica, and
// always the leader. Propose applies the batch at once, in process and
// without encoding it, so the single-node path costs a call, not a log.
type Local struct {
	sm      StateMachine
	closed  atomic.Bool
	start   time.Time // carries the monotonic reading Now is taken from
	startNs int64
}

// LocalID is the leader id that Local reports.
const LocalID = "local"

// NewLocal returns the replicator of sm alone.
func NewLocal(sm StateMachine) *Local {
	start := time.Now()
	return &Local{sm: sm, start: start, startNs: start.UnixNano()}
}

// Now is the wall-clock time at NewLocal plus the monotonic time since: a
// step of the wall clock does not move it.
func (l *Local) Now() int64 { return l.startNs + int64(time.Since(l.start)) }

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
