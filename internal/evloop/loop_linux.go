//go:build linux

package evloop

import (
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// readSize is the most a loop reads from a connection at once; a longer
// input is read over several turns of the loop, in turn with the other
// connections'.
const readSize = 64 << 10

// yieldEvery is the longest Run goes without passing through Go's
// scheduler. A goroutine that only ever makes system calls never does on
// its own, and the runtime's monitor takes it for one that has run too
// long: every 10 ms it takes the loop's P away during a system call, hands
// the P to another thread (the loop then goes on on another thread, or
// waits for one), and polls every 20 µs for the next millisecond. On a
// loaded loop that was 185 hand-offs and 2,100 wake-ups of the monitor a
// second; yielding every 5 ms (one runtime.Gosched, a few hundred
// nanoseconds) leaves about 5 and 100, and took 5-10% off the server's CPU
// per unpipelined Redis request (docs/benchmarks-history.md).
const yieldEvery = 5 * time.Millisecond

// gosched is runtime.Gosched; tests count its calls.
var gosched = runtime.Gosched

// maxKeep bounds the reply buffer a loop keeps for reuse, in bytes (a
// connection keeps readSize).
const maxKeep = 1 << 20

// Bounds on the buffers of Send a loop keeps for reuse: how many, and how
// long each may be. Between two sends a connection keeps none.
const (
	maxSendBufs = 64
	maxSendBuf  = 64 << 10
)

// mailRounds bounds the rounds of mail Run delivers before it looks at
// its sockets again, so that goroutines that Send without pause cannot
// keep it from its other connections.
const mailRounds = 16

// A Loop serves the connections given to Add on the goroutine that calls
// Run, until Close.
type Loop struct {
	cfg  Config
	tick time.Duration
	epfd int
	// wake is an eventfd: Close writes to it to stop Run, and Send and
	// Resume to wake a Run that sleeps in epoll_wait.
	wake int

	mu      sync.Mutex
	conns   []*Conn // by file descriptor
	n       int     // connections in conns
	closing bool
	// mail holds the connections with bytes sent or a Resume, for Run
	// to deliver; bufs are buffers for Send to reuse.
	mail []*Conn
	bufs [][]byte

	// sleeping is set, under mu and only when mail is empty, before Run
	// waits in epoll_wait, and cleared when the wait returns: Send and
	// Resume wake the loop only then, once per wait (woken).
	sleeping atomic.Bool
	woken    atomic.Bool
	// hasMail is set while mail is not empty, for Run to deliver it after
	// the event that made it (a grant that a release on another
	// connection posted) without a lock.
	hasMail atomic.Bool

	// Used by Run's goroutine only.
	buf     []byte    // what the current read read
	out     []byte    // the replies of the current Input, reused
	now     time.Time // when the current epoll_wait returned
	expired []*Conn
	posted  []*Conn  // the mail being delivered
	freed   [][]byte // buffers of delivered sends, for bufs
}

// A Conn is one connection a Loop serves. A Handler that implements
// Attacher is given its Conn, to close it from any goroutine (Close).
type Conn struct {
	l  *Loop
	fd int
	h  Handler
	// killed is set by Close, under l.mu, once it has shut the socket
	// down: the loop closes the connection at its next event.
	killed bool
	// The mailbox, under l.mu: bytes Send queued, whether the connection
	// is in l.mail, and whether Resume was called.
	sendq  []byte
	mailed bool
	resume bool
	// sent is set while sendq holds bytes: read without l.mu, so that a
	// connection that never sends costs Input no lock.
	sent atomic.Bool

	// The fields below are Run's.

	in       []byte // input not yet consumed: the start of a request
	out      []byte // replies the socket has not taken yet
	closing  bool   // close once out is written
	more     bool   // the handler stopped on long replies: give it in again once out is written
	paused   bool   // the handler paused its input (Pause) until Resume
	events   uint32 // what the epoll set reports for the socket
	last     time.Time
	inSince  time.Time // when the request in holds started arriving, at the latest
	outSince time.Time // when out became non-empty
	// posted is sendq, taken by Run for delivery, and resumed the
	// mailbox's resume.
	posted  []byte
	resumed bool
}

// New returns a loop bounded by cfg; Run serves it.
func New(cfg Config) (*Loop, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("evloop: epoll_create1: %w", err)
	}
	wake, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("evloop: eventfd: %w", err)
	}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, wake, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(wake)}); err != nil {
		unix.Close(epfd)
		unix.Close(wake)
		return nil, fmt.Errorf("evloop: epoll_ctl: %w", err)
	}
	return &Loop{
		cfg:  cfg,
		tick: cfg.tick(),
		epfd: epfd,
		wake: wake,
		buf:  make([]byte, readSize),
	}, nil
}

// ErrNotSocket is returned by Add for a connection that is not a socket of
// the system (a TLS or in-memory connection): the caller keeps it.
var ErrNotSocket = errors.New("evloop: not a socket connection")

// Add hands nc over to the loop, to be served with h from now on. The loop
// serves a duplicate of nc's socket: nc itself is closed (its addresses
// still answer). An Attacher h is given its Conn before the loop calls any
// other of its methods. On ErrNotSocket, nc is untouched; on any other error
// it is closed and h will not be called again (Close of its Conn does
// nothing).
func (l *Loop) Add(nc net.Conn, h Handler) error {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return ErrNotSocket
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return ErrNotSocket
	}
	fd, derr := -1, error(nil)
	if err := rc.Control(func(s uintptr) { fd, derr = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return ErrNotSocket
	}
	nc.Close()
	if derr != nil {
		return fmt.Errorf("evloop: dup: %w", derr)
	}
	// The duplicate shares the socket's flags: non-blocking, as Go's
	// poller set them. Set them anyway: a blocking read would stop the
	// loop.
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return fmt.Errorf("evloop: %w", err)
	}
	c := &Conn{l: l, fd: fd, h: h, last: time.Now(), events: unix.EPOLLIN}
	if a, ok := h.(Attacher); ok {
		a.Attach(c)
	}
	l.mu.Lock()
	if l.closing {
		l.mu.Unlock()
		unix.Close(fd)
		return ErrClosed
	}
	if fd >= len(l.conns) {
		l.conns = append(l.conns, make([]*Conn, fd+1-len(l.conns))...)
	}
	l.conns[fd] = c
	l.n++
	l.mu.Unlock()
	if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}); err != nil {
		l.forget(fd)
		unix.Close(fd)
		return fmt.Errorf("evloop: epoll_ctl: %w", err)
	}
	return nil
}

// Close makes Run close every connection (their handlers see ErrClosed)
// and return. Add refuses connections from now on.
func (l *Loop) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closing {
		return
	}
	l.closing = true
	l.woken.Store(true)
	var one = [8]byte{1}
	unix.Write(l.wake, one[:])
}

// Send queues p to be written to the connection, from any goroutine: the
// loop writes it after what the connection has queued already (replies
// and earlier sends, in the order they were queued), as it writes Input's
// replies, under the write timeout, waiting for room rather than input
// when the socket does not take it all. Send copies p, and never blocks:
// it wakes the loop when it sleeps, and costs no wake-up while it runs (a
// Send from a handler's method, or while the loop serves other
// connections, is delivered before it next sleeps). Input's replies are
// written after every byte that Send queued before Input returned.
//
// Send reports false, and drops p, once the connection is closed or being
// closed (Conn.Close): nothing is written to a connection after its
// handler's Closed, nor to a descriptor the connection no longer owns. On
// Loop.Close, what was sent until Run closes the connections is written as
// far as the socket takes it without waiting, before the socket is closed.
func (c *Conn) Send(p []byte) bool {
	l := c.l
	l.mu.Lock()
	if !l.serves(c) {
		l.mu.Unlock()
		return false
	}
	if c.sendq == nil {
		if n := len(l.bufs); n > 0 {
			c.sendq, l.bufs = l.bufs[n-1], l.bufs[:n-1]
		}
	}
	c.sendq = append(c.sendq, p...)
	c.sent.Store(true)
	l.post(c)
	l.mu.Unlock()
	return true
}

// Pause stops the connection's input until Resume: the loop reads nothing
// more from the socket and does not call Input again, but writes the
// replies and what is sent, under the write timeout, and keeps the
// input not consumed (under the read timeout, as any incomplete request).
// It is for a handler that cannot take a request before something of its
// own happens (room in a queue another goroutine serves), and may be
// called only from Input.
func (c *Conn) Pause() { c.paused = true }

// Resume ends a Pause, from any goroutine: the loop calls Input again with
// the input not consumed, if there is any, and reads the socket again. A
// Resume while the input is not paused does nothing; one called during
// the Input that pauses takes effect once that Input has returned.
func (c *Conn) Resume() {
	l := c.l
	l.mu.Lock()
	if l.serves(c) {
		c.resume = true
		l.post(c)
	}
	l.mu.Unlock()
}

// serves reports whether the loop serves c and c is not being closed.
// Called with l.mu held.
func (l *Loop) serves(c *Conn) bool {
	return !c.killed && c.fd < len(l.conns) && l.conns[c.fd] == c
}

// post puts c in the loop's mail and wakes the loop if it waits in
// epoll_wait. Called with l.mu held: Run marks itself asleep under it,
// after it found the mail empty.
func (l *Loop) post(c *Conn) {
	if !c.mailed {
		c.mailed = true
		l.mail = append(l.mail, c)
		l.hasMail.Store(true)
	}
	if l.sleeping.Load() && l.woken.CompareAndSwap(false, true) {
		wakeLoop(l.wake)
	}
}

// wakeLoop wakes a loop that sleeps in epoll_wait, through its eventfd;
// tests count its calls.
var wakeLoop = func(fd int) {
	var one = [8]byte{1}
	unix.Write(fd, one[:])
}

// Close closes the connection from any goroutine: the loop then calls its
// handler's Closed with ErrConnClosed, on the loop's goroutine, unless the
// connection was closed otherwise first. Replies not yet written, and
// what was sent (Send), are dropped. Close may be called any number of
// times, during or after the connection's life: it shuts down
// (shutdown(2)) the socket under the loop's mutex, and only while the loop
// still serves it, so it never touches a socket whose descriptor has
// since been reused.
func (c *Conn) Close() {
	l := c.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.serves(c) {
		return
	}
	c.killed = true
	c.sendq = nil
	// The loop's epoll set reports the shut down socket (EPOLLHUP), and
	// Run closes it then.
	unix.Shutdown(c.fd, unix.SHUT_RDWR)
}

// Len returns the number of connections the loop serves.
func (l *Loop) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// forget removes the connection of fd and reports whether Conn.Close shut
// it down.
func (l *Loop) forget(fd int) (killed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if fd >= len(l.conns) || l.conns[fd] == nil {
		return false
	}
	c := l.conns[fd]
	killed = c.killed
	c.sendq = nil
	l.conns[fd] = nil
	l.n--
	return killed
}

// Run serves the loop's connections until Close, then closes them and
// releases the loop. It is called once.
func (l *Loop) Run() {
	events := make([]unix.EpollEvent, 256)
	wait := -1
	if l.tick > 0 {
		wait = int(l.tick / time.Millisecond)
	}
	l.now = time.Now()
	nextSweep := l.now.Add(l.tick)
	yielded := l.now
	var drained [8]byte
	for {
		// Deliver the mail until there is none, which marks the loop
		// asleep, or for mailRounds rounds: then only look at the sockets.
		timeout := 0
		for range mailRounds {
			if !l.deliverMail(true) {
				timeout = wait
				break
			}
		}
		n, err := unix.EpollWait(l.epfd, events, timeout)
		l.sleeping.Store(false)
		l.woken.Store(false)
		if err != nil && !errors.Is(err, unix.EINTR) {
			l.shutdown(fmt.Errorf("evloop: epoll_wait: %w", err))
			return
		}
		l.now = time.Now()
		if l.now.Sub(yielded) >= yieldEvery {
			gosched()
			yielded = l.now
		}
		for i := range n {
			fd := int(events[i].Fd)
			if fd == l.wake {
				unix.Read(l.wake, drained[:])
				l.mu.Lock()
				closing := l.closing
				l.mu.Unlock()
				if closing {
					l.shutdown(ErrClosed)
					return
				}
				continue // mail: delivered before the next wait
			}
			var c *Conn
			killed := false
			l.mu.Lock()
			if fd < len(l.conns) {
				c = l.conns[fd]
				killed = c != nil && c.killed
			}
			l.mu.Unlock()
			switch {
			case c == nil:
				// closed earlier in this batch
			case killed:
				l.close(c, ErrConnClosed)
			case len(c.out) > 0 || c.more:
				l.flush(c)
			case c.paused:
				// Only a hang-up or an error is reported while paused.
				if events[i].Events&unix.EPOLLERR != 0 {
					l.close(c, errors.New("evloop: socket error while input is paused"))
				} else if events[i].Events&unix.EPOLLHUP != 0 {
					l.close(c, io.EOF)
				}
			default:
				l.read(c)
			}
			// What the event sent to other connections (a grant, posted
			// by the release of a lock) goes now: it waits for one
			// event's work, not for the rest of the batch (up to 256).
			if l.hasMail.Load() {
				l.deliverMail(false)
			}
		}
		if l.tick > 0 && !l.now.Before(nextSweep) {
			l.sweep()
			nextSweep = l.now.Add(l.tick)
		}
	}
}

// read reads what c's socket has and gives it to c's handler.
func (l *Loop) read(c *Conn) {
	n, err := unix.Read(c.fd, l.buf)
	switch {
	case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EINTR):
		return // the loop is told again
	case err != nil:
		l.close(c, fmt.Errorf("evloop: read: %w", err))
		return
	case n == 0:
		l.close(c, io.EOF)
		return
	}
	c.last = l.now
	in := l.buf[:n]
	if len(c.in) > 0 {
		c.in = append(c.in, in...)
		in = c.in
	}
	l.input(c, in)
}

// input gives in, c's input not yet consumed, to c's handler, and writes
// what was sent to c, then its replies. It reports false when c is closed.
func (l *Loop) input(c *Conn, in []byte) bool {
	reply, used, open := c.h.Input(in, l.out[:0])
	if l.out = reply[:0]; cap(l.out) > maxKeep {
		l.out = nil // one connection's burst of replies: not kept for all
	}
	if rest := in[used:]; len(rest) == 0 {
		c.in = c.in[:0]
		if cap(c.in) > readSize {
			c.in = nil
		}
	} else {
		if len(c.in) == 0 || used > 0 {
			c.inSince = l.now // a request started arriving since the last one was whole
		}
		c.in = append(c.in[:0], rest...) // rest may be c.in's own tail: append moves it down
		if l.cfg.MaxInput > 0 && len(c.in) > l.cfg.MaxInput {
			l.close(c, ErrInputTooLong)
			return false
		}
	}
	// A handler may have stopped on long replies (ReplyLimit): it is
	// given the rest once they are written, when the socket has room
	// (flush), in turn with the other connections. One that paused is
	// given the rest on Resume.
	c.more = open && !c.paused && len(reply) >= ReplyLimit && len(c.in) > 0
	// What was sent before Input returned goes before its replies.
	if sent := l.takeSent(c); len(sent) > 0 {
		ok := l.send(c, sent)
		l.free(sent)
		if !ok {
			return false
		}
	}
	if len(reply) > 0 && !l.send(c, reply) {
		return false
	}
	if !open {
		if len(c.out) == 0 {
			l.close(c, nil)
			return false
		}
		c.closing = true
	}
	if c.more && len(c.out) == 0 {
		c.outSince = l.now // waiting for room, under the write timeout
	}
	return l.arm(c)
}

// takeSent takes what Send queued for c, or returns nil. When c was the
// last connection put in the mail, it leaves the mail too: that is the
// usual case of a handler that sends its own replies, whose mail then
// costs the loop nothing more.
func (l *Loop) takeSent(c *Conn) []byte {
	if !c.sent.Load() {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b := c.sendq
	c.sendq = nil
	c.sent.Store(false)
	if n := len(l.mail); n > 0 && l.mail[n-1] == c && !c.resume {
		l.mail[n-1] = nil
		l.mail = l.mail[:n-1]
		c.mailed = false
		if n == 1 {
			l.hasMail.Store(false)
		}
	}
	return b
}

// free keeps b, a buffer of Send that was delivered, for reuse.
func (l *Loop) free(b []byte) {
	if cap(b) <= maxSendBuf {
		l.freed = append(l.freed, b[:0])
	}
}

// send writes b to c's socket after what waits in c.out. It reports false
// when c is closed.
func (l *Loop) send(c *Conn, b []byte) bool {
	if len(c.out) > 0 {
		c.out = append(c.out, b...)
		return true
	}
	return l.write(c, b)
}

// arm makes the epoll set report what the loop waits for from c: room for
// its replies, its input, or (paused, with nothing to write) only a
// hang-up. It reports false when that failed and c is closed.
func (l *Loop) arm(c *Conn) bool {
	var ev uint32 = unix.EPOLLIN
	switch {
	case len(c.out) > 0 || c.more:
		ev = unix.EPOLLOUT
	case c.paused:
		ev = 0
	}
	if ev == c.events {
		return true
	}
	if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_MOD, c.fd, &unix.EpollEvent{Events: ev, Fd: int32(c.fd)}); err != nil {
		l.close(c, fmt.Errorf("evloop: epoll_ctl: %w", err))
		return false
	}
	c.events = ev
	return true
}

// deliverMail delivers the loop's mail: what was sent to its connections,
// and their Resumes. It reports false when there was none, and then, if
// sleep is set, marks the loop asleep, under l.mu, for Send and Resume to
// wake it.
func (l *Loop) deliverMail(sleep bool) bool {
	l.mu.Lock()
	for i, b := range l.freed {
		if len(l.bufs) < maxSendBufs {
			l.bufs = append(l.bufs, b)
		}
		l.freed[i] = nil
	}
	l.freed = l.freed[:0]
	mail := l.mail
	if len(mail) == 0 {
		if sleep {
			l.sleeping.Store(true)
		}
		l.mu.Unlock()
		return false
	}
	l.mail, l.posted = l.posted[:0], mail
	l.hasMail.Store(false)
	for _, c := range mail {
		c.mailed = false
		if l.serves(c) {
			c.posted, c.resumed = c.sendq, c.resume
		}
		c.sendq, c.resume = nil, false
		c.sent.Store(false)
	}
	l.mu.Unlock()
	for i, c := range mail {
		mail[i] = nil
		l.deliver(c)
	}
	return true
}

// deliver writes what was sent to c, and resumes its input if asked to.
func (l *Loop) deliver(c *Conn) {
	b, resume := c.posted, c.resumed
	c.posted, c.resumed = nil, false
	if len(b) > 0 {
		ok := l.send(c, b)
		l.free(b)
		if !ok {
			return
		}
	}
	if !resume || !c.paused {
		return
	}
	c.paused = false
	switch {
	case len(c.in) == 0:
		l.arm(c)
	case len(c.out) > 0:
		c.more = true // the rest of the input once the replies are out
		l.arm(c)
	default:
		l.input(c, c.in)
	}
}

// write writes b to c's socket; what the socket does not take waits in
// c.out, and the loop waits for room instead of input. It reports false
// when the write failed and c is closed.
func (l *Loop) write(c *Conn, b []byte) bool {
	for len(b) > 0 {
		n, err := unix.Write(c.fd, b)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if errors.Is(err, unix.EAGAIN) {
			break
		}
		if err != nil {
			l.close(c, fmt.Errorf("evloop: write: %w", err))
			return false
		}
		b = b[n:]
	}
	if len(b) == 0 {
		return true
	}
	c.out = append(c.out, b...)
	c.outSince = l.now
	return l.arm(c)
}

// flush writes c's waiting replies, once its socket has room; when they
// are all out, c's handler is given the rest of its input if it stopped on
// long replies, and c is read again (or closed, if it was closing).
func (l *Loop) flush(c *Conn) {
	b := c.out
	for len(b) > 0 {
		n, err := unix.Write(c.fd, b)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if errors.Is(err, unix.EAGAIN) {
			c.out = c.out[:copy(c.out, b)]
			return
		}
		if err != nil {
			l.close(c, fmt.Errorf("evloop: write: %w", err))
			return
		}
		b = b[n:]
	}
	c.out = c.out[:0]
	if cap(c.out) > readSize {
		c.out = nil
	}
	if c.closing {
		l.close(c, nil)
		return
	}
	c.last = l.now
	if c.more {
		l.input(c, c.in) // which arms c
		return
	}
	l.arm(c)
}

// close closes c, telling its handler why, then its socket: err, or
// ErrConnClosed when Conn.Close shut it down (the error the loop met is
// then its consequence).
func (l *Loop) close(c *Conn, err error) {
	if l.forget(c.fd) {
		err = ErrConnClosed
	}
	// The handler first: the peer sees the end once the connection's end
	// is done (a lock service's session ended, its locks released).
	c.h.Closed(err)
	unix.Close(c.fd)
}

// sweep closes the connections past a timeout, but the idle ones that an
// IdleKeeper handler keeps: those are asked again one IdleTimeout later.
// Handlers are asked outside the loop's mutex, which Conn.Close takes.
func (l *Loop) sweep() {
	l.expired = l.expired[:0]
	l.mu.Lock()
	for _, c := range l.conns {
		if c != nil && l.timedOut(c) != nil {
			l.expired = append(l.expired, c)
		}
	}
	l.mu.Unlock()
	for i, c := range l.expired {
		l.expired[i] = nil
		err := l.timedOut(c)
		if err == ErrIdle {
			if k, ok := c.h.(IdleKeeper); ok && k.KeepIdle() {
				c.last = l.now
				continue
			}
		}
		l.close(c, err)
	}
}

// timedOut returns the timeout c is past, or nil.
func (l *Loop) timedOut(c *Conn) error {
	past := func(since time.Time, d time.Duration) bool { return d > 0 && l.now.Sub(since) >= d }
	switch {
	case len(c.out) > 0 || c.more:
		if past(c.outSince, l.cfg.WriteTimeout) {
			return ErrWriteTimeout
		}
	case len(c.in) > 0:
		if past(c.inSince, l.cfg.ReadTimeout) {
			return ErrReadTimeout
		}
	case past(c.last, l.cfg.IdleTimeout):
		return ErrIdle
	}
	return nil
}

// shutdown closes every connection with err and releases the loop. What
// a connection has to write (replies, what was sent) is written as far as
// its socket takes it at once, unless Conn.Close closed it.
func (l *Loop) shutdown(err error) {
	l.mu.Lock()
	l.closing = true
	conns := l.conns
	l.conns, l.n = nil, 0
	for _, c := range conns {
		if c != nil {
			c.posted, c.sendq = c.sendq, nil
		}
	}
	l.mail, l.bufs = nil, nil
	l.mu.Unlock()
	for _, c := range conns {
		if c == nil {
			continue
		}
		if !c.killed {
			writeNow(c.fd, c.out, c.posted)
		}
		c.out, c.posted = nil, nil
		c.h.Closed(err)
		unix.Close(c.fd)
	}
	unix.Close(l.epfd)
	unix.Close(l.wake)
}

// writeNow writes bufs to fd in order, as far as the socket takes them
// without waiting.
func writeNow(fd int, bufs ...[]byte) {
	for _, b := range bufs {
		for len(b) > 0 {
			n, err := unix.Write(fd, b)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil {
				return
			}
			b = b[n:]
		}
	}
}
