// Command floor is a memcached binary-protocol server with no logic at all:
// every request gets a success reply with its opcode and opaque (Version
// gets "1.6.18"). It measures what serving costs on a machine before any
// server does any work, for docs/benchmarks.md: point "latch bench
// --recipe lock" at it beside latch and memcached and compare the server
// CPU per request.
//
// Two ways of serving, chosen by -mode:
//
//   - goroutine: one goroutine per connection over net.Conn, replies
//     buffered and flushed before each read from the socket, as latch's
//     front ends serve;
//   - epoll (Linux): -loops event loops (default GOMAXPROCS) of package
//     evloop, each a goroutine with an epoll instance of its own,
//     level-triggered, one read per readiness event and the replies
//     written at once, as memcached's worker threads serve (and latch's
//     Redis front end).
//
// It is a measuring instrument for loopback runs, not a server: it has no
// limits (a request's body length is believed) and no timeouts.
//
// Usage: go run ./scripts/floor [-mode goroutine|epoll] [-loops N] host:port
package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"runtime"
)

const headerLen = 24

func main() {
	mode := flag.String("mode", "goroutine", "goroutine or epoll")
	loops := flag.Int("loops", runtime.GOMAXPROCS(0), "epoll: event loops")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: floor [-mode goroutine|epoll] [-loops N] host:port")
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", flag.Arg(0))
	if err != nil {
		log.Fatal(err)
	}
	switch *mode {
	case "goroutine":
		err = serveGoroutines(ln)
	case "epoll":
		err = serveEpoll(ln.(*net.TCPListener), *loops)
	default:
		err = fmt.Errorf("unknown mode %q", *mode)
	}
	log.Fatal(err)
}

// reply appends the reply to the request whose header is hdr to out.
func reply(out, hdr []byte) []byte {
	var h [headerLen]byte
	h[0] = 0x81 // response magic
	h[1] = hdr[1]
	copy(h[12:16], hdr[12:16]) // opaque
	h[23] = 1                  // CAS 1
	if hdr[1] != 0x0b {        // not Version
		return append(out, h[:]...)
	}
	const version = "1.6.18"
	binary.BigEndian.PutUint32(h[8:12], uint32(len(version)))
	return append(append(out, h[:]...), version...)
}

// answer appends the replies to the complete requests at the start of in
// and returns what is left of in: the start of a request yet to arrive.
func answer(out, in []byte) ([]byte, []byte) {
	for len(in) >= headerLen {
		n := headerLen + int(binary.BigEndian.Uint32(in[8:12]))
		if len(in) < n {
			break
		}
		out = reply(out, in[:headerLen])
		in = in[n:]
	}
	return out, in
}

// serveGoroutines serves each connection of ln in a goroutine of its own.
func serveGoroutines(ln net.Listener) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go serveConn(c)
	}
}

// flushing flushes w before every read from c: replies to a batch of
// pipelined requests leave in one write, when the server needs more input.
type flushing struct {
	c net.Conn
	w *bufio.Writer
}

func (f flushing) Read(p []byte) (int, error) {
	if err := f.w.Flush(); err != nil {
		return 0, err
	}
	return f.c.Read(p)
}

func serveConn(c net.Conn) {
	defer c.Close()
	w := bufio.NewWriterSize(c, 4<<10)
	r := bufio.NewReaderSize(flushing{c, w}, 4<<10)
	var out []byte
	for {
		hdr, err := r.Peek(headerLen)
		if err != nil {
			return
		}
		out = reply(out[:0], hdr)
		body := int(binary.BigEndian.Uint32(hdr[8:12]))
		if _, err := r.Discard(headerLen + body); err != nil {
			if !errors.Is(err, io.EOF) {
				log.Print(err)
			}
			return
		}
		w.Write(out)
	}
}
