package engine

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/latchd/latch"
)

// TestOwned: owned holds against each other, against sessions, and in time.
func TestOwned(t *testing.T) {
	type step struct {
		name string
		do   func(h *harness) error
	}
	acquire := func(owner string, lease time.Duration, keys ...string) func(h *harness) error {
		return func(h *harness) error {
			_, _, err := h.e.AcquireOwned(h.now, keys, []byte(owner), lease)
			return err
		}
	}
	tests := []struct {
		name  string
		steps []step
		check func(h *harness)
	}{
		{
			name: "second owner is busy, same owner too",
			steps: []step{
				{"a", acquire("a", time.Second, "k")},
				{"b busy", func(h *harness) error {
					_, _, err := h.e.AcquireOwned(h.now, []string{"k"}, []byte("b"), time.Second)
					return wantErr(err, latch.ErrWouldBlock)
				}},
				{"a again busy", func(h *harness) error {
					_, _, err := h.e.AcquireOwned(h.now, []string{"k"}, []byte("a"), time.Second)
					return wantErr(err, latch.ErrWouldBlock)
				}},
			},
			check: func(h *harness) {
				if st := h.e.Owned(h.now, "k"); !st.Owned || st.Owner != "a" || st.Expires != h.now+int64(time.Second) {
					h.t.Errorf("Owned = %+v", st)
				}
			},
		},
		{
			name: "lease ends exactly at its instant for readers",
			steps: []step{
				{"a", acquire("a", time.Second, "k")},
			},
			check: func(h *harness) {
				if st := h.e.Owned(h.now+int64(time.Second)-1, "k"); !st.Held {
					h.t.Errorf("held a nanosecond before the end: %+v", st)
				}
				if st := h.e.Owned(h.now+int64(time.Second), "k"); st.Held {
					h.t.Errorf("held at the end: %+v", st)
				}
				h.advance(time.Second)
				if h.e.Stats().Keys != 0 {
					h.t.Errorf("the key stays after its lease: %+v", h.e.Stats())
				}
			},
		},
		{
			name: "multi-key is all or nothing",
			steps: []step{
				{"a on y", acquire("a", 0, "y")},
				{"b on x y busy", func(h *harness) error {
					_, _, err := h.e.AcquireOwned(h.now, []string{"x", "y"}, []byte("b"), 0)
					var busy *latch.BusyError
					if !errors.As(err, &busy) || !errors.Is(err, latch.ErrWouldBlock) {
						return fmt.Errorf("got %v, want a busy error", err)
					}
					return nil
				}},
			},
			check: func(h *harness) {
				if st := h.e.Owned(h.now, "x"); st.Held {
					h.t.Errorf("x taken by a failed multi-key request: %+v", st)
				}
			},
		},
		{
			name: "a session's hold excludes owners, and an owned release grants its waiter",
			steps: []step{
				{"owned", acquire("o", 0, "k")},
				{"session queues", func(h *harness) error {
					s := h.open()
					h.queue(s, withWait(req("k"), latch.WaitForever))
					return nil
				}},
				{"release", func(h *harness) error {
					evs, err := h.e.ReleaseOwned(h.now, "k")
					if len(evs) != 1 || evs[0].Kind != EventGranted {
						return errors.New("release did not grant the waiter")
					}
					return err
				}},
				{"owner busy", func(h *harness) error {
					_, _, err := h.e.AcquireOwned(h.now, []string{"k"}, []byte("o"), 0)
					return wantErr(err, latch.ErrWouldBlock)
				}},
				{"owned release refused", func(h *harness) error {
					_, err := h.e.ReleaseOwned(h.now, "k")
					return wantErr(err, latch.ErrNotHeld)
				}},
				{"owned renew refused", func(h *harness) error {
					_, _, _, err := h.e.RenewOwned(h.now, "k", time.Second)
					return wantErr(err, latch.ErrNotHeld)
				}},
			},
			check: func(h *harness) {
				if st := h.e.Owned(h.now, "k"); !st.Held || st.Owned {
					h.t.Errorf("Owned = %+v, want a session's hold", st)
				}
			},
		},
		{
			name: "renew, then takeover gives a new token and no lease",
			steps: []step{
				{"a", acquire("a", time.Second, "k")},
				{"renew", func(h *harness) error {
					_, exp, _, err := h.e.RenewOwned(h.now, "k", time.Minute)
					if exp != h.now+int64(time.Minute) {
						return errors.New("renew did not move the lease")
					}
					return err
				}},
				{"takeover", func(h *harness) error {
					before := h.e.Owned(h.now, "k").Token
					old, tok, _, err := h.e.ReplaceOwner(h.now, "k", "b", true)
					if old != "a" || tok <= before {
						return errors.New("takeover: wrong old value or token")
					}
					return err
				}},
			},
			check: func(h *harness) {
				st := h.e.Owned(h.now, "k")
				if st.Owner != "b" || st.Expires != 0 {
					h.t.Errorf("after takeover: %+v", st)
				}
				h.advance(time.Hour)
				if !h.e.Owned(h.now, "k").Held {
					h.t.Errorf("a hold without lease ended")
				}
			},
		},
		{
			name: "owned holds survive every session's end and go with force-release",
			steps: []step{
				{"a", acquire("a", 0, "k")},
				{"end sessions", func(h *harness) error {
					s := h.open()
					_, err := h.e.EndSession(h.now, s)
					return err
				}},
			},
			check: func(h *harness) {
				if n, _ := h.e.ForceRelease(h.now, "k"); n != 1 {
					h.t.Errorf("ForceRelease removed %d", n)
				}
				if st := h.e.Stats(); st.Keys != 0 || st.Holds != 0 {
					h.t.Errorf("after force-release: %+v", st)
				}
			},
		},
		{
			name: "invalid key",
			steps: []step{
				{"bad", func(h *harness) error {
					_, _, err := h.e.AcquireOwned(h.now, []string{"a b"}, []byte("o"), 0)
					return wantErr(err, latch.ErrInvalidKey)
				}},
			},
			check: func(h *harness) {},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			for _, s := range tt.steps {
				if err := s.do(h); err != nil {
					t.Fatalf("%s: %v", s.name, err)
				}
			}
			tt.check(h)
			// Every state is one a snapshot carries exactly.
			snap := h.e.AppendSnapshot(nil)
			r, err := Restore(Config{MaxKeys: 8}, snap)
			if err != nil {
				t.Fatalf("restore: %v", err)
			}
			if err := sameEngines(h.e, r); err != nil {
				t.Fatal(err)
			}
			if got := r.AppendSnapshot(nil); string(got) != string(snap) {
				t.Fatalf("snapshot re-encodes differently")
			}
		})
	}
}

// wantErr returns nil if err wraps want, an error saying what it is
// otherwise.
func wantErr(err, want error) error {
	if errors.Is(err, want) {
		return nil
	}
	return errors.New("got error " + errString(err) + ", want " + want.Error())
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}

// TestOwnedSnapshotSeed: a snapshot with owned holds restores, owners
// included (a seed for FuzzRestore).
func TestOwnedSnapshotSeed(t *testing.T) {
	snap := ownedSnapshot()
	e, err := Restore(Config{}, snap)
	if err != nil {
		t.Fatal(err)
	}
	if st := e.Owned(0, "k1"); st.Owner != "v1" || st.Expires == 0 {
		t.Errorf("k1: %+v", st)
	}
	if st := e.Owned(0, "k2"); st.Owner != "" || !st.Owned || st.Expires != 0 {
		t.Errorf("k2: %+v", st)
	}
}

func ownedSnapshot() []byte {
	e := New(Config{})
	_, _, _ = e.AcquireOwned(10, []string{"k1"}, []byte("v1"), time.Second)
	_, _, _ = e.AcquireOwned(10, []string{"k2"}, []byte(""), 0)
	return e.AppendSnapshot(nil)
}

// TestAcquireOwnedBusyAndCopy: a busy owned acquire, the Redis clients'
// common case while they poll, allocates nothing; a granted one keeps a
// copy of the owner value, not the caller's bytes.
func TestAcquireOwnedBusyAndCopy(t *testing.T) {
	h := newHarness(t)
	owner := []byte("tok-a")
	if _, _, err := h.e.AcquireOwned(h.now, []string{"k"}, owner, time.Hour); err != nil {
		t.Fatal(err)
	}
	copy(owner, "XXXXX")
	if st := h.e.Owned(h.now, "k"); st.Owner != "tok-a" {
		t.Errorf("owner %q after the caller's bytes changed, want tok-a", st.Owner)
	}
	keys, other := []string{"k"}, []byte("tok-b")
	allocs := testing.AllocsPerRun(100, func() {
		if _, _, err := h.e.AcquireOwned(h.now, keys, other, time.Hour); !errors.Is(err, latch.ErrWouldBlock) {
			t.Fatalf("acquire of a held key: %v", err)
		}
	})
	if allocs != 0 {
		t.Errorf("a busy owned acquire allocates %v times, want 0", allocs)
	}
}
