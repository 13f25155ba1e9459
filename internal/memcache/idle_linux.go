package memcache

import (
	"io"
	"net"
	"os"
	"sync"
	"syscall"
)

// idleWaiter reads a TCP connection's next input into a pooled buffer,
// waiting for it without holding one.
type idleWaiter struct{ raw syscall.RawConn }

// newIdleWaiter returns an idleWaiter for nc, or nil when nc is not a
// plain TCP connection (a TLS connection has buffers of its own).
func newIdleWaiter(nc net.Conn) *idleWaiter {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return nil
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	return &idleWaiter{raw: raw}
}

// read reads the connection's next input into a buffer from pool (a
// *[bufSize]byte) and returns the buffer and how much it read, or the
// error that ended the wait: io.EOF, the read deadline
// (os.ErrDeadlineExceeded), a closed connection. It makes the system
// calls net.Conn's Read would (a read that finds nothing, a sleep in the
// netpoller, a read) but holds a buffer only for the reads.
func (w *idleWaiter) read(pool *sync.Pool) (*[bufSize]byte, int, error) {
	var (
		p    *[bufSize]byte
		n    int
		rerr error
	)
	err := w.raw.Read(func(fd uintptr) bool {
		p = pool.Get().(*[bufSize]byte)
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
		return nil, 0, err
	}
	return p, n, nil
}
