package node

import "sync"

// reporter calls the done functions of AcquireFunc requests that a cluster
// replicator's apply ended, and the functions of proposals that it
// answered (proposeFunc), in order, from a goroutine of its own: the
// replicator's goroutine must not run them, since a done function may call
// the node and wait for a command that only that goroutine can apply.
// (With replica.Local, the goroutine that proposed applies, and unlock
// runs them; see Node.unlock.)
type reporter struct {
	mu      sync.Mutex
	cond    *sync.Cond
	queue   []ended
	stopped bool
	done    chan struct{}
}

func newReporter(n *Node) *reporter {
	r := &reporter{done: make(chan struct{})}
	r.cond = sync.NewCond(&r.mu)
	go r.run(n)
	return r
}

// add queues ends to be reported. It never blocks for long.
func (r *reporter) add(ends []ended) {
	r.mu.Lock()
	r.queue = append(r.queue, ends...)
	r.mu.Unlock()
	r.cond.Signal()
}

func (r *reporter) run(n *Node) {
	defer close(r.done)
	var batch []ended
	for {
		r.mu.Lock()
		for len(r.queue) == 0 && !r.stopped {
			r.cond.Wait()
		}
		if len(r.queue) == 0 {
			r.mu.Unlock()
			return
		}
		batch, r.queue = r.queue, batch[:0]
		r.mu.Unlock()
		for i, c := range batch {
			n.report(c)
			batch[i] = ended{}
		}
	}
}

// stop reports what is queued and ends the goroutine.
func (r *reporter) stop() {
	r.mu.Lock()
	r.stopped = true
	r.mu.Unlock()
	r.cond.Signal()
	<-r.done
}
