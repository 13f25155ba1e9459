package engine

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/latchd/latch"
)

// TestWaiterLimits checks Config.MaxWaitersPerKey and Config.MaxWaiters: a
// request that would queue beyond them fails with latch.ErrTooManyWaiters
// and changes nothing, while requests that need not wait are unaffected.
func TestWaiterLimits(t *testing.T) {
	tests := []struct {
		name           string
		perKey, total  int
		queued         [][]string // requests queued first, each by its own session
		try            []string   // then this request, by a new session, waiting
		tryNoWait      bool       // try it once instead
		wantErr        error
		wantWaitersOnA int // waiters on key "a" afterwards
	}{
		{name: "no limits", queued: [][]string{{"a"}, {"a"}, {"a"}}, try: []string{"a"}, wantWaitersOnA: 4},
		{name: "per key: room", perKey: 2, queued: [][]string{{"a"}}, try: []string{"a"}, wantWaitersOnA: 2},
		{name: "per key: full", perKey: 2, queued: [][]string{{"a"}, {"a"}}, try: []string{"a"}, wantErr: latch.ErrTooManyWaiters, wantWaitersOnA: 2},
		{name: "per key: one key of many full", perKey: 1, queued: [][]string{{"a"}}, try: []string{"b", "a"}, wantErr: latch.ErrTooManyWaiters, wantWaitersOnA: 1},
		{name: "per key: other key", perKey: 1, queued: [][]string{{"a"}}, try: []string{"b"}, wantWaitersOnA: 1},
		{name: "per key: try-once still busy", perKey: 1, queued: [][]string{{"a"}}, try: []string{"a"}, tryNoWait: true, wantErr: latch.ErrWouldBlock, wantWaitersOnA: 1},
		{name: "total: room", total: 3, queued: [][]string{{"a"}, {"b"}}, try: []string{"a"}, wantWaitersOnA: 2},
		{name: "total: full", total: 2, queued: [][]string{{"a"}, {"b"}}, try: []string{"a"}, wantErr: latch.ErrTooManyWaiters, wantWaitersOnA: 1},
		{name: "total: full, free key granted", total: 2, queued: [][]string{{"a"}, {"b"}}, try: []string{"free"}, wantWaitersOnA: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &harness{t: t, e: New(Config{MaxWaitersPerKey: tt.perKey, MaxWaiters: tt.total}), now: 1_000}
			holder := h.open()
			h.grant(holder, req("a"))
			h.grant(holder, req("b"))
			for _, keys := range tt.queued {
				h.queue(h.open(), req(keys...))
			}
			s := h.open()
			before := h.e.Stats()
			r := req(tt.try...)
			if !tt.tryNoWait {
				r.Wait = latch.WaitForever
			}
			res, _, err := h.e.Acquire(h.now, s, r)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("acquire %v: got %+v, %v; want %v", tt.try, res, err, tt.wantErr)
			}
			if tt.wantErr != nil && h.e.Stats() != before {
				t.Errorf("a refused request changed the table: %+v, was %+v", h.e.Stats(), before)
			}
			st, _ := h.e.Key("a")
			if got := len(st.Waiters); got != tt.wantWaitersOnA {
				t.Errorf("waiters on a: got %d, want %d", got, tt.wantWaitersOnA)
			}
		})
	}
}

// TestWaiterLimitFreesRoom checks that a waiter leaving (granted, timed
// out, cancelled) makes room for the next one.
func TestWaiterLimitFreesRoom(t *testing.T) {
	h := &harness{t: t, e: New(Config{MaxWaitersPerKey: 1, MaxWaiters: 1}), now: 1_000}
	holder := h.open()
	h.grant(holder, req("a"))
	w := h.queue(h.open(), req("a"))
	r := req("a")
	r.Wait = latch.WaitForever
	if _, _, err := h.e.Acquire(h.now, h.open(), r); !errors.Is(err, latch.ErrTooManyWaiters) {
		t.Fatalf("second waiter: got %v, want ErrTooManyWaiters", err)
	}
	if _, err := h.e.Cancel(h.now, w); err != nil {
		t.Fatal(err)
	}
	h.queue(h.open(), req("a"))
}

// TestWaiterLimitsRandom drives an engine with limits through random
// operations and checks the rule exactly: a request is refused with
// latch.ErrTooManyWaiters if and only if it would queue while the table, or
// one of its keys, is at its limit; and the limits always hold.
func TestWaiterLimitsRandom(t *testing.T) {
	const perKey, total = 3, 7
	keys := []string{"a", "b", "c", "d"}
	refused, queued := 0, 0
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 0))
		e := New(Config{MaxWaitersPerKey: perKey, MaxWaiters: total})
		now := int64(1_000)
		var sessions []latch.SessionID
		var waiters []WaiterID
		for step := range 2000 {
			now += int64(rng.IntN(3)) * int64(time.Millisecond)
			switch op := rng.IntN(10); {
			case op < 2 || len(sessions) == 0:
				id, _ := e.OpenSession(now, SessionOptions{})
				sessions = append(sessions, id)
			case op < 7:
				s := sessions[rng.IntN(len(sessions))]
				r := latch.LockRequest{Relock: latch.RelockReuse, Wait: latch.WaitForever}
				for range 1 + rng.IntN(2) {
					r.Keys = append(r.Keys, keys[rng.IntN(len(keys))])
				}
				if rng.IntN(3) == 0 {
					r.Wait = time.Duration(1+rng.IntN(5)) * time.Millisecond
				}
				e.Tick(now) // time out waiters first, as Acquire does
				atLimit := e.Stats().Waiters >= total
				for _, k := range r.Keys {
					if st, ok := e.Key(k); ok && len(st.Waiters) >= perKey {
						atLimit = true
					}
				}
				res, _, err := e.Acquire(now, s, r)
				switch {
				case errors.Is(err, latch.ErrTooManyWaiters):
					if !atLimit {
						t.Fatalf("seed %d step %d: %v refused below the limits", seed, step, r.Keys)
					}
					refused++
				case err != nil:
				case !res.Granted:
					if atLimit {
						t.Fatalf("seed %d step %d: %v queued beyond the limits", seed, step, r.Keys)
					}
					waiters = append(waiters, res.Waiter)
					queued++
				}
			case op < 8 && len(waiters) > 0:
				i := rng.IntN(len(waiters))
				e.Cancel(now, waiters[i])
				waiters = append(waiters[:i], waiters[i+1:]...)
			case op < 9:
				e.ReleaseAll(now, sessions[rng.IntN(len(sessions))])
			default:
				i := rng.IntN(len(sessions))
				e.EndSession(now, sessions[i])
				sessions = append(sessions[:i], sessions[i+1:]...)
			}
			if n := e.Stats().Waiters; n > total {
				t.Fatalf("seed %d step %d: %d waiters, limit %d", seed, step, n, total)
			}
			for _, k := range keys {
				if st, ok := e.Key(k); ok && len(st.Waiters) > perKey {
					t.Fatalf("seed %d step %d: key %s has %d waiters, limit %d", seed, step, k, len(st.Waiters), perKey)
				}
			}
		}
	}
	if refused == 0 || queued == 0 {
		t.Errorf("%d refused, %d queued: the test does not exercise the limits", refused, queued)
	}
}

// TestMaxQueue: without a per-key limit, a key still takes at most
// MaxQueue waiters (its record counts them in 16 bits), of either mode.
func TestMaxQueue(t *testing.T) {
	for _, perKey := range []int{0, MaxQueue + 10} {
		h := &harness{t: t, e: New(Config{MaxWaitersPerKey: perKey}), now: 1_000}
		holder := h.open()
		h.grant(holder, req("a"))
		for i := range MaxQueue {
			r := req("a")
			if i%2 == 1 {
				r.Mode, r.Limit = latch.Shared, 5
			}
			h.queue(h.open(), r)
		}
		r := req("a")
		r.Wait = latch.WaitForever
		if _, _, err := h.e.Acquire(h.now, h.open(), r); !errors.Is(err, latch.ErrTooManyWaiters) {
			t.Fatalf("perKey %d: waiter %d: %v, want ErrTooManyWaiters", perKey, MaxQueue+1, err)
		}
		if st, _ := h.e.Key("a"); len(st.Waiters) != MaxQueue {
			t.Errorf("perKey %d: %d waiters, want %d", perKey, len(st.Waiters), MaxQueue)
		}
	}
}
