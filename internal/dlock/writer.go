package dlock

import (
	"net"
	"sync"
	"time"

	pb "github.com/latchd/latch/dlockpb"
	"github.com/latchd/latch/internal/evloop"
	"github.com/latchd/latch/internal/frame"
	"github.com/latchd/latch/internal/timedwrite"
)

// maxBuffered is how many bytes of answers may wait for the writer before
// the goroutines answering block: the back-pressure on a client that sends
// requests without reading the answers.
const maxBuffered = 1 << 20

// keepWriteBuffer is the largest write buffer kept between writes.
const keepWriteBuffer = 64 << 10

// holdLimit is how many bytes of answers may gather while the writer is held
// before they are written anyway.
const holdLimit = 32 << 10

// writer sends a connection's answers. Any goroutine may queue an answer
// with send, and the goroutine that finds no write in progress writes: it
// writes whatever has gathered with one Write call and comes back for more
// until nothing is left, so answers coalesce while a write is in progress,
// each is written as soon as the connection is idle, and no goroutine is
// woken just to write (an answer the reader makes leaves from the reader;
// a grant is posted, without blocking, by the goroutine that released the
// lock).
//
// The connection's reader holds the writer while it handles requests it
// has already read (hold), and lets it go before it waits for more input
// (flush): the answers to a batch of requests that arrived together leave
// together, in one write.
//
// On a connection an event loop serves, the writer "writes" by handing
// what has gathered to the loop (evloop.Conn.Send), which never blocks:
// the loop writes it under the write timeout, waiting for room as it
// does for any reply. The loop's Input holds the writer while it serves
// the frames of one read, and flushes it before it returns.
type writer struct {
	nc net.Conn
	// out writes to nc: without blocking for post (unless it cannot, on a
	// TLS connection: post then leaves the write to a goroutine), and
	// under the write timeout for the rest. Only the goroutine that set
	// writing uses it.
	out *timedwrite.Writer
	// lc, on a loop's connection, takes the writes instead of out; nc and
	// out are nil then.
	lc loopConn

	mu      sync.Mutex
	room    sync.Cond // signalled when a write took buf, or when writing stopped
	buf     []byte    // encoded frames waiting to be written
	spare   []byte    // the buffer of the last write, for reuse
	writing bool      // a goroutine is writing, and writes buf before it stops
	held    bool      // the reader has more requests at hand: send does not write
	closing bool      // no more answers: what is queued is written, then nothing
	failed  bool      // a write failed: answers are dropped
}

func newWriter(nc net.Conn, timeout time.Duration) *writer {
	w := &writer{nc: nc, out: timedwrite.New(nc, timeout)}
	w.room.L = &w.mu
	return w
}

// newLoopWriter returns the writer of a connection that lc's loop serves.
func newLoopWriter(lc loopConn) *writer {
	w := &writer{lc: lc}
	w.room.L = &w.mu
	return w
}

// canTry reports whether a write can be made without blocking: always on a
// loop's connection, where the loop writes.
func (w *writer) canTry() bool { return w.lc != nil || w.out.CanTry() }

// send queues resp and writes it, unless a write is in progress (whose
// goroutine writes it next) or the writer is held. It blocks while more
// than maxBuffered bytes wait, and drops resp once a write has failed or
// the writer is closing.
func (w *writer) send(resp *pb.Response) {
	w.mu.Lock()
	for len(w.buf) > maxBuffered && !w.failed && !w.closing {
		if !w.writing {
			w.write() // it was held
			continue
		}
		w.room.Wait()
	}
	if w.failed || w.closing {
		w.mu.Unlock()
		return
	}
	w.encode(resp)
	if !w.writing && (!w.held || len(w.buf) >= holdLimit) {
		w.write()
	}
	w.mu.Unlock()
}

// post queues resp as send does, but never blocks: it is for answers made
// outside the connection's goroutines (a grant, from the goroutine that
// released the lock). Unless a write is in progress or the writer is held,
// it writes what has gathered without blocking, and leaves what the socket
// did not take to a goroutine of its own. Its answers are not held back by
// maxBuffered: there are at most as many as the connection has waiting
// Locks.
func (w *writer) post(resp *pb.Response) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.queue(resp) {
		return
	}
	if w.canTry() && w.drain(false) {
		w.writing = false
		w.room.Broadcast()
		return
	}
	go func() {
		w.mu.Lock()
		w.writeOn()
		w.mu.Unlock()
	}()
}

// postLater queues resp as post does, and leaves the write to a goroutine
// of its own: the answers posted until it runs go in the same write. It is
// for the answers that a cluster node reports, a whole applied batch at a
// time, where writing each at once would make one write per answer.
func (w *writer) postLater(resp *pb.Response) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.queue(resp) {
		return
	}
	go func() {
		w.mu.Lock()
		w.writeOn()
		w.mu.Unlock()
	}()
}

// queue encodes resp for post and postLater and reports whether the
// caller is to write it: no write is in progress and the writer is not
// held (below holdLimit). It then sets writing. Called with mu held.
func (w *writer) queue(resp *pb.Response) bool {
	if w.failed || w.closing {
		return false
	}
	w.encode(resp)
	if w.writing || (w.held && len(w.buf) < holdLimit) {
		return false
	}
	w.writing = true
	return true
}

// drain writes buf until it stays empty or a write fails, and reports
// true then. With block false it never waits: it makes non-blocking writes
// (Try) and reports false as soon as the socket takes less than it was
// given, with the rest back at the start of buf. It is called with mu held
// and writing set, and releases mu while it writes.
func (w *writer) drain(block bool) bool {
	for len(w.buf) > 0 && !w.failed {
		out := w.buf
		w.buf = w.spare[:0]
		w.spare = nil
		w.room.Broadcast()
		w.mu.Unlock()
		var (
			n   int
			err error
		)
		switch {
		case w.lc != nil:
			// The loop copies it, and writes it in the order sent.
			n = len(out)
			if !w.lc.Send(out) {
				err = evloop.ErrConnClosed
			}
		case block:
			n, err = w.out.Write(out)
		default:
			n, err = w.out.Try(out)
		}
		w.mu.Lock()
		if err != nil {
			w.fail()
			return true
		}
		if n < len(out) { // only without blocking
			// The rest goes first, then whatever came meanwhile.
			rest := copy(out, out[n:])
			w.buf = append(out[:rest], w.buf...)
			return false
		}
		if cap(out) <= keepWriteBuffer {
			w.spare = out
		}
	}
	return true
}

// fail records a failed write: answers are dropped from now on, and the
// connection is closed, which ends its reader too (a loop's connection
// is closed already). Called with mu held.
func (w *writer) fail() {
	w.failed = true
	w.buf = nil
	if w.nc != nil {
		w.nc.Close()
	}
}

// encode appends resp's frame to buf. Called with mu held.
func (w *writer) encode(resp *pb.Response) {
	buf, off := frame.Start(w.buf)
	buf, err := appendResponse(buf, resp)
	if err == nil {
		err = frame.Finish(buf, off)
	}
	if err != nil {
		// A Response always encodes; keep the buffer consistent anyway.
		buf = buf[:off]
	}
	w.buf = buf
}

// dropBuffers lets go of the buffers kept from the last write, for a
// connection that waits idle. What is queued stays.
func (w *writer) dropBuffers() {
	w.mu.Lock()
	w.spare = nil
	if len(w.buf) == 0 {
		w.buf = nil
	}
	w.mu.Unlock()
}

// hold keeps send from writing (less than holdLimit bytes) until flush.
func (w *writer) hold() {
	w.mu.Lock()
	w.held = true
	w.mu.Unlock()
}

// flush ends hold and writes the answers queued meanwhile, unless a write
// in progress will.
func (w *writer) flush() {
	w.mu.Lock()
	w.held = false
	if !w.writing {
		w.write()
	}
	w.mu.Unlock()
}

// close says that no more answers come, and writes what is queued, or
// waits for the write in progress to.
func (w *writer) close() {
	w.mu.Lock()
	w.held = false
	if !w.writing {
		w.write()
	}
	w.closing = true
	w.room.Broadcast()
	for w.writing {
		w.room.Wait()
	}
	w.mu.Unlock()
}

// write writes buf until it stays empty. It is called with mu held and no
// write in progress, and releases mu while it writes. On a write error it
// closes the connection, which ends the connection's reader too.
func (w *writer) write() {
	w.writing = true
	w.writeOn()
}

// writeOn is write for a caller that has set writing already; it clears it.
func (w *writer) writeOn() {
	w.drain(true)
	w.writing = false
	w.room.Broadcast()
}
