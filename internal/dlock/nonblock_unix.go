//go:build unix

package dlock

import (
	"net"
	"os"
	"syscall"
)

// nonblockingWrite returns a function that writes to nc's socket without
// waiting: it makes one write system call and returns how much the socket
// took, 0 when it would block. nil when nc is no plain TCP or Unix
// connection.
func nonblockingWrite(nc net.Conn) func([]byte) (int, error) {
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
	return func(p []byte) (int, error) {
		var (
			n    int
			werr error
		)
		err := raw.Write(func(fd uintptr) bool {
			for {
				n, werr = syscall.Write(int(fd), p)
				if werr != syscall.EINTR {
					return true // done either way: never wait
				}
			}
		})
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
}
