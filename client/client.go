package client

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/latchd/latch"
	"github.com/latchd/latch/dlockpb"
	"github.com/latchd/latch/internal/frame"
)

// protocolVersion is the dlock version the Client speaks.
const protocolVersion = 3

// Client is a connection to a latch server and the session it carries. The
// server sees every lock taken through one Client as held by one owner, the
// session: see the package documentation. A Client is safe for concurrent
// use; many requests may wait on it at once.
type Client struct {
	addrs    []string // the servers, in the order Dial was given them
	dial     func(ctx context.Context, addr string) (net.Conn, error)
	log      *slog.Logger
	clk      clock
	token    string
	ttl      time.Duration // of the session
	margin   time.Duration // see SafetyMargin
	interval time.Duration // between keepalives
	// silentAfter is how long after lastAck the connection is given up as
	// silent (see watch).
	silentAfter time.Duration
	sessionID   latch.SessionID

	nextID atomic.Uint64

	wmu  sync.Mutex // serializes writes; guards wbuf
	wbuf []byte

	mu sync.Mutex
	// pending holds the requests sent and not answered yet, by id.
	pending map[uint64]*call
	// reserved holds the keys of the live locks and of the lock requests
	// in flight (see Lock).
	reserved map[string]bool
	// locks holds the live locks, whose Done is closed when the Client
	// stops.
	locks map[*Lock]struct{}
	// lastAck is when the newest keepalive the server answered was sent
	// (by clk): the server cannot end the session by its TTL before
	// lastAck+ttl.
	lastAck  time.Time
	watchdog stopper // fires at lastAck+silentAfter, then lastAck+ttl-margin
	pinger   stopper // sends the next keepalive
	closer   stopper // closes the connection of a Client given up
	// err is why the Client stopped, nil while it runs; broken is closed
	// when it is set.
	err    error
	broken chan struct{}

	// conn is the connection, nil while the Client resumes its session on
	// another (or the same) server; addr is its server. reconnecting is
	// set while a goroutine resumes, resuming while a connection carries
	// the resume request (no other request may go out before it).
	// cleanup holds the keys of requests whose answer the lost connection
	// took (Lock, Unlock): unlocked once the session is resumed, then
	// unreserved.
	conn         net.Conn
	addr         string
	reconnecting bool
	resuming     bool
	cleanup      [][]string
	// stale is the connection given up as silent (connSilent), left
	// open: its server may be alive, and would end the session if it saw
	// the connection close. It is closed once the session is resumed on
	// another connection (a server then ignores the end of an older one),
	// or when the Client stops. There is at most one: only the connection
	// that carries the session can be given up as silent, and the resume
	// that made it carry the session closed the one before.
	stale net.Conn

	// bg counts the reading and resuming goroutines.
	bg sync.WaitGroup
}

// call is a request waiting for its response.
type call struct {
	// onResp, when set, is called with the response by the reading
	// goroutine; it must not block.
	onResp func(*dlockpb.Response)
	// ch, when set, receives the response; its capacity is 1. It
	// receives nil when the connection was lost before the answer.
	ch chan *dlockpb.Response
	// cleanup, when set, are keys the request may have changed on the
	// server: if the connection is lost before the answer, they are
	// unlocked once the session is resumed.
	cleanup []string
}

func newCall() *call { return &call{ch: make(chan *dlockpb.Response, 1)} }

// Dial connects to the latch server at addr (host:port of its dlock
// listener) and opens a session with the TTL of SessionTTL. The Client
// keeps the session alive until Close, or until it may have been lost.
//
// addr may list the servers of a cluster, separated by commas: Dial opens
// the session on the first that takes it, passing over a server that
// cannot be reached or that answers Unavailable (cut off from the
// majority of its cluster) or ShuttingDown. When the connection breaks,
// or its server falls silent (no keepalive answered for two keepalive
// intervals: a server stopped, or cut off by a partition that keeps the
// connection open), or answers Unavailable (it cannot reach a majority of
// its cluster, or it is shutting down, so it cannot vouch for the
// session), the Client resumes its session on the next server that
// answers (the same one included, after a restart), within the session's
// TTL: its locks stay held, and requests that were in flight fail with an
// error wrapping ErrConnectionLost, which may be retried. Only when the
// session may have ended (no server took it back in time, or one answered
// that it ended) does the Client stop and its locks' Done close.
func Dial(ctx context.Context, addr string, opts ...Option) (*Client, error) {
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	var addrs []string
	for _, a := range strings.Split(addr, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("client: no server address in %q", addr)
	}
	dial := func(ctx context.Context, a string) (net.Conn, error) {
		if o.tls != nil {
			// Connects and completes the handshake, within ctx.
			d := tls.Dialer{Config: o.tls}
			return d.DialContext(ctx, "tcp", a)
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", a)
	}
	dctx := ctx
	if o.dialTimeout > 0 {
		var cancel context.CancelFunc
		dctx, cancel = context.WithTimeout(ctx, o.dialTimeout)
		defer cancel()
	}
	var errs []error
	for _, a := range addrs {
		c, next, err := connect(dctx, o, addrs, a, dial)
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
		if !next || dctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("client: %w", errors.Join(errs...))
}

// connect connects to addr, one of addrs, and opens the session there.
// On failure, next reports whether Dial may try the next server: addr
// could not be reached, or it answered that it cannot take a session now
// (Unavailable, ShuttingDown); any other answer (a refused access token,
// not a dlock server) fails Dial.
func connect(ctx context.Context, o options, addrs []string, addr string, dial func(context.Context, string) (net.Conn, error)) (c *Client, next bool, err error) {
	conn, err := dial(ctx, addr)
	if err != nil {
		return nil, true, err
	}
	interval := (o.sessionTTL - o.margin) / 3
	c = &Client{
		addrs:    addrs,
		dial:     dial,
		addr:     addr,
		conn:     conn,
		log:      o.logger,
		clk:      o.clock,
		token:    o.token,
		ttl:      o.sessionTTL,
		margin:   o.margin,
		interval: interval,
		// See watch.
		silentAfter: 2 * interval,
		pending:     make(map[uint64]*call),
		reserved:    make(map[string]bool),
		locks:       make(map[*Lock]struct{}),
		broken:      make(chan struct{}),
	}
	c.bg.Add(1)
	go c.readLoop(conn, addr)
	if err := c.openSession(ctx); err != nil {
		c.Close()
		next = errors.Is(err, latch.ErrUnavailable) || errors.Is(err, latch.ErrShutdown)
		return nil, next, fmt.Errorf("%s: open session: %w", addr, err)
	}
	c.log.Debug("client: session open", "server", addr, "session", c.sessionID, "ttl", c.ttl, "keepalive", c.interval, "silent_after", c.silentAfter)
	return c, false, nil
}

// openSession sets the session's TTL and starts the keepalives.
func (c *Client) openSession(ctx context.Context) error {
	sent := c.clk.Now()
	cl, _, err := c.send(&dlockpb.Request{
		Type:    dlockpb.RequestType_Session,
		Session: &dlockpb.RequestSession{TtlMicro: micros(c.ttl)},
	}, newCall())
	if err != nil {
		return err
	}
	resp, err := c.await(ctx, cl)
	if err != nil {
		return err
	}
	if err := statusError(resp, false); err != nil {
		return err
	}
	c.sessionID = latch.SessionID(resp.GetSessionId())
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastAck = sent
	c.watchdog = c.clk.AfterFunc(sent.Add(c.silentAfter).Sub(c.clk.Now()), c.watch)
	c.pinger = c.clk.AfterFunc(c.interval, c.ping)
	return nil
}

// SessionID returns the id of the Client's session, as the server's admin
// API shows it.
func (c *Client) SessionID() latch.SessionID { return c.sessionID }

// Done returns a channel closed when the Client stops: closed, or its
// session may have ended. Err then says why.
func (c *Client) Done() <-chan struct{} { return c.broken }

// Err returns nil while the Client runs, then why it stopped: ErrClosed
// after Close, otherwise a *SessionLostError, which wraps
// latch.ErrSessionEnded and the cause (the connection's error,
// ErrKeepalive, or a SessionExpired or ShuttingDown answer).
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close closes the connection, which ends the session: the server releases
// at once every lock of the Client that has no lease. Leased locks stay
// until their lease ends. Requests still waiting fail with an error
// wrapping ErrClosed, and the Done channel of every live Lock is closed.
// Close returns when the Client's goroutines have ended. It always returns
// nil; calling it again does nothing.
func (c *Client) Close() error {
	c.stop(ErrClosed, time.Time{})
	c.mu.Lock()
	if c.closer != nil {
		c.closer.Stop()
		c.closer = nil
	}
	c.mu.Unlock()
	c.closeConn()
	c.bg.Wait()
	return nil
}

// closeConn closes the current connection, if there is one, and the stale
// one (see stale).
func (c *Client) closeConn() {
	c.mu.Lock()
	conn, stale := c.conn, c.stale
	c.stale = nil
	c.mu.Unlock()
	if conn != nil {
		conn.Close()
	}
	if stale != nil {
		stale.Close()
	}
}

// stop stops the Client with err, once: requests in flight and later ones
// fail with err, every live Lock ends with it. The connection is closed at
// closeAt by the Client's clock, or at once if closeAt is not in the future.
func (c *Client) stop(err error, closeAt time.Time) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	close(c.broken)
	for _, t := range []stopper{c.watchdog, c.pinger} {
		if t != nil {
			t.Stop()
		}
	}
	for l := range c.locks {
		l.finishLocked(err)
	}
	wait := closeAt.Sub(c.clk.Now())
	if wait > 0 {
		c.closer = c.clk.AfterFunc(wait, c.closeConn)
	}
	server := c.addr
	c.mu.Unlock()
	if wait <= 0 {
		c.closeConn()
	}
	if err != ErrClosed {
		c.log.Warn("client: session given up", "server", server, "session", c.sessionID, "err", err)
	}
}

// fail stops the Client because its connection broke.
func (c *Client) fail(err error) {
	c.stop(lostError(err), time.Time{})
}

// send assigns req an id, registers cl for its response and writes it.
// It returns cl and the id, or the error that stopped the Client; while the
// session is being resumed, it fails with ErrConnectionLost.
func (c *Client) send(req *dlockpb.Request, cl *call) (*call, uint64, error) {
	return c.sendOn(nil, req, cl)
}

// sendOn is send; with a non-nil conn, it writes on conn (the resume
// request) even while the session is being resumed.
func (c *Client) sendOn(on net.Conn, req *dlockpb.Request, cl *call) (*call, uint64, error) {
	id := c.nextID.Add(1)
	req.Version = protocolVersion
	req.Id = id
	req.AccessToken = c.token

	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return nil, 0, err
	}
	conn, addr := c.conn, c.addr
	if on != nil {
		conn = on
	} else if conn == nil || c.resuming {
		c.mu.Unlock()
		return nil, 0, ErrConnectionLost
	}
	c.pending[id] = cl
	c.mu.Unlock()

	c.wmu.Lock()
	buf, off := frame.Start(c.wbuf[:0])
	buf, err := proto.MarshalOptions{}.MarshalAppend(buf, req)
	if err == nil {
		err = frame.Finish(buf, off)
	}
	givenUp, registered := false, false
	if err == nil {
		// conn may have been given up since cl was registered; then it
		// carries nothing more. This is checked under mu, which
		// connSilent holds to set a write deadline in the past: a write
		// to a silent connection does not block the next connection's.
		c.mu.Lock()
		if givenUp = c.conn != conn; givenUp {
			if _, registered = c.pending[id]; registered {
				delete(c.pending, id)
			}
		} else {
			// A write that cannot finish within the TTL has lost the
			// session anyway.
			conn.SetWriteDeadline(time.Now().Add(c.ttl))
		}
		c.mu.Unlock()
	}
	if err == nil && !givenUp {
		_, err = conn.Write(buf)
		if err != nil {
			err = fmt.Errorf("writing to %s: %w", addr, err)
		}
	}
	if cap(buf) <= 64<<10 {
		c.wbuf = buf
	}
	c.wmu.Unlock()
	if givenUp {
		if registered {
			return nil, 0, ErrConnectionLost
		}
		// Giving conn up failed cl (await returns ErrConnectionLost) and
		// left its keys to the cleanup, as for a request lost in flight.
		return cl, id, nil
	}
	if err != nil {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
		c.connLost(conn, err)
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.err != nil {
			return nil, 0, c.err
		}
		return nil, 0, fmt.Errorf("client: %w: %w", ErrConnectionLost, err)
	}
	return cl, id, nil
}

// await waits for the response of cl, until ctx is done (ctx.Err()) or the
// Client stops (the error that stopped it).
func (c *Client) await(ctx context.Context, cl *call) (*dlockpb.Response, error) {
	select {
	case r := <-cl.ch:
		if r == nil {
			return nil, ErrConnectionLost
		}
		return r, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.broken:
	}
	select {
	case r := <-cl.ch: // answered as the Client stopped
		if r != nil {
			return r, nil
		}
	default:
	}
	return nil, c.err // set before broken was closed
}

// roundTrip sends req and waits for its answer until ctx is done. It
// returns when req was sent, and the answer's status as an error.
func (c *Client) roundTrip(ctx context.Context, req *dlockpb.Request) (*dlockpb.Response, time.Time, error) {
	sent := c.clk.Now()
	cl, _, err := c.send(req, newCall())
	if err != nil {
		return nil, sent, err
	}
	resp, err := c.await(ctx, cl)
	if err == nil {
		err = answerError(resp, false, false)
	}
	return resp, sent, err
}

// answerError is statusError for the answer to a request of the session,
// sent on its connection. An Unavailable answer made the Client give that
// connection up and resume the session elsewhere (readLoop): the request's
// outcome is unknown, and the error wraps ErrConnectionLost beside
// latch.ErrUnavailable. cleanup says that the request's keys are given
// back once the session is resumed (call.cleanup): the error then marks
// it as lost in flight (errLostInFlight), so that its keys stay reserved.
func answerError(resp *dlockpb.Response, tryOnce, cleanup bool) error {
	err := statusError(resp, tryOnce)
	if resp.GetStatus() != dlockpb.ResponseStatus_Unavailable {
		return err
	}
	if cleanup {
		return fmt.Errorf("%w; client: %w (%w)", err, ErrConnectionLost, errLostInFlight)
	}
	return fmt.Errorf("%w; client: %w", err, ErrConnectionLost)
}

// readLoop reads the responses that conn, to addr, carries and hands each
// to its call, until the connection breaks or is closed.
func (c *Client) readLoop(conn net.Conn, addr string) {
	defer c.bg.Done()
	br := bufio.NewReader(conn)
	if err := notDlock(br); err != nil {
		c.fail(fmt.Errorf("%w: %s %w", ErrProtocol, addr, err))
		return
	}
	r := frame.NewReader(br, maxResponse)
	for {
		b, err := r.Read()
		if err != nil {
			c.connLost(conn, fmt.Errorf("reading from %s: %w", addr, err))
			return
		}
		resp := new(dlockpb.Response)
		uerr := proto.Unmarshal(b, resp)
		c.mu.Lock()
		if c.conn != conn {
			// Given up (connSilent, connLost): the requests it carried
			// have failed already, and what it says is nobody's concern.
			// Read on until it is closed.
			c.mu.Unlock()
			continue
		}
		if uerr != nil {
			c.mu.Unlock()
			c.fail(fmt.Errorf("%w: undecodable response: %v", ErrProtocol, uerr))
			return
		}
		cl := c.pending[resp.GetRequestId()]
		delete(c.pending, resp.GetRequestId())
		// Unavailable: the server cannot vouch for the session (it cannot
		// reach a majority of its cluster), which may live on: give the
		// connection up and resume the session elsewhere, as for a
		// silent server. The outcome of the request is unknown: its keys
		// are given back once the session is resumed, as those of a
		// request the connection took with it. (Not for the request that
		// resumes or opens the session: resumeOn tries the next server,
		// Dial fails.)
		unavailable := cl != nil && resp.GetStatus() == dlockpb.ResponseStatus_Unavailable &&
			!c.resuming && c.sessionID != 0
		if unavailable && cl.cleanup != nil {
			c.cleanup = append(c.cleanup, cl.cleanup)
		}
		c.mu.Unlock()
		if unavailable {
			c.connSilent(conn, fmt.Errorf("%s cannot vouch for the session: %w", addr, statusError(resp, false)))
		}
		if cl == nil {
			// The server answers request id 0 when it could not read a
			// request at all, and closes the connection.
			c.fail(fmt.Errorf("%w: answer to request %d, which is not in flight: %w",
				ErrProtocol, resp.GetRequestId(), statusError(resp, false)))
			return
		}
		if cl.onResp != nil {
			cl.onResp(resp)
		}
		if cl.ch != nil {
			cl.ch <- resp
		}
		switch resp.GetStatus() {
		case dlockpb.ResponseStatus_SessionExpired, dlockpb.ResponseStatus_ShuttingDown:
			// The session has ended, and its locks with it.
			c.stop(lostError(statusError(resp, false)), time.Time{})
		}
	}
}

// connLost handles the loss of conn: a Client whose session has a TTL
// fails the requests in flight with ErrConnectionLost and resumes the
// session on a server (resume); one without a TTL has lost its session
// with the connection, and stops. (Every Client's session has a TTL once
// it is open: a connection lost before, during Dial, fails Dial.)
func (c *Client) connLost(conn net.Conn, err error) {
	c.giveUp(conn, err, false)
}

// connSilent gives conn up as connLost does, because its server has not
// answered a keepalive in time (see watch) or answered that it cannot
// vouch for the session (Unavailable, see readLoop), but leaves it open
// among the stale connections. The server may be alive, only slow (or
// about to reach its cluster again): one that saw the connection close
// would end the session at once, racing the resume on another
// connection, which would then find the session ended. Left open until
// the session is resumed elsewhere, its end is ignored by then. A write
// blocked on conn fails at once.
func (c *Client) connSilent(conn net.Conn, err error) {
	c.giveUp(conn, err, true)
}

// giveUp implements connLost and, with keepOpen, connSilent.
func (c *Client) giveUp(conn net.Conn, err error, keepOpen bool) {
	c.mu.Lock()
	if c.err != nil || c.conn != conn {
		c.mu.Unlock()
		return
	}
	if c.ttl <= 0 || c.sessionID == 0 {
		c.mu.Unlock()
		c.fail(err)
		return
	}
	c.conn, c.resuming = nil, false
	if keepOpen {
		c.stale = conn
		// Under mu: see sendOn.
		conn.SetWriteDeadline(aLongTimeAgo)
	}
	pending := c.pending
	c.pending = make(map[uint64]*call)
	for _, cl := range pending {
		if cl.cleanup != nil {
			c.cleanup = append(c.cleanup, cl.cleanup)
		}
	}
	start := !c.reconnecting
	c.reconnecting = true
	server := c.addr
	c.mu.Unlock()
	if !keepOpen {
		conn.Close()
	}
	for _, cl := range pending {
		if cl.ch != nil {
			cl.ch <- nil
		}
	}
	c.log.Warn("client: connection lost; resuming the session", "server", server, "session", c.sessionID, "err", err)
	if start {
		c.bg.Add(1)
		go c.resume()
	}
}

// aLongTimeAgo is a deadline in the past: a read or write with it fails at
// once.
var aLongTimeAgo = time.Unix(1, 0)

// resume takes the session back on the servers in turn, starting after
// the one lost, until one does, one answers that the session ended, or
// the Client stops (its keepalive watch gives the session up in time).
func (c *Client) resume() {
	defer c.bg.Done()
	c.mu.Lock()
	next := 0
	for i, a := range c.addrs {
		if a == c.addr {
			next = i + 1
		}
	}
	c.mu.Unlock()
	wait := 20 * time.Millisecond
	for {
		for range c.addrs {
			a := c.addrs[next%len(c.addrs)]
			next++
			select {
			case <-c.broken:
				return
			default:
			}
			err := c.resumeOn(a)
			if err == nil {
				return
			}
			if errors.Is(err, latch.ErrNoSession) || errors.Is(err, latch.ErrSessionEnded) || errors.Is(err, latch.ErrShutdown) {
				c.stop(lostError(fmt.Errorf("resuming on %s: %w", a, err)), time.Time{})
				return
			}
			c.log.Debug("client: resume failed", "server", a, "err", err)
		}
		select {
		case <-c.broken:
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// resumeOn connects to addr and takes the session back there.
func (c *Client) resumeOn(addr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), max(min(c.ttl/4, 2*time.Second), 100*time.Millisecond))
	defer cancel()
	conn, err := c.dial(ctx, addr)
	if err != nil {
		return err
	}
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		conn.Close()
		return c.err
	}
	c.conn, c.addr, c.resuming = conn, addr, true
	c.mu.Unlock()
	c.bg.Add(1)
	go c.readLoop(conn, addr)
	sent := c.clk.Now()
	cl, _, err := c.sendOn(conn, &dlockpb.Request{
		Type:    dlockpb.RequestType_Session,
		Session: &dlockpb.RequestSession{TtlMicro: micros(c.ttl), ResumeSessionId: uint64(c.sessionID)},
	}, newCall())
	var resp *dlockpb.Response
	if err == nil {
		resp, err = c.await(ctx, cl)
	}
	if err == nil {
		err = statusError(resp, false)
	}
	if err == nil && latch.SessionID(resp.GetSessionId()) != c.sessionID {
		err = fmt.Errorf("%w: resumed session %d, not %d", ErrProtocol, resp.GetSessionId(), c.sessionID)
	}
	c.mu.Lock()
	if err != nil || c.err != nil || c.conn != conn {
		if c.conn == conn {
			c.conn, c.resuming = nil, false
		}
		c.mu.Unlock()
		conn.Close()
		if err == nil {
			err = ErrConnectionLost
		}
		return err
	}
	c.resuming, c.reconnecting = false, false
	if sent.After(c.lastAck) {
		c.lastAck = sent
	}
	cleanup := c.cleanup
	c.cleanup = nil
	// The session has moved to conn: the servers of the connections given
	// up as silent ignore their end now, if they are alive to see it.
	stale := c.stale
	c.stale = nil
	c.mu.Unlock()
	if stale != nil {
		stale.Close()
	}
	c.log.Info("client: session resumed", "session", c.sessionID, "server", addr)
	for _, keys := range cleanup {
		// The lost connection took the answer of a request for keys:
		// whatever it did, give them back, then let them be requested.
		c.unlock(keys)
		c.unreserve(keys)
	}
	return nil
}

// ping sends a keepalive and schedules the next one.
func (c *Client) ping() {
	sent := c.clk.Now()
	cl := &call{onResp: func(r *dlockpb.Response) { c.pinged(sent, r) }}
	if _, _, err := c.send(&dlockpb.Request{Type: dlockpb.RequestType_Ping}, cl); err != nil && !errors.Is(err, ErrConnectionLost) {
		return // stopped
	}
	c.mu.Lock()
	if c.err == nil {
		c.pinger = c.clk.AfterFunc(c.interval, c.ping)
	}
	c.mu.Unlock()
}

// pinged handles the answer to a keepalive sent at sent.
func (c *Client) pinged(sent time.Time, r *dlockpb.Response) {
	if r.GetStatus() == dlockpb.ResponseStatus_Unavailable {
		return // the connection is given up (readLoop)
	}
	if err := statusError(r, false); err != nil {
		// SessionExpired, or an operator ended the session: its locks
		// are gone already.
		c.stop(lostError(fmt.Errorf("keepalive: %w", err)), time.Time{})
		return
	}
	c.mu.Lock()
	if sent.After(c.lastAck) {
		c.lastAck = sent
	}
	c.mu.Unlock()
}

// watch runs at the deadlines that count from lastAck, the send time of
// the newest keepalive answered; whichever connection answered it, the
// server cannot end the session by its TTL before lastAck+ttl.
//
// At lastAck+silentAfter, the connection is given up as silent
// (connSilent) and the session resumed, as if the connection had broken:
// its server may be stopped, or cut off by a partition that drops packets
// and leaves the connection open. silentAfter is two keepalive intervals,
// 2(ttl-margin)/3 (half the TTL with the default margin): a keepalive is
// sent at most an interval after the one answered last, so the server has
// had at least an interval to answer it, and an interval is left to
// resume the session before the watch gives it up. That is the split of
// ZooKeeper's client, which sends a ping a third of the way into its
// session timeout and gives a server up after two thirds without an
// answer. A shorter bound would move away from a server that is only slow
// to commit (a leader election, a stalled disk); a longer one would leave
// less time to resume. While the session is being resumed, each attempt
// has a bound of its own (resumeOn). A Client whose own process is paused
// for longer than silentAfter may give up a connection that was fine when
// it wakes: that costs the requests in flight (ErrConnectionLost), not the
// session.
//
// At lastAck+ttl-margin, the session is given up. The server may end it
// at lastAck+ttl (by its clock); the connections are kept open until
// then, so that closing them does not release the locks before that
// instant, while their owners stop.
func (c *Client) watch() {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	now := c.clk.Now()
	lastAck := c.lastAck
	deadline := lastAck.Add(c.ttl - c.margin)
	if now.Before(deadline) {
		silentAt := lastAck.Add(c.silentAfter)
		var silent net.Conn
		if now.Before(silentAt) {
			deadline = silentAt
		} else if !c.resuming {
			silent = c.conn
		}
		c.watchdog = c.clk.AfterFunc(deadline.Sub(now), c.watch)
		server := c.addr
		c.mu.Unlock()
		if silent != nil {
			c.connSilent(silent, fmt.Errorf("%s is silent: no keepalive sent since %v ago answered (session TTL %v, keepalive interval %v)",
				server, now.Sub(lastAck).Round(time.Millisecond), c.ttl, c.interval))
		}
		return
	}
	c.mu.Unlock()
	err := fmt.Errorf("%w: none sent since %v ago answered (session TTL %v, safety margin %v)",
		ErrKeepalive, now.Sub(lastAck).Round(time.Millisecond), c.ttl, c.margin)
	c.stop(lostError(err), lastAck.Add(c.ttl))
}

// micros converts d to whole microseconds, rounding up, so that a positive
// duration never becomes 0 (which means "forever" on the wire).
func micros(d time.Duration) uint64 {
	if d <= 0 {
		return 0
	}
	return uint64((d + time.Microsecond - 1) / time.Microsecond)
}

// notDlock looks at the first bytes the server sent: four printable ASCII
// bytes are a text protocol's answer (a memcached, Redis or HTTP server's
// error line), not the length of a dlock frame, which would be over
// 500 MB. It returns an error quoting the line, or nil for anything else
// (a read error included: the frame reader reports it).
func notDlock(br *bufio.Reader) error {
	hdr, err := br.Peek(4)
	if err != nil {
		return nil
	}
	for _, b := range hdr {
		if (b < ' ' || b > '~') && b != '\r' && b != '\n' && b != '\t' {
			return nil
		}
	}
	line, _ := br.Peek(min(br.Buffered(), 120))
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	return fmt.Errorf("answered %q, a text protocol's reply: this is not a dlock port (a memcached, Redis or HTTP one?)", bytes.TrimSpace(line))
}
