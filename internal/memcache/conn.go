package memcache

import (
	"bufio"
	"errors"
	"net"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/cache"
	"github.com/latchd/latch/internal/fsm"
	"github.com/latchd/latch/internal/metrics"
	"github.com/latchd/latch/internal/netserve"
)

// errClose ends a connection after its pending replies are flushed (quit).
var errClose = errors.New("memcache: close connection")

// conn is one client connection and its session, served by a goroutine of
// its own (ServeConn) or by an event loop (Input, loop.go).
type conn struct {
	srv  *Server
	nc   *netserve.Conn
	peer net.Addr
	r    *bufio.Reader // nc.R, or the input of an event loop's call
	w    *bufio.Writer // nc.W, or the replies of an event loop's call
	sess latch.Session // nil until its first lock (openSession)

	// Served by an event loop: the input and the replies of the current
	// call, and the rest of a request being skipped (nil but while one
	// is).
	src      netserve.Input
	dst      netserve.Output
	skipping *skipState

	toks [][]byte // tokens of the current text line, into line or r's buffer
	line []byte   // a text line too long for r's buffer
	key  []byte   // a copy of the current key, when r's buffer moves on
	data []byte   // a data block too long for r's buffer
	num  []byte   // scratch for formatting numbers

	started    bool             // a request has been served
	bodyPeeked int              // bytes of the current binary body still in r's buffer
	cmd        *metrics.Command // the current text command's, nil when unknown
	// op is the item command of the current request (command, exec):
	// every change to items is one command of the node.
	op fsm.Command

	// now is the service's clock (Service.Now), read once per read from
	// the socket: the requests of one pipelined batch share it, as
	// memcached's requests share its clock of one-second ticks.
	now int64
}

// ServeConn serves nc on its own goroutine (netserve.Protocol) until the
// client leaves, a write fails, or the server or an operator ends it. Its
// locks are released when it returns.
func (s *Server) ServeConn(nc *netserve.Conn) {
	c := &conn{srv: s, nc: nc, peer: nc.RemoteAddr()}
	nc.SetHooks(netserve.Hooks{Busy: c.holdsLocks, Read: c.tick})
	c.serve()
}

// tick reads the service's clock after a read from the socket.
func (c *conn) tick() { c.now = c.srv.svc.Now() }

// serve runs the connection until the client leaves, a write fails, or the
// server or an operator ends it.
func (c *conn) serve() {
	defer c.finish()
	for {
		// Replies are flushed when more input is needed (netserve).
		if err := c.nc.Next(); err != nil {
			return
		}
		// Next may have given the buffers back and taken others.
		c.r, c.w = c.nc.R, c.nc.W
		b, err := c.r.Peek(1)
		if err != nil {
			return
		}
		err = c.request(b[0])
		if err != nil {
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
}

// command starts the item command of the current request, c.op, with op
// and key, at the time of the read that brought the request (c.now), and
// returns it for the caller to fill in: the item fields only
// (fsm.Command.ResetItem zeroes the others it had; c.op holds nothing but
// item commands, whose other fields stay zero).
func (c *conn) command(op fsm.Op, key []byte) *fsm.Command {
	c.op.ResetItem(op, c.now, key)
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
// connection makes serve return, or its event loop call Closed.
func (c *conn) openSession() error {
	nc := c.nc
	sess, err := c.srv.svc.OpenSession(latch.SessionOptions{Protocol: "memcache", Peer: c.peer.String(), OnEnd: func(error) {
		if nc != nil { // nil: a test's connection, served by no server
			nc.Close()
		}
	}})
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
