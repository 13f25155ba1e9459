package dlock

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/latchd/latch/dlockpb"
	"github.com/latchd/latch/internal/frame"
	"github.com/latchd/latch/internal/idleread"
)

// TestIdleConnectionDropsBuffers checks that a TCP connection serves on
// after waiting without its buffers (waitInput: a connection's first wait,
// and each wait after one of idleread.After or more): whole requests, a frame
// split across an idle pause, a batch larger than the read buffer, and a
// grant that comes while the connection waits so. That the buffers are
// gone meanwhile shows in the memory per idle connection (latch bench
// --workload idle), not here.
func TestIdleConnectionDropsBuffers(t *testing.T) {
	e := newEnv(t, nil)
	a, b := e.dial(t), e.dial(t)
	pause := func() { time.Sleep(3 * idleread.After) }

	a.mustV3(v3Lock(1, []string{"k"}), pb.ResponseStatus_Ok)
	pause()
	a.mustV3(v3Keys(pb.RequestType_Unlock, 2, "k"), pb.ResponseStatus_Ok)

	pause()
	body, err := proto.Marshal(v3(3, pb.RequestType_Ping))
	if err != nil {
		t.Fatal(err)
	}
	f := frame.Append(nil, body)
	a.send(f[:3])
	pause()
	a.send(f[3:])
	if r := a.recvPB(); r.GetRequestId() != 3 || r.GetStatus() != pb.ResponseStatus_Ok {
		t.Fatalf("a frame split across an idle pause: answer %v", r)
	}

	pause()
	var batch []byte
	const n = 400 // about 10 KiB of frames
	for i := range n {
		body, err := proto.Marshal(v3Keys(pb.RequestType_Ping, uint64(100+i), "padding-to-make-the-frame-longer"))
		if err != nil {
			t.Fatal(err)
		}
		batch = frame.Append(batch, body)
	}
	a.send(batch)
	for i := range n {
		if r := a.recvPB(); r.GetRequestId() != uint64(100+i) {
			t.Fatalf("batch answer %d: %v, want request %d", i, r, 100+i)
		}
	}

	// b waits for k while a holds it; both connections then wait idle,
	// and a's Unlock hands k to b.
	a.mustV3(v3Lock(4, []string{"k"}), pb.ResponseStatus_Ok)
	b.sendPB(v3Lock(1, []string{"k"}))
	e.waitFor(t, "k", "b to wait", waiters(1))
	pause()
	a.mustV3(v3Keys(pb.RequestType_Unlock, 5, "k"), pb.ResponseStatus_Ok)
	if r := b.recvPB(); r.GetRequestId() != 1 || r.GetStatus() != pb.ResponseStatus_Ok || len(r.GetTokens()) != 1 {
		t.Fatalf("b's grant after an idle wait: %v", r)
	}
}

// server_unix_time is when the server read the request: the frames of one
// read share the time of that read, and a frame split across reads gets the
// time its last part was read.
func TestServerUnixTime(t *testing.T) {
	e := newEnv(t, nil)
	c := e.dial(t)
	within := func(r *pb.Response, from, to time.Time) {
		t.Helper()
		if at := time.Unix(0, r.GetServerUnixTime()); at.Before(from) || at.After(to) {
			t.Errorf("request %d: server_unix_time %v, want within [%v, %v]", r.GetRequestId(), at, from, to)
		}
	}
	before := time.Now()
	r := c.do(v3(1, pb.RequestType_Ping))
	within(r, before, time.Now())

	body, err := proto.Marshal(v3(2, pb.RequestType_Ping))
	if err != nil {
		t.Fatal(err)
	}
	f := frame.Append(nil, body)
	c.send(f[:3])
	time.Sleep(30 * time.Millisecond)
	rest := time.Now()
	c.send(f[3:])
	within(c.recvPB(), rest, time.Now())
}

// TestIdleTimeoutTCP is TestIdleTimeout over TCP, in real time: served by
// event loops by default (their sweep and KeepIdle), by goroutines with
// LATCH_DLOCK_LOOPS=-1.
func TestIdleTimeoutTCP(t *testing.T) {
	const idle = 150 * time.Millisecond
	e := newEnv(t, func(c *Config) { c.IdleTimeout = idle })
	other := e.hold(t, "w")
	silent, holding, waiting, waitingV3 := e.dial(t), e.dial(t), e.dial(t), e.dial(t)
	lockOK(t, holding, 1, "k")
	waiting.sendMsg(v2Lock(1, 0, 0, "w"))
	waitingV3.sendPB(v3Lock(1, []string{"w"}))
	e.waitFor(t, "w", "both to wait", waiters(2))

	silent.expectEOF()
	holding.expectEOF()
	if info, ok := e.svc.Lock("k"); ok && len(info.Holders) > 0 {
		t.Errorf("k after its holder idled out: %+v, want free", info)
	}
	time.Sleep(3 * idle)
	if info, _ := e.svc.Lock("w"); len(info.Waiters) != 2 {
		t.Fatalf("w: %+v, want both waiters still queued", info)
	}
	other.Close()
	if r := waiting.recv(); r.status != sOk {
		t.Errorf("waiting (v2): %s %q, want Ok", r.shape(), r.text)
	}
	// The v3 waiter's turn comes when the v2 waiter's connection, silent
	// with nothing waiting, idles out.
	waiting.expectEOF()
	if r := waitingV3.recvPB(); r.GetStatus() != pb.ResponseStatus_Ok {
		t.Errorf("waiting (v3): %v, want Ok", r)
	}
}
