package dlock

import (
	"net"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/latchd/latch/dlockpb"
	"github.com/latchd/latch/internal/frame"
)

// maxBuffered is how many bytes of answers may wait for the writer before
// the goroutines answering block: the back-pressure on a client that sends
// requests without reading the answers.
const maxBuffered = 1 << 20

// keepWriteBuffer is the largest write buffer kept between writes.
const keepWriteBuffer = 64 << 10

// holdLimit is how many bytes of answers may gather while the writer is held
// before it is woken anyway.
const holdLimit = 32 << 10

// writer sends a connection's answers. Any goroutine may queue an answer
// with send; the writer goroutine (run) writes whatever has gathered with
// one Write call and comes back for more, so answers coalesce while a write
// is in progress and each is written as soon as the connection is idle.
//
// The connection's reader holds the writer while it handles requests it
// has already read (hold), and lets it go before it waits for more input
// (flush): the answers to a batch of requests that arrived together leave
// together, without waking the writer goroutine for each.
type writer struct {
	nc      net.Conn
	timeout time.Duration

	mu      sync.Mutex
	room    sync.Cond     // signalled when buf was taken or the writer failed
	buf     []byte        // encoded frames waiting to be written
	wake    chan struct{} // one slot: buf has data, or closing
	held    bool          // the reader has more requests at hand: send does not wake run
	closing bool          // no more answers: write what is left and stop
	failed  bool          // a write failed: answers are dropped
	done    chan struct{} // closed when run returns
}

func newWriter(nc net.Conn, timeout time.Duration) *writer {
	w := &writer{
		nc:      nc,
		timeout: timeout,
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
	}
	w.room.L = &w.mu
	return w
}

// send queues resp. It blocks while more than maxBuffered bytes wait, and
// drops resp once a write has failed or the writer is closing.
func (w *writer) send(resp *pb.Response) {
	w.mu.Lock()
	for len(w.buf) > maxBuffered && !w.failed && !w.closing {
		w.wakeUp() // it may be held
		w.room.Wait()
	}
	if w.failed || w.closing {
		w.mu.Unlock()
		return
	}
	wasEmpty := len(w.buf) == 0
	buf, off := frame.Start(w.buf)
	buf, err := proto.MarshalOptions{}.MarshalAppend(buf, resp)
	if err == nil {
		err = frame.Finish(buf, off)
	}
	if err != nil {
		// A Response always encodes; keep the buffer consistent anyway.
		buf = buf[:off]
	}
	w.buf = buf
	wake := wasEmpty && !w.held || w.held && len(buf) >= holdLimit
	w.mu.Unlock()
	if wake {
		w.wakeUp()
	}
}

// hold keeps send from waking the writer goroutine (for less than
// holdLimit bytes) until flush.
func (w *writer) hold() {
	w.mu.Lock()
	w.held = true
	w.mu.Unlock()
}

// flush ends hold: the answers queued meanwhile are written.
func (w *writer) flush() {
	w.mu.Lock()
	wake := w.held && len(w.buf) > 0
	w.held = false
	w.mu.Unlock()
	if wake {
		w.wakeUp()
	}
}

// wakeUp wakes the writer goroutine, unless it is already due to wake.
func (w *writer) wakeUp() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// close tells the writer that no more answers come: it writes what is
// queued and stops. It does not wait; <-w.done does.
func (w *writer) close() {
	w.mu.Lock()
	w.closing = true
	w.room.Broadcast()
	w.mu.Unlock()
	w.wakeUp()
}

// run is the writer goroutine. On a write error it closes the connection,
// which ends the connection's reader too.
func (w *writer) run() {
	defer close(w.done)
	var spare []byte
	for range w.wake {
		for {
			w.mu.Lock()
			out := w.buf
			w.buf = spare[:0]
			closing := w.closing
			w.room.Broadcast()
			w.mu.Unlock()
			if len(out) == 0 {
				spare = out
				if closing {
					return
				}
				break
			}
			if w.timeout > 0 {
				w.nc.SetWriteDeadline(time.Now().Add(w.timeout))
			}
			if _, err := w.nc.Write(out); err != nil {
				w.mu.Lock()
				w.failed = true
				w.buf = nil
				w.room.Broadcast()
				w.mu.Unlock()
				w.nc.Close()
				return
			}
			if cap(out) > keepWriteBuffer {
				out = nil
			}
			spare = out
		}
	}
}
