package idleread

import (
	"io"
	"net"
	"os"
	"syscall"
)

// Waiter reads a TCP connection's next input into a pooled buffer, waiting
// for it without holding one.
type Waiter struct{ raw syscall.RawConn }

// New returns a Waiter for nc, or nil when nc is not a plain TCP connection
// (a TLS connection has buffers of its own).
func New(nc net.Conn) *Waiter {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return nil
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	return &Waiter{raw: raw}
}

// Read reads the connection's next input into in, which must be empty,
// or returns the error that ended the wait: io.EOF, the read deadline
// (os.ErrDeadlineExceeded), a closed connection. It makes the system calls
// net.Conn's Read would (a read that finds nothing, a sleep in the
// netpoller, a read) but holds a buffer only for the reads and for what
// they read.
func (w *Waiter) Read(in *Input) error {
	var (
		p    *buffer
		n    int
		rerr error
	)
	err := w.raw.Read(func(fd uintptr) bool {
		p = pool.Get().(*buffer)
		for {
			n, rerr = syscall.Read(int(fd), p[:])
			if rerr != syscall.EINTR {
				break
			}
		}
		if rerr == syscall.EAGAIN {
			pool.Put(p)
			p = nil
			return false
		}
		return true
	})
	if err == nil && rerr != nil {
		err = os.NewSyscallError("read", rerr)
	}
	if err == nil && n <= 0 {
		err = io.EOF
	}
	if err != nil {
		if p != nil {
			pool.Put(p)
		}
		return err
	}
	in.buf, in.rest = p, p[:n]
	return nil
}
