package idleread

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t *testing.T) (server, client net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { server.Close(); client.Close() })
	return server, client
}

func TestNew(t *testing.T) {
	server, _ := tcpPair(t)
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
			server, client := tcpPair(t)
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
