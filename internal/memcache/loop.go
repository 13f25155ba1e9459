package memcache

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"sync"

	"github.com/latchd/latch/internal/evloop"
	"github.com/latchd/latch/internal/netserve"
)

// A connection served by an event loop (evloop.Handler) runs the same
// parsers as one served by its goroutine, over the input the loop read: a
// bufio.Reader over a slice (netserve.Input), and replies appended to the
// loop's output (netserve.Output). It borrows both buffers from the pools for
// each call, so that an idle connection holds neither. Each call serves
// the whole requests at the start of its input (nextRequest) and leaves
// the incomplete one to the loop, which gives it again with more.

// newLoopConn returns the connection from peer, to be served by an event
// loop (Input).
func newLoopConn(s *Server, peer net.Addr) *conn {
	return &conn{srv: s, peer: peer}
}

// bufSize is the size of a connection's read and write buffers, on a
// goroutine (netserve's) or an event loop (these): the text parser's
// lines longer than it and than MaxLine are too long (nextRequest).
const bufSize = netserve.BufferSize

// The read and write buffers of the event loops' connections, lent for
// one call of Input.
var (
	loopReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, bufSize) }}
	loopWriters = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, bufSize) }}
)

// errIncomplete is the end of an event loop's input, met by a parser
// that skips the rest of a request (skip, readLine); errSkipping ends
// that request's parse, to be finished by later input (skipInput).
var (
	errIncomplete = netserve.ErrIncomplete
	errSkipping   = errors.New("memcache: skipping the rest of a request")
)

// skipState is a request being skipped, and how it is answered once it
// is.
type skipState struct {
	n     uint64 // bytes left to skip
	toLF  bool   // rather than n bytes, skip up to and with the next LF
	then  skipThen
	req   header // the binary request's header
	since int64  // when the skipping started (Service.Now)
	// held says that the first byte of the next input was skipped: an
	// event loop holds an incomplete request's last byte (Input), under
	// its read timeout.
	held bool
}

// skipThen says how a skipped request is answered.
type skipThen uint8

const (
	thenLineTooLong  skipThen = iota // a text line over MaxLine: ERROR
	thenTextTooLarge                 // a text data block over the item size: SERVER_ERROR
	thenBinInvalid                   // a binary key over its limit: Invalid
	thenBinTooLarge                  // a binary value over the item size: binTooLarge
)

// skip discards the next n bytes of input, the rest of a request too large
// to keep, and answers the request as s says. Where an event loop's input
// ends first, the rest is skipped as it arrives (errSkipping).
func (c *conn) skip(n uint64, s skipState) error {
	for n > 0 {
		d, err := c.r.Discard(int(min(n, 1<<30)))
		n -= uint64(d)
		if errors.Is(err, errIncomplete) {
			s.n = n
			return c.startSkip(s)
		}
		if err != nil {
			return err
		}
	}
	return c.skipped(&s)
}

// startSkip records that the request s says is skipped as the input
// arrives, and returns errSkipping.
func (c *conn) startSkip(s skipState) error {
	s.since = c.now
	c.skipping = &s
	return errSkipping
}

// skipped answers a request skipped to its end.
func (c *conn) skipped(s *skipState) error {
	switch s.then {
	case thenLineTooLong:
		c.textError(rError)
	case thenTextTooLarge:
		c.textError(rTooLarge)
	case thenBinInvalid:
		c.binError(&request{header: s.req}, stInvalid)
	case thenBinTooLarge:
		return c.binTooLarge(&request{header: s.req})
	}
	return nil
}

// skipInput skips what in has of c.skipping's request, and reports how
// many bytes it skipped and whether the request is over.
func (c *conn) skipInput(in []byte) (int, bool) {
	s := c.skipping
	used := 0
	if s.held {
		used, s.held = 1, false
	}
	if s.toLF {
		i := bytes.IndexByte(in[used:], '\n')
		if i < 0 {
			return len(in), false
		}
		return used + i + 1, true
	}
	k := int(min(s.n, uint64(len(in)-used)))
	s.n -= uint64(k)
	return used + k, s.n == 0
}

// lim returns the parsers' limits, for nextRequest.
func (c *conn) lim() limits {
	return limits{maxLine: c.srv.cfg.MaxLine, maxItem: c.srv.items.MaxItemSize}
}

// Input serves the whole requests at the start of in, for an event loop
// (evloop.Handler), and appends their replies to out. The requests of one
// call share one reading of the service's clock. It stops at an
// incomplete request, which the loop gives again with more input, or once
// the replies reach evloop.ReplyLimit (a few gets of large items), and the
// loop gives the rest again once they are written.
func (c *conn) Input(in, out []byte) ([]byte, int, bool) {
	c.now = c.srv.svc.Now()
	c.r = loopReaders.Get().(*bufio.Reader)
	c.w = loopWriters.Get().(*bufio.Writer)
	c.dst.B = out
	c.w.Reset(&c.dst)
	used, open := c.serveInput(in)
	c.src.Reset(nil)
	c.w.Flush()
	out, c.dst.B = c.dst.B, nil
	c.r.Reset(nil)
	loopReaders.Put(c.r)
	c.w.Reset(nil)
	loopWriters.Put(c.w)
	c.r, c.w = nil, nil
	if open && c.skipping != nil && used == len(in) && used > 0 {
		// Hold the last byte skipped: the loop then counts the request
		// as incomplete, under its read timeout, as serve does.
		used--
		c.skipping.held = true
	}
	return out, used, open
}

// serveInput is Input's work, with c's buffers: it returns how many bytes of in
// it consumed and whether the connection stays open.
func (c *conn) serveInput(in []byte) (int, bool) {
	used := 0
	if c.skipping != nil {
		n, done := c.skipInput(in)
		used = n
		if !done {
			if d := c.srv.cfg.ReadTimeout; d > 0 && c.now-c.skipping.since >= int64(d) {
				c.srv.log.Debug("memcache: closing a connection: a request took longer than the read timeout", "peer", c.peer.String())
				return used, false
			}
			return used, true
		}
		s := c.skipping
		c.skipping = nil
		if err := c.skipped(s); err != nil {
			return used, c.ended(err)
		}
	}
	c.src.Reset(in[used:])
	c.r.Reset(&c.src)
	base := used
	lim := c.lim()
	for used < len(in) {
		if len(c.dst.B)+c.w.Buffered() >= evloop.ReplyLimit {
			break // the loop gives the rest again once the replies are out
		}
		n, st := nextRequest(in[used:], c.started, lim)
		if st == reqIncomplete {
			break
		}
		err := c.request(in[used])
		pos := base + c.src.Pos() - c.r.Buffered()
		switch {
		case errors.Is(err, errSkipping) || errors.Is(err, errIncomplete):
			if st == reqOversized && errors.Is(err, errSkipping) {
				return len(in), true
			}
		case err != nil:
			return pos, c.ended(err)
		case st == reqWhole && pos-used == n:
			used = pos
			continue
		}
		// nextRequest and the parsers disagree: a bug, which must not
		// make the connection answer out of turn.
		c.srv.log.Error("memcache: request framing disagrees with its parse; closing the connection",
			"peer", c.peer.String(), "framed", n, "parsed", pos-used, "oversized", st == reqOversized, "err", err)
		return pos, false
	}
	return used, true
}

// ended reports whether the connection stays open after a request's
// error: errClose closes it once its replies are written (quit); another
// error (a failed parse is a bug: the request was whole) closes it too.
func (c *conn) ended(err error) bool {
	if !errors.Is(err, errClose) {
		c.srv.log.Debug("memcache: connection ended", "peer", c.peer.String(), "err", err)
	}
	return false
}

// Closed ends the connection once its event loop has closed it, and its
// session, as finish does.
func (c *conn) Closed(err error) {
	switch {
	case errors.Is(err, evloop.ErrIdle):
		c.srv.log.Debug("memcache: closing an idle connection", "peer", c.peer.String())
	case err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, evloop.ErrClosed):
		c.srv.log.Debug("memcache: connection closed", "peer", c.peer.String(), "err", err)
	}
	c.skipping = nil
	c.finish()
}
