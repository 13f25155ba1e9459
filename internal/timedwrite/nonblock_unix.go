//go:build unix

package timedwrite

import (
	"net"
	"os"
	"syscall"
)

// nonblocking returns a function that writes to nc's socket without
// waiting: it makes one write system call and returns how much the socket
// took, 0 when it would block. nil when nc is no plain TCP or Unix
// connection. The function must not be called concurrently.
func nonblocking(nc net.Conn) func([]byte) (int, error) {
	var sc syscall.Conn
	switch c := nc.(type) {
	case *net.TCPConn:
		sc = c
	case *net.UnixConn:
		sc = c
	default:
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	t := &rawWrite{raw: raw}
	t.f = t.write
	return t.do
}

// rawWrite is one non-blocking write through a syscall.RawConn. Its
// callback is made once, so that a write allocates nothing.
type rawWrite struct {
	raw syscall.RawConn
	f   func(fd uintptr) bool // t.write

	p   []byte // what the current write writes
	n   int
	err error
}

func (t *rawWrite) do(p []byte) (int, error) {
	t.p = p
	err := t.raw.Write(t.f)
	n, werr := t.n, t.err
	t.p, t.err = nil, nil
	switch {
	case err != nil:
		return 0, err
	case werr == syscall.EAGAIN:
		return 0, nil
	case werr != nil:
		return 0, os.NewSyscallError("write", werr)
	}
	return max(n, 0), nil
}

func (t *rawWrite) write(fd uintptr) bool {
	for {
		t.n, t.err = syscall.Write(int(fd), t.p)
		if t.err != syscall.EINTR {
			return true // done either way: never wait
		}
	}
}
