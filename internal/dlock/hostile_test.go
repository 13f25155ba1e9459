package dlock

import (
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/latchd/latch/dlockpb"
	"github.com/latchd/latch/internal/frame"
	"github.com/latchd/latch/internal/node"
)

// bystander holds key "held" on its own connection; check verifies that it
// still does and that other clients are still served.
type bystander struct {
	e *env
	c *client
}

func newBystander(t *testing.T, e *env) *bystander {
	t.Helper()
	c := e.dial(t)
	c.mustV3(v3Lock(1, []string{"held"}), pb.ResponseStatus_Ok)
	return &bystander{e: e, c: c}
}

func (b *bystander) check(t *testing.T) {
	t.Helper()
	other := b.e.dial(t)
	other.mustV3(v3Lock(1, []string{"held"}, func(l *pb.RequestLock) { l.TryOnce = true }), pb.ResponseStatus_AcquireTimeout)
	other.mustV3(v3Lock(2, []string{"free"}), pb.ResponseStatus_Ok)
	other.mustV3(v3Unlock(3, "free"), pb.ResponseStatus_Ok)
	b.c.mustV3(v3(2, pb.RequestType_Ping), pb.ResponseStatus_Ok)
}

func v3Unlock(id uint64, keys ...string) *pb.Request {
	r := v3(id, pb.RequestType_Unlock)
	r.Lock = &pb.RequestLock{Keys: keys}
	return r
}

// TestHostileFrames sends garbage, truncated and oversized frames: each is
// answered or ends its own connection, and harms no other client.
func TestHostileFrames(t *testing.T) {
	tests := []struct {
		name   string
		input  []byte
		answer bool // answered General before anything else happens
		closes bool // the server closes the connection by itself
	}{
		{name: "garbage protobuf", input: frame.Append(nil, []byte{0xff, 0xff, 0xff, 0x01}), answer: true},
		{name: "empty frame", input: frame.Append(nil, nil), answer: true},
		{name: "text instead of frames", input: []byte("lock a\r\nGET / HTTP/1.1\r\n\r\n"), answer: true, closes: true},
		{name: "frame over the limit", input: []byte{0x7f, 0xff, 0xff, 0xff, 1, 2, 3}, answer: true, closes: true},
		{name: "truncated frame", input: []byte{0, 0, 1, 0, 1, 2}, closes: true},
		{name: "truncated header", input: []byte{0, 0}, closes: true},
		{name: "many keys", input: frame.Append(nil, mustMarshal(t, v3Lock(1, manyKeys(5000)))), answer: true},
		{name: "invalid keys", input: frame.Append(nil, mustMarshal(t, v3Lock(1, []string{"a b", "", strings.Repeat("k", 300)}))), answer: true},
	}
	e := newEnv(t, func(c *Config) { c.ReadTimeout = 300 * time.Millisecond; c.MaxFrame = 64 << 10 })
	by := newBystander(t, e)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := e.dial(t)
			c.send(tt.input)
			if tt.answer {
				if r := c.recvPB(); r.GetStatus() == pb.ResponseStatus_Ok {
					t.Errorf("answer %v, want an error", r)
				}
			}
			if tt.closes {
				c.expectEOF()
			} else {
				c.nc.(*net.TCPConn).CloseWrite()
				c.expectEOF()
			}
			by.check(t)
		})
	}
}

func manyKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = strings.Repeat("k", 10) + string(rune('a'+i%26)) + strings.Repeat("x", i%50)
	}
	return keys
}

func mustMarshal(t *testing.T, req *pb.Request) []byte {
	t.Helper()
	b, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestReadTimeoutInsideFrame: a frame that stops arriving half-way is cut
// off after the read timeout, even with no idle timeout; a connection
// silent between frames is not.
func TestReadTimeoutInsideFrame(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newPipeEnv(t, func(c *Config) { c.IdleTimeout = 0; c.ReadTimeout = time.Second })
		silent := e.dial(t)
		c := e.dial(t)
		c.send([]byte{0, 0, 0, 10, 1})
		time.Sleep(2 * time.Second)
		synctest.Wait()
		c.expectEOF()
		time.Sleep(time.Hour)
		silent.mustV3(v3(1, pb.RequestType_Ping), pb.ResponseStatus_Ok)
	})
}

// TestMaxConns: connections beyond MaxConns get one answer and are closed;
// the limit frees up when connections leave.
func TestMaxConns(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxConns = 2 })
	by := newBystander(t, e)
	c := e.dial(t)
	c.mustV3(v3(1, pb.RequestType_Ping), pb.ResponseStatus_Ok)
	for range 5 {
		over := e.dial(t)
		r := over.recvPB()
		if r.GetStatus() != pb.ResponseStatus_General || !strings.Contains(r.GetErrorText(), "TooManyConnections") || r.GetRequestId() != 0 {
			t.Errorf("over the limit: answer %v, want General TooManyConnections for request 0", r)
		}
		over.expectEOF()
	}
	c.nc.Close()
	deadline := time.Now().Add(testTimeout)
	for {
		c := e.dial(t)
		c.sendPB(v3(1, pb.RequestType_Ping))
		r := c.recvPB()
		c.nc.Close()
		if r.GetStatus() == pb.ResponseStatus_Ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a closed connection never made room")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// by.check dials one more: wait until the server forgot the last one.
	for {
		n := e.srv.ns.Stats().Open
		if n < 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still open", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	by.check(t)
}

// TestClientNeverReads: a client that sends requests and never reads the
// answers is disconnected after the write timeout, while other clients
// are served.
func TestClientNeverReads(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.WriteTimeout = 300 * time.Millisecond })
	by := newBystander(t, e)
	hog := e.dial(t)
	// Invalid-key Locks: each answer echoes the long key.
	key := strings.Repeat("k", 240) + " "
	req := frame.Append(nil, mustMarshal(t, v3Lock(0, []string{key})))
	batch := []byte(strings.Repeat(string(req), 200))
	sent := make(chan error, 1)
	go func() {
		hog.nc.SetWriteDeadline(time.Now().Add(testTimeout))
		for {
			if _, err := hog.nc.Write(batch); err != nil {
				sent <- err
				return
			}
		}
	}()
	for range 5 {
		by.check(t)
	}
	if err := <-sent; errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the server did not disconnect a client that never reads within %v", testTimeout)
	}
	by.check(t)
}

// TestSilentConnections: connections that never send are closed after the
// idle timeout, and connection limits contain them meanwhile.
func TestSilentConnections(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// No write timeout: over an unbuffered pipe, an answer waits until
		// the test reads it.
		e := newPipeEnv(t, func(c *Config) { c.IdleTimeout, c.WriteTimeout = time.Minute, 0 })
		var silent []*client
		for range 50 {
			silent = append(silent, e.dial(t))
		}
		waiting := e.dial(t)
		holder := e.dial(t)
		holder.mustV3(v3Lock(1, []string{"a"}), pb.ResponseStatus_Ok)
		waiting.sendPB(v3Lock(1, []string{"a"})) // waits forever
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		for _, c := range silent {
			c.expectEOF()
		}
		// The waiting one was not idle; the holder was, and its leaving
		// granted the lock.
		holder.expectEOF()
		if r := waiting.recvPB(); r.GetStatus() != pb.ResponseStatus_Ok {
			t.Errorf("waiter: %v, want Ok", r)
		}
	})
}

// TestTooManyWaiters: a Lock that would wait beyond the lock service's
// limits is answered TooManyWaiters (version 2: General), and others are
// unaffected.
func TestTooManyWaiters(t *testing.T) {
	cfg := testConfig()
	svc, err := node.New(node.Config{MaxWaitersPerKey: 1, MaxWaiters: 2})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{svc: svc}
	srv, err := New(svc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.srv = srv
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	e.addr = srv.Addr().String()
	t.Cleanup(e.shutdown)

	holder, w1, w2 := e.dial(t), e.dial(t), e.dial(t)
	holder.mustV3(v3Lock(1, []string{"a", "b"}), pb.ResponseStatus_Ok)
	w1.sendPB(v3Lock(1, []string{"a"}))
	e.waitFor(t, "a", "1 waiter", waiters(1))
	w2.mustV3(v3Lock(1, []string{"a"}), pb.ResponseStatus_TooManyWaiters)
	w2.sendMsg(v2Lock(2, 0, 0, "a"))
	if r := w2.recv(); r.status != sGeneral || !strings.HasPrefix(r.text, "TooManyWaiters") {
		t.Errorf("version 2: answer %+v, want General TooManyWaiters", r)
	}
	w2.sendPB(v3Lock(3, []string{"b"}))
	e.waitFor(t, "b", "1 waiter", waiters(1))
	// Two wait in all: a third key is refused too.
	holder.mustV3(v3Lock(2, []string{"c"}), pb.ResponseStatus_Ok)
	e.dial(t).mustV3(v3Lock(1, []string{"c"}), pb.ResponseStatus_TooManyWaiters)
	// Granted at once: no limit applies.
	e.dial(t).mustV3(v3Lock(1, []string{"d"}), pb.ResponseStatus_Ok)
	holder.mustV3(v3Unlock(3, "a"), pb.ResponseStatus_Ok)
	if r := w1.recvPB(); r.GetStatus() != pb.ResponseStatus_Ok {
		t.Errorf("waiter on a: %v, want Ok", r)
	}
}
