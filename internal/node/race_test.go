package node

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchd/latch"
)

// keyCheck tracks the holders of one key independently of the node.
type keyCheck struct {
	excl, shared atomic.Int32
	lastExcl     atomic.Uint64 // token of the latest exclusive grant
	limit        int32         // shared limit, 0 = none
}

// enter records a grant of k in mode with token tok and reports what is
// wrong with it.
func (k *keyCheck) enter(name string, mode latch.Mode, tok latch.Token) error {
	if last := latch.Token(k.lastExcl.Load()); tok <= last {
		return fmt.Errorf("%s: token %d granted after exclusive token %d", name, tok, last)
	}
	if mode == latch.Exclusive {
		e := k.excl.Add(1)
		s := k.shared.Load()
		k.lastExcl.Store(uint64(tok))
		if e != 1 || s != 0 {
			return fmt.Errorf("%s: exclusive grant beside %d exclusive and %d shared holders", name, e-1, s)
		}
		return nil
	}
	s := k.shared.Add(1)
	e := k.excl.Load()
	if e != 0 || (k.limit > 0 && s > k.limit) {
		return fmt.Errorf("%s: shared grant beside %d exclusive and %d shared holders (limit %d)", name, e, s-1, k.limit)
	}
	return nil
}

func (k *keyCheck) leave(mode latch.Mode) {
	if mode == latch.Exclusive {
		k.excl.Add(-1)
	} else {
		k.shared.Add(-1)
	}
}

// TestRace runs hundreds of goroutines on a handful of keys doing random
// acquires (exclusive or shared, multi-key, try-once, with a deadline, or
// forever with or without a context that ends), releases and closes, and
// checks mutual exclusion, shared limits and fencing-token order with
// counters kept outside the node. Run it with -race.
func TestRace(t *testing.T) {
	const goroutines = 300
	iterations := 60
	if testing.Short() {
		iterations = 10
	}
	n, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Shutdown(context.Background())

	plain := []string{"k0", "k1", "k2", "k3", "k4"}
	checks := map[string]*keyCheck{"sem": {limit: 2}}
	for _, k := range plain {
		checks[k] = &keyCheck{}
	}
	var (
		wg                   sync.WaitGroup
		grants, busy, cancel atomic.Int64
	)
	for g := range goroutines {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 42))
			s, err := n.OpenSession(latch.SessionOptions{Protocol: "race"})
			if err != nil {
				t.Error(err)
				return
			}
			defer func() { s.Close() }()
			for range iterations {
				req := randomRequest(rng, plain)
				ctx, stop := context.Background(), context.CancelFunc(func() {})
				async, cancelAfter := false, time.Duration(0)
				switch rng.IntN(6) {
				case 0:
					req.Wait = latch.NoWait
				case 1:
					req.Wait = time.Duration(rng.IntN(2000)) * time.Microsecond
				case 2:
					req.Wait = latch.WaitForever
					ctx, stop = context.WithTimeout(ctx, time.Duration(rng.IntN(3000))*time.Microsecond)
				case 3:
					req.Wait = latch.WaitForever
				case 4:
					req.Wait, async = latch.WaitForever, true
				case 5:
					req.Wait, async = latch.WaitForever, true
					cancelAfter = time.Duration(1+rng.IntN(3000)) * time.Microsecond
				}
				var gr latch.Grant
				if async {
					gr, err = acquireFunc(s, req, cancelAfter)
				} else {
					gr, err = s.Acquire(ctx, req)
				}
				stop()
				switch {
				case err == nil:
				case errors.Is(err, latch.ErrWouldBlock), errors.Is(err, latch.ErrTimeout):
					busy.Add(1)
					continue
				case errors.Is(err, latch.ErrCanceled):
					cancel.Add(1)
					continue
				default:
					t.Errorf("Acquire(%+v): %v", req, err)
					return
				}
				grants.Add(1)
				for _, k := range req.Keys {
					if err := checks[k].enter(k, req.Mode, gr.Token); err != nil {
						t.Error(err)
					}
				}
				for range rng.IntN(4) {
					runtime.Gosched()
				}
				for _, k := range req.Keys {
					checks[k].leave(req.Mode)
				}
				switch rng.IntN(10) {
				case 0: // end the session holding the locks, start another
					s.Close()
					if s, err = n.OpenSession(latch.SessionOptions{Protocol: "race"}); err != nil {
						t.Error(err)
						return
					}
				case 1:
					if cnt, err := s.ReleaseAll(); err != nil || cnt != len(req.Keys) {
						t.Errorf("ReleaseAll = (%d, %v), want %d keys", cnt, err, len(req.Keys))
					}
				default:
					if err := s.Release(req.Keys...); err != nil {
						t.Errorf("Release(%v): %v", req.Keys, err)
					}
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d grants, %d busy or timed out, %d cancelled", grants.Load(), busy.Load(), cancel.Load())
	if got := n.Locks("", "", 0); len(got) != 0 {
		t.Errorf("locks left: %+v", got)
	}
	if got := n.Sessions(); len(got) != 0 {
		t.Errorf("sessions left: %+v", got)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.waiters) != 0 || len(n.sessions) != 0 {
		t.Errorf("node records left: %d waiters, %d sessions", len(n.waiters), len(n.sessions))
	}
	if _, ok := n.st.Engine().NextDeadline(); ok || n.armedOK {
		t.Errorf("a deadline is left (timer armed: %v)", n.armedOK)
	}
}

// acquireFunc takes req with AcquireFunc and waits for its end; a positive
// cancelAfter cancels it after that time.
func acquireFunc(s latch.Session, req latch.LockRequest, cancelAfter time.Duration) (latch.Grant, error) {
	ch := make(chan outcome, 2) // a second call of done must not block: it fails the test
	g, id, err := s.AcquireFunc(req, func(g latch.Grant, err error) { ch <- outcome{g, err} })
	if id == 0 {
		return g, err
	}
	if cancelAfter > 0 {
		t := time.AfterFunc(cancelAfter, func() { s.Cancel(id) })
		defer t.Stop()
	}
	o := <-ch
	select {
	case o2 := <-ch:
		return latch.Grant{}, fmt.Errorf("done called twice: (%+v, %v), then (%+v, %v)", o.g, o.err, o2.g, o2.err)
	default:
	}
	return o.g, o.err
}

// randomRequest names 1 to 3 distinct plain keys in either mode, or the
// semaphore key "sem" (shared with limit 2, or exclusive) alone.
func randomRequest(rng *rand.Rand, plain []string) latch.LockRequest {
	if rng.IntN(5) == 0 {
		if rng.IntN(3) == 0 {
			return latch.LockRequest{Keys: []string{"sem"}, Mode: latch.Exclusive}
		}
		return latch.LockRequest{Keys: []string{"sem"}, Mode: latch.Shared, Limit: 2}
	}
	perm := rng.Perm(len(plain))
	keys := make([]string, 1+rng.IntN(3))
	for i := range keys {
		keys[i] = plain[perm[i]]
	}
	mode := latch.Exclusive
	if rng.IntN(2) == 0 {
		mode = latch.Shared
	}
	return latch.LockRequest{Keys: keys, Mode: mode}
}
