package timedwrite

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/latchd/latch/internal/tcptest"
)

// big is more than loopback socket buffers hold, so that writing it to a
// client that does not read must wait.
const big = 64 << 20

func TestCanTry(t *testing.T) {
	server, _ := tcptest.Pair(t)
	p1, p2 := net.Pipe()
	defer p1.Close()
	defer p2.Close()
	for _, tt := range []struct {
		name string
		nc   net.Conn
		want bool
	}{{"tcp", server, runtime.GOOS != "windows"}, {"pipe", p1, false}} {
		if got := New(tt.nc, time.Second).CanTry(); got != tt.want {
			t.Errorf("%s: CanTry() = %v, want %v", tt.name, got, tt.want)
		}
	}
	if n, err := New(p1, time.Second).Try([]byte("x")); n != 0 || err != nil {
		t.Errorf("Try on a pipe = %d, %v; want 0, nil (it cannot write without waiting)", n, err)
	}
}

// Write delivers everything, in order, whether the socket takes it at once
// or must be waited for, on TCP and on a connection without a
// non-blocking write.
func TestWriteDelivers(t *testing.T) {
	pipe := func(t *testing.T) (net.Conn, net.Conn) {
		a, b := net.Pipe()
		t.Cleanup(func() { a.Close(); b.Close() })
		return a, b
	}
	tcp := func(t *testing.T) (net.Conn, net.Conn) { return tcptest.Pair(t) }
	for _, tt := range []struct {
		name string
		pair func(*testing.T) (net.Conn, net.Conn)
		size int
	}{
		{"tcp/small", tcp, 100},
		{"tcp/big", tcp, 8 << 20},
		{"pipe/small", pipe, 100},
		{"pipe/big", pipe, 1 << 20},
	} {
		t.Run(tt.name, func(t *testing.T) {
			server, client := tt.pair(t)
			w := New(server, 10*time.Second)
			p := bytes.Repeat([]byte("0123456789abcdef"), tt.size/16)
			got := make(chan []byte, 1)
			go func() {
				b, _ := io.ReadAll(io.LimitReader(client, int64(len(p))))
				got <- b
			}()
			n, err := w.Write(p)
			if n != len(p) || err != nil {
				t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(p))
			}
			if b := <-got; !bytes.Equal(b, p) {
				t.Fatalf("client read %d bytes, not what was written (%d)", len(b), len(p))
			}
		})
	}
}

// A Write to a client that reads nothing fails with the deadline.
func TestWriteTimeout(t *testing.T) {
	server, _ := tcptest.Pair(t)
	w := New(server, 50*time.Millisecond)
	n, err := w.Write(make([]byte, big))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Write to a client that does not read = %d, %v; want the deadline", n, err)
	}
	if n >= big {
		t.Fatalf("Write wrote all %d bytes to a client that does not read", n)
	}
}

// After a Write that had to wait, the deadline it set must not outlive it:
// once that deadline has passed, Try and Write still work.
func TestDeadlineCleared(t *testing.T) {
	server, client := tcptest.Pair(t)
	const timeout = 50 * time.Millisecond
	w := New(server, timeout)
	p := make([]byte, 8<<20)
	done := make(chan error, 1)
	go func() {
		_, err := io.CopyN(io.Discard, client, int64(len(p))+2)
		done <- err
	}()
	if n, err := w.Write(p); n != len(p) || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	time.Sleep(2 * timeout) // past the deadline the Write set
	if w.CanTry() {
		if n, err := w.Try([]byte("x")); n != 1 || err != nil {
			t.Fatalf("Try after the deadline passed = %d, %v; want 1, nil", n, err)
		}
	} else if n, err := w.Write([]byte("x")); n != 1 || err != nil {
		t.Fatalf("Write after the deadline passed = %d, %v; want 1, nil", n, err)
	}
	if n, err := w.Write([]byte("y")); n != 1 || err != nil {
		t.Fatalf("Write after the deadline passed = %d, %v; want 1, nil", n, err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A write the socket takes at once allocates nothing.
func TestWriteAllocs(t *testing.T) {
	server, client := tcptest.Pair(t)
	go io.Copy(io.Discard, client)
	w := New(server, time.Second)
	p := []byte("reply")
	if a := testing.AllocsPerRun(100, func() { w.Write(p) }); a != 0 {
		t.Errorf("Write allocates %v times per call, want 0", a)
	}
}

// BenchmarkWrite compares a Writer with setting the deadline before every
// write, for small writes the socket takes at once (a reply).
func BenchmarkWrite(b *testing.B) {
	p := make([]byte, 24)
	b.Run("deadline-every-write", func(b *testing.B) {
		server, client := tcptest.Pair(b)
		go io.Copy(io.Discard, client)
		b.ReportAllocs()
		for b.Loop() {
			server.SetWriteDeadline(time.Now().Add(10 * time.Second))
			if _, err := server.Write(p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("timedwrite", func(b *testing.B) {
		server, client := tcptest.Pair(b)
		go io.Copy(io.Discard, client)
		w := New(server, 10*time.Second)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := w.Write(p); err != nil {
				b.Fatal(err)
			}
		}
	})
}
