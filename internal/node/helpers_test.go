package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/latchd/latch"
)

// TestMain runs every test twice: over replica.Local, then (when the first
// run passed) with newNode's nodes in a cluster of one over
// asyncReplicator.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		asyncReplicas = true
		code = m.Run()
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// firstToken is the token counter's start in tests: the first grant is 101.
const firstToken = 100

// newNode returns a Node that is shut down when the test ends.
func newNode(t *testing.T, cfg Config) *Node {
	t.Helper()
	if cfg.FirstToken == 0 {
		cfg.FirstToken = firstToken
	}
	if asyncReplicas && cfg.Replicator == nil {
		cfg.Replicator, cfg.NodeID = newAsyncReplicator, "test-node"
	}
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Shutdown(context.Background()) })
	return n
}

func open(t *testing.T, n *Node, opts latch.SessionOptions) latch.Session {
	t.Helper()
	s, err := n.OpenSession(opts)
	if err != nil {
		t.Fatalf("OpenSession(%+v): %v", opts, err)
	}
	return s
}

// x and sh build requests.
func x(wait time.Duration, keys ...string) latch.LockRequest {
	return latch.LockRequest{Keys: keys, Mode: latch.Exclusive, Wait: wait}
}

func sh(wait time.Duration, keys ...string) latch.LockRequest {
	return latch.LockRequest{Keys: keys, Mode: latch.Shared, Wait: wait}
}

// mustAcquire acquires req at once or fails the test.
func mustAcquire(t *testing.T, s latch.Session, req latch.LockRequest) latch.Grant {
	t.Helper()
	g, err := s.Acquire(context.Background(), req)
	if err != nil {
		t.Fatalf("session %d: Acquire(%v): %v", s.ID(), req.Keys, err)
	}
	return g
}

type outcome struct {
	g   latch.Grant
	err error
}

// call is an Acquire running in its own goroutine.
type call chan outcome

// goAcquire starts an Acquire and returns once it has settled (parked or
// answered). Only inside a synctest bubble.
func goAcquire(ctx context.Context, s latch.Session, req latch.LockRequest) call {
	c := make(call, 1)
	go func() {
		g, err := s.Acquire(ctx, req)
		c <- outcome{g, err}
	}()
	synctest.Wait()
	return c
}

// waiting fails the test if c has returned.
func (c call) waiting(t *testing.T) {
	t.Helper()
	synctest.Wait()
	select {
	case o := <-c:
		t.Fatalf("Acquire returned (%+v, %v), want it still waiting", o.g, o.err)
	default:
	}
}

// result returns what c returned, failing the test if it is still waiting.
func (c call) result(t *testing.T) outcome {
	t.Helper()
	synctest.Wait()
	select {
	case o := <-c:
		return o
	default:
		t.Fatal("Acquire still waiting, want it answered")
		return outcome{}
	}
}

// granted fails the test unless c returned a grant with token tok.
func (c call) granted(t *testing.T, tok latch.Token) latch.Grant {
	t.Helper()
	o := c.result(t)
	if o.err != nil || o.g.Token != tok {
		t.Fatalf("Acquire = (token %d, %v), want token %d", o.g.Token, o.err, tok)
	}
	return o.g
}

// failed fails the test unless c returned an error wrapping want.
func (c call) failed(t *testing.T, want error) error {
	t.Helper()
	o := c.result(t)
	if !errors.Is(o.err, want) {
		t.Fatalf("Acquire = (%+v, %v), want an error wrapping %v", o.g, o.err, want)
	}
	return o.err
}

// isClosed reports whether a Done channel is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// holders returns the sessions holding key, in token order.
func holders(n *Node, key string) []latch.SessionID {
	ki, ok := n.Lock(key)
	if !ok {
		return nil
	}
	var out []latch.SessionID
	for _, h := range ki.Holders {
		out = append(out, h.Session)
	}
	return out
}

// waiters returns the sessions waiting for key, in queue order.
func waiters(n *Node, key string) []latch.SessionID {
	ki, ok := n.Lock(key)
	if !ok {
		return nil
	}
	var out []latch.SessionID
	for _, w := range ki.Waiters {
		out = append(out, w.Session)
	}
	return out
}
