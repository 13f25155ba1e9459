package dlock

import (
	"encoding/binary"
	"errors"
	"io"
	"time"

	"github.com/latchd/latch/internal/evloop"
	"github.com/latchd/latch/internal/frame"
	"github.com/latchd/latch/internal/netserve"
)

// A connection served by an event loop (evloop.Handler) is served by the
// same code as one served by its goroutine: the loop's Input frames the
// requests of what the loop read and hands each to serveFrame, as readLoop
// does. The loop never waits:
//
//   - answers are handed to the loop (the writer's evloop.Conn.Send), from
//     the loop's goroutine or from any other: a version 3 Lock that waits
//     is answered by the goroutine that ends its wait, as on a goroutine's
//     connection, and the version 2 queue is still served by a goroutine
//     of its own (serveV2), which blocks in the lock service as before;
//   - where the reader would wait for room in a full version 2 queue, the
//     loop pauses the connection's input instead (evloop.Conn.Pause,
//     conn.stalled) and the queue's server resumes it once there is room,
//     or once it parks in a waiting Lock (the next request then finds the
//     queue full behind a waiting Lock, and the connection is aborted as
//     on a goroutine);
//   - the connection's end (Closed, or Finish in a shutdown) closes the
//     session, which answers what waits, and waits only for the queue's
//     server to finish the request it handles, which the session's end
//     cuts short.

// loopConn is what a connection uses of its event loop's connection
// (*evloop.Conn): tests give it another.
type loopConn interface {
	Send(p []byte) bool
	Pause()
	Resume()
}

// LoopConn returns the connection nc, to be served by an event loop
// (Input): netserve's, for the plain connections of an inline service.
func (s *Server) LoopConn(nc *netserve.Conn) evloop.Handler {
	c := newConn(s, nc, nc.RemoteAddr().String())
	nc.SetHooks(netserve.Hooks{
		Busy:   c.waits,
		Drain:  true,
		Finish: func() { c.end(true) },
	})
	return c
}

// Attach takes the loop's connection, to which answers are sent
// (evloop.Attacher): the loop calls it before any other method.
func (c *conn) Attach(lc *evloop.Conn) { c.attach(lc) }

func (c *conn) attach(lc loopConn) {
	c.imu.Lock()
	c.lc = lc
	c.out = newLoopWriter(lc)
	c.imu.Unlock()
	c.nc.SetState(c) // whole: Server.Range's callers see it from now on
}

// Input serves the whole frames at the start of in, the connection's
// input not yet consumed, for its event loop (evloop.Handler). The frames
// of one call share the time of the read that completed them
// (server_unix_time). Their answers are sent, together, before Input
// returns (the writer is held meanwhile); none is appended to out.
//
// It stops at an incomplete frame, which the loop gives again with more
// input, or at a version 2 request that finds the queue full (stalled:
// the input is paused until the queue has room). A frame over MaxFrame is
// answered, and the connection closed, from its header alone. Once the
// connection ends (a shutdown drains it), its input is dropped.
func (c *conn) Input(in, out []byte) ([]byte, int, bool) {
	c.imu.Lock()
	defer c.imu.Unlock()
	if c.ended || c.nc.Draining() {
		return out, len(in), true
	}
	at := time.Now()
	c.out.hold()
	used, open := c.serveInput(in, at)
	c.out.flush()
	return out, used, open
}

// serveInput is Input's work: it returns how many bytes of in it consumed
// and whether the connection stays open.
func (c *conn) serveInput(in []byte, at time.Time) (int, bool) {
	used := 0
	for len(in)-used >= frame.HeaderSize {
		size := binary.BigEndian.Uint32(in[used:])
		if uint64(size) > uint64(c.srv.cfg.MaxFrame) {
			c.frameTooLarge(&frame.TooLargeError{Size: uint64(size), Max: c.srv.cfg.MaxFrame}, at)
			return len(in), false
		}
		end := used + frame.HeaderSize + int(size)
		if end > len(in) {
			break
		}
		if !c.serveFrame(in[used+frame.HeaderSize:end], at) {
			c.lc.Pause() // until serveV2 resumes it (unstall)
			break
		}
		used = end
		if c.aborted.Load() {
			return used, false
		}
	}
	return used, true
}

// Closed ends the connection once its event loop has closed it, as finish
// does at the end of a goroutine's connection: on the loop's goroutine,
// which it holds only while the session's end answers what waits.
func (c *conn) Closed(err error) {
	switch {
	case errors.Is(err, evloop.ErrIdle):
		c.srv.log.Debug("dlock: closing an idle connection", "peer", c.peer)
	case err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, evloop.ErrClosed):
		c.srv.log.Debug("dlock: connection lost", "peer", c.peer, "err", err)
	}
	// The loop closing in a shutdown ends the connection as a shutdown
	// does a goroutine's (the answers have nowhere to go by now).
	c.end(c.nc.Draining() || errors.Is(err, evloop.ErrClosed))
}

// end finishes an event loop's connection once: from Closed, on the loop's
// goroutine, or from the server's shutdown (drain), on a goroutine of its
// own, while the loop still serves the connection; the loop then writes
// the answers sent, and closes it (netserve.Hooks.Finish).
//
// A shutdown may come before the loop attached the connection (Attach):
// then nothing of it was served, and there is nothing to finish.
func (c *conn) end(drain bool) {
	c.imu.Lock()
	ended, attached := c.ended, c.out != nil
	c.ended = true
	c.imu.Unlock()
	if !ended && attached {
		c.finish(drain)
	}
}
