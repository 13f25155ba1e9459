package node

import (
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/fsm"
)

// keysHeard records what WatchKeys tells: each call's keys (sorted,
// without repeats; "*" for every key), its client, and when it came.
type keysHeard struct {
	mu    sync.Mutex
	calls []heardKeys
}

type heardKeys struct {
	keys   []string
	client uint64
	at     time.Time
}

func (h *keysHeard) hear(keys []string, client uint64) {
	k := slices.Clone(keys)
	if keys == nil {
		k = []string{"*"}
	}
	slices.Sort(k)
	h.mu.Lock()
	h.calls = append(h.calls, heardKeys{slices.Compact(k), client, time.Now()})
	h.mu.Unlock()
}

// take waits (in the bubble's time) for the calls heard since the last
// take, and returns them.
func (h *keysHeard) take() []heardKeys {
	for range 100 {
		synctest.Wait()
		h.mu.Lock()
		got := h.calls
		h.calls = nil
		h.mu.Unlock()
		if len(got) > 0 {
			return got
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// TestWatchKeys: every change to a key's holder is heard, whatever makes
// it: an owned lock taken, renewed and released (with the client that
// proposed it), a session's lock taken and released, an operator's force
// release, and a lease that ends with nobody touching the key, at its
// end. Reads are not heard.
func TestWatchKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNode(t, Config{})
		var h keysHeard
		n.WatchKeys(h.hear)
		owned := func(kind fsm.OwnedKind, lease time.Duration, client uint64, keys ...string) fsm.Result {
			t.Helper()
			r := n.Owned(&fsm.Command{Op: fsm.OpOwned, Owned: kind, Value: []byte("tok"), Client: client,
				Req: latch.LockRequest{Keys: keys, Lease: lease}})
			if r.Err != nil {
				t.Fatalf("%v %v: %v", kind, keys, r.Err)
			}
			return r
		}
		expect := func(what string, want ...heardKeys) {
			t.Helper()
			got := h.take()
			if len(got) != len(want) {
				t.Fatalf("%s: heard %+v, want %+v", what, got, want)
			}
			for i := range got {
				if !slices.Equal(got[i].keys, want[i].keys) || got[i].client != want[i].client {
					t.Fatalf("%s: heard %+v, want %+v", what, got, want)
				}
			}
		}
		owned(fsm.OwnedAcquire, 0, 7, "a", "b")
		expect("acquire", heardKeys{keys: []string{"a", "b"}, client: 7})
		owned(fsm.OwnedGet, 0, 7, "a")
		owned(fsm.OwnedRenew, time.Minute, 0, "a")
		expect("renew", heardKeys{keys: []string{"a"}})
		owned(fsm.OwnedRelease, 0, 9, "a", "b")
		expect("release", heardKeys{keys: []string{"a", "b"}, client: 9})

		s := open(t, n, latch.SessionOptions{})
		mustAcquire(t, s, latch.LockRequest{Keys: []string{"c"}})
		expect("session acquire", heardKeys{keys: []string{"c"}})
		if err := s.Release("c"); err != nil {
			t.Fatal(err)
		}
		expect("session release", heardKeys{keys: []string{"c"}})
		mustAcquire(t, s, latch.LockRequest{Keys: []string{"d"}})
		expect("session acquire", heardKeys{keys: []string{"d"}})
		if _, err := n.ForceRelease("d"); err != nil {
			t.Fatal(err)
		}
		expect("force release", heardKeys{keys: []string{"d"}})

		start := time.Now()
		owned(fsm.OwnedAcquire, 10*time.Second, 0, "e")
		expect("acquire with a lease", heardKeys{keys: []string{"e"}})
		time.Sleep(time.Hour)
		got := h.take()
		if len(got) != 1 || !slices.Equal(got[0].keys, []string{"e"}) {
			t.Fatalf("lease end: heard %+v, want e", got)
		}
		if at := got[0].at.Sub(start); at < 10*time.Second || at > 11*time.Second {
			t.Errorf("the lease's end was heard %v after it began, want 10s", at)
		}

		n.WatchKeys(nil)
		owned(fsm.OwnedAcquire, 0, 7, "f")
		synctest.Wait()
		if h.calls != nil {
			t.Errorf("heard %+v after WatchKeys(nil)", h.calls)
		}
	})
}
