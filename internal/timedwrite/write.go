package timedwrite

import (
	"net"
	"time"
)

// Writer writes to a connection; each Write must complete within its
// timeout, counted from the moment the socket first refuses bytes. Write
// and Try must not be called concurrently; Writer does not lock.
type Writer struct {
	nc      net.Conn
	timeout time.Duration // 0: no bound
	// try is the non-blocking write; nil when the connection has none (a
	// TLS connection): Write then sets the deadline before every write.
	try func([]byte) (int, error)
}

// New returns a Writer for nc whose writes must each complete within
// timeout (0: no bound).
func New(nc net.Conn, timeout time.Duration) *Writer {
	return &Writer{nc: nc, timeout: timeout, try: nonblocking(nc)}
}

// CanTry reports whether Try can write without waiting on this connection.
func (w *Writer) CanTry() bool { return w.try != nil }

// Try writes p without waiting: it makes one write system call and returns
// how much of p the socket took, 0 when it would block. On a connection
// that cannot (CanTry false) it writes nothing and returns 0.
func (w *Writer) Try(p []byte) (int, error) {
	if w.try == nil || len(p) == 0 {
		return 0, nil
	}
	return w.try(p)
}

// Write writes all of p, or returns the error that stopped it: a failed
// write, or os.ErrDeadlineExceeded when the socket did not take p within
// the timeout from when it first refused some of it.
func (w *Writer) Write(p []byte) (int, error) {
	if w.try == nil {
		if w.timeout > 0 {
			w.nc.SetWriteDeadline(time.Now().Add(w.timeout))
		}
		return w.nc.Write(p)
	}
	n, err := w.Try(p)
	if err != nil || n == len(p) {
		return n, err
	}
	if w.timeout > 0 {
		w.nc.SetWriteDeadline(time.Now().Add(w.timeout))
	}
	m, err := w.nc.Write(p[n:])
	if w.timeout > 0 && err == nil {
		// A deadline left behind would fail a later Try once it passed.
		w.nc.SetWriteDeadline(time.Time{})
	}
	return n + m, err
}
