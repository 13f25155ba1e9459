package dlock

import (
	"bufio"
	"bytes"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/latchd/latch/dlockpb"
	"github.com/latchd/latch/internal/frame"
	"github.com/latchd/latch/internal/tcptest"
)

// pipePair returns the two ends of a net.Pipe, which has no socket to write
// to without blocking.
func pipePair(t *testing.T) (server, client net.Conn) {
	server, client = net.Pipe()
	t.Cleanup(func() { server.Close(); client.Close() })
	return server, client
}

// post must never block, whether the socket takes the answers at once or
// the client reads none of them for a while: what the socket does not take
// is written by a goroutine of its own, in order, once the client reads.
func TestWriterPostNeverBlocks(t *testing.T) {
	for _, tt := range []struct {
		name string
		pair func(*testing.T) (net.Conn, net.Conn)
	}{{"tcp", func(t *testing.T) (net.Conn, net.Conn) { return tcptest.Pair(t) }}, {"pipe", pipePair}} {
		t.Run(tt.name, func(t *testing.T) {
			server, client := tt.pair(t)
			w := newWriter(server, 0)
			if w.out.CanTry() != (tt.name == "tcp") {
				t.Fatalf("nonblocking write available: %v, want it for TCP only", w.out.CanTry())
			}
			// Far more than the socket buffers hold, so that posting
			// while nobody reads must leave most of it to a goroutine.
			const n = 2000
			key := strings.Repeat("k", 4000)
			posted := make(chan struct{})
			go func() {
				defer close(posted)
				for i := range n {
					w.post(&pb.Response{Version: 3, RequestId: uint64(i + 1), Keys: []string{key}})
				}
			}()
			select {
			case <-posted:
			case <-time.After(20 * time.Second): // a deadlock, not a speed
				t.Fatal("post blocked on a client that does not read")
			}
			fr := frame.NewReader(bufio.NewReader(client), 1<<20)
			for i := range n {
				body, err := fr.Read()
				if err != nil {
					t.Fatalf("answer %d: %v", i+1, err)
				}
				var resp pb.Response
				if err := proto.Unmarshal(body, &resp); err != nil {
					t.Fatalf("answer %d: %v", i+1, err)
				}
				if resp.GetRequestId() != uint64(i+1) || len(resp.GetKeys()) != 1 || resp.GetKeys()[0] != key {
					t.Fatalf("answer %d has request id %d and %d keys, want them in order", i+1, resp.GetRequestId(), len(resp.GetKeys()))
				}
			}
			w.close()
		})
	}
}

// While the connection's reader holds the writer, a posted answer waits for
// its flush, like the reader's own answers.
func TestWriterPostHeld(t *testing.T) {
	server, client := tcptest.Pair(t)
	w := newWriter(server, 0)
	w.hold()
	w.post(&pb.Response{Version: 3, RequestId: 7})
	client.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if n, err := client.Read(make([]byte, 64)); err == nil {
		t.Fatalf("read %d bytes of an answer posted while held", n)
	}
	w.flush()
	client.SetReadDeadline(time.Time{})
	body, err := frame.NewReader(bufio.NewReader(client), 1<<10).Read()
	if err != nil {
		t.Fatal(err)
	}
	var resp pb.Response
	if err := proto.Unmarshal(body, &resp); err != nil || resp.GetRequestId() != 7 {
		t.Fatalf("after flush: %v, %v; want the answer to request 7", &resp, err)
	}
}

// A failed write drops later answers and closes the connection.
func TestWriterPostAfterFailure(t *testing.T) {
	server, client := tcptest.Pair(t)
	w := newWriter(server, 0)
	client.Close()
	for range 100 { // the first writes may still succeed before the reset
		w.post(&pb.Response{Version: 3, RequestId: 1, Keys: []string{strings.Repeat("k", 1000)}})
	}
	w.close()
	w.mu.Lock()
	failed, queued := w.failed, len(w.buf)
	w.mu.Unlock()
	if !failed || queued != 0 {
		t.Fatalf("after writing to a closed peer: failed %v, %d bytes queued; want failed and none", failed, queued)
	}
}

// The answers to a batch of frames that arrived together leave in one
// write, the first frame's included. Over a pipe, each of the server's
// writes reaches the client in reads of its own.
func TestBatchAnsweredInOneWrite(t *testing.T) {
	e := newPipeEnv(t, nil)
	c := e.dial(t)
	const n = 16
	var batch []byte
	for i := range n {
		b, err := proto.Marshal(v3(uint64(i+1), pb.RequestType_Ping))
		if err != nil {
			t.Fatal(err)
		}
		batch = frame.Append(batch, b)
	}
	c.send(batch)
	c.nc.SetReadDeadline(time.Now().Add(testTimeout))
	buf := make([]byte, 64<<10)
	got, err := c.nc.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	fr := frame.NewReader(bufio.NewReader(bytes.NewReader(buf[:got])), 0)
	frames := 0
	for {
		if _, err := fr.Read(); err != nil {
			break
		}
		frames++
	}
	if frames != n {
		t.Errorf("the server's first write held %d answers, want all %d", frames, n)
	}
}
