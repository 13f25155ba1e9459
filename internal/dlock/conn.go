package dlock

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/latchd/latch"
	pb "github.com/latchd/latch/dlockpb"
	"github.com/latchd/latch/internal/frame"
	"github.com/latchd/latch/internal/netserve"
)

// conn is one client connection. Its reader is a goroutine of its own
// (readLoop), or the event loop that serves it (Input, loop.go).
type conn struct {
	srv  *Server
	nc   *netserve.Conn
	peer string
	br   *bufio.Reader // nc.R
	fr   *frame.Reader
	out  *writer
	// lc is the loop's connection of one an event loop serves, nil for
	// one served by its goroutine.
	lc loopConn

	// On an event loop, imu is held while the loop serves input (Input)
	// and while the connection's end begins (end): ended is set, under
	// it, once the connection ends, draining or not, and Input then takes
	// no more requests.
	imu   sync.Mutex
	ended bool

	// busy counts the requests accepted and not answered yet: queued or
	// handled version 2 requests and waiting version 3 Locks. A connection
	// with busy > 0 is never idle.
	busy atomic.Int64
	// lastDone is when busy last dropped to 0 (UnixNano): the idle clock
	// of a connection starts at its last read or then, whichever is later.
	lastDone atomic.Int64
	// aborted is set when the client is gone: queued version 2 requests
	// are dropped unanswered.
	aborted atomic.Bool

	// wg counts the version 2 queue's server and the waiting version 3
	// Locks, which finish waits for.
	wg sync.WaitGroup

	// drained is set when the connection ends in a shutdown (sessionErr).
	drained atomic.Bool
	// resumed is set when the connection's session is one it resumed
	// (RequestSession.resume_session_id), and usedAfter when a request
	// was read after that: finish leaves a resumed session that was not
	// used rather than end it (leaver).
	resumed, usedAfter atomic.Bool

	// wmu guards the waiting version 3 Locks. It is never held across a
	// call of the lock service, so that a Lock's end, reported from
	// whichever goroutine ended it, can always take it.
	wmu sync.Mutex
	// pending maps the ids of waiting version 3 Locks to them; an id-0
	// Lock is not in it.
	pending map[uint64]*waitingLock
	nwait   int // waiting version 3 Locks, id 0 included

	// inflight holds a token for each laterAnswer in flight: the reader
	// waits for room when it is full.
	inflight chan struct{}

	mu sync.Mutex
	// sess is the connection's session, opened by its first Lock or
	// Session request; ttl the TTL it was opened with.
	sess latch.Session
	ttl  time.Duration
	// closed is set when the connection ends: no session opens any more.
	// closeErr says why, for the answers still to come.
	closed   bool
	closeErr error

	// The version 2 queue, guarded by mu: requests in order, served one at
	// a time by serveV2. qcond is signalled when the queue changes or its
	// server parks in a waiting Lock.
	queue    []queued
	qcond    sync.Cond
	qrunning bool // serveV2 is running
	qclosed  bool // no more requests: serveV2 ends once the queue is empty
	parked   bool // serveV2 waits in a Lock that could not be granted at once
	// stalled is set, on an event loop, when a version 2 request found
	// the queue full while its server was not parked: the loop's input
	// is paused (evloop.Conn.Pause) until the queue has room again or
	// its server parks, and serveV2 then resumes it.
	stalled bool

	// The answers being built, reused from one answer to the next: the
	// writer encodes each when it is sent. rresp is the reader's, qresp
	// the version 2 queue's server's (one runs at a time). A version 3
	// Lock that waits gets a Response of its own.
	rresp pb.Response
	qresp pb.Response

	// dec holds the request the reader decoded last (decodedRequest.decode).
	dec decodedRequest

	// readAt is when the last read from the socket returned: the time of
	// the frames it brought whole.
	readAt time.Time
}

// queued is a request of the version 2 queue.
type queued struct {
	req *pb.Request // nil for a frame that did not decode
	at  time.Time   // when it was read
	err error       // for req == nil: the answer's error
}

// ServeConn serves nc on its own goroutine (netserve.Protocol): it reads
// and dispatches requests until the connection ends, then ends the
// connection's session and waits for its other goroutines.
func (s *Server) ServeConn(nc *netserve.Conn) {
	c := newConn(s, nc, nc.RemoteAddr().String())
	c.out = newWriter(nc.NetConn(), s.cfg.WriteTimeout)
	nc.SetHooks(netserve.Hooks{
		Busy:      c.waits,
		Flush:     func() error { c.out.flush(); return nil },
		Read:      func() { c.readAt = time.Now() },
		Idle:      c.out.dropBuffers,
		OwnWriter: true,
		Drain:     true,
	})
	c.br = nc.R
	c.fr = frame.NewReader(buffered{c}, s.cfg.MaxFrame)
	nc.SetState(c)
	drain := c.readLoop()
	c.finish(drain)
}

// newConn returns the connection nc from peer, without its writer.
func newConn(s *Server, nc *netserve.Conn, peer string) *conn {
	c := &conn{
		srv:     s,
		nc:      nc,
		peer:    peer,
		pending: make(map[uint64]*waitingLock),
	}
	if s.exec == latch.Replicated {
		c.inflight = make(chan struct{}, maxLater)
	}
	c.qcond.L = &c.mu
	return c
}

// readLoop reads requests until the input ends. It reports whether the
// server asked it to stop (a shutdown, whose answers are still sent) rather
// than the client going away.
func (c *conn) readLoop() (drain bool) {
	log := c.srv.log
	for {
		whole, err := c.waitForFrame()
		if err != nil {
			if c.nc.Draining() {
				return true
			}
			if !errors.Is(err, io.EOF) {
				log.Debug("dlock: connection lost", "peer", c.peer, "err", err)
			}
			return false
		}
		body, err := c.fr.Read()
		at := c.readAt // the frames of one read share its time
		if !whole {
			at = time.Now()
		}
		if err != nil {
			if c.nc.Draining() {
				return true
			}
			if errors.Is(err, frame.ErrTooLarge) {
				c.frameTooLarge(err, at)
			} else {
				log.Debug("dlock: connection lost inside a frame", "peer", c.peer, "err", err)
			}
			return false
		}
		c.serveFrame(body, at)
		if c.aborted.Load() {
			return false
		}
	}
}

// serveFrame decodes and handles the request in body, a frame read at at.
// It reports false, having done nothing, when the request is to be given
// again later: a version 2 request that found the queue full, on an event
// loop (enqueue).
func (c *conn) serveFrame(body []byte, at time.Time) bool {
	if c.resumed.Load() {
		c.usedAfter.Store(true)
	}
	req, err := c.dec.decode(body)
	if err != nil {
		return c.dispatchV2(queued{at: at, err: fmt.Errorf("%w: %w", errMalformed, err)}, nil)
	}
	if req.GetVersion() == 3 {
		c.handleV3(req, at)
		return true
	}
	// Versions 0 and 2, and the answer Version to any other, in the order
	// of the version 2 requests.
	return c.dispatchV2(queued{req: req, at: at}, body)
}

// frameTooLarge answers a frame over the limit (err, a
// *frame.TooLargeError), read at at, before the connection closes.
func (c *conn) frameTooLarge(err error, at time.Time) {
	c.srv.log.Info("dlock: frame too large, closing the connection", "peer", c.peer, "err", err)
	c.answerNow(nil, at, fmt.Errorf("%w: %w; closing the connection", errFrameTooLarge, err))
}

// waitForFrame waits until the next frame starts (netserve.Conn.Next: the
// answers are flushed first, and the wait ends at the idle timeout unless
// the connection waits). It returns an error when the input ends or fails.
//
// It reports whether the frame is in the read buffer whole: then it was
// read at c.readAt, when the read that brought its first byte returned.
func (c *conn) waitForFrame() (whole bool, err error) {
	if c.frameBuffered() {
		// Reading it reads nothing from the connection, and its answer
		// may wait for the next ones.
		c.out.hold()
		return true, nil
	}
	if err := c.nc.Next(); err != nil {
		return false, err
	}
	c.br = c.nc.R // Next may have given the buffer back and taken another
	// The answers to what arrived go together, at the next flush: hold
	// the writer, as for the frames after the first. The rest of a frame
	// that has not all arrived is read under the read timeout; its answer
	// is not held.
	if c.frameBuffered() {
		c.out.hold()
		return true, nil
	}
	return false, nil
}

// waits reports whether the connection must stay open past its idle
// timeout: a request of it is accepted and not answered, or its last
// answer went out less than the idle timeout ago (the idle clock starts at
// the later of its last read and its last answer).
func (c *conn) waits() bool {
	if c.busy.Load() > 0 {
		return true
	}
	return time.Since(time.Unix(0, c.lastDone.Load())) < c.srv.cfg.IdleTimeout
}

// buffered is what the frame reader reads: the read buffer the connection
// has at the time.
type buffered struct{ c *conn }

func (b buffered) Read(p []byte) (int, error) { return b.c.br.Read(p) }

// frameBuffered reports whether the next frame is in the read buffer whole,
// so that reading it makes no read from the connection (nor does a frame
// header over the limit, which fails at once).
func (c *conn) frameBuffered() bool {
	n := c.br.Buffered()
	if n < frame.HeaderSize {
		return false
	}
	hdr, err := c.br.Peek(frame.HeaderSize) // buffered: reads nothing
	if err != nil {
		return false
	}
	size := uint64(binary.BigEndian.Uint32(hdr))
	return size <= uint64(n-frame.HeaderSize) || size > uint64(c.fr.Max())
}

// answered records that a request counted in busy was answered.
func (c *conn) answered() {
	if c.busy.Add(-1) == 0 {
		c.lastDone.Store(time.Now().UnixNano())
	}
}

// finish ends the connection once its input has ended. drain is true when
// the server is shutting down: queued requests are still answered (the lock
// service fails them at once) and every answer is written before the
// connection closes. Otherwise the client is gone: the session ends at once
// (unless the connection resumed it and made no request since: it is left,
// see leaver) and queued requests are dropped.
func (c *conn) finish(drain bool) {
	if !drain {
		c.aborted.Store(true)
	}
	c.mu.Lock()
	c.closed = true
	c.closeErr = latch.ErrSessionEnded
	if drain {
		c.closeErr = latch.ErrShutdown
		c.drained.Store(true)
	}
	sess := c.sess
	c.qclosed = true
	c.qcond.Broadcast()
	c.mu.Unlock()
	// Ending the session releases its locks without a lease and fails its
	// waiting requests, which answers them and lets the version 2 queue's
	// server end.
	if l, ok := sess.(leaver); ok && !drain && c.resumed.Load() && !c.usedAfter.Load() {
		l.Leave()
	} else if sess != nil {
		sess.Close()
	}
	c.wg.Wait()
	// The answers still queued go now, after the session's end released
	// its locks: a client that does not read delays no one.
	c.out.close()
	if c.lc == nil {
		// An event loop's connection is closed by its loop: already, or,
		// draining, once it has written what was sent (Server.Shutdown).
		c.nc.Close()
	}
	c.srv.log.Debug("dlock: connection closed", "peer", c.peer, "drained", drain)
}

// session returns the connection's session, opening it with ttl if it has
// none yet. setTTL says the caller asks for that TTL (a Session request):
// an open session with another TTL is then an error.
func (c *conn) session(ttl time.Duration, setTTL bool) (latch.Session, error) {
	return c.resume(ttl, setTTL, 0)
}

// resume is session, but with a non-zero id, a connection without a
// session takes over session id (latch.Service.ResumeSession) instead of
// opening one.
func (c *conn) resume(ttl time.Duration, setTTL bool, id latch.SessionID) (latch.Session, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess != nil && id != 0 && id != c.sess.ID() {
		return nil, fmt.Errorf("%w: the connection has session %d; resume_session_id is for its first Session request", latch.ErrInvalidRequest, c.sess.ID())
	}
	if c.sess != nil {
		if setTTL && ttl != c.ttl {
			return nil, fmt.Errorf("%w: the session is open with TTL %v; its TTL is set by a Session request before the first Lock", latch.ErrInvalidRequest, c.ttl)
		}
		return c.sess, nil
	}
	if c.closed {
		return nil, fmt.Errorf("connection closing: %w", c.closeErr)
	}
	opts := latch.SessionOptions{TTL: ttl, Protocol: "dlock", Peer: c.peer}
	if ttl == 0 {
		// Bound to this connection: when the service ends it (an operator,
		// a cluster node that can no longer vouch for it), the connection
		// goes too, so that the client learns its locks are gone. Not when
		// the service shuts down: the front end's own shutdown answers
		// what waits, then closes. A session with a TTL stays, answering
		// SessionExpired.
		opts.OnEnd = func(why error) {
			if !errors.Is(why, latch.ErrShutdown) {
				c.nc.Close()
			}
		}
	}
	var sess latch.Session
	var err error
	if id != 0 {
		sess, err = c.srv.svc.ResumeSession(id, opts)
	} else {
		sess, err = c.srv.svc.OpenSession(opts)
	}
	if err != nil {
		return nil, err
	}
	c.sess, c.ttl = sess, ttl
	if id != 0 {
		c.resumed.Store(true)
	}
	return sess, nil
}

// A leaver is a session with a TTL that a connection can leave without
// ending it (the node's Leave): it lives on until its TTL lapses or a
// client resumes it. finish leaves a session that its connection resumed
// and then made no request on: its client went away without learning that
// the resume succeeded, perhaps because it gave the resume up as late and
// took the session back on another server. The late resume, applied
// last, made this connection the session's; ending the session with it
// would end the session the client holds elsewhere.
type leaver interface{ Leave() }

// openSession returns the connection's session and its TTL if it has one,
// or nil.
func (c *conn) openSession() (latch.Session, time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sess, c.ttl
}

// dispatchV2 answers a request in version 2 order. When nothing of the
// version 2 queue is pending, it is answered right here, unless it is a
// Lock that must wait: that one, and every request behind it, goes to the
// queue.
//
// body is the frame q.req was decoded from: a request decoded into the
// reader's record (c.dec) is decoded again into one of its own to be queued.
//
// It reports false when the request was neither answered nor queued, to be
// given again later (enqueue, on an event loop).
func (c *conn) dispatchV2(q queued, body []byte) bool {
	c.mu.Lock()
	idle := !c.qrunning && len(c.queue) == 0
	c.mu.Unlock()
	// Only the reader starts the queue's server, so the queue stays idle
	// while this request is handled.
	if idle {
		if wait := c.handleV2(q, true, &c.rresp); !wait {
			c.reply(q.req, &c.rresp)
			return true
		}
	}
	if q.req == &c.dec.req {
		q.req, _ = decodeRequest(body) // it decoded once
	}
	return c.enqueue(q)
}

// enqueue appends a request to the version 2 queue, starting its server if
// needed. When the queue is full it waits for room, unless the queue's
// server is parked in a waiting Lock: the client has piled more requests
// behind a wait than allowed, which aborts the connection.
//
// An event loop's reader never waits: it reports false instead, having
// stalled the connection (conn.stalled), for the loop to pause its input
// until the queue's server resumes it.
func (c *conn) enqueue(q queued) bool {
	c.mu.Lock()
	for len(c.queue) >= c.srv.cfg.MaxPending {
		if c.parked {
			c.mu.Unlock()
			c.srv.log.Info("dlock: too many requests queued behind a waiting Lock, closing the connection", "peer", c.peer, "queued", c.srv.cfg.MaxPending)
			c.answerNow(q.req, q.at, fmt.Errorf("%w: more than %d queued behind a waiting Lock; closing the connection", errTooManyPending, c.srv.cfg.MaxPending))
			c.aborted.Store(true)
			return true
		}
		if c.lc != nil {
			c.stalled = true
			c.mu.Unlock()
			return false
		}
		// Let the answers out while the queue drains. Not under c.mu:
		// flushing may write to the socket, and the queue's server and
		// waiting Locks need c.mu meanwhile.
		c.mu.Unlock()
		c.out.flush()
		c.mu.Lock()
		if len(c.queue) >= c.srv.cfg.MaxPending && !c.parked {
			c.qcond.Wait()
		}
	}
	c.queue = append(c.queue, q)
	c.busy.Add(1)
	if !c.qrunning {
		c.qrunning = true
		c.wg.Add(1)
		go c.serveV2()
	}
	c.qcond.Signal()
	c.mu.Unlock()
	return true
}

// unstall ends a stall of the connection's input (conn.stalled): the loop
// gives the reader its input again. Called with c.mu held, when the queue
// has room or its server parks.
func (c *conn) unstall() {
	if c.stalled {
		c.stalled = false
		c.lc.Resume() // takes the loop's mutex only, never c.mu
	}
}

// serveV2 answers the version 2 queue in order, one request at a time. It
// ends when the queue is empty, or closed and empty, and enqueue starts it
// again when needed.
func (c *conn) serveV2() {
	defer c.wg.Done()
	c.mu.Lock()
	for len(c.queue) > 0 {
		q := c.queue[0]
		c.queue[0] = queued{}
		c.queue = c.queue[1:]
		if len(c.queue) == 0 {
			c.queue = c.queue[:0:0] // let the backing array go
		}
		c.qcond.Broadcast()
		c.unstall()
		c.mu.Unlock()
		if !c.aborted.Load() {
			c.handleV2(q, false, &c.qresp)
			c.reply(q.req, &c.qresp)
			if testHookAnsweredV2 != nil {
				testHookAnsweredV2()
			}
		}
		c.answered()
		c.mu.Lock()
	}
	c.qrunning = false
	c.mu.Unlock()
}

// testHookAnsweredV2, when set, is called by serveV2 after each answer:
// tests stop it there, busy and not parked.
var testHookAnsweredV2 func()

// setParked records whether serveV2 waits in a Lock.
func (c *conn) setParked(p bool) {
	c.mu.Lock()
	c.parked = p
	c.qcond.Broadcast()
	if p {
		c.unstall() // the reader is to learn that the queue waits
	}
	c.mu.Unlock()
}

// answerNow answers a request (nil: one that could not be read) with err at
// once, outside the version 2 order: for the errors that close the
// connection. Only the reader calls it.
func (c *conn) answerNow(req *pb.Request, at time.Time, err error) {
	v3 := req.GetVersion() == 3
	resp := &c.rresp
	initResponse(resp, req.GetId(), at, v3)
	setError(resp, err, v3)
	c.reply(req, resp)
}

// reply counts the answer to req (nil: a frame that could not be read) in
// the metrics and queues it.
func (c *conn) reply(req *pb.Request, resp *pb.Response) {
	c.count(req.GetType(), resp)
	c.out.send(resp)
}

// count counts the answer to a request of type typ in the metrics.
func (c *conn) count(typ pb.RequestType, resp *pb.Response) {
	cmd := c.srv.command(typ)
	cmd.Request()
	if resp.GetStatus() != pb.ResponseStatus_Ok {
		cmd.Error()
	}
}
