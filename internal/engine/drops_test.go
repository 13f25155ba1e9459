package engine

import (
	gocmp "cmp"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestDrops: every call that removes holds reports each of them once, with
// its session, grant instant, end instant and cause; the next call starts
// a new list.
func TestDrops(t *testing.T) {
	const sec = int64(time.Second)
	tests := []struct {
		name string
		// run acts on a fresh harness (now = 1000) and returns the drops
		// of its last call.
		run  func(h *harness) []Drop
		want []Drop
	}{
		{
			name: "release",
			run: func(h *harness) []Drop {
				s := h.open()
				h.grant(s, req("a", "b"))
				h.now += sec
				h.release(s, "b", "a")
				return h.e.Drops()
			},
			want: []Drop{
				{Session: 1, Acquired: 1000, At: 1000 + sec, Cause: DropReleased},
				{Session: 1, Acquired: 1000, At: 1000 + sec, Cause: DropReleased},
			},
		},
		{
			name: "release all",
			run: func(h *harness) []Drop {
				s := h.open()
				h.grant(s, req("a"))
				h.now += sec
				if _, _, err := h.e.ReleaseAll(h.now, s); err != nil {
					h.t.Fatal(err)
				}
				return h.e.Drops()
			},
			want: []Drop{{Session: 1, Acquired: 1000, At: 1000 + sec, Cause: DropReleased}},
		},
		{
			name: "failed release drops nothing",
			run: func(h *harness) []Drop {
				s := h.open()
				h.grant(s, req("a"))
				h.e.Release(h.now, s, []string{"a", "zz"})
				return h.e.Drops()
			},
		},
		{
			name: "session end keeps leases",
			run: func(h *harness) []Drop {
				s := h.open()
				h.grant(s, req("a"))
				h.grant(s, withLease(req("b"), time.Hour))
				h.now += sec
				if _, err := h.e.EndSession(h.now, s); err != nil {
					h.t.Fatal(err)
				}
				return h.e.Drops()
			},
			want: []Drop{{Session: 1, Acquired: 1000, At: 1000 + sec, Cause: DropSessionEnded}},
		},
		{
			name: "session TTL lapses inside another call",
			run: func(h *harness) []Drop {
				s := h.open(SessionOptions{TTL: time.Second})
				h.grant(s, req("a"))
				other := h.open()
				h.now += 2 * sec
				h.grant(other, req("c"))
				return h.e.Drops()
			},
			want: []Drop{{Session: 1, Acquired: 1000, At: 1000 + sec, Cause: DropSessionEnded}},
		},
		{
			name: "lease of an ended session expires",
			run: func(h *harness) []Drop {
				s := h.open()
				h.grant(s, withLease(req("a"), time.Second))
				h.e.EndSession(h.now, s)
				h.advance(5 * time.Second)
				return h.e.Drops()
			},
			want: []Drop{{Session: 0, Acquired: 1000, At: 1000 + sec, Cause: DropLeaseExpired}},
		},
		{
			name: "force release",
			run: func(h *harness) []Drop {
				s1, s2 := h.open(), h.open()
				h.grant(s1, shared(0, "a"))
				h.now += sec
				h.grant(s2, shared(0, "a"))
				h.e.ForceRelease(h.now, "a")
				return h.e.Drops()
			},
			want: []Drop{
				{Session: 2, Acquired: 1000 + sec, At: 1000 + sec, Cause: DropForced},
				{Session: 1, Acquired: 1000, At: 1000 + sec, Cause: DropForced},
			},
		},
		{
			name: "owned holds are marked",
			run: func(h *harness) []Drop {
				if _, _, err := h.e.AcquireOwned(h.now, []string{"a"}, []byte("tok"), 0); err != nil {
					h.t.Fatal(err)
				}
				if _, _, err := h.e.AcquireOwned(h.now, []string{"b"}, []byte("tok"), time.Second); err != nil {
					h.t.Fatal(err)
				}
				h.now += 2 * sec
				if _, err := h.e.ReleaseOwned(h.now, "a"); err != nil {
					h.t.Fatal(err)
				}
				return h.e.Drops()
			},
			want: []Drop{
				{Acquired: 1000, At: 1000 + sec, Cause: DropLeaseExpired, Owned: true},
				{Acquired: 1000, At: 1000 + 2*sec, Cause: DropReleased, Owned: true},
			},
		},
		{
			name: "a call that drops nothing clears the list",
			run: func(h *harness) []Drop {
				s := h.open()
				h.grant(s, req("a"))
				h.release(s, "a")
				h.grant(s, req("a"))
				return h.e.Drops()
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.e.cfg.RecordDrops = true
			got := slices.Clone(tt.run(h))
			// Holders of one key are unordered: compare as sets.
			slices.SortStableFunc(got, compareDrops)
			want := slices.Clone(tt.want)
			slices.SortStableFunc(want, compareDrops)
			if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Drops() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func compareDrops(a, b Drop) int {
	return gocmp.Or(gocmp.Compare(a.Session, b.Session), gocmp.Compare(a.Acquired, b.Acquired))
}

// TestDropsOff: without RecordDrops nothing is recorded.
func TestDropsOff(t *testing.T) {
	h := newHarness(t)
	s := h.open()
	h.grant(s, req("a"))
	h.release(s, "a")
	if d := h.e.Drops(); len(d) != 0 {
		t.Errorf("Drops() = %+v without RecordDrops", d)
	}
}

// TestDropsAllocationFree: recording drops allocates nothing once warm.
func TestDropsAllocationFree(t *testing.T) {
	h := newHarness(t)
	h.e.cfg.RecordDrops = true
	s := h.open()
	r := req("a", "b")
	keys := []string{"a", "b"}
	allocs := testing.AllocsPerRun(100, func() {
		h.e.Acquire(h.now, s, r)
		h.e.Release(h.now, s, keys)
	})
	if allocs != 0 {
		t.Errorf("Acquire+Release allocates %v times, want 0", allocs)
	}
}
