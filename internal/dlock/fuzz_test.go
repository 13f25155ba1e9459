package dlock

import (
	"context"
	"io"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/latchd/latch"
	pb "github.com/latchd/latch/dlockpb"
	"github.com/latchd/latch/internal/frame"
)

// FuzzConn replays arbitrary bytes as a whole client connection against an
// in-process server (over an in-memory pipe), the client closing after its
// last byte. The server must not panic, must answer only with frames that
// decode as Responses, and must be done with the connection, its session
// ended, soon after the client left: no hang, whatever was waiting.
func FuzzConn(f *testing.F) {
	for _, seed := range connSeeds() {
		f.Add(seed)
	}
	e := newPipeEnvTB(f, func(c *Config) {
		c.MaxFrame = 4096
		c.MaxKeys = 8
		c.MaxPending = 8
		c.Tokens = nil
	})
	// Keys that are always busy, so that Locks wait.
	busy, err := e.svc.OpenSession(latch.SessionOptions{Protocol: "fuzz"})
	if err != nil {
		f.Fatal(err)
	}
	if _, err := busy.Acquire(context.Background(), latch.LockRequest{Keys: []string{"busy", "b"}}); err != nil {
		f.Fatal(err)
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		nc, err := e.pl.dial()
		if err != nil {
			t.Fatal(err)
		}
		answers := make(chan error, 1)
		go func() {
			fr := frame.NewReader(nc, 0)
			for {
				b, err := fr.Read()
				if err != nil {
					answers <- nil
					return
				}
				var r pb.Response
				if err := proto.Unmarshal(b, &r); err != nil {
					answers <- err
					return
				}
				if v := r.GetVersion(); v != 2 && v != 3 {
					answers <- errVersion
					return
				}
			}
		}()
		nc.SetWriteDeadline(time.Now().Add(testTimeout))
		nc.Write(data) // fails when the server closes first
		nc.Close()
		if err := <-answers; err != nil && err != io.EOF {
			t.Fatalf("bad answer: %v", err)
		}
		deadline := time.Now().Add(testTimeout)
		for {
			n := e.srv.ns.Stats().Open
			if n == 0 && len(e.svc.Sessions()) == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the server still has %d connections and %d sessions after the client left", n, len(e.svc.Sessions()))
			}
			time.Sleep(50 * time.Microsecond)
		}
	})
}

// newPipeEnvTB is newPipeEnv for a testing.TB (the fuzz target).
func newPipeEnvTB(tb testing.TB, modify func(*Config)) *env {
	tb.Helper()
	cfg := testConfig()
	// Pipes are served by goroutines: no loop, whose epoll_wait would
	// keep a synctest bubble from ever being idle.
	cfg.Loops = -1
	if modify != nil {
		modify(&cfg)
	}
	e := &env{svc: nodeFor(cfg), pl: newPipeListener()}
	srv, err := New(e.svc, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	e.srv = srv
	if err := srv.Serve(e.pl); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(e.shutdown)
	return e
}

// connSeeds are connection transcripts for the fuzzer to start from.
func connSeeds() [][]byte {
	pbf := func(r *pb.Request) []byte {
		b, err := proto.Marshal(r)
		if err != nil {
			panic(err)
		}
		return frame.Append(nil, b)
	}
	cat := func(frames ...[]byte) []byte {
		var out []byte
		for _, f := range frames {
			out = append(out, f...)
		}
		return out
	}
	fr := func(m msg) []byte { return frame.Append(nil, m) }
	return [][]byte{
		{},
		{0, 0, 0, 0},
		fr(v2(1, tPing)),
		cat(fr(v2Lock(1, 0, 0, "a")), fr(v2Unlock(2, "a")), fr(v2(3, tPing))),
		cat(fr(v2Lock(1, 1000, 3000000, "a", "b", "busy")), fr(v2(2, tPing))),
		cat(fr(v2Lock(1, 0, 0, "busy")), fr(v2(2, tPing)), fr(v2Lock(3, 0, 0, "c"))),
		cat(fr(v2Lock(1, 0, 0, "a b")), fr(v2Lock(2, 0, 0, "")), fr(v2(3, 99))),
		cat(fr(msg(nil).varint(fReqVersion, 7)), fr(msg{0x0a, 0xff})),
		{0, 0, 0x20, 0, 1, 2, 3},
		cat(pbf(v3Lock(1, []string{"busy"})), pbf(v3Lock(2, []string{"x"}, shared(2))), pbf(cancelReq(3, 1)), pbf(v3(4, pb.RequestType_Ping))),
		cat(pbf(sessionReq(1, time.Second)), pbf(v3Lock(2, []string{"k"}, lease(time.Minute))), pbf(v3Keys(pb.RequestType_Renew, 3, "k")), pbf(v3Keys(pb.RequestType_Unlock, 4, "k"))),
		cat(pbf(v3Lock(1, []string{"b"}, tryOnce)), pbf(v3Lock(2, []string{"b"}, wait(time.Millisecond))), pbf(v3Lock(1, []string{"busy"})), pbf(v3Lock(1, []string{"busy"}))),
	}
}
