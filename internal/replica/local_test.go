package replica

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"

	"github.com/latchd/latch/internal/fsm"
)

// recorder is a StateMachine that records the batches applied to it.
type recorder struct {
	sync.Mutex
	applied []fsm.Op
}

func (r *recorder) Apply(b *fsm.Batch) {
	if r.TryLock() {
		r.Unlock()
		panic("Apply without the StateMachine's lock")
	}
	for i := range b.Cmds {
		r.applied = append(r.applied, b.Cmds[i].Op)
	}
	b.Results = append(b.Results[:0], make([]fsm.Result, len(b.Cmds))...)
}

func (r *recorder) Snapshot() *fsm.Capture  { return nil }
func (r *recorder) Restore(io.Reader) error { return nil }

// TestLocal: Local applies a batch before Propose returns, in the caller's
// goroutine under the caller's lock; it is always the leader; after Close
// it applies nothing.
func TestLocal(t *testing.T) {
	sm := &recorder{}
	l := NewLocal(sm)
	var b fsm.Batch
	b.Add().Op = fsm.OpTick
	b.Add().Op = fsm.OpSeed
	sm.Lock()
	if err := l.Propose(&b); err != nil {
		t.Fatalf("Propose: %v", err)
	}
	sm.Unlock()
	if len(sm.applied) != 2 || sm.applied[0] != fsm.OpTick || sm.applied[1] != fsm.OpSeed {
		t.Fatalf("applied %v, want [tick seed]", sm.applied)
	}
	if len(b.Results) != 2 {
		t.Fatalf("results: %d, want 2 once Propose returned", len(b.Results))
	}
	if id, self, ok := l.Leader(); id != LocalID || !self || !ok {
		t.Fatalf("Leader() = %q, %v, %v", id, self, ok)
	}
	if err := l.Barrier(context.Background()); err != nil {
		t.Fatalf("Barrier: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	sm.Lock()
	err := l.Propose(&b)
	sm.Unlock()
	if !errors.Is(err, ErrClosed) || len(sm.applied) != 2 {
		t.Fatalf("Propose after Close: %v, applied %v", err, sm.applied)
	}
	if err := l.Barrier(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Barrier after Close: %v", err)
	}
}
