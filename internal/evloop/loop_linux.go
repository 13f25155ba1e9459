//go:build linux

package evloop

import (
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
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

// A Loop serves the connections given to Add on the goroutine that calls
// Run, until Close.
type Loop struct {
	cfg  Config
	tick time.Duration
	epfd int
	wake int // an eventfd: Close writes to it to stop Run

	mu      sync.Mutex
	conns   []*Conn // by file descriptor
	n       int     // connections in conns
	closing bool

	// Used by Run's goroutine only.
	buf     []byte    // what the current read read
	out     []byte    // the replies of the current Input, reused
	now     time.Time // when the current epoll_wait returned
	expired []*Conn
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

	// The fields below are Run's.

	in       []byte // input not yet consumed: the start of a request
	out      []byte // replies the socket has not taken yet
	closing  bool   // close once out is written
	more     bool   // the handler stopped on long replies: give it in again once out is written
	last     time.Time
	inSince  time.Time // when the request in holds started arriving, at the latest
	outSince time.Time // when out became non-empty
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
	c := &Conn{l: l, fd: fd, h: h, last: time.Now()}
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
	var one = [8]byte{1}
	unix.Write(l.wake, one[:])
}

// Close closes the connection from any goroutine: the loop then calls its
// handler's Closed with ErrConnClosed, on the loop's goroutine, unless the
// connection was closed otherwise first. Replies not yet written are
// dropped. Close may be called any number of times, during or after the
// connection's life: it shuts down (shutdown(2)) the socket under the
// loop's mutex, and only while the loop still serves it, so it never
// touches a socket whose descriptor has since been reused.
func (c *Conn) Close() {
	l := c.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.killed || c.fd >= len(l.conns) || l.conns[c.fd] != c {
		return
	}
	c.killed = true
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
	killed = l.conns[fd].killed
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
	for {
		n, err := unix.EpollWait(l.epfd, events, wait)
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
				l.shutdown(ErrClosed)
				return
			}
			var c *Conn
			killed := false
			l.mu.Lock()
			if fd < len(l.conns) {
				c = l.conns[fd]
				killed = c != nil && c.killed
			}
			l.mu.Unlock()
			if c == nil {
				continue // closed earlier in this batch
			}
			if killed {
				l.close(c, ErrConnClosed)
				continue
			}
			if len(c.out) > 0 || c.more {
				l.flush(c)
			} else {
				l.read(c)
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
// its replies. It reports false when c is closed.
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
	// (flush), in turn with the other connections.
	c.more = open && len(reply) >= ReplyLimit && len(c.in) > 0
	if len(reply) > 0 && !l.write(c, reply) {
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
		if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_MOD, c.fd, &unix.EpollEvent{Events: unix.EPOLLOUT, Fd: int32(c.fd)}); err != nil {
			l.close(c, fmt.Errorf("evloop: epoll_ctl: %w", err))
			return false
		}
	}
	return true
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
	if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_MOD, c.fd, &unix.EpollEvent{Events: unix.EPOLLOUT, Fd: int32(c.fd)}); err != nil {
		l.close(c, fmt.Errorf("evloop: epoll_ctl: %w", err))
		return false
	}
	return true
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
		if !l.input(c, c.in) || c.more || len(c.out) > 0 {
			return // closed, or waiting for room again
		}
	}
	if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_MOD, c.fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(c.fd)}); err != nil {
		l.close(c, fmt.Errorf("evloop: epoll_ctl: %w", err))
	}
}

// close closes c's socket and tells its handler why: err, or
// ErrConnClosed when Conn.Close shut it down (the error the loop met is
// then its consequence).
func (l *Loop) close(c *Conn, err error) {
	if l.forget(c.fd) {
		err = ErrConnClosed
	}
	unix.Close(c.fd)
	c.h.Closed(err)
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

// shutdown closes every connection with err and releases the loop.
func (l *Loop) shutdown(err error) {
	l.mu.Lock()
	l.closing = true
	conns := l.conns
	l.conns, l.n = nil, 0
	l.mu.Unlock()
	for _, c := range conns {
		if c == nil {
			continue
		}
		unix.Close(c.fd)
		c.h.Closed(err)
	}
	unix.Close(l.epfd)
	unix.Close(l.wake)
}
