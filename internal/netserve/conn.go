package netserve

import (
	"bufio"
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/latchd/latch/internal/idleread"
	"github.com/latchd/latch/internal/timedwrite"
)

// BufferSize is the size of a connection's read buffer (R) and of its
// write buffer (W): room for a batch of 16 pipelined requests or replies of
// small items. Longer requests and replies go around them, so the size
// bounds what a connection costs while it is busy (twice this), not what a
// request may carry; an idle connection gives both back (Conn.Next).
const BufferSize = 4 << 10

// Buffers of connections that are not idle.
var (
	readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, BufferSize) }}
	writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, BufferSize) }}
)

// Hooks are what a protocol tells the read path of its connection. Each
// may be left nil.
type Hooks struct {
	// Busy reports whether the connection must stay open past its idle
	// timeout: it holds a lock that closing it would release, or a request
	// of it waits. It is called from the connection's goroutine (or its
	// event loop's) and must be cheap.
	Busy func() bool
	// Flush writes the replies pending. The read path calls it before
	// every read from the socket, so that a pipelined batch is answered in
	// one write, and the answers to the complete requests of a batch go out
	// even when it ends in part of a request. nil: W.Flush. A protocol that
	// finishes a batch before answering it flushes W itself.
	Flush func() error
	// OwnWriter says the protocol writes through a writer of its own: the
	// connection has no W, and Flush flushes that writer.
	OwnWriter bool
	// Read is called after every read from the socket, whatever it read.
	Read func()
	// Idle is called when the connection gives its buffers back for a wait
	// (Next), for the protocol to drop buffers of its own.
	Idle func()
	// Drain makes Shutdown let the connection answer what it has pending
	// rather than close it at once: its reads fail with ErrServerClosed
	// from then on, and the protocol's ServeConn ends when it has answered.
	Drain bool
	// Finish drains a connection an event loop serves, where Drain is set:
	// Shutdown calls it on a goroutine of its own once Draining reports
	// true, for the protocol to take no more requests, answer what it has
	// pending (evloop.Conn.Send) and return. Shutdown closes the event
	// loops once every Finish has returned (or its context is done), and
	// the loops write what was sent as far as the sockets take it at once
	// before they close them: a client that does not read cannot hold a
	// shutdown. Finish may run while the loop calls the connection's
	// handler, and after its Closed.
	Finish func()
}

// Conn is one client connection of a Server. A connection served by its own
// goroutine reads through R, under the read path's deadlines, and writes
// through W; one served by an event loop has neither (its protocol's
// handler is given its input and appends its replies).
type Conn struct {
	srv  *Server
	peer net.Addr
	nc   net.Conn // nil for a loop's connection
	loop loopRef  // set for a loop's connection

	// R reads the connection's input; W buffers its replies, written to
	// the socket within the write timeout when flushed. Both are the
	// connection's goroutine's, and are replaced while it waits idle (Next)
	// : read them after Next, not before.
	R *bufio.Reader
	W *bufio.Writer

	hooks Hooks
	state atomic.Value // the protocol's (SetState)
	out   *timedwrite.Writer
	// idle waits for input without buffers; nil when it cannot. input is
	// what it read, not yet taken by R. gap is how long the last wait for
	// a request took.
	idle  *idleread.Waiter
	input idleread.Input
	gap   time.Duration

	// Read deadlines (see armRead). between is set while Next waits for
	// the first byte of a request; reqDeadline is when the current request
	// must have arrived (zero until it first needs another read);
	// readDeadline is the deadline set on the socket.
	between      bool
	reqDeadline  time.Time
	readDeadline time.Time

	drains atomic.Bool // Hooks.Drain, for Shutdown's goroutine
	// finisher is Hooks.Finish of a loop's connection that drains, for
	// Shutdown's goroutine.
	finisher atomic.Pointer[func()]
	draining atomic.Bool // Shutdown began and the protocol drains
}

// init readies c, whose connection is nc, to be served by a goroutine.
func (c *Conn) init(nc net.Conn) {
	c.nc = nc
	c.out = timedwrite.New(nc, c.srv.cfg.WriteTimeout)
	c.idle = idleread.New(nc)
	c.gap = idleread.After // a new connection waits for its first request without buffers
	c.takeBuffers()
}

// RemoteAddr returns the client's address.
func (c *Conn) RemoteAddr() net.Addr { return c.peer }

// NetConn returns the connection's net.Conn, or nil for one an event loop
// serves.
func (c *Conn) NetConn() net.Conn { return c.nc }

// SetHooks sets the protocol's hooks. A goroutine's protocol calls it
// first thing in ServeConn; a loop's protocol in LoopConn, where only
// Busy, Drain and Finish are used. With OwnWriter set, the connection has
// no W.
func (c *Conn) SetHooks(h Hooks) {
	c.hooks = h
	c.drains.Store(h.Drain)
	if c.nc == nil && h.Drain && h.Finish != nil {
		c.finisher.Store(&h.Finish)
	}
	if h.OwnWriter && c.W != nil {
		c.W.Reset(nil)
		writers.Put(c.W)
		c.W = nil
	}
}

// SetState records the protocol's state of the connection, once, for
// State: what the protocol wrote before the call, State's caller reads.
func (c *Conn) SetState(v any) { c.state.Store(v) }

// State returns what SetState recorded, or nil: a protocol that lists its
// connections (Server.Range) finds its own state there.
func (c *Conn) State() any { return c.state.Load() }

// Draining reports whether the server is shutting down and the connection
// is to answer what it has pending and end (Hooks.Drain).
func (c *Conn) Draining() bool { return c.draining.Load() }

// Close closes the connection, from any goroutine: its reads and writes
// fail, and its protocol ends it as when the client leaves.
func (c *Conn) Close() error {
	if c.nc != nil {
		return c.nc.Close()
	}
	return c.loop.close()
}

// busy reports Hooks.Busy.
func (c *Conn) busy() bool { return c.hooks.Busy != nil && c.hooks.Busy() }

// shutdown begins the connection's end in a shutdown, with the server's
// mutex held: a draining one stops reading; any other goroutine's is
// closed. A loop's that drains is finished (Hooks.Finish) on a goroutine
// of the server's, counted in finishing too; any other loop's is left to
// its loop, which Shutdown closes.
func (c *Conn) shutdown(finishing *sync.WaitGroup) {
	switch {
	case c.nc == nil:
		f := c.finisher.Load()
		if f == nil {
			return
		}
		c.draining.Store(true)
		finishing.Add(1)
		c.srv.wg.Add(1)
		go func() {
			defer c.srv.wg.Done()
			defer finishing.Done()
			(*f)()
		}()
	case c.drains.Load():
		c.draining.Store(true)
		c.nc.SetReadDeadline(aLongTimeAgo)
	default:
		c.nc.Close()
	}
}

var aLongTimeAgo = time.Unix(1, 0)

// finish closes a goroutine's connection and gives its buffers back, once
// its protocol is done with it.
func (c *Conn) finish() {
	c.nc.Close()
	if c.R != nil {
		c.R.Reset(nil)
		readers.Put(c.R)
		c.R = nil
	}
	if c.W != nil {
		c.W.Reset(nil)
		writers.Put(c.W)
		c.W = nil
	}
}

// takeBuffers gives c a read buffer, and a write buffer unless its
// protocol writes through its own.
func (c *Conn) takeBuffers() {
	c.R = readers.Get().(*bufio.Reader)
	c.R.Reset(source{c})
	if !c.hooks.OwnWriter {
		c.W = writers.Get().(*bufio.Writer)
		c.W.Reset(c.out)
	}
}

// dropBuffers flushes c's replies and gives its buffers back, for a wait
// without them. Both must be empty.
func (c *Conn) dropBuffers() error {
	if err := c.flush(); err != nil {
		return err
	}
	c.R.Reset(nil)
	readers.Put(c.R)
	c.R = nil
	if c.W != nil {
		c.W.Reset(nil)
		writers.Put(c.W)
		c.W = nil
	}
	if c.hooks.Idle != nil {
		c.hooks.Idle()
	}
	return nil
}

// flush writes the replies pending: Hooks.Flush, or W's.
func (c *Conn) flush() error {
	if c.hooks.Flush != nil {
		return c.hooks.Flush()
	}
	// Flush also reports an earlier failed write (a client that did not
	// read its replies within the write timeout) when nothing is buffered:
	// the connection must end rather than read on and drop replies.
	return c.W.Flush()
}

// Next waits for the first byte of the next request and returns the error
// that ends the connection, if any: the client left or failed, the idle
// timeout passed while the connection was not busy (os.ErrDeadlineExceeded),
// or, for a draining connection, ErrServerClosed. Replies are flushed
// before any wait. A connection whose last wait took idleread.After or
// more gives its buffers back for this one (an idle connection then holds
// neither). Once Next returns, the request's bytes are read under the read
// timeout, from the first time the request needs a read.
func (c *Conn) Next() error {
	if c.R.Buffered() == 0 {
		c.between = true
		if c.idle != nil && c.gap >= idleread.After && c.input.Len() == 0 {
			if err := c.waitIdle(); err != nil {
				c.between = false
				return c.readErr(err)
			}
		}
	}
	_, err := c.R.Peek(1)
	c.between = false
	c.reqDeadline = time.Time{}
	if err != nil {
		return c.readErr(err)
	}
	return nil
}

// waitIdle waits, without buffers, for the next request to start
// arriving, under the idle timeout, and keeps what arrived in c.input for
// R.
func (c *Conn) waitIdle() error {
	if err := c.dropBuffers(); err != nil {
		return err
	}
	defer c.takeBuffers()
	for {
		c.armRead()
		start := time.Now()
		err := c.idle.Read(&c.input)
		c.gap = time.Since(start)
		c.afterRead()
		if err != nil && c.keepIdle(err) {
			continue
		}
		return err
	}
}

// keepIdle reports whether a read that failed with err between requests
// is to be tried again: the idle timeout passed, but the connection is
// busy.
func (c *Conn) keepIdle(err error) bool {
	if !c.between || !errors.Is(err, os.ErrDeadlineExceeded) || c.draining.Load() {
		return false
	}
	if c.busy() {
		return true // idle, but holding a lock or waiting: keep it
	}
	c.srv.log.Debug(c.srv.name+": closing an idle connection", "peer", c.peer.String())
	return false
}

// readErr is the error a failed read ends the connection with.
func (c *Conn) readErr(err error) error {
	if c.draining.Load() {
		return ErrServerClosed
	}
	return err
}

func (c *Conn) afterRead() {
	if c.hooks.Read != nil {
		c.hooks.Read()
	}
}

// source is what R reads: what an idle wait read, then the socket, after
// flushing the replies and under the read path's deadlines.
type source struct{ c *Conn }

func (s source) Read(p []byte) (int, error) {
	c := s.c
	if c.input.Len() > 0 {
		return c.input.Read(p), nil
	}
	if err := c.flush(); err != nil {
		return 0, err
	}
	for {
		c.armRead()
		var start time.Time
		if c.between {
			start = time.Now()
		}
		n, err := c.nc.Read(p)
		if c.between {
			c.gap = time.Since(start)
		}
		c.afterRead()
		if err != nil && c.keepIdle(err) {
			continue
		}
		if err != nil {
			err = c.readErr(err)
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
// costs no clock reading. A draining connection's deadline stays in the
// past.
func (c *Conn) armRead() {
	cfg := &c.srv.cfg
	var dl time.Time
	switch {
	case c.draining.Load():
		dl = aLongTimeAgo
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
		if c.draining.Load() {
			// Shutdown may have set its deadline between the check and
			// this one: keep it in the past.
			c.nc.SetReadDeadline(aLongTimeAgo)
		}
	}
}
