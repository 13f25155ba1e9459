// Package refuse owns turning away a connection a server will not serve
// over its connection limit: one last answer, written in the background
// within a time bound, by a bounded number of goroutines, so that neither
// a slow client nor a TLS handshake holds up the accept loop and a flood
// of connections costs little. (A connection from outside a server's
// allow-list is closed at once, without a byte: package netserve.)
package refuse

import (
	"io"
	"net"
	"sync"
	"time"
)

// Timeout bounds the time spent on one refused connection.
const Timeout = time.Second

// MaxAtOnce is how many refusals a Refuser answers at once; beyond it,
// connections are closed without a word.
const MaxAtOnce = 64

// drainLimit bounds what is read from a refused client.
const drainLimit = 64 << 10

// Refuser answers refused connections. The zero value is not usable; call
// New.
type Refuser struct {
	slots chan struct{} // one per refusal in progress
	wg    *sync.WaitGroup
}

// New returns a Refuser whose goroutines wg counts (nil: none), so that a
// server's shutdown can wait for them.
func New(wg *sync.WaitGroup) *Refuser {
	return &Refuser{slots: make(chan struct{}, MaxAtOnce), wg: wg}
}

// Refuse answers nc with msg and closes it, in the background (see Conn).
// When MaxAtOnce refusals are in progress it closes nc at once instead and
// reports false.
func (r *Refuser) Refuse(nc net.Conn, msg []byte) bool {
	select {
	case r.slots <- struct{}{}:
	default:
		nc.Close()
		return false
	}
	if r.wg != nil {
		r.wg.Add(1)
	}
	go func() {
		defer func() {
			<-r.slots
			if r.wg != nil {
				r.wg.Done()
			}
		}()
		Conn(nc, msg)
	}()
	return true
}

// Conn writes msg to nc and closes it, within Timeout. It shuts its side
// down first and drains what the client sent, so that the client reads
// msg rather than a reset.
func Conn(nc net.Conn, msg []byte) {
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(Timeout))
	if _, err := nc.Write(msg); err != nil {
		return
	}
	if cw, ok := nc.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	io.Copy(io.Discard, io.LimitReader(nc, drainLimit))
}
