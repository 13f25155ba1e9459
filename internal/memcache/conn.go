package memcache

import (
	"bufio"
	"errors"
	"net"
	"os"
	"sync"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/cache"
	"github.com/latchd/latch/internal/evloop"
	"github.com/latchd/latch/internal/fsm"
	"github.com/latchd/latch/internal/idleread"
	"github.com/latchd/latch/internal/metrics"
	"github.com/latchd/latch/internal/timedwrite"
)

// errClose ends a connection after its pending replies are flushed (quit).
var errClose = errors.New("memcache: close connection")

// bufSize is the size of a connection's read buffer and of its write
// buffer. 4 KiB holds a batch of 16 pipelined requests or replies of
// small items; larger lines and values go around the buffers (see line,
// data), so the size bounds what an idle connection costs (twice this),
// not what a request may carry.
const bufSize = 4 << 10

// conn is one client connection and its session, served by a goroutine of
// its own (serve) or by an event loop (Input, loop.go).
type conn struct {
	srv  *Server
	nc   net.Conn // nil when an event loop serves the connection
	peer net.Addr
	r    *bufio.Reader // nil between an event loop's calls
	w    *bufio.Writer // nil between an event loop's calls
	sess latch.Session // nil until its first lock (openSession)

	// Served by an event loop: its handle (Attach), the input and the
	// replies of the current call, and the rest of a request being
	// skipped (nil but while one is).
	lc       *evloop.Conn
	src      sliceReader
	dst      appendWriter
	skipping *skipState

	toks [][]byte // tokens of the current text line, into line or r's buffer
	line []byte   // a text line too long for r's buffer
	key  []byte   // a copy of the current key, when r's buffer moves on
	data []byte   // a data block too long for r's buffer
	num  []byte   // scratch for formatting numbers

	idle *idleread.Waiter // waits for input without buffers; nil when it cannot
	// out is w's output: each write to the socket must complete within the
	// write timeout, or the connection fails. A client that does not read
	// its replies therefore blocks its own connection's goroutine for at
	// most that long (it never holds the node's mutex while writing), and
	// its replies are bounded by the write buffer.
	out *timedwrite.Writer
	// input is what waitIdle read, not yet taken by r.
	input idleread.Input

	started    bool             // a request has been served
	bodyPeeked int              // bytes of the current binary body still in r's buffer
	cmd        *metrics.Command // the current text command's, nil when unknown
	// op is the item command of the current request (command, exec):
	// every change to items is one command of the node.
	op fsm.Command

	// now is the service's clock (Service.Now), read once per read from the socket: the
	// requests of one pipelined batch share it, as memcached's requests
	// share its clock of one-second ticks. gap is the time between the
	// last two reads (see waitIdle); huge at first.
	now, gap int64

	// Read deadlines (see armRead). between is set while serve waits for
	// the first byte of a request; reqDeadline is when the current request
	// must have arrived (zero until it first needs another read);
	// readDeadline is the deadline set on the socket.
	between      bool
	reqDeadline  time.Time
	readDeadline time.Time
}

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{srv: s, nc: nc, peer: nc.RemoteAddr(), gap: 1 << 62}
	c.idle = idleread.New(nc)
	c.out = timedwrite.New(nc, s.cfg.WriteTimeout)
	c.takeBuffers()
	return c
}

// Buffers of connections between requests. A connection that can wait for
// input without a buffer (idleread.Waiter) gives its buffers back while it
// waits, so that an idle connection costs neither.
var (
	readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, bufSize) }}
	writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, bufSize) }}
)

// takeBuffers gives c a read and a write buffer.
func (c *conn) takeBuffers() {
	c.r = readers.Get().(*bufio.Reader)
	c.r.Reset(flushingReader{c})
	c.w = writers.Get().(*bufio.Writer)
	c.w.Reset(c.out)
}

// dropBuffers flushes c's replies and gives its buffers back, for the
// time it waits for its next request. Both must be empty then.
func (c *conn) dropBuffers() error {
	if err := c.w.Flush(); err != nil {
		return err
	}
	c.r.Reset(nil)
	readers.Put(c.r)
	c.w.Reset(nil)
	writers.Put(c.w)
	c.r, c.w = nil, nil
	return nil
}

// waitIdle waits, without buffers, for the next request to start
// arriving, under the idle timeout, as flushingReader.Read does between
// requests, and keeps what arrived in c.input for flushingReader. It
// reports false when c.idle cannot wait so (the caller reads as usual),
// and the error that ends the connection, if any.
func (c *conn) waitIdle() (bool, error) {
	if c.idle == nil || c.gap < int64(idleread.After) {
		return false, nil
	}
	if err := c.dropBuffers(); err != nil {
		return true, err
	}
	defer c.takeBuffers()
	for {
		c.armRead()
		err := c.idle.Read(&c.input)
		if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
			if c.holdsLocks() {
				continue // idle, but holding a lock: keep it
			}
			c.srv.log.Debug("memcache: closing an idle connection", "peer", c.peer.String())
		}
		if err != nil {
			return true, err
		}
		c.tick()
		return true, nil
	}
}

// tick reads the server's clock after a read from the socket: c.now, and
// c.gap since the read before.
func (c *conn) tick() {
	now := c.srv.svc.Now()
	c.gap, c.now = now-c.now, now
}

// flushingReader is the connection's input. It flushes the buffered
// replies before every read from the socket, that is whenever the server
// is about to wait for input: a pipelined batch gets its replies in one
// write, and the replies to the complete requests of a batch go out even
// when the batch ends in part of a request whose rest has yet to come.
type flushingReader struct{ c *conn }

func (f flushingReader) Read(p []byte) (int, error) {
	c := f.c
	if c.input.Len() > 0 {
		// What waitIdle read; the replies were flushed before.
		return c.input.Read(p), nil
	}
	// Flush also reports an earlier failed write (a client that did not
	// read its replies within the write timeout) when nothing is buffered:
	// the connection must end rather than read on and drop replies.
	if err := c.w.Flush(); err != nil {
		return 0, err
	}
	for {
		c.armRead()
		n, err := c.nc.Read(p)
		c.tick()
		if err != nil && c.between && errors.Is(err, os.ErrDeadlineExceeded) {
			if c.holdsLocks() {
				continue // idle, but holding a lock: keep it
			}
			c.srv.log.Debug("memcache: closing an idle connection", "peer", c.peer.String())
		}
		return n, err
	}
}

// armRead sets the read deadline for the next read from the socket: the
// idle timeout from now between requests; inside one, the read timeout
// from the first time the request needed more input than had arrived with
// its first byte. The server waits for input only once it has used up what
// arrived, so that is when its first byte came, give or take the time it
// took to serve the requests before it; and a request that fits in one read
// costs no clock reading.
func (c *conn) armRead() {
	cfg := &c.srv.cfg
	var dl time.Time
	switch {
	case c.between:
		if cfg.IdleTimeout > 0 {
			dl = time.Now().Add(cfg.IdleTimeout)
		}
	case cfg.ReadTimeout > 0:
		if c.reqDeadline.IsZero() {
			c.reqDeadline = time.Now().Add(cfg.ReadTimeout)
		}
		dl = c.reqDeadline
	}
	if !dl.Equal(c.readDeadline) {
		c.nc.SetReadDeadline(dl)
		c.readDeadline = dl
	}
}

// serve runs the connection until the client leaves, a write fails, or the
// server or an operator ends it. Its locks are released when it returns.
func (c *conn) serve() {
	defer c.finish()
	for {
		// Replies are flushed when more input is needed (flushingReader).
		c.between = c.r.Buffered() == 0
		if c.between {
			if waited, err := c.waitIdle(); waited && err != nil {
				return
			}
		}
		b, err := c.r.Peek(1)
		c.between = false
		if err != nil {
			return
		}
		c.reqDeadline = time.Time{}
		if err := c.request(b[0]); err != nil {
			if errors.Is(err, errClose) {
				c.w.Flush()
			}
			return
		}
	}
}

// request reads one request, whose first byte is first (not yet read),
// and writes its reply. It returns an error only when the connection must
// end.
func (c *conn) request(first byte) error {
	var err error
	switch first {
	case magicRequest:
		err = c.serveBinary()
	case 0:
		if !c.started {
			// No memcached client starts a connection so; a dlock
			// client at this port does (its frames start with a 4-byte
			// length). Say so at once and close, rather than wait for a
			// line that never comes. (Later, a NUL byte starts a text
			// line like any other, as in yrmcds.)
			c.w.WriteString(rNotMemcached)
			err = errClose
			break
		}
		err = c.serveText()
	default:
		err = c.serveText()
	}
	c.started = true
	return err
}

// finish closes the connection and its session, which drops the
// session's locks in one command. A client that left holding locks died
// holding them, so the session's lock-delay applies to those keys.
func (c *conn) finish() {
	if c.sess != nil {
		_ = c.sess.Close()
	}
	if c.nc != nil {
		c.nc.Close()
	}
	c.srv.forget(c)
}

// command starts the item command of the current request, c.op, with op
// and key, at the time of the read that brought the request (c.now), and
// returns it for the caller to fill in.
func (c *conn) command(op fsm.Op, key []byte) *fsm.Command {
	c.op = fsm.Command{Op: op, At: c.now, Key: key}
	return &c.op
}

// exec has the node apply c.op for the connection's session (nil until
// its first lock: other commands need none).
func (c *conn) exec() fsm.Result {
	return c.srv.svc.Do(c.sess, &c.op)
}

// execLock is exec for c.op, a lock: the connection opens its session
// with its first lock.
func (c *conn) execLock() fsm.Result {
	if c.sess == nil {
		if err := c.openSession(); err != nil {
			return fsm.Result{Err: err}
		}
	}
	return c.exec()
}

// openSession opens the connection's session, which holds its locks (and
// in a cluster is bound to this node: it takes a commit). When the
// session ends behind the connection's back (an operator ended it, the
// node let go of its clients, or the lock service shut down), closing the
// socket makes serve return, or its event loop call Closed.
func (c *conn) openSession() error {
	var end func(error)
	if nc := c.nc; nc != nil {
		end = func(error) { nc.Close() }
	} else {
		lc := c.lc // attached before the first request
		end = func(error) { lc.Close() }
	}
	sess, err := c.srv.svc.OpenSession(latch.SessionOptions{Protocol: "memcache", Peer: c.peer.String(), OnEnd: end})
	if err != nil {
		return err
	}
	c.sess = sess
	return nil
}

// holdsLocks reports whether the connection holds item locks.
func (c *conn) holdsLocks() bool {
	return c.sess != nil && c.srv.svc.HoldsItemLocks(c.sess)
}

// unlockAll drops every lock of the connection (unlock_all, quit). A
// connection that never locked holds none: nothing is proposed (in a
// cluster, a commit for nothing, or a wait without a leader).
func (c *conn) unlockAll() error {
	if c.sess == nil {
		return nil
	}
	c.command(fsm.OpItemUnlockAll, nil)
	return c.exec().Err
}

// unlock drops the connection's lock on key. A connection that never
// locked holds none, which a read tells without proposing anything (nor
// counting a get): the item's absence (cache.ErrNotFound) or else
// cache.ErrNotLocked, as the lock table would answer.
func (c *conn) unlock(key []byte) error {
	if c.sess == nil {
		live, err := c.srv.svc.ItemLive(c.now, key)
		switch {
		case err != nil:
			return err
		case !live:
			return cache.ErrNotFound
		}
		return cache.ErrNotLocked
	}
	c.command(fsm.OpItemUnlock, key)
	return c.exec().Err
}
