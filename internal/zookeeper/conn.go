package zookeeper

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/fsm"
	"github.com/latchd/latch/internal/jute"
	"github.com/latchd/latch/internal/netserve"
	"github.com/latchd/latch/internal/znode"
)

// conn is one client connection: its reader (the netserve goroutine that
// calls ServeConn) handles its requests one at a time, in order, so that
// replies go out in request order; a writer goroutine of its own sends
// what is queued (replies, and watch events that the node's apply queues
// from other goroutines), so that nobody blocks on a slow client.
type conn struct {
	s  *Server
	nc *netserve.Conn

	// The session it speaks for, set by the handshake.
	sess    latch.SessionID
	gen     uint64
	timeout time.Duration
	// vouched is when the last command that restarted the session's
	// timeout in the cluster was sent from here (its open or attach, a
	// touch): its timeout runs from no earlier. Guarded by the server's
	// mu once the connection is bound.
	vouched time.Time

	// Its watches, guarded by the server's watches.mu: by kind, the
	// paths it watches; how many in all; gone once it closes.
	own      [numWatchKinds]map[string]struct{}
	nwatches int
	gone     bool

	// The output queue: out is what waits to be written; wake tells the
	// writer. closed stops queueing. Guarded by omu.
	omu    sync.Mutex
	out    []byte
	closed bool
	wake   chan struct{}
	// why is what ended the connection from outside (expiry, a move),
	// for the log.
	why string

	wdone chan struct{} // closed when the writer returns
	// hangUp is set when the connection is to close once the writer has
	// sent what is queued (a session that moved). Guarded by omu.
	hangUp bool

	// The replies of the writes in flight, in request order (reserve):
	// a reply goes out once it and every one before it is ready. pcond
	// (on pmu) wakes the reader waiting for them to settle or for room.
	pmu   sync.Mutex
	pcond *sync.Cond
	slots []*slot

	// Scratch of the reader's.
	body []byte
	d    jute.Decoder
	rep  []byte
}

func newConn(s *Server, nc *netserve.Conn) *conn {
	c := &conn{s: s, nc: nc, wake: make(chan struct{}, 1), wdone: make(chan struct{})}
	c.pcond = sync.NewCond(&c.pmu)
	for k := range c.own {
		c.own[k] = make(map[string]struct{})
	}
	return c
}

// ServeConn serves one connection until it ends.
func (s *Server) ServeConn(nc *netserve.Conn) {
	c := newConn(s, nc)
	nc.SetHooks(netserve.Hooks{OwnWriter: true, Flush: func() error { return nil }})
	nc.SetState(c)
	go c.writer()
	defer c.finish()
	if err := c.handshake(); err != nil {
		if !errors.Is(err, io.EOF) {
			s.log.Debug("zookeeper: handshake", "peer", nc.RemoteAddr(), "err", err)
		}
		return
	}
	for {
		if err := nc.Next(); err != nil {
			return
		}
		body, err := c.readFrame()
		if err != nil {
			s.log.Debug("zookeeper: read", "peer", nc.RemoteAddr(), "session", c.sess, "err", err)
			return
		}
		if !c.serve(body) {
			return
		}
	}
}

// finish ends the connection: its watches go, its session no longer has
// it, and the writer sends what is queued (within the write timeout)
// and stops.
func (c *conn) finish() {
	c.s.w.drop(c)
	if c.sess != 0 {
		c.s.unbind(c)
	}
	c.omu.Lock()
	c.closed = true
	c.omu.Unlock()
	c.signal()
	<-c.wdone
}

// errFrame is the error of a frame whose length is out of bounds.
var errFrame = errors.New("zookeeper: frame length out of bounds")

// readFrame reads one length-prefixed frame into c.body.
func (c *conn) readFrame() ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(c.nc.R, hdr[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(hdr[:]))
	if n < 0 || n > jute.MaxFrame {
		return nil, fmt.Errorf("%w: %d", errFrame, n)
	}
	if cap(c.body) < int(n) {
		c.body = make([]byte, n)
	}
	c.body = c.body[:n]
	if _, err := io.ReadFull(c.nc.R, c.body); err != nil {
		return nil, err
	}
	return c.body, nil
}

// handshake reads the first frame: a four-letter word (answered, and the
// connection closes) or a ConnectRequest, which opens or attaches the
// session. A failed handshake closes the connection.
func (c *conn) handshake() error {
	if err := c.nc.Next(); err != nil {
		return err
	}
	first, err := c.nc.R.Peek(4)
	if err != nil {
		return err
	}
	if word, ok := jute.FourLetterWord(first); ok {
		c.nc.R.Discard(4)
		c.queue([]byte(c.s.fourLetter(word)))
		return io.EOF
	}
	body, err := c.readFrame()
	if err != nil {
		return err
	}
	if c.s.unvouched.Load() {
		return fmt.Errorf("this node cannot commit: %w", io.EOF)
	}
	var req jute.ConnectRequest
	c.d.Reset(body)
	req.Decode(&c.d)
	if err := c.d.Err(); err != nil {
		return fmt.Errorf("connect request: %w", err)
	}
	if err := c.catchUp(req.LastZxidSeen); err != nil {
		return err
	}
	resp := jute.ConnectResponse{HasReadOnly: req.HasReadOnly}
	var passwd [fsm.PasswordLen]byte
	c.vouched = time.Now()
	if req.SessionID == 0 {
		rand.Read(passwd[:])
		timeout := c.s.cfg.negotiate(req.TimeOut)
		id, _, err := c.s.svc.ZOpen(timeout, passwd)
		if err != nil {
			return err
		}
		c.sess, c.timeout = id, timeout
	} else {
		copy(passwd[:], req.Passwd)
		gen, timeout, _, err := c.s.svc.ZAttach(latch.SessionID(req.SessionID), passwd)
		if errors.Is(err, fsm.ErrZSession) || len(req.Passwd) != fsm.PasswordLen && err == nil {
			// Expired (or never was): ZooKeeper's answer, then a close.
			resp.Passwd = make([]byte, fsm.PasswordLen)
			c.queueFrame(resp.Append(c.frame()))
			return io.EOF
		}
		if err != nil {
			return err
		}
		c.sess, c.gen, c.timeout = latch.SessionID(req.SessionID), gen, timeout
	}
	resp.TimeOut = int32(c.timeout / time.Millisecond)
	resp.SessionID = int64(c.sess)
	resp.Passwd = passwd[:]
	c.queueFrame(resp.Append(c.frame()))
	c.s.bind(c)
	return nil
}

// catchUpWait is how long a client whose last zxid is ahead of this node
// waits for it to apply as far, before the connection is closed so that
// the client tries another node.
const catchUpWait = 2 * time.Second

// catchUp waits until the node has applied zxid, for at most catchUpWait;
// a node still behind closes the connection (ZooKeeper's single system
// image: a client never goes back in time).
func (c *conn) catchUp(zxid int64) error {
	deadline := time.Now().Add(catchUpWait)
	for {
		now := c.s.zxid()
		if zxid <= now {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("client has seen zxid %#x, this node only %#x: %w", zxid, now, io.EOF)
		}
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		_, err := c.s.svc.ZSync(ctx)
		cancel()
		if err != nil {
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// frame starts a frame in c.rep (its length written by queueFrame) and
// returns it.
func (c *conn) frame() []byte {
	return append(c.rep[:0], 0, 0, 0, 0)
}

// queueFrame sets the length of frame f (started by frame) and queues it.
func (c *conn) queueFrame(f []byte) {
	binary.BigEndian.PutUint32(f, uint32(len(f)-4))
	c.rep = f
	c.queue(f)
}

// queue appends b to the output; past Config.MaxQueued the connection is
// closed instead, as its client does not read.
func (c *conn) queue(b []byte) {
	c.omu.Lock()
	if c.closed {
		c.omu.Unlock()
		return
	}
	if len(c.out)+len(b) > c.s.cfg.MaxQueued {
		c.closed, c.why = true, "too much output queued"
		c.omu.Unlock()
		c.nc.Close()
		return
	}
	c.out = append(c.out, b...)
	c.omu.Unlock()
	c.signal()
}

func (c *conn) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// writer writes the queued output until the connection closes, then what
// is left, and returns.
func (c *conn) writer() {
	defer close(c.wdone)
	var buf []byte
	nc := c.nc.NetConn()
	for range c.wake {
		c.omu.Lock()
		buf, c.out = c.out, buf[:0]
		closed, hangUp := c.closed, c.hangUp
		c.omu.Unlock()
		if len(buf) > 0 {
			if wt := c.s.cfg.WriteTimeout; wt > 0 {
				nc.SetWriteDeadline(time.Now().Add(wt))
			}
			if _, err := nc.Write(buf); err != nil {
				c.omu.Lock()
				c.closed = true
				c.omu.Unlock()
				nc.Close()
				return
			}
			c.s.stats.sent.Add(1)
		}
		if hangUp {
			nc.Close()
		}
		if closed {
			return
		}
	}
}

// slot is the place of a pipelined write's reply among its connection's
// replies.
type slot struct {
	frame  []byte // the reply; nil for none (the connection closes)
	ready  bool
	hangUp bool // close the connection once the reply is sent
}

// maxInFlight bounds the writes of one connection in flight: the reader
// waits for room past it.
const maxInFlight = 1024

// reserve takes the next place among the connection's replies for a
// write about to be proposed. Only the reader calls it.
func (c *conn) reserve() *slot {
	sl := &slot{}
	c.pmu.Lock()
	for len(c.slots) >= maxInFlight {
		c.pcond.Wait()
	}
	c.slots = append(c.slots, sl)
	c.pmu.Unlock()
	return sl
}

// complete sets the reply of sl and sends the replies that are ready in
// order. It is called from the goroutine that reports the write's outcome
// and does not block.
func (c *conn) complete(sl *slot, frame []byte, hangUp bool) {
	c.pmu.Lock()
	sl.frame, sl.ready, sl.hangUp = frame, true, hangUp
	n := 0
	for _, s := range c.slots {
		if !s.ready {
			break
		}
		if s.frame != nil {
			c.queue(s.frame)
		}
		if s.hangUp {
			c.hangUpAfterFlush()
		}
		n++
	}
	if n > 0 {
		clear(c.slots[:n])
		c.slots = c.slots[n:]
		c.pcond.Broadcast()
	}
	c.pmu.Unlock()
}

// settle waits until every write in flight has been answered: a request
// that is not a pipelined write reads what they wrote, and its reply
// follows theirs.
func (c *conn) settle() {
	c.pmu.Lock()
	for len(c.slots) > 0 {
		c.pcond.Wait()
	}
	c.pmu.Unlock()
}

// hangUpAfterFlush closes the connection once what is queued is written.
func (c *conn) hangUpAfterFlush() {
	c.omu.Lock()
	c.hangUp = true
	c.omu.Unlock()
	c.signal()
}

// event queues a watch event for path. Called under the node's lock.
func (c *conn) event(t znode.EventType, path string) {
	h := jute.ReplyHeader{Xid: jute.XidWatch, Zxid: -1}
	ev := jute.WatcherEvent{Type: jute.EventType(t), State: jute.StateSyncConnected, Path: path}
	b := make([]byte, 4, 4+jute.ReplyHeaderSize+12+len(path))
	b = ev.Append(h.Append(b))
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	c.queue(b)
}

// expired closes the connection of a session that ended: the client, on
// reconnecting, learns that it expired.
func (c *conn) expired() { c.closeFor("session ended") }

// moved closes the connection of a session that another connection took
// over.
func (c *conn) moved() { c.closeFor("session moved") }

func (c *conn) closeFor(why string) {
	c.omu.Lock()
	if c.why == "" {
		c.why = why
	}
	c.omu.Unlock()
	c.nc.Close()
}
