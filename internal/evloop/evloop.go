// Package evloop serves many TCP connections from a few goroutines, each
// waiting on its own epoll set (Linux), as Redis and memcached do: a
// connection costs no goroutine, and a request costs one read and one
// write, with no goroutine parked and woken in between.
//
// It is for front ends whose handlers never wait: a handler runs on its
// loop's goroutine, and every connection of that loop waits while it runs.
// A request that is answered later (a lock granted when another client
// releases it) is answered from whichever goroutine ends it, through
// Conn.Send, which queues bytes for the loop to write; a handler that
// cannot take more input until something of its own happens pauses it
// (Conn.Pause, Conn.Resume). Front ends whose requests wait on the
// handler's goroutine (for a Raft commit) or that speak TLS keep a
// goroutine per connection.
//
// On systems other than Linux, New returns an error wrapping
// errors.ErrUnsupported, and callers serve with goroutines.
package evloop

import (
	"errors"
	"time"
)

// A Handler is one connection's protocol. The loop calls its methods on the
// loop's goroutine, one call at a time, never after Closed.
type Handler interface {
	// Input is called with the connection's input not yet consumed: what
	// the previous call left, followed by what arrived since. It appends
	// its replies to out and returns the result, with how many leading
	// bytes of in it consumed (the rest is the start of a request, given
	// again once more has arrived) and whether the connection stays open
	// (false closes it once the replies are written). Neither in nor out
	// may be kept after the call.
	//
	// Once its replies hold ReplyLimit bytes or more, Input may stop
	// before the end of the whole requests in holds: the loop writes the
	// replies and, once the peer has taken them, calls Input again with
	// the rest (and nothing new), so that a few short requests for long
	// replies hold neither the loop nor its memory.
	Input(in, out []byte) (reply []byte, consumed int, open bool)
	// Closed is called once, when the connection has been closed: by the
	// peer, by Input, on an error or a timeout (err then says which), by
	// Loop.Close (err is ErrClosed) or by Conn.Close (ErrConnClosed).
	// Nothing is read from it or written to it any more, but its socket
	// is closed only once Closed returns: the peer learns of the end after
	// the handler has done with it.
	Closed(err error)
}

// ReplyLimit is the length of replies past which Handler.Input may stop
// before the end of its input's whole requests.
const ReplyLimit = 64 << 10

// An Attacher is a Handler that keeps its connection's Conn, to close it
// (Conn.Close) or write to it (Conn.Send) from other goroutines, or to
// pause its input (Conn.Pause): Loop.Add calls Attach before the loop
// calls any other method of the handler.
type Attacher interface {
	Attach(c *Conn)
}

// An IdleKeeper is a Handler that may keep its connection open past the
// idle timeout. Before the loop closes an idle connection it calls
// KeepIdle, on the loop's goroutine like Input: true keeps the connection
// for another IdleTimeout, after which it is asked again.
type IdleKeeper interface {
	KeepIdle() bool
}

// Config bounds the connections of a Loop. A zero duration is no bound.
type Config struct {
	// IdleTimeout closes a connection that has sent nothing for this long
	// while no request of it was incomplete and no reply unwritten.
	IdleTimeout time.Duration
	// ReadTimeout closes a connection whose request has been incomplete for
	// this long (its first bytes arrived, not its last).
	ReadTimeout time.Duration
	// WriteTimeout closes a connection whose replies the peer has not taken
	// for this long.
	WriteTimeout time.Duration
	// MaxInput bounds the incomplete request a connection may hold, in
	// bytes: beyond it the connection is closed (ErrInputTooLong). Handlers
	// that bound their requests themselves may leave it 0 (no bound).
	MaxInput int
}

// Errors given to Handler.Closed.
var (
	ErrClosed       = errors.New("evloop: loop closed")
	ErrIdle         = errors.New("evloop: idle timeout")
	ErrReadTimeout  = errors.New("evloop: request not complete within the read timeout")
	ErrWriteTimeout = errors.New("evloop: replies not taken within the write timeout")
	ErrInputTooLong = errors.New("evloop: incomplete request too long")
	ErrConnClosed   = errors.New("evloop: connection closed by Conn.Close")
)

// tick returns how often a loop checks its connections' timeouts: a quarter
// of the shortest, within [10ms, 1s]; 0 when there is none.
func (c Config) tick() time.Duration {
	var least time.Duration
	for _, d := range []time.Duration{c.IdleTimeout, c.ReadTimeout, c.WriteTimeout} {
		if d > 0 && (least == 0 || d < least) {
			least = d
		}
	}
	if least == 0 {
		return 0
	}
	return min(max(least/4, 10*time.Millisecond), time.Second)
}
