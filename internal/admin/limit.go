package admin

import (
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"
)

// maxRefusing bounds the connections being answered 503 at once; beyond
// it, connections over the limit are closed unanswered, so that a flood
// of them costs no more than that many goroutines.
const maxRefusing = 16

// refuseTimeout bounds the writing of one refusal.
const refuseTimeout = time.Second

// refusal answers a connection over the limit. It closes the connection
// so that a client does not wait for a body that will not come.
const refusal = "HTTP/1.1 503 Service Unavailable\r\n" +
	"Content-Type: text/plain; charset=utf-8\r\n" +
	"Connection: close\r\n" +
	"Content-Length: 21\r\n" +
	"\r\n" +
	"too many connections\n"

// limitListener hands out at most cap(open) connections at once. One
// more is answered with a 503 (plaintext only) and closed, never queued:
// a client of the status page or of /metrics should learn that the
// server is busy, not hang.
type limitListener struct {
	net.Listener
	log      *slog.Logger
	open     chan struct{} // a token per open connection
	refusing chan struct{} // a token per refusal being written
	// silent closes refused connections without a word: under TLS the
	// listener sits below the handshake, where a plaintext answer would
	// only confuse the client.
	silent bool
}

func newLimitListener(ln net.Listener, max int, silent bool, log *slog.Logger) *limitListener {
	return &limitListener{
		Listener: ln,
		log:      log,
		open:     make(chan struct{}, max),
		refusing: make(chan struct{}, maxRefusing),
		silent:   silent,
	}
}

// Accept returns the next connection within the limit, refusing those
// over it on the way.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.open <- struct{}{}:
			return &limitConn{Conn: c, release: func() { <-l.open }}, nil
		default:
		}
		l.log.Warn("admin: too many connections; refusing one",
			"peer", c.RemoteAddr().String(), "max_conns", strconv.Itoa(cap(l.open)))
		if l.silent {
			c.Close()
			continue
		}
		select {
		case l.refusing <- struct{}{}:
			go l.refuse(c)
		default:
			c.Close()
		}
	}
}

// refuse writes the refusal to c within refuseTimeout and closes it. It
// first reads what the client sent (its request, or the first part of it)
// so that an HTTP client takes the answer for one, not for a stray
// response on an idle connection.
func (l *limitListener) refuse(c net.Conn) {
	defer func() { <-l.refusing }()
	defer c.Close()
	c.SetDeadline(time.Now().Add(refuseTimeout))
	var buf [4096]byte
	c.Read(buf[:])
	io.WriteString(c, refusal)
}

// limitConn gives its slot back on its first Close.
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
