package resp

import (
	"bufio"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"

	"github.com/latchd/latch/internal/evloop"
	"github.com/latchd/latch/internal/fsm"
	"github.com/latchd/latch/internal/netserve"
)

// bufSize is the size of a connection's read and write buffers: room for
// a pipelined batch of small requests or replies. Longer requests go around
// them (Reader).
const bufSize = 4 << 10

// conn is one client connection. Its locks are not its own: they are owned
// by the values its requests carry.
type conn struct {
	srv  *Server
	nc   *netserve.Conn
	peer net.Addr
	br   *bufio.Reader
	bw   *bufio.Writer
	rd   *Reader
	w    *Writer

	// Served by an event loop (Input): the input given and the replies;
	// partial is set when the input ended in an incomplete request.
	in      *netserve.Input
	reply   *netserve.Output
	partial bool

	id      int64
	name    string
	authed  bool
	token   *netserve.Token // the token AUTH accepted; nil: all rights
	closing bool            // QUIT: close once the reply is out

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
	at        int64      // when the results were read (PTTL)
	scriptOut []byte     // room for a Lua script's reply, reused
	script    *scriptRun // a Lua script's run, reused
	luaQ      []luaReq   // the Lua batch: script requests not yet run (flushLua)
	luaArgs   [][]byte   // the arena of the batch's requests' KEYS and ARGV

	// Client-side caching (tracking.go): the tracking state (guarded by
	// the tracker's lock); the connection's own copy of what its reads
	// need (tracks: default mode on), CLIENT CACHING's flag (caching, for
	// the next command: cachingUsed once that one ran); the protocol and
	// subscriptions, read by whoever sends invalidations; the channels
	// subscribed (pubsub.go); and the delivery of what is pushed.
	tr                   *trackState
	trackFor             *conn           // a script's: its caller, whose reads they are
	srun                 *scriptRun      // a script's: its run
	own                  map[string]bool // remember's, for the step being applied
	tracks, optin        bool
	optout, noloop       bool
	caching, cachingUsed bool
	proto, nsubs         atomic.Int32
	channels             map[string]bool
	patterns             map[string]bool
	pushState
}

// ServeConn serves nc on its own goroutine (netserve.Protocol), until the
// client leaves, a write fails, a request is malformed, or the server shuts
// down.
func (s *Server) ServeConn(nc *netserve.Conn) {
	c := &conn{srv: s, nc: nc, peer: nc.RemoteAddr(), id: s.lastID.Add(1)}
	nc.SetHooks(netserve.Hooks{Flush: c.flush})
	c.br, c.bw = nc.R, nc.W
	c.busy = true
	c.init()
	defer s.track.close(c)
	c.serve()
}

// LoopConn returns the connection nc, served by an event loop (Input).
func (s *Server) LoopConn(nc *netserve.Conn) evloop.Handler {
	c := newLoopConn(s, nc.RemoteAddr())
	c.nc = nc
	return c
}

// newLoopConn returns the connection from peer, served by an event loop
// (Input). Its buffers are borrowed for each call of Input (loopBuffers),
// so that an idle connection holds none.
func newLoopConn(s *Server, peer net.Addr) *conn {
	c := &conn{srv: s, peer: peer, id: s.lastID.Add(1)}
	c.in, c.reply = new(netserve.Input), new(netserve.Output)
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
	c.setProto(2)
	c.authed = len(c.srv.tokens()) == 0
	c.srv.track.open(c)
}

// setProto sets the protocol of the replies (HELLO, RESET).
func (c *conn) setProto(p int) {
	c.w.Proto = p
	c.proto.Store(int32(p))
}

// more reports whether more input than the current request is at hand,
// read and not yet parsed: a pipelined request follows.
func (c *conn) more() bool {
	return c.br.Buffered() > 0 || (c.in != nil && c.in.Len() > 0)
}

// flush answers the requests planned and flushes the replies, before the
// connection reads from its socket: a pipelined batch is answered in one
// write.
func (c *conn) flush() error {
	if c.batch > 0 {
		c.runBatch()
	}
	if c.in != nil {
		return c.bw.Flush()
	}
	// A goroutine's connection: with what was pushed to it, and then
	// the writer may write to its socket until it serves a request.
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.pmu.Lock()
	c.writePending()
	c.busy = false
	c.pmu.Unlock()
	return c.bw.Flush()
}

// serve runs a goroutine's connection.
func (c *conn) serve() {
	for {
		if err := c.nc.Next(); err != nil {
			return
		}
		// Next may have given the buffers back and taken others.
		c.br, c.bw = c.nc.R, c.nc.W
		c.rd.r, c.w.w = c.br, c.bw
		// The writer's write to the socket ends first; what was pushed
		// before this request goes before its reply.
		c.wmu.Lock()
		c.busy = true
		c.wmu.Unlock()
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
		c.writePushes()
		c.do(args)
		if c.closing {
			c.flush()
			return
		}
	}
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
	c.pmu.Lock()
	c.inInput = true // pushes wait for the replies
	c.pmu.Unlock()
	c.in.Reset(in)
	c.takeBuffers()
	defer c.giveBuffers()
	c.reply.B = out
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
		c.writePushes()
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
	c.pmu.Lock()
	c.writePending()
	c.inInput = false
	c.pmu.Unlock()
	c.bw.Flush()
	c.in.Reset(nil)
	out, c.reply.B = c.reply.B, nil
	return out, used, open
}

// Closed ends the connection once its event loop has closed it.
func (c *conn) Closed(err error) {
	c.srv.track.close(c)
	switch {
	case errors.Is(err, evloop.ErrIdle):
		c.srv.log.Debug("redis: closing an idle connection", "peer", c.peer.String())
	case err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, evloop.ErrClosed):
		c.srv.log.Debug("redis: connection closed", "peer", c.peer.String(), "err", err)
	}
}

// errIncomplete is the end of an event loop's input in the middle of a
// request.
var errIncomplete = netserve.ErrIncomplete
