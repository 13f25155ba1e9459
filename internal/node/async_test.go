package node

import (
	"context"
	"sync"
	"time"

	"github.com/latchd/latch/internal/fsm"
	"github.com/latchd/latch/internal/replica"
)

// asyncReplicas, when set (TestMain's second run), makes newNode build
// cluster nodes over asyncReplicator, so that every test that uses newNode
// also runs as a cluster node does: its batches encoded, applied later from
// another goroutine, its connection-bound sessions owned by the node.
var asyncReplicas bool

// asyncReplicator is a one-replica cluster as the node sees one: Propose
// encodes the batch and returns; a goroutine of its own decodes and applies
// the batches in order, with the StateMachine's lock.
type asyncReplicator struct {
	sm      replica.StateMachine
	start   time.Time
	startNs int64

	mu     sync.Mutex
	queue  [][]byte
	closed bool
	wake   chan struct{} // capacity 1
	idle   *sync.Cond    // signalled when queue empties
	done   chan struct{}
}

func newAsyncReplicator(sm replica.StateMachine) (replica.Replicator, error) {
	start := time.Now()
	r := &asyncReplicator{sm: sm, start: start, startNs: start.UnixNano(), wake: make(chan struct{}, 1), done: make(chan struct{})}
	r.idle = sync.NewCond(&r.mu)
	go r.run()
	return r, nil
}

func (r *asyncReplicator) Propose(b *fsm.Batch) error {
	enc := fsm.AppendBatch(nil, b.Cmds)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return replica.ErrClosed
	}
	r.queue = append(r.queue, enc)
	select {
	case r.wake <- struct{}{}:
	default:
	}
	return nil
}

func (r *asyncReplicator) run() {
	defer close(r.done)
	var b fsm.Batch
	for range r.wake {
		for {
			r.mu.Lock()
			if len(r.queue) == 0 {
				r.idle.Broadcast()
				closed := r.closed
				r.mu.Unlock()
				if closed {
					return
				}
				break
			}
			enc := r.queue[0]
			r.queue = r.queue[1:]
			r.mu.Unlock()
			if err := fsm.DecodeBatch(enc, &b); err != nil {
				panic(err)
			}
			r.sm.Lock()
			r.sm.Apply(&b)
			r.sm.Unlock()
		}
	}
}

func (r *asyncReplicator) Leader() (string, bool, bool) { return "async", true, true }

func (r *asyncReplicator) Now() int64 { return r.startNs + int64(time.Since(r.start)) }

func (r *asyncReplicator) Barrier(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for len(r.queue) > 0 {
		r.idle.Wait()
	}
	return ctx.Err()
}

// Close applies what was proposed before it, then stops.
func (r *asyncReplicator) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	select {
	case r.wake <- struct{}{}:
	default:
	}
	r.mu.Unlock()
	<-r.done
	return nil
}
