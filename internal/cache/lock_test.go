package cache

import (
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/latchd/latch"
)

// sameString reports whether a and b share their bytes: whether b is a
// (another reference to the same string), not just equal to it. The tests
// use keys of more than one byte: the runtime has one string for each
// one-byte value, so it could not tell copies of those apart.
func sameString(a, b string) bool {
	return len(a) == len(b) && unsafe.StringData(a) == unsafe.StringData(b)
}

// TestLockName checks Lock's validation order and the name it returns: the
// item's own string whenever key had an item, live or dead, "" otherwise.
func TestLockName(t *testing.T) {
	tests := []struct {
		name    string
		setup   []op // at t0
		at      time.Duration
		owner   latch.SessionID
		key     string
		mode    LockMode
		exptime int64

		want      res // Name: the key when named
		own       bool
		wantOwner latch.SessionID // the item's lock owner afterwards
	}{
		{name: "live item: locked",
			setup: []op{set(0, "item", "v", 3, 0)}, owner: A, key: "item",
			want: res{Val: "v", Flags: 3, CAS: 1, Name: "item"}, own: true, wantOwner: A},
		{name: "no item: not found, no name",
			owner: A, key: "item",
			want: res{Err: ErrNotFound}},
		{name: "expired item: not found, named",
			setup: []op{set(0, "item", "v", 0, 1)}, at: sec, owner: A, key: "item",
			want: res{Err: ErrNotFound, Name: "item"}, own: true},
		{name: "flushed item: not found, named",
			setup: []op{set(0, "item", "v", 0, 0), flush(1)}, at: sec, owner: A, key: "item",
			want: res{Err: ErrNotFound, Name: "item"}, own: true},
		{name: "locked by another: locked, named",
			setup: []op{set(0, "item", "v", 0, 0), lock(B, "item")}, owner: A, key: "item",
			want: res{Err: ErrLocked, Name: "item"}, own: true, wantOwner: B},
		{name: "locked by the owner itself: not re-entrant",
			setup: []op{set(0, "item", "v", 0, 0), lock(A, "item")}, owner: A, key: "item",
			want: res{Err: ErrLocked, Name: "item"}, own: true, wantOwner: A},
		{name: "invalid key",
			owner: A, key: "a b",
			want: res{Err: ErrInvalidKey}},
		{name: "invalid key before owner 0",
			owner: 0, key: "a b",
			want: res{Err: ErrInvalidKey}},
		{name: "owner 0: no name",
			setup: []op{set(0, "item", "v", 0, 0)}, owner: 0, key: "item",
			want: res{Err: latch.ErrNoSession}},
		{name: "owner 0 before not found",
			owner: 0, key: "item",
			want: res{Err: latch.ErrNoSession}},
		{name: "owner 0 before locked",
			setup: []op{set(0, "item", "v", 0, 0), lock(B, "item")}, owner: 0, key: "item",
			want: res{Err: latch.ErrNoSession}, wantOwner: B},
		{name: "LockGet",
			setup: []op{set(0, "item", "v", 3, 0)}, owner: A, key: "item", mode: LockGet,
			want: res{Val: "v", Flags: 3, CAS: 1, Name: "item"}, own: true, wantOwner: A},
		{name: "LockTouch",
			setup: []op{set(0, "item", "v", 3, 0)}, owner: A, key: "item", mode: LockTouch, exptime: 10,
			want: res{Val: "v", Flags: 3, CAS: 1, Name: "item"}, own: true, wantOwner: A},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCache(t, testConfig())
			for _, o := range tt.setup {
				o(c, t0)
			}
			var own string // the item's copy of the key, if any
			if e := c.items[tt.key]; e != nil {
				own = e.key
			}
			it, name, err := c.Lock(t0+int64(tt.at), tt.owner, []byte(tt.key), tt.mode, tt.exptime)
			got := itemRes(it, err)
			got.Name = name
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateErrors(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("result mismatch (-want +got):\n%s", diff)
			}
			if tt.own && !sameString(name, own) {
				t.Errorf("Lock named the key with a new string, not the item's own")
			}
			var owner latch.SessionID
			e := c.items[tt.key]
			if e != nil {
				owner = e.owner
			}
			if owner != tt.wantOwner {
				t.Errorf("item locked by %d, want %d", owner, tt.wantOwner)
			}
			if tt.mode == LockTouch && tt.want.Err == nil && e.exp != t0+10*int64(sec) {
				t.Errorf("exptime not set: exp %d", e.exp)
			}
			if fetched := e != nil && e.fetched; tt.want.Err == nil && fetched != (tt.mode != LockOnly) {
				t.Errorf("fetched = %v after mode %d", fetched, tt.mode)
			}
			checkInvariants(t, c)
		})
	}
}

// TestName checks Name: the item's own string, liveness and lock owner, and
// that it changes nothing.
func TestName(t *testing.T) {
	type want struct {
		name     string
		live     bool
		lockedBy latch.SessionID
	}
	tests := []struct {
		name  string
		setup []op // at t0
		at    time.Duration
		key   string
		want  want
	}{
		{name: "missing", key: "item"},
		{name: "invalid key", key: "a b"},
		{name: "live", setup: []op{set(0, "item", "v", 0, 0)}, key: "item",
			want: want{"item", true, 0}},
		{name: "locked", setup: []op{set(0, "item", "v", 0, 1), lock(A, "item")}, at: 5 * sec, key: "item",
			want: want{"item", true, A}},
		{name: "expired, not removed", setup: []op{set(0, "item", "v", 0, 1)}, at: sec, key: "item",
			want: want{"item", false, 0}},
		{name: "a pending flush whose instant came", setup: []op{set(0, "item", "v", 0, 0), flush(1)}, at: sec, key: "item",
			want: want{"item", false, 0}},
		{name: "a pending flush still ahead", setup: []op{set(0, "item", "v", 0, 0), flush(2)}, at: sec, key: "item",
			want: want{"item", true, 0}},
		{name: "a time before the last write's counts as it",
			setup: []op{set(0, "item", "v", 0, 1), set(0, "other", "v", 0, 0)}, at: -sec, key: "item",
			want: want{"item", true, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCache(t, testConfig())
			for _, o := range tt.setup {
				o(c, t0)
			}
			before := c.AppendSnapshot(nil)
			name, live, lockedBy := c.Name(t0+int64(tt.at), []byte(tt.key))
			if got := (want{name, live, lockedBy}); got != tt.want {
				t.Errorf("Name = %+v, want %+v", got, tt.want)
			}
			if e := c.items[tt.key]; e != nil && !sameString(name, e.key) {
				t.Errorf("Name returned a new string, not the item's own")
			}
			if after := c.AppendSnapshot(nil); string(after) != string(before) {
				t.Errorf("Name changed the state")
			}
			checkInvariants(t, c)
		})
	}
}

// TestReleaseNames checks Unlock, Delete and ReplaceAndUnlock: their
// results, and the key as the item's own string exactly when the caller
// must release it in its lock table.
func TestReleaseNames(t *testing.T) {
	unlockKey := func(o latch.SessionID) func(c *Cache, now int64) (string, res) {
		return func(c *Cache, now int64) (string, res) {
			name, err := c.Unlock(now, o, []byte("item"))
			return name, res{Err: err}
		}
	}
	deleteKey := func(o latch.SessionID, cas uint64) func(c *Cache, now int64) (string, res) {
		return func(c *Cache, now int64) (string, res) {
			name, err := c.Delete(now, o, []byte("item"), cas)
			return name, res{Err: err}
		}
	}
	rauKey := func(o latch.SessionID, val string, cas uint64) func(c *Cache, now int64) (string, res) {
		return func(c *Cache, now int64) (string, res) {
			newCAS, name, err := c.ReplaceAndUnlock(now, o, []byte("item"), []byte(val), 0, 0, cas)
			return name, res{CAS: newCAS, Err: err}
		}
	}
	locked := []op{set(0, "item", "v", 0, 0), lock(A, "item")}
	tests := []struct {
		name  string
		setup []op // at t0
		at    time.Duration
		do    func(c *Cache, now int64) (string, res)
		want  res
		named bool // the key is returned
		after res  // get("item") afterwards
	}{
		{name: "unlock: held", setup: locked, do: unlockKey(A),
			named: true, after: res{Val: "v", CAS: 1}},
		{name: "unlock: expired while locked, gone once unlocked",
			setup: []op{set(0, "item", "v", 0, 1), lock(A, "item")}, at: 2 * sec, do: unlockKey(A),
			named: true, after: res{Err: ErrNotFound}},
		{name: "unlock: not locked", setup: []op{set(0, "item", "v", 0, 0)}, do: unlockKey(A),
			want: res{Err: ErrNotLocked}, after: res{Val: "v", CAS: 1}},
		{name: "unlock: locked by another", setup: locked, do: unlockKey(B),
			want: res{Err: ErrNotLocked}, after: res{Val: "v", CAS: 1}},
		{name: "unlock: missing", do: unlockKey(A),
			want: res{Err: ErrNotFound}, after: res{Err: ErrNotFound}},
		{name: "delete: by the holder", setup: locked, do: deleteKey(A, 0),
			named: true, after: res{Err: ErrNotFound}},
		{name: "delete: unlocked item, no lock to release", setup: []op{set(0, "item", "v", 0, 0)}, do: deleteKey(A, 0),
			after: res{Err: ErrNotFound}},
		{name: "delete: locked by another", setup: locked, do: deleteKey(B, 0),
			want: res{Err: ErrLocked}, after: res{Val: "v", CAS: 1}},
		{name: "delete: the holder's cas mismatch keeps the lock", setup: locked, do: deleteKey(A, 9),
			want: res{Err: ErrExists}, after: res{Val: "v", CAS: 1}},
		{name: "delete: missing", do: deleteKey(A, 0),
			want: res{Err: ErrNotFound}, after: res{Err: ErrNotFound}},
		{name: "rau: held", setup: locked, do: rauKey(A, "w", 0),
			want: res{CAS: 2}, named: true, after: res{Val: "w", CAS: 2}},
		{name: "rau: not held", setup: locked, do: rauKey(B, "w", 0),
			want: res{Err: ErrNotLocked}, after: res{Val: "v", CAS: 1}},
		{name: "rau: cas mismatch keeps the lock", setup: locked, do: rauKey(A, "w", 9),
			want: res{Err: ErrExists}, after: res{Val: "v", CAS: 1}},
		{name: "rau: too large keeps the lock", setup: locked, do: rauKey(A, key(2000), 0),
			want: res{Err: ErrTooLarge}, after: res{Val: "v", CAS: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCache(t, testConfig())
			for _, o := range tt.setup {
				o(c, t0)
			}
			var own string
			if e := c.items["item"]; e != nil {
				own = e.key
			}
			now := t0 + int64(tt.at)
			name, got := tt.do(c, now)
			if e := c.items["item"]; e != nil {
				own = e.key // a new value (rau) is stored with a new copy of the key
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateErrors()); diff != "" {
				t.Errorf("result mismatch (-want +got):\n%s", diff)
			}
			switch {
			case !tt.named && name != "":
				t.Errorf("returned %q, want \"\"", name)
			case tt.named && !sameString(name, own):
				t.Errorf("returned %q, want the item's own %q", name, own)
			}
			if diff := cmp.Diff(tt.after, get("item")(c, now), cmpopts.EquateErrors()); diff != "" {
				t.Errorf("get afterwards (-want +got):\n%s", diff)
			}
			checkInvariants(t, c)
		})
	}
}

// TestLockAllocs checks that a caller with a lock table allocates nothing
// on an existing item: Name, a lock and an unlock, naming the key in the
// table with the returned strings; and a lock and the holder's delete,
// which allocates no more than a plain delete.
func TestLockAllocs(t *testing.T) {
	// Longer than 32 bytes: string(k) would allocate.
	k := []byte("a-key-longer-than-thirty-two-bytes-so-that-naming-it-allocates")
	table := map[string]latch.SessionID{}
	c := newCache(t, testConfig())
	if _, err := c.Set(t0, 0, k, nil, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		name, live, holder := c.Name(t0, k)
		if !live || holder != 0 {
			t.Fatal("Name: not live or locked")
		}
		table[name] = A
		if _, _, err := c.Lock(t0, A, k, LockGet, 0); err != nil {
			t.Fatal(err)
		}
		name, err := c.Unlock(t0, A, k)
		if err != nil {
			t.Fatal(err)
		}
		delete(table, name)
	})
	if allocs != 0 {
		t.Errorf("Name+Lock+Unlock: %v allocations, want 0", allocs)
	}

	setDelete := testing.AllocsPerRun(100, func() {
		if _, err := c.Set(t0, 0, k, nil, 0, 0, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Delete(t0, 0, k, 0); err != nil {
			t.Fatal(err)
		}
	})
	allocs = testing.AllocsPerRun(100, func() {
		if _, err := c.Set(t0, 0, k, nil, 0, 0, 0); err != nil {
			t.Fatal(err)
		}
		_, name, err := c.Lock(t0, A, k, LockOnly, 0)
		if err != nil {
			t.Fatal(err)
		}
		table[name] = A
		name, err = c.Delete(t0, A, k, 0)
		if err != nil {
			t.Fatal(err)
		}
		delete(table, name)
	})
	if allocs != setDelete {
		t.Errorf("Set+Lock+Delete: %v allocations, want %v (Set+Delete's)", allocs, setDelete)
	}
}

// TestOwnerListKept checks that an owner keeps its empty list of locked
// items between locks, until UnlockAll, and that the empty list is not
// state: the snapshot is that of a cache restored from it.
func TestOwnerListKept(t *testing.T) {
	c := newCache(t, testConfig())
	const A = latch.SessionID(7)
	for _, k := range []string{"one", "two"} {
		if _, err := c.Set(t0, 0, []byte(k), []byte("v"), 0, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := c.Lock(t0, A, []byte("one"), LockOnly, 0); err != nil {
		t.Fatal(err)
	}
	l := c.owners[A]
	if _, err := c.Unlock(t0, A, []byte("one")); err != nil {
		t.Fatal(err)
	}
	if c.owners[A] != l || l.first != nil {
		t.Fatalf("after the last unlock: owner's list %p (first %v), want the same list, empty", c.owners[A], c.owners[A])
	}
	checkInvariants(t, c)
	snap := c.AppendSnapshot(nil)
	r, err := Restore(testConfig(), snap)
	if err != nil {
		t.Fatal(err)
	}
	if again := r.AppendSnapshot(nil); string(again) != string(snap) {
		t.Errorf("the empty list is in the snapshot: %x, restored %x", snap, again)
	}
	if n := c.Locks(A); n != 0 {
		t.Errorf("Locks = %d, want 0", n)
	}
	if _, _, err := c.Lock(t0, A, []byte("two"), LockOnly, 0); err != nil {
		t.Fatal(err)
	}
	if c.owners[A] != l || c.Locks(A) != 1 {
		t.Errorf("a new lock made another list, or Locks = %d", c.Locks(A))
	}
	if n := c.UnlockAll(t0, A); n != 1 {
		t.Errorf("UnlockAll = %d, want 1", n)
	}
	if _, ok := c.owners[A]; ok {
		t.Error("UnlockAll kept the owner's list")
	}
	checkInvariants(t, c)
}
