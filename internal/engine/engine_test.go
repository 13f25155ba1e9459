package engine

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/latchd/latch"
)

// harness drives an Engine with a fake clock and checks outcomes.
type harness struct {
	t   *testing.T
	e   *Engine
	now int64
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	e := New(Config{MaxKeys: 8})
	e.SeedToken(100)
	return &harness{t: t, e: e, now: 1_000}
}

func (h *harness) open(opts ...SessionOptions) latch.SessionID {
	h.t.Helper()
	var o SessionOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	id, _ := h.e.OpenSession(h.now, o)
	return id
}

// req builds a request: exclusive, try-once, over keys.
func req(keys ...string) latch.LockRequest { return latch.LockRequest{Keys: keys} }

func shared(limit uint32, keys ...string) latch.LockRequest {
	return latch.LockRequest{Keys: keys, Mode: latch.Shared, Limit: limit}
}

func withWait(r latch.LockRequest, d time.Duration) latch.LockRequest  { r.Wait = d; return r }
func withLease(r latch.LockRequest, d time.Duration) latch.LockRequest { r.Lease = d; return r }
func withReuse(r latch.LockRequest) latch.LockRequest                  { r.Relock = latch.RelockReuse; return r }

func (h *harness) grant(s latch.SessionID, r latch.LockRequest) latch.Token {
	h.t.Helper()
	res, _, err := h.e.Acquire(h.now, s, r)
	if err != nil || !res.Granted {
		h.t.Fatalf("acquire %v by %d: got %+v, %v; want granted", r.Keys, s, res, err)
	}
	return res.Token
}

func (h *harness) queue(s latch.SessionID, r latch.LockRequest) WaiterID {
	h.t.Helper()
	if r.Wait == latch.NoWait {
		r.Wait = latch.WaitForever
	}
	res, _, err := h.e.Acquire(h.now, s, r)
	if err != nil || res.Granted || res.Waiter == 0 {
		h.t.Fatalf("acquire %v by %d: got %+v, %v; want queued", r.Keys, s, res, err)
	}
	return res.Waiter
}

func (h *harness) fail(s latch.SessionID, r latch.LockRequest, want error) error {
	h.t.Helper()
	res, _, err := h.e.Acquire(h.now, s, r)
	if !errors.Is(err, want) {
		h.t.Fatalf("acquire %v by %d: got %+v, %v; want %v", r.Keys, s, res, err, want)
	}
	return err
}

func (h *harness) release(s latch.SessionID, keys ...string) []Event {
	h.t.Helper()
	evs, err := h.e.Release(h.now, s, keys)
	if err != nil {
		h.t.Fatalf("release %v by %d: %v", keys, s, err)
	}
	return slices.Clone(evs)
}

func (h *harness) advance(d time.Duration) []Event {
	h.now += int64(d)
	return slices.Clone(h.e.Tick(h.now))
}

// holders returns the sessions holding key, in token order.
func (h *harness) holders(name string) []latch.SessionID {
	st, ok := h.e.Key(name)
	if !ok {
		return nil
	}
	var out []latch.SessionID
	for _, hs := range st.Holders {
		out = append(out, hs.Session)
	}
	return out
}

func (h *harness) wantHolders(name string, want ...latch.SessionID) {
	h.t.Helper()
	if got := h.holders(name); !slices.Equal(got, want) {
		h.t.Fatalf("holders of %q = %v, want %v", name, got, want)
	}
}

// ev is the comparable part of an Event.
type ev struct {
	Kind    EventKind
	Waiter  WaiterID
	Session latch.SessionID
	Key     string
	At      int64
}

func evs(events []Event) []ev {
	var out []ev
	for _, e := range events {
		out = append(out, ev{Kind: e.Kind, Waiter: e.Waiter, Session: e.Session, Key: e.Key, At: e.At})
	}
	return out
}

func (h *harness) wantEvents(got []Event, want ...ev) {
	h.t.Helper()
	if diff := cmp.Diff(want, evs(got)); diff != "" {
		h.t.Fatalf("events (-want +got):\n%s", diff)
	}
}

func granted(w WaiterID, s latch.SessionID, at int64) ev {
	return ev{Kind: EventGranted, Waiter: w, Session: s, At: at}
}

func TestRequestValidation(t *testing.T) {
	long := string(make([]byte, latch.MaxKeyLen+1))
	tests := []struct {
		name string
		req  latch.LockRequest
		want error
	}{
		{"no keys", latch.LockRequest{}, latch.ErrNoKeys},
		{"empty key", req(""), latch.ErrInvalidKey},
		{"key with space", req("a b"), latch.ErrInvalidKey},
		{"key with newline", req("a\n"), latch.ErrInvalidKey},
		{"key too long", req(long), latch.ErrInvalidKey},
		{"too many keys", req("1", "2", "3", "4", "5", "6", "7", "8", "9"), latch.ErrTooManyKeys},
		{"bad mode", latch.LockRequest{Keys: []string{"a"}, Mode: 7}, latch.ErrInvalidRequest},
		{"limit on exclusive", latch.LockRequest{Keys: []string{"a"}, Limit: 2}, latch.ErrInvalidRequest},
		{"negative lease", withLease(req("a"), -1), latch.ErrInvalidRequest},
		{"negative wait", withWait(req("a"), -5), latch.ErrInvalidRequest},
		{"bad relock", latch.LockRequest{Keys: []string{"a"}, Relock: 9}, latch.ErrInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			s := h.open()
			h.fail(s, tt.req, tt.want)
			if st := h.e.Stats(); st.Keys != 0 || st.Holds != 0 || st.Waiters != 0 {
				t.Fatalf("failed request changed the table: %+v", st)
			}
		})
	}
	t.Run("no session", func(t *testing.T) {
		h := newHarness(t)
		h.fail(42, req("a"), latch.ErrNoSession)
	})
	t.Run("max key length is fine", func(t *testing.T) {
		h := newHarness(t)
		h.grant(h.open(), req(long[1:]))
	})
}

func TestExclusive(t *testing.T) {
	h := newHarness(t)
	a, b := h.open(), h.open()
	t1 := h.grant(a, req("k"))
	err := h.fail(b, req("k"), latch.ErrWouldBlock)
	var be *latch.BusyError
	if !errors.As(err, &be) || !slices.Equal(be.Keys, []string{"k"}) {
		t.Fatalf("busy error = %#v, want keys [k]", err)
	}
	h.fail(b, shared(0, "k"), latch.ErrWouldBlock)
	h.release(a, "k")
	if _, ok := h.e.Key("k"); ok {
		t.Fatal("released key stays in the table")
	}
	t2 := h.grant(b, req("k"))
	if t1 != 101 || t2 != 102 {
		t.Fatalf("tokens %d, %d; want 101, 102", t1, t2)
	}
}

func TestShared(t *testing.T) {
	tests := []struct {
		name  string
		limit uint32
		fits  int // shared holders admitted
	}{
		{"unlimited", 0, 5},
		{"limit 1", 1, 1},
		{"limit 3", 3, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			var ss []latch.SessionID
			for range 5 {
				ss = append(ss, h.open())
			}
			for i, s := range ss {
				if i < tt.fits {
					h.grant(s, shared(tt.limit, "k"))
				} else {
					h.fail(s, shared(tt.limit, "k"), latch.ErrWouldBlock)
				}
			}
			x := h.open()
			h.fail(x, req("k"), latch.ErrWouldBlock)
			h.wantHolders("k", ss[:tt.fits]...)
		})
	}
}

func TestLimitMismatch(t *testing.T) {
	h := newHarness(t)
	a, b, c := h.open(), h.open(), h.open()
	h.grant(a, shared(2, "k"))
	h.fail(b, shared(3, "k"), latch.ErrLimitMismatch)
	h.fail(b, shared(0, "k"), latch.ErrLimitMismatch)
	h.grant(b, shared(2, "k"))
	// A queued shared waiter sets the limit too.
	x := h.open()
	h.release(a, "k")
	h.release(b, "k")
	h.grant(x, req("k"))
	h.queue(c, shared(5, "k"))
	h.fail(a, withWait(shared(4, "k"), time.Second), latch.ErrLimitMismatch)
	h.queue(a, shared(5, "k"))
}

func TestFIFOHandoff(t *testing.T) {
	h := newHarness(t)
	a, b, c := h.open(), h.open(), h.open()
	h.grant(a, req("k"))
	wb := h.queue(b, req("k"))
	wc := h.queue(c, req("k"))
	h.now += 5
	h.wantEvents(h.release(a, "k"), granted(wb, b, h.now))
	h.wantHolders("k", b)
	h.wantEvents(h.release(b, "k"), granted(wc, c, h.now))
	h.wantHolders("k", c)
	st, _ := h.e.Key("k")
	if len(st.Waiters) != 0 {
		t.Fatalf("waiters left: %+v", st.Waiters)
	}
}

// A try-once request behind a queued conflicting waiter fails even though
// the holders would admit it: no barging past the queue.
func TestNoBarging(t *testing.T) {
	h := newHarness(t)
	a, b, c := h.open(), h.open(), h.open()
	h.grant(a, shared(0, "k"))
	h.queue(b, req("k"))
	h.fail(c, shared(0, "k"), latch.ErrWouldBlock)
	wc := h.queue(c, shared(0, "k"))
	evs := h.release(a, "k")
	if len(evs) != 1 || evs[0].Session != b {
		t.Fatalf("release gave %v; want the exclusive waiter first", evs)
	}
	h.wantEvents(h.release(b, "k"), granted(wc, c, h.now))
}

func TestConsecutiveSharedGrantedTogether(t *testing.T) {
	h := newHarness(t)
	x, a, b, c, d := h.open(), h.open(), h.open(), h.open(), h.open()
	h.grant(x, req("k"))
	wa := h.queue(a, shared(2, "k"))
	wb := h.queue(b, shared(2, "k"))
	wc := h.queue(c, shared(2, "k")) // over the limit: waits
	wd := h.queue(d, req("k"))
	h.wantEvents(h.release(x, "k"), granted(wa, a, h.now), granted(wb, b, h.now))
	h.wantEvents(h.release(a, "k"), granted(wc, c, h.now))
	h.release(b, "k")
	h.wantEvents(h.release(c, "k"), granted(wd, d, h.now))
}

func TestMultiKeyAllOrNothing(t *testing.T) {
	h := newHarness(t)
	a, b, c := h.open(), h.open(), h.open()
	h.grant(a, req("y"))
	err := h.fail(b, req("x", "y", "z"), latch.ErrWouldBlock)
	var be *latch.BusyError
	if !errors.As(err, &be) || !slices.Equal(be.Keys, []string{"y"}) {
		t.Fatalf("busy keys = %v, want [y]", err)
	}
	if h.holders("x") != nil || h.holders("z") != nil {
		t.Fatal("a failed multi-key request took keys")
	}
	wb := h.queue(b, req("x", "y", "z"))
	// b holds nothing while it waits, yet c cannot barge past it on z.
	h.fail(c, req("z"), latch.ErrWouldBlock)
	if h.holders("x") != nil {
		t.Fatal("a waiting multi-key request holds a key")
	}
	h.wantEvents(h.release(a, "y"), granted(wb, b, h.now))
	h.wantHolders("x", b)
	h.wantHolders("y", b)
	h.wantHolders("z", b)
}

// Two multi-key requests over the same keys in opposite orders cannot
// deadlock: both join every queue at once and the queues agree.
func TestMultiKeyNoDeadlock(t *testing.T) {
	h := newHarness(t)
	a, b, c := h.open(), h.open(), h.open()
	h.grant(a, req("x"))
	h.grant(b, req("y"))
	wb := h.queue(b, withReuse(req("x", "y")))
	wc := h.queue(c, req("y", "x"))
	h.wantEvents(h.release(a, "x"), granted(wb, b, h.now))
	h.wantEvents(h.release(b, "x", "y"), granted(wc, c, h.now))
}

// A multi-key waiter that times out leaves every queue and wakes the
// waiters it was blocking.
func TestMultiKeyTimeoutWakesOthers(t *testing.T) {
	h := newHarness(t)
	a, b, c := h.open(), h.open(), h.open()
	h.grant(a, req("y"))
	wb := h.queue(b, withWait(req("x", "y"), 10))
	wc := h.queue(c, req("x")) // x is free, but b is ahead of c on x
	got := h.advance(10)
	h.wantEvents(got,
		ev{Kind: EventTimedOut, Waiter: wb, Session: b, At: h.now},
		granted(wc, c, h.now))
	if !slices.Equal(got[0].Keys, []string{"y"}) {
		t.Fatalf("timed-out keys = %v, want [y]", got[0].Keys)
	}
}

func TestCancel(t *testing.T) {
	h := newHarness(t)
	a, b, c := h.open(), h.open(), h.open()
	h.grant(a, req("y"))
	wb := h.queue(b, req("x", "y"))
	wc := h.queue(c, req("x"))
	evs, err := h.e.Cancel(h.now, wb)
	if err != nil {
		t.Fatal(err)
	}
	h.wantEvents(evs, granted(wc, c, h.now))
	if _, err := h.e.Cancel(h.now, wb); !errors.Is(err, ErrNoWaiter) {
		t.Fatalf("second cancel: %v, want ErrNoWaiter", err)
	}
	if _, err := h.e.Cancel(h.now, wc); !errors.Is(err, ErrNoWaiter) {
		t.Fatalf("cancel of a granted waiter: %v, want ErrNoWaiter", err)
	}
}

func TestWaitDeadline(t *testing.T) {
	tests := []struct {
		name      string
		releaseAt time.Duration // when the holder's lease ends
		deadline  time.Duration
		granted   bool
	}{
		{"freed before deadline", 5, 10, true},
		{"freed at deadline: expiry first", 10, 10, true},
		{"freed after deadline", 11, 10, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			a, b := h.open(), h.open()
			start := h.now
			h.grant(a, withLease(req("k"), tt.releaseAt))
			wb := h.queue(b, withWait(req("k"), tt.deadline))
			if d, ok := h.e.NextDeadline(); !ok || d != start+int64(min(tt.releaseAt, tt.deadline)) {
				t.Fatalf("NextDeadline = %d, %v", d, ok)
			}
			// Jump past both instants in one tick: they are processed in order.
			got := h.advance(20)
			var kinds []EventKind
			for _, e := range got {
				if e.Waiter == wb {
					kinds = append(kinds, e.Kind)
					want := start + int64(tt.deadline)
					if e.Kind == EventGranted {
						want = start + int64(tt.releaseAt)
					}
					if e.At != want {
						t.Fatalf("%v at %d, want %d", e.Kind, e.At, want)
					}
				}
			}
			want := EventTimedOut
			if tt.granted {
				want = EventGranted
			}
			if !slices.Equal(kinds, []EventKind{want}) {
				t.Fatalf("waiter events %v, want [%v]", kinds, want)
			}
		})
	}
}

func TestWaitForeverHasNoDeadline(t *testing.T) {
	h := newHarness(t)
	a, b := h.open(), h.open()
	h.grant(a, req("k"))
	h.queue(b, withWait(req("k"), latch.WaitForever))
	if _, ok := h.e.NextDeadline(); ok {
		t.Fatal("a forever waiter set a deadline")
	}
	if got := h.advance(time.Hour); len(got) != 0 {
		t.Fatalf("events %v", got)
	}
}

func TestLease(t *testing.T) {
	h := newHarness(t)
	a, b := h.open(), h.open()
	res, _, err := h.e.Acquire(h.now, a, withLease(req("k"), 100))
	if err != nil || res.Expires != h.now+100 {
		t.Fatalf("got %+v, %v", res, err)
	}
	wb := h.queue(b, req("k"))
	// The lease outlives its session.
	if _, err := h.e.EndSession(h.now, a); err != nil {
		t.Fatal(err)
	}
	h.wantHolders("k", 0)
	at := h.now + 100
	h.wantEvents(h.advance(150),
		ev{Kind: EventLeaseExpired, Session: 0, Key: "k", At: at},
		granted(wb, b, at))
}

func TestRenew(t *testing.T) {
	h := newHarness(t)
	a, b := h.open(), h.open()
	h.grant(a, withLease(req("k"), 100))
	h.advance(50)
	tok, exp, _, err := h.e.Renew(h.now, a, []string{"k"}, 100)
	if err != nil || exp != h.now+100 || tok != 101 {
		t.Fatalf("renew = %d, %d, %v", tok, exp, err)
	}
	if _, _, _, err := h.e.Renew(h.now, b, []string{"k"}, 100); !errors.Is(err, latch.ErrNotHeld) {
		t.Fatalf("renew by non-holder: %v", err)
	}
	if got := h.advance(99); len(got) != 0 {
		t.Fatalf("lease ended early: %v", got)
	}
	// Lease 0 turns it into a plain lock.
	if _, exp, _, err := h.e.Renew(h.now, a, []string{"k"}, 0); err != nil || exp != 0 {
		t.Fatalf("renew 0 = %d, %v", exp, err)
	}
	if got := h.advance(time.Hour); len(got) != 0 {
		t.Fatalf("plain lock expired: %v", got)
	}
	h.wantHolders("k", a)
}

func TestTokensOnlyGrow(t *testing.T) {
	h := newHarness(t)
	a, b := h.open(), h.open()
	var last latch.Token
	for i := range 10 {
		s := a
		if i%2 == 1 {
			s = b
		}
		tok := h.grant(s, req("k", fmt.Sprint(i)))
		if tok <= last {
			t.Fatalf("token %d after %d", tok, last)
		}
		last = tok
		h.release(s, "k", fmt.Sprint(i))
	}
	if got := h.e.Stats().Token; got != last {
		t.Fatalf("Stats().Token = %d, want %d", got, last)
	}
}

func TestRelock(t *testing.T) {
	t.Run("reject", func(t *testing.T) {
		h := newHarness(t)
		a := h.open()
		h.grant(a, req("k"))
		h.fail(a, req("k"), latch.ErrAlreadyHeld)
		h.fail(a, withWait(req("j", "k"), latch.WaitForever), latch.ErrAlreadyHeld)
	})
	t.Run("reuse returns the existing token and resets the lease", func(t *testing.T) {
		h := newHarness(t)
		a := h.open()
		t1 := h.grant(a, withLease(req("k"), 100))
		h.advance(60)
		res, _, err := h.e.Acquire(h.now, a, withReuse(withLease(req("k"), 100)))
		if err != nil || res.Token != t1 || res.Expires != h.now+100 {
			t.Fatalf("relock = %+v, %v; want token %d expiring %d", res, err, t1, h.now+100)
		}
		// Without a lease the relock turns the lease into a plain lock.
		h.grant(a, withReuse(req("k")))
		if got := h.advance(time.Hour); len(got) != 0 {
			t.Fatalf("events %v", got)
		}
	})
	t.Run("reuse with a new key stamps a new token on all", func(t *testing.T) {
		h := newHarness(t)
		a := h.open()
		t1 := h.grant(a, req("k"))
		t2 := h.grant(a, withReuse(req("k", "j")))
		if t2 <= t1 {
			t.Fatalf("token %d after %d", t2, t1)
		}
		st, _ := h.e.Key("k")
		if st.Holders[0].Token != t2 {
			t.Fatalf("held key token %d, want %d", st.Holders[0].Token, t2)
		}
	})
	t.Run("reuse does not queue behind waiters for its own key", func(t *testing.T) {
		h := newHarness(t)
		a, b := h.open(), h.open()
		h.grant(a, req("k"))
		h.queue(b, req("k"))
		h.grant(a, withReuse(req("k")))
	})
	t.Run("reuse in another mode", func(t *testing.T) {
		h := newHarness(t)
		a := h.open()
		h.grant(a, shared(0, "k"))
		h.fail(a, withReuse(req("k")), latch.ErrModeMismatch)
		h.fail(a, withReuse(shared(2, "k")), latch.ErrLimitMismatch)
	})
	t.Run("duplicate keys count once", func(t *testing.T) {
		h := newHarness(t)
		a := h.open()
		h.grant(a, req("k", "k", "j", "k"))
		if st := h.e.Stats(); st.Holds != 2 {
			t.Fatalf("holds = %d, want 2", st.Holds)
		}
		h.release(a, "k", "j", "k")
		if st := h.e.Stats(); st.Holds != 0 || st.Keys != 0 {
			t.Fatalf("after release: %+v", st)
		}
	})
}

func TestRelease(t *testing.T) {
	h := newHarness(t)
	a, b := h.open(), h.open()
	h.grant(a, req("x", "y"))
	if _, err := h.e.Release(h.now, b, []string{"x"}); !errors.Is(err, latch.ErrNotHeld) {
		t.Fatalf("release by other: %v", err)
	}
	if _, err := h.e.Release(h.now, a, []string{"x", "nope"}); !errors.Is(err, latch.ErrNotHeld) {
		t.Fatalf("release of an unheld key: %v", err)
	}
	h.wantHolders("x", a) // all or nothing
	if _, err := h.e.Release(h.now, a, nil); !errors.Is(err, latch.ErrNoKeys) {
		t.Fatalf("release of nothing: %v", err)
	}
	n, _, err := h.e.ReleaseAll(h.now, a)
	if err != nil || n != 2 {
		t.Fatalf("release all = %d, %v", n, err)
	}
	if n, _, _ := h.e.ReleaseAll(h.now, a); n != 0 {
		t.Fatalf("second release all = %d", n)
	}
}

func TestEndSession(t *testing.T) {
	h := newHarness(t)
	a, b, c := h.open(), h.open(), h.open()
	h.grant(a, req("x"))
	h.grant(a, withLease(req("l"), 1000))
	h.grant(c, req("busy"))
	wa := h.queue(a, req("busy"))
	wb := h.queue(b, req("x"))
	h.now += 7
	evs, err := h.e.EndSession(h.now, a)
	if err != nil {
		t.Fatal(err)
	}
	h.wantEvents(evs,
		ev{Kind: EventAborted, Waiter: wa, Session: a, At: h.now},
		granted(wb, b, h.now))
	h.wantHolders("l", 0) // leased lock survives, owned by nobody
	if _, err := h.e.EndSession(h.now, a); !errors.Is(err, latch.ErrNoSession) {
		t.Fatalf("second end: %v", err)
	}
	h.fail(a, req("z"), latch.ErrNoSession)
}

func TestSessionTTL(t *testing.T) {
	h := newHarness(t)
	a := h.open(SessionOptions{TTL: 100})
	b := h.open()
	h.grant(a, req("k"))
	wb := h.queue(b, req("k"))
	h.advance(90)
	if _, err := h.e.KeepAlive(h.now, a); err != nil {
		t.Fatal(err)
	}
	if got := h.advance(99); len(got) != 0 {
		t.Fatalf("session expired despite keepalive: %v", got)
	}
	at := h.now + 1
	h.wantEvents(h.advance(5),
		ev{Kind: EventSessionExpired, Session: a, At: at},
		granted(wb, b, at))
	if _, err := h.e.KeepAlive(h.now, a); !errors.Is(err, latch.ErrNoSession) {
		t.Fatalf("keepalive after expiry: %v", err)
	}
}

func TestLockDelay(t *testing.T) {
	h := newHarness(t)
	a := h.open(SessionOptions{LockDelay: 50})
	b, c := h.open(), h.open()
	h.grant(a, req("k"))
	h.grant(a, req("r"))
	wb := h.queue(b, req("k"))
	h.release(a, "r") // a normal release never delays
	h.grant(c, req("r"))
	start := h.now
	if evs, _ := h.e.EndSession(h.now, a); len(evs) != 0 {
		t.Fatalf("granted during lock-delay: %v", evs)
	}
	st, _ := h.e.Key("k")
	if st.DelayedUntil != start+50 {
		t.Fatalf("DelayedUntil = %d, want %d", st.DelayedUntil, start+50)
	}
	h.fail(c, req("k"), latch.ErrWouldBlock)
	h.wantEvents(h.advance(60), granted(wb, b, start+50))
}

func TestForceRelease(t *testing.T) {
	h := newHarness(t)
	a, b, c := h.open(SessionOptions{LockDelay: time.Hour}), h.open(), h.open()
	h.grant(a, withLease(shared(0, "k"), 1000))
	h.grant(b, shared(0, "k"))
	wc := h.queue(c, req("k"))
	n, evs := h.e.ForceRelease(h.now, "k")
	if n != 2 {
		t.Fatalf("force release removed %d", n)
	}
	h.wantEvents(evs, granted(wc, c, h.now))
	if n, _ := h.e.ForceRelease(h.now, "nope"); n != 0 {
		t.Fatalf("force release of nothing = %d", n)
	}
	// It also lifts a lock-delay.
	h.release(c, "k")
	h.grant(a, req("d"))
	h.e.EndSession(h.now, a)
	h.fail(b, req("d"), latch.ErrWouldBlock)
	h.e.ForceRelease(h.now, "d")
	h.grant(b, req("d"))
}

func TestTimeNeverRunsBackwards(t *testing.T) {
	h := newHarness(t)
	a := h.open()
	h.grant(a, withLease(req("k"), 10))
	h.advance(20)
	h.now -= 1000
	res, _, err := h.e.Acquire(h.now, a, withLease(req("k"), 10))
	if err != nil || res.Expires != h.e.Now()+10 {
		t.Fatalf("got %+v, %v; want lease from the latest instant %d", res, err, h.e.Now())
	}
}

func TestIntrospection(t *testing.T) {
	h := newHarness(t)
	a, b := h.open(SessionOptions{TTL: 500}), h.open()
	h.grant(a, req("app/1"))
	h.grant(a, req("app/2"))
	h.grant(b, req("other"))
	w := h.queue(b, withWait(req("app/1", "app/3"), 30))
	got := h.e.Keys("app/", "", 0)
	var names []string
	for _, k := range got {
		names = append(names, k.Key)
	}
	if !slices.Equal(names, []string{"app/1", "app/2", "app/3"}) {
		t.Fatalf("keys = %v", names)
	}
	if page := h.e.Keys("app/", "app/1", 1); len(page) != 1 || page[0].Key != "app/2" {
		t.Fatalf("page = %+v", page)
	}
	k1 := got[0]
	if len(k1.Waiters) != 1 || k1.Waiters[0].ID != w || k1.Waiters[0].Deadline != h.now+30 ||
		!slices.Equal(k1.Waiters[0].Keys, []string{"app/1", "app/3"}) {
		t.Fatalf("waiters = %+v", k1.Waiters)
	}
	ss := h.e.Sessions()
	if len(ss) != 2 || ss[0].ID != a || ss[0].Held != 2 || ss[0].Expires != h.now+500 || ss[1].Waiting != 1 {
		t.Fatalf("sessions = %+v", ss)
	}
	if held := h.e.Held(a); !slices.Equal(held, []string{"app/1", "app/2"}) {
		t.Fatalf("held = %v", held)
	}
	if st := h.e.Stats(); st.Keys != 4 || st.Holds != 3 || st.Waiters != 1 || st.Sessions != 2 {
		t.Fatalf("stats = %+v", st)
	}
}
