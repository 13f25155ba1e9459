package idleread

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/latchd/latch/internal/tcptest"
)

func TestNew(t *testing.T) {
	server, _ := tcptest.Pair(t)
	if New(server) == nil {
		t.Error("New(a TCP connection) = nil")
	}
	p1, p2 := net.Pipe()
	defer p1.Close()
	defer p2.Close()
	if New(p1) != nil {
		t.Error("New(a pipe) is not nil")
	}
}

func TestRead(t *testing.T) {
	tests := []struct {
		name    string
		client  func(net.Conn)
		want    string
		wantErr error
	}{
		{"input that comes later", func(c net.Conn) {
			time.Sleep(20 * time.Millisecond)
			c.Write([]byte("get k\r\n"))
		}, "get k\r\n", nil},
		{"more than a buffer", func(c net.Conn) {
			c.Write(make([]byte, 3*size))
		}, string(make([]byte, size)), nil},
		{"end of input", func(c net.Conn) { c.Close() }, "", io.EOF},
		{"deadline", func(net.Conn) {}, "", os.ErrDeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			server, client := tcptest.Pair(t)
			w := New(server)
			deadline := 20 * time.Second // a bound on a hang, not a speed
			if tt.wantErr == os.ErrDeadlineExceeded {
				deadline = 50 * time.Millisecond
			}
			server.SetReadDeadline(time.Now().Add(deadline))
			go tt.client(client)
			time.Sleep(5 * time.Millisecond) // the more-than-a-buffer case: let it all arrive
			var in Input
			err := w.Read(&in)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("Read error = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				if in.Len() != 0 || in.buf != nil {
					t.Errorf("Read left %d bytes in its input with an error, want none", in.Len())
				}
				return
			}
			// Taken in pieces, as a buffered reader may.
			var got []byte
			for in.Len() > 0 {
				p := make([]byte, 1000)
				got = append(got, p[:in.Read(p)]...)
			}
			if string(got) != tt.want {
				t.Errorf("Read = %d bytes %q, want %d bytes %q", len(got), got[:min(len(got), 16)], len(tt.want), tt.want[:min(len(tt.want), 16)])
			}
			if in.buf != nil {
				t.Errorf("the input keeps its buffer once taken")
			}
		})
	}
}
