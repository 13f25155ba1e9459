package main

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"runtime"
	"testing"
	"time"
)

// request returns a binary request: opcode, opaque and a body of n bytes.
func request(op byte, opaque uint32, n int) []byte {
	b := make([]byte, headerLen+n)
	b[0] = 0x80
	b[1] = op
	binary.BigEndian.PutUint32(b[8:12], uint32(n))
	binary.BigEndian.PutUint32(b[12:16], opaque)
	return b
}

func TestServe(t *testing.T) {
	modes := map[string]func(*net.TCPListener) error{
		"goroutine": func(ln *net.TCPListener) error { return serveGoroutines(ln) },
	}
	if runtime.GOOS == "linux" {
		modes["epoll"] = func(ln *net.TCPListener) error { return serveEpoll(ln, 2) }
	}
	for name, serve := range modes {
		t.Run(name, func(t *testing.T) {
			ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go serve(ln)
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))

			// A pipelined batch: a Set with a body, a Version, and a
			// Lock whose header arrives in two writes.
			var batch []byte
			batch = append(batch, request(0x01, 7, 300)...)
			batch = append(batch, request(0x0b, 8, 0)...)
			lock := request(0x40, 9, 5)
			batch = append(batch, lock[:10]...)
			if _, err := c.Write(batch); err != nil {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond) // let the server see the split
			if _, err := c.Write(lock[10:]); err != nil {
				t.Fatal(err)
			}

			want := []struct {
				op     byte
				opaque uint32
				body   string
			}{{0x01, 7, ""}, {0x0b, 8, "1.6.18"}, {0x40, 9, ""}}
			for _, w := range want {
				var h [headerLen]byte
				if _, err := io.ReadFull(c, h[:]); err != nil {
					t.Fatal(err)
				}
				body := make([]byte, binary.BigEndian.Uint32(h[8:12]))
				if _, err := io.ReadFull(c, body); err != nil {
					t.Fatal(err)
				}
				if h[0] != 0x81 || h[1] != w.op || binary.BigEndian.Uint32(h[12:16]) != w.opaque || !bytes.Equal(body, []byte(w.body)) {
					t.Errorf("reply %x %q, want opcode %#x opaque %d body %q", h, body, w.op, w.opaque, w.body)
				}
			}
		})
	}
}

// FuzzAnswer: answer never panics, answers only whole requests, and leaves
// exactly the start of one that has not all arrived.
func FuzzAnswer(f *testing.F) {
	f.Add(request(0x01, 1, 10))
	f.Add(append(request(0x0b, 2, 0), request(0x40, 3, 4)[:7]...))
	f.Add([]byte{0x80, 0x01, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, in []byte) {
		out, rest := answer(nil, in)
		if len(rest) > len(in) || !bytes.Equal(rest, in[len(in)-len(rest):]) {
			t.Fatalf("rest %x is not the end of the input", rest)
		}
		if len(rest) >= headerLen && headerLen+int(binary.BigEndian.Uint32(rest[8:12])) <= len(rest) {
			t.Fatalf("a whole request left unanswered: %x", rest)
		}
		if len(out)%headerLen != 0 && !bytes.Contains(out, []byte("1.6.18")) {
			t.Fatalf("replies of %d bytes are not whole headers", len(out))
		}
	})
}
