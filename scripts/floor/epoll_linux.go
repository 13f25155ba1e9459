package main

import (
	"fmt"
	"net"
	"os"
	"sync"
	"syscall"
)

// serveEpoll serves ln's connections on n event loops. Accepted connections
// leave Go's netpoller (their descriptors are duplicated and the net.Conn
// closed) and go to the loops in turn.
func serveEpoll(ln *net.TCPListener, n int) error {
	if n < 1 {
		return fmt.Errorf("floor: %d loops", n)
	}
	loops := make([]*loop, n)
	for i := range loops {
		ep, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
		if err != nil {
			return fmt.Errorf("floor: epoll_create1: %w", err)
		}
		loops[i] = &loop{ep: ep, conns: map[int32]*econn{}, buf: make([]byte, 64<<10)}
		go loops[i].run()
	}
	for i := 0; ; i++ {
		c, err := ln.AcceptTCP()
		if err != nil {
			return err
		}
		f, err := c.File() // a blocking duplicate
		c.Close()
		if err != nil {
			return fmt.Errorf("floor: %w", err)
		}
		if err := loops[i%n].add(f); err != nil {
			return err
		}
	}
}

// loop is one event loop.
type loop struct {
	ep  int
	buf []byte // what one read reads, shared by the loop's connections

	mu    sync.Mutex // conns is written by the acceptor
	conns map[int32]*econn
}

// econn is one connection of a loop.
type econn struct {
	f   *os.File // owns fd
	fd  int
	in  []byte // the start of a request yet to arrive
	out []byte // replies the socket has not taken yet
	// writing is set while the loop waits for the socket to take out
	// (EPOLLOUT instead of EPOLLIN).
	writing bool
}

func (l *loop) add(f *os.File) error {
	fd := int(f.Fd())
	if err := syscall.SetNonblock(fd, true); err != nil {
		f.Close()
		return fmt.Errorf("floor: %w", err)
	}
	l.mu.Lock()
	l.conns[int32(fd)] = &econn{f: f, fd: fd}
	l.mu.Unlock()
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(fd)}
	if err := syscall.EpollCtl(l.ep, syscall.EPOLL_CTL_ADD, fd, &ev); err != nil {
		return fmt.Errorf("floor: epoll_ctl: %w", err)
	}
	return nil
}

func (l *loop) run() {
	events := make([]syscall.EpollEvent, 128)
	for {
		n, err := syscall.EpollWait(l.ep, events, -1)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			panic(fmt.Sprintf("floor: epoll_wait: %v", err))
		}
		for _, ev := range events[:n] {
			l.mu.Lock()
			c := l.conns[ev.Fd]
			l.mu.Unlock()
			if c == nil {
				continue
			}
			var ok bool
			if len(c.out) > 0 {
				ok = l.flush(c)
			} else {
				ok = l.serve(c)
			}
			if !ok {
				l.close(c)
			}
		}
	}
}

// serve makes one read from c's socket and answers what it completes.
func (l *loop) serve(c *econn) bool {
	n, err := syscall.Read(c.fd, l.buf)
	if err == syscall.EAGAIN || err == syscall.EINTR {
		return true
	}
	if err != nil || n == 0 {
		return false
	}
	in := l.buf[:n]
	if len(c.in) > 0 {
		c.in = append(c.in, in...)
		in = c.in
	}
	var rest []byte
	c.out, rest = answer(c.out[:0], in)
	c.in = append(c.in[:0], rest...)
	return l.flush(c)
}

// flush writes c's replies; what the socket does not take waits for it to
// become writable, and c's input waits meanwhile.
func (l *loop) flush(c *econn) bool {
	for len(c.out) > 0 {
		n, err := syscall.Write(c.fd, c.out)
		if err == syscall.EINTR {
			continue
		}
		if err == syscall.EAGAIN {
			return c.writing || l.watch(c, true)
		}
		if err != nil {
			return false
		}
		c.out = c.out[n:]
	}
	c.out = c.out[:0]
	return !c.writing || l.watch(c, false)
}

// watch makes the loop wait for c's socket to be writable (out) or
// readable.
func (l *loop) watch(c *econn, out bool) bool {
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(c.fd)}
	if out {
		ev.Events = syscall.EPOLLOUT
	}
	c.writing = out
	return syscall.EpollCtl(l.ep, syscall.EPOLL_CTL_MOD, c.fd, &ev) == nil
}

func (l *loop) close(c *econn) {
	syscall.EpollCtl(l.ep, syscall.EPOLL_CTL_DEL, c.fd, nil)
	l.mu.Lock()
	delete(l.conns, int32(c.fd))
	l.mu.Unlock()
	c.f.Close()
}
