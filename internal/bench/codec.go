package bench

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"
)

// op is a request a workload makes.
type op uint8

const (
	opGet op = iota
	opSet
	opAdd    // add with the recipe's exptime: a lock for plain memcached
	opDelete // the add recipe's unlock
	opLock
	opUnlock
	opPing // version (memcached), Ping (dlock)
)

var opNames = [...]string{"get", "set", "add", "delete", "lock", "unlock", "ping"}

func (o op) String() string { return opNames[o] }

// outcome is what a valid reply says.
type outcome uint8

const (
	done    outcome = iota // the request did what it asked
	refused                // lock or add refused: the key is taken (a poll that failed)
	miss                   // get of a missing item
)

// A codec encodes requests of one protocol and validates their replies.
// Requests are appended to a batch buffer; replies are read in order from
// a buffered reader. seq numbers requests (binary opaque, dlock id); it is
// never 0.
type codec interface {
	appendReq(b []byte, o op, key []byte, seq uint32) []byte
	// readReply reads the reply to request (o, key, seq). It returns an
	// *unexpectedError for a well-formed reply that is not one of o's
	// expected replies (the stream is still in step), and any other
	// error when the stream is broken.
	readReply(r *bufio.Reader, o op, key []byte, seq uint32) (outcome, error)
	// version returns the server's version string (memcached) or "" (dlock
	// has none) after a ping.
	version(r *bufio.Reader, seq uint32) (string, error)
}

// unexpectedError is a well-formed reply that its request does not allow.
// It counts as an error, never as an operation, and the connection goes
// on.
type unexpectedError struct {
	op  op
	got string
}

func (e *unexpectedError) Error() string {
	return fmt.Sprintf("unexpected reply to %s: %s", e.op, e.got)
}

// unexpected returns the error for reply got (quoted, cut short) to o.
func unexpected(o op, got []byte) error {
	if len(got) > 80 {
		got = append(got[:80:80], "..."...)
	}
	return &unexpectedError{op: o, got: strconv.Quote(string(got))}
}

// errBroken wraps errors after which a connection's replies can no longer
// be matched to its requests.
var errBroken = errors.New("reply stream broken")

func broken(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errBroken, fmt.Sprintf(format, args...))
}

// wire is one connection: a net.Conn, its buffered reader and the batch of
// requests being built.
type wire struct {
	nc      net.Conn
	r       *bufio.Reader
	out     []byte
	timeout time.Duration
	dl      time.Time // the deadline set on nc
}

const readBufSize = 64 << 10

func dial(addr string, timeout time.Duration) (*wire, error) {
	nc, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	return &wire{nc: nc, r: bufio.NewReaderSize(nc, readBufSize), out: make([]byte, 0, 4096), timeout: timeout}, nil
}

// flush writes the batch with one write. The connection's deadline is
// pushed forward at most once a second, not on every batch.
func (w *wire) flush(now time.Time) error {
	if w.timeout > 0 && now.Add(w.timeout/2).After(w.dl) {
		w.dl = now.Add(w.timeout)
		w.nc.SetDeadline(w.dl)
	}
	_, err := w.nc.Write(w.out)
	w.out = w.out[:0]
	return err
}

// extendDeadline gives a connection that is about to wait without writing
// (a dlock Lock waiting in the server) the full timeout.
func (w *wire) extendDeadline(now time.Time) {
	if w.timeout > 0 {
		w.dl = now.Add(w.timeout)
		w.nc.SetDeadline(w.dl)
	}
}

func (w *wire) close() error { return w.nc.Close() }
