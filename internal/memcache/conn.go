package memcache

import (
	"bufio"
	"errors"
	"net"

	"github.com/latchd/latch"
)

// errClose ends a connection after its pending replies are flushed (quit).
var errClose = errors.New("memcache: close connection")

const bufSize = 16 << 10

// conn is one client connection and its session.
type conn struct {
	srv  *Server
	nc   net.Conn
	r    *bufio.Reader
	w    *bufio.Writer
	sess latch.Session
	done chan struct{} // closed when serve returns

	toks [][]byte // tokens of the current text line, into line or r's buffer
	line []byte   // a text line too long for r's buffer
	key  []byte   // a copy of the current key, when r's buffer moves on
	data []byte   // a data block too long for r's buffer
	num  []byte   // scratch for formatting numbers

	bodyPeeked int // bytes of the current binary body still in r's buffer
}

func newConn(s *Server, nc net.Conn, sess latch.Session) *conn {
	c := &conn{
		srv:  s,
		nc:   nc,
		w:    bufio.NewWriterSize(nc, bufSize),
		sess: sess,
		done: make(chan struct{}),
	}
	c.r = bufio.NewReaderSize(flushingReader{c}, bufSize)
	return c
}

// flushingReader is the connection's input. It flushes the buffered
// replies before every read from the socket, that is whenever the server
// is about to wait for input: a pipelined batch gets its replies in one
// write, and the replies to the complete requests of a batch go out even
// when the batch ends in part of a request whose rest has yet to come.
type flushingReader struct{ c *conn }

func (f flushingReader) Read(p []byte) (int, error) {
	if f.c.w.Buffered() > 0 {
		if err := f.c.w.Flush(); err != nil {
			return 0, err
		}
	}
	return f.c.nc.Read(p)
}

// serve runs the connection until the client leaves, a write fails, or the
// server or an operator ends it. Its locks are released when it returns.
func (c *conn) serve() {
	defer c.finish()
	go c.watch()
	for {
		// Replies are flushed when more input is needed (flushingReader).
		b, err := c.r.Peek(1)
		if err != nil {
			return
		}
		if b[0] == magicRequest {
			err = c.serveBinary()
		} else {
			err = c.serveText()
		}
		if err != nil {
			if errors.Is(err, errClose) {
				c.w.Flush()
			}
			return
		}
	}
}

// watch closes the socket when the session ends behind the connection's
// back (an operator ended it, or the lock service shut down), so that serve
// returns.
func (c *conn) watch() {
	select {
	case <-c.sess.Done():
		c.nc.Close()
	case <-c.done:
	}
}

// finish releases the connection's locks and closes it.
func (c *conn) finish() {
	close(c.done)
	c.srv.store.unlockAllOnClose(c.sess)
	c.nc.Close()
	c.srv.forget(c)
}
