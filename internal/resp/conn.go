package resp

import (
	"bufio"
	"errors"
	"net"
	"os"
	"time"

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
	srv *Server
	nc  net.Conn
	br  *bufio.Reader
	bw  *bufio.Writer
	rd  *Reader
	w   *Writer
	out *timedwrite.Writer

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

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{srv: s, nc: nc, id: s.lastID.Add(1)}
	c.out = timedwrite.New(nc, s.cfg.WriteTimeout)
	c.br = bufio.NewReaderSize(flushingReader{c}, bufSize)
	c.bw = bufio.NewWriterSize(c.out, bufSize)
	c.rd = NewReader(c.br, s.cfg.Limits)
	c.w = NewWriter(c.bw)
	c.authed = len(s.cfg.Tokens) == 0
	return c
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
		c.srv.log.Debug("redis: closing an idle connection", "peer", c.nc.RemoteAddr().String())
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
