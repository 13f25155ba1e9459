package dlock

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/latchd/latch"
	pb "github.com/latchd/latch/dlockpb"
)

// The tests of this file run in a synctest bubble over in-memory
// connections: time is fake, so the idle timeout and session TTLs are
// exact and nothing sleeps for real.

// hold takes keys with a session of the service itself (no connection, so
// no idle timeout) and returns it.
func (e *env) hold(t *testing.T, keys ...string) latch.Session {
	t.Helper()
	s, err := e.svc.OpenSession(latch.SessionOptions{Protocol: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(context.Background(), latch.LockRequest{Keys: keys}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestIdleTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const idle = 10 * time.Second
		// No write timeout: over an unbuffered pipe, an answer waits until
		// the test reads it.
		e := newPipeEnv(t, func(c *Config) { c.IdleTimeout, c.WriteTimeout = idle, 0 })
		other := e.hold(t, "w")

		silent := e.dial(t)
		holding := e.dial(t)
		lockOK(t, holding, 1, "k")
		waiting := e.dial(t)
		waiting.sendMsg(v2Lock(1, 0, 0, "w")) // waits for ever
		waitingV3 := e.dial(t)
		waitingV3.sendPB(v3Lock(1, []string{"w"}))
		talking := e.dial(t)

		// Just before the timeout nothing is closed; a request restarts
		// the talking connection's clock.
		time.Sleep(idle - time.Nanosecond)
		synctest.Wait()
		if info, _ := e.svc.Lock("k"); !heldBy("pipe")(info) {
			t.Fatalf("k released before the idle timeout: %+v", info)
		}
		talking.sendMsg(v2(1, tPing))
		talking.recv()

		// Past it, the silent connections close and release their locks;
		// those with a Lock waiting stay, however long they wait.
		time.Sleep(10 * idle)
		synctest.Wait()
		silent.expectEOF()
		holding.expectEOF()
		talking.expectEOF()
		if info, ok := e.svc.Lock("k"); ok && len(info.Holders) > 0 {
			t.Errorf("k after its holder idled out: %+v, want free", info)
		}
		if info, _ := e.svc.Lock("w"); len(info.Waiters) != 2 {
			t.Fatalf("w: %+v, want both waiters still queued", info)
		}
		other.Close()
		if r := waiting.recv(); r.status != sOk {
			t.Errorf("waiting (v2): %s %q, want Ok", r.shape(), r.text)
		}
		// The v3 waiter's turn comes when the v2 waiter's connection, now
		// silent with nothing waiting, idles out.
		time.Sleep(2 * idle)
		synctest.Wait()
		waiting.expectEOF()
		if r := waitingV3.recvPB(); r.GetStatus() != pb.ResponseStatus_Ok {
			t.Errorf("waiting (v3): %v, want Ok", r)
		}
	})
}

// TestIdleTimeoutInsideFrame: once a frame has started, the rest must come
// within the idle timeout too.
func TestIdleTimeoutInsideFrame(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newPipeEnv(t, func(c *Config) { c.IdleTimeout = time.Second })
		c := e.dial(t)
		c.send([]byte{0, 0, 0, 10, 1})
		time.Sleep(2 * time.Second)
		synctest.Wait()
		c.expectEOF()
	})
}

func sessionReq(id uint64, ttl time.Duration) *pb.Request {
	r := v3(id, pb.RequestType_Session)
	r.Session = &pb.RequestSession{TtlMicro: uint64(ttl / time.Microsecond)}
	return r
}

func TestSessionTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 10 * time.Second
		e := newPipeEnv(t, nil)
		other := e.hold(t, "busy")

		c := e.dial(t)
		c.mustV3(sessionReq(1, ttl), pb.ResponseStatus_Ok)
		c.mustV3(v3Lock(2, []string{"k"}), pb.ResponseStatus_Ok)
		c.mustV3(v3Lock(3, []string{"l"}, lease(time.Hour)), pb.ResponseStatus_Ok)
		c.sendPB(v3Lock(4, []string{"busy"})) // waits

		// Pings keep the session alive, for as long as they come.
		for i := range 20 {
			time.Sleep(ttl / 2)
			c.mustV3(v3(uint64(10+i), pb.RequestType_Ping), pb.ResponseStatus_Ok)
		}
		if info, _ := e.svc.Lock("k"); !heldBy("pipe")(info) {
			t.Fatalf("k while pings come: %+v, want held", info)
		}

		// Without them, the session ends at its TTL: its waiting Lock is
		// answered, its plain lock released, its lease kept.
		time.Sleep(ttl)
		synctest.Wait()
		if r := c.recvPB(); r.GetRequestId() != 4 || r.GetStatus() != pb.ResponseStatus_SessionExpired {
			t.Fatalf("waiting Lock: %v, want SessionExpired", r)
		}
		if info, ok := e.svc.Lock("k"); ok && len(info.Holders) > 0 {
			t.Errorf("k after the TTL: %+v, want free", info)
		}
		if info, _ := e.svc.Lock("l"); len(info.Holders) != 1 {
			t.Errorf("leased l after the TTL: %+v, want still held", info)
		}
		// The connection stays and says so to every request of the session.
		c.mustV3(v3(30, pb.RequestType_Ping), pb.ResponseStatus_SessionExpired)
		c.mustV3(v3Lock(31, []string{"m"}), pb.ResponseStatus_SessionExpired)
		c.mustV3(v3Keys(pb.RequestType_Unlock, 32, "l"), pb.ResponseStatus_SessionExpired)
		c.sendMsg(v2Lock(33, 0, 0, "m"))
		if r := c.recv(); r.status != sGeneral || r.text[:14] != "SessionExpired" {
			t.Errorf("version 2 Lock: %s %q, want General SessionExpired", r.shape(), r.text)
		}
		other.Close()
	})
}

// TestLeaseExpiry: a lease ends on time and hands the key to the next
// waiter, with or without its connection.
func TestLeaseExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newPipeEnv(t, nil)
		a, b := e.dial(t), e.dial(t)
		a.sendMsg(v2Lock(1, 0, uint64(time.Minute/time.Microsecond), "k"))
		if r := a.recv(); r.status != sOk {
			t.Fatal(r.text)
		}
		a.nc.Close()
		b.sendMsg(v2Lock(2, 0, 0, "k"))
		start := time.Now()
		r := b.recv()
		if r.status != sOk {
			t.Fatalf("b: %s %q", r.shape(), r.text)
		}
		if waited := time.Since(start); waited != time.Minute {
			t.Errorf("b was granted after %v (fake time), want exactly the lease's minute", waited)
		}
	})
}
