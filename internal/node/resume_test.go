package node

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/latchd/latch"
)

// TestResumeSession: a session with a TTL taken over by a new connection
// keeps its locks; its old handle ends without ending it, its waiting
// request fails, and the new handle's Close ends it. A session without a
// TTL cannot be resumed, nor one that ended.
func TestResumeSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNode(t, Config{})
		old := open(t, n, latch.SessionOptions{TTL: time.Minute, Protocol: "dlock"})
		other := open(t, n, latch.SessionOptions{})
		mustAcquire(t, old, x(0, "k"))
		mustAcquire(t, other, x(0, "busy"))
		waiting := goAcquire(context.Background(), old, x(latch.WaitForever, "busy"))

		s, err := n.ResumeSession(old.ID(), latch.SessionOptions{Protocol: "dlock", Peer: "new"})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		waiting.failed(t, latch.ErrSessionEnded)
		if !isClosed(old.Done()) {
			t.Error("the old handle's Done is open")
		}
		if err := old.Close(); err != nil {
			t.Fatal(err)
		}
		if info, ok := n.Lock("k"); !ok || len(info.Holders) != 1 || info.Holders[0].Session != s.ID() {
			t.Fatalf("k after the resume = %+v, %v", info, ok)
		}
		if err := s.Release("k"); err != nil {
			t.Fatalf("release through the resumed session: %v", err)
		}
		mustAcquire(t, s, x(0, "k"))
		s.Close()
		if _, ok := n.Lock("k"); ok {
			t.Error("k held after the resumed session closed")
		}
		if _, err := n.ResumeSession(s.ID(), latch.SessionOptions{}); !errors.Is(err, latch.ErrNoSession) {
			t.Errorf("resume of an ended session: %v", err)
		}
		if _, err := n.ResumeSession(other.ID(), latch.SessionOptions{}); !errors.Is(err, latch.ErrInvalidRequest) {
			t.Errorf("resume of a connection-bound session: %v, want ErrInvalidRequest", err)
		}
	})
}
