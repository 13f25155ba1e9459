package resp

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/latchd/latch/internal/evloop"
	"github.com/latchd/latch/internal/fsm"
	"github.com/latchd/latch/internal/timedwrite"
)

// bufSize is the size of a connection's read and write buffers: room for
// a pipelined batch of small requests or replies. Longer requests go around
// them (Reader).
const bufSize = 4 << 10

// conn is one client connection. Its locks are not its own: they are owned
// by the values its requests carry.
type conn struct {
	srv  *Server
	nc   net.Conn // nil when an event loop serves the connection
	peer net.Addr
	br   *bufio.Reader
	bw   *bufio.Writer
	rd   *Reader
	w    *Writer
	out  *timedwrite.Writer

	// Served by an event loop (Input): the input given and the replies;
	// partial is set when the input ended in an incomplete request.
	in      *sliceReader
	reply   *appendWriter
	partial bool

	id      int64
	name    string
	authed  bool
	token   *Token // the token AUTH accepted; nil: all rights
	closing bool   // QUIT: close once the reply is out

	// A transaction: MULTI started it (multi), its commands are queued
	// (copies), dirty when one was refused (EXEC then aborts). watches
	// are the keys WATCHed, as they were.
	multi   bool
	dirty   bool
	queued  [][][]byte
	watches []fsm.Watch

	// The plan of the current request or transaction: commands for the
	// service (subs) and how to answer from their results (plans).
	subs    []fsm.Command
	names   []string // the key lists of subs
	plans   []plan
	batch   int // requests planned and not yet run (runBatch)
	results []fsm.Result
	// txResults is room for the results of a batch or transaction
	// (fsm.Command.TxResults), reused.
	txResults []fsm.Result
	at        int64 // when the results were read (PTTL)

	// Read deadlines: between is set while waiting for the first byte of a
	// request; reqDeadline is when the current request must have arrived.
	between      bool
	reqDeadline  time.Time
	readDeadline time.Time
}

// newConn returns the connection nc, served by its own goroutine (serve).
func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{srv: s, nc: nc, peer: nc.RemoteAddr(), id: s.lastID.Add(1)}
	c.out = timedwrite.New(nc, s.cfg.WriteTimeout)
	c.br = bufio.NewReaderSize(flushingReader{c}, bufSize)
	c.bw = bufio.NewWriterSize(c.out, bufSize)
	c.init()
	return c
}

// newLoopConn returns the connection from peer, served by an event loop
// (Input). Its buffers are borrowed for each call of Input (loopBuffers),
// so that an idle connection holds none.
func newLoopConn(s *Server, peer net.Addr) *conn {
	c := &conn{srv: s, peer: peer, id: s.lastID.Add(1)}
	c.in, c.reply = new(sliceReader), new(appendWriter)
	c.init()
	return c
}

// The read and write buffers of the event loops' connections, lent for
// one call of Input.
var (
	loopReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, bufSize) }}
	loopWriters = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, bufSize) }}
)

// takeBuffers lends c a read buffer over c.in and a write buffer over
// c.reply, for one call of Input.
func (c *conn) takeBuffers() {
	c.br = loopReaders.Get().(*bufio.Reader)
	c.br.Reset(c.in)
	c.bw = loopWriters.Get().(*bufio.Writer)
	c.bw.Reset(c.reply)
	c.rd.r, c.w.w = c.br, c.bw
}

// giveBuffers gives c's buffers back; the write buffer must have been
// flushed.
func (c *conn) giveBuffers() {
	c.br.Reset(nil)
	loopReaders.Put(c.br)
	c.bw.Reset(nil)
	loopWriters.Put(c.bw)
	c.br, c.bw, c.rd.r, c.w.w = nil, nil, nil, nil
}

func (c *conn) init() {
	c.rd = NewReader(c.br, c.srv.cfg.Limits)
	c.w = NewWriter(c.bw)
	c.authed = len(c.srv.cfg.Tokens) == 0
}

// more reports whether more input than the current request is at hand,
// read and not yet parsed: a pipelined request follows.
func (c *conn) more() bool {
	return c.br.Buffered() > 0 || (c.in != nil && c.in.Len() > 0)
}

// flushingReader is the connection's input: it flushes the buffered
// replies before every read from the socket, so that a pipelined batch is
// answered in one write.
type flushingReader struct{ c *conn }

func (f flushingReader) Read(p []byte) (int, error) {
	c := f.c
	if c.batch > 0 {
		c.runBatch()
	}
	if err := c.bw.Flush(); err != nil {
		return 0, err
	}
	c.armRead()
	n, err := c.nc.Read(p)
	if err != nil && c.between && errors.Is(err, os.ErrDeadlineExceeded) {
		c.srv.log.Debug("redis: closing an idle connection", "peer", c.peer.String())
	}
	return n, err
}

// armRead sets the read deadline of the next read: the idle timeout from
// now between requests, the read timeout from the request's first wait
// inside one.
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

// serve runs the connection until the client leaves, a write fails, a
// request is malformed, or the server shuts down.
func (c *conn) serve() {
	defer c.finish()
	for {
		c.between = c.br.Buffered() == 0
		if _, err := c.br.Peek(1); err != nil {
			return
		}
		c.between = false
		c.reqDeadline = time.Time{}
		args, err := c.rd.Next()
		if err != nil {
			var pe *ProtocolError
			if errors.As(err, &pe) {
				if c.batch > 0 {
					c.runBatch()
				}
				c.w.Error("ERR " + pe.Error())
				c.bw.Flush()
			}
			return
		}
		c.do(args)
		if c.closing {
			c.bw.Flush()
			return
		}
	}
}

func (c *conn) finish() {
	c.nc.Close()
	c.srv.forget(c)
}

// Input parses and answers the complete requests at the start of in, for
// an event loop (evloop.Handler): the loop has read them, and the replies
// are appended to out. It stops at an incomplete request, which the loop
// gives again with more input.
func (c *conn) Input(in, out []byte) ([]byte, int, bool) {
	// A request left incomplete by the previous call is parsed again only
	// once it is whole (complete reads its headers), so that a long one
	// arriving in many reads is parsed once; the requests after it are
	// parsed at once (at most one parse fails per read).
	if c.partial && !complete(in, c.srv.cfg.Limits) {
		return out, 0, true
	}
	c.partial = false
	c.in.Reset(in)
	c.takeBuffers()
	defer c.giveBuffers()
	c.reply.b = out
	used := 0
	open := true
	for c.more() {
		args, err := c.rd.Next()
		if errors.Is(err, errIncomplete) {
			c.partial = true
			break
		}
		if err != nil {
			// A *ProtocolError: nothing else can fail reading memory.
			if c.batch > 0 {
				c.runBatch()
			}
			c.w.Error("ERR " + err.Error())
			used, open = len(in), false
			break
		}
		c.do(args)
		used = c.in.Pos() - c.br.Buffered()
		if c.closing {
			open = false
			break
		}
	}
	if c.batch > 0 {
		c.runBatch()
	}
	c.bw.Flush()
	c.in.Reset(nil)
	out, c.reply.b = c.reply.b, nil
	return out, used, open
}

// Closed ends the connection once its event loop has closed it.
func (c *conn) Closed(err error) {
	switch {
	case errors.Is(err, evloop.ErrIdle):
		c.srv.log.Debug("redis: closing an idle connection", "peer", c.peer.String())
	case err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, evloop.ErrClosed):
		c.srv.log.Debug("redis: connection closed", "peer", c.peer.String(), "err", err)
	}
	c.srv.forget(c)
}

// errIncomplete is the end of an event loop's input in the middle of a
// request.
var errIncomplete = errors.New("incomplete request")

// sliceReader reads a slice, then answers errIncomplete.
type sliceReader struct {
	b   []byte
	pos int
}

func (r *sliceReader) Reset(b []byte) { r.b, r.pos = b, 0 }

// Pos returns how many bytes were read.
func (r *sliceReader) Pos() int { return r.pos }

// Len returns how many bytes are left.
func (r *sliceReader) Len() int { return len(r.b) - r.pos }

func (r *sliceReader) Read(p []byte) (int, error) {
	if r.pos == len(r.b) {
		return 0, errIncomplete
	}
	n := copy(p, r.b[r.pos:])
	r.pos += n
	return n, nil
}

// appendWriter appends to a slice.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}
