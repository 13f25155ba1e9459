package cache

import (
	"errors"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/latchd/latch"
)

// errTable is what a fake lock table's take returns for a key it refuses
// (held over another protocol, say).
var errTable = errors.New("lock table: key is held")

// sameString reports whether a and b share their bytes: whether b is a
// (another reference to the same string), not just equal to it. The tests
// use keys of more than one byte: the runtime has one string for each
// one-byte value, so it could not tell copies of those apart.
func sameString(a, b string) bool {
	return len(a) == len(b) && unsafe.StringData(a) == unsafe.StringData(b)
}

// TestLockFunc checks LockFunc's contract with its caller's lock table:
// when take is called and with which string, that the table answers
// before the item's lock mark, and that a refusal locks nothing.
func TestLockFunc(t *testing.T) {
	tests := []struct {
		name    string
		setup   []op // at t0
		at      time.Duration
		owner   latch.SessionID
		key     string
		mode    LockMode
		exptime int64
		refuse  bool // take refuses the key
		nilTake bool

		want res
		// take: 0 not called, 1 called with a new string equal to key,
		// 2 called with the string of key's item.
		take      int
		wantOwner latch.SessionID // the item's lock owner afterwards
	}{
		{name: "live item: taken, then locked",
			setup: []op{set(0, "item", "v", 3, 0)}, owner: A, key: "item",
			want: res{Val: "v", Flags: 3, CAS: 1}, take: 2, wantOwner: A},
		{name: "nil take is Lock",
			setup: []op{set(0, "item", "v", 0, 0)}, owner: A, key: "item", nilTake: true,
			want: res{Val: "v", CAS: 1}, wantOwner: A},
		{name: "refused: nothing is locked",
			setup: []op{set(0, "item", "v", 0, 0)}, owner: A, key: "item", refuse: true,
			want: res{Err: errTable}, take: 2},
		{name: "no item, refused: the table answers first",
			owner: A, key: "item", refuse: true,
			want: res{Err: errTable}, take: 1},
		{name: "no item, taken: not found, the caller gives the key back",
			owner: A, key: "item",
			want: res{Err: ErrNotFound}, take: 1},
		{name: "expired item: take gets its key, then not found",
			setup: []op{set(0, "item", "v", 0, 1)}, at: sec, owner: A, key: "item",
			want: res{Err: ErrNotFound}, take: 2},
		{name: "marked by another, free in the table (force-released): locked",
			setup: []op{set(0, "item", "v", 0, 0), lock(B, "item")}, owner: A, key: "item",
			want: res{Err: ErrLocked}, take: 2, wantOwner: B},
		{name: "marked by the owner itself: not re-entrant",
			setup: []op{set(0, "item", "v", 0, 0), lock(A, "item")}, owner: A, key: "item",
			want: res{Err: ErrLocked}, take: 2, wantOwner: A},
		{name: "marked, refused: the table's error",
			setup: []op{set(0, "item", "v", 0, 0), lock(B, "item")}, owner: A, key: "item", refuse: true,
			want: res{Err: errTable}, take: 2, wantOwner: B},
		{name: "invalid key: take is not called",
			owner: A, key: "a b",
			want: res{Err: ErrInvalidKey}},
		{name: "owner 0: take is not called",
			setup: []op{set(0, "item", "v", 0, 0)}, owner: 0, key: "item",
			want: res{Err: latch.ErrNoSession}},
		{name: "LockGet",
			setup: []op{set(0, "item", "v", 3, 0)}, owner: A, key: "item", mode: LockGet,
			want: res{Val: "v", Flags: 3, CAS: 1}, take: 2, wantOwner: A},
		{name: "LockTouch",
			setup: []op{set(0, "item", "v", 3, 0)}, owner: A, key: "item", mode: LockTouch, exptime: 10,
			want: res{Val: "v", Flags: 3, CAS: 1}, take: 2, wantOwner: A},
		{name: "LockTouch refused: the exptime is not set",
			setup: []op{set(0, "item", "v", 3, 0)}, owner: A, key: "item", mode: LockTouch, exptime: -1, refuse: true,
			want: res{Err: errTable}, take: 2},
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
			var before itemState
			if tt.refuse {
				before = snapshot(c, []byte(tt.key))
			}
			calls := 0
			var name string
			take := func(n string) error {
				calls++
				name = n
				if tt.refuse {
					return errTable
				}
				return nil
			}
			if tt.nilTake {
				take = nil
			}
			got := itemRes(c.LockFunc(t0+int64(tt.at), tt.owner, []byte(tt.key), tt.mode, tt.exptime, take))
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateErrors(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("result mismatch (-want +got):\n%s", diff)
			}
			switch {
			case tt.take == 0 && calls != 0:
				t.Errorf("take called %d times, want none", calls)
			case tt.take != 0 && calls != 1:
				t.Errorf("take called %d times, want once", calls)
			case tt.take != 0 && name != tt.key:
				t.Errorf("take(%q), want take(%q)", name, tt.key)
			case tt.take == 2 && !sameString(name, own):
				t.Errorf("take got a new string, not the item's own")
			}
			var owner latch.SessionID
			e := c.items[tt.key]
			if e != nil {
				owner = e.owner
			}
			if owner != tt.wantOwner {
				t.Errorf("item locked by %d, want %d", owner, tt.wantOwner)
			}
			if tt.refuse && e != nil && !snapshot(c, []byte(tt.key)).equal(before) {
				t.Errorf("a refused lock changed the item: %+v -> %+v", before, snapshot(c, []byte(tt.key)))
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

// TestKeyVariants checks UnlockKey, DeleteKey and ReplaceAndUnlockKey: the
// result of Unlock, Delete and ReplaceAndUnlock, and the key as the item's
// own string exactly when the caller must release it in its lock table.
func TestKeyVariants(t *testing.T) {
	unlockKey := func(o latch.SessionID) func(c *Cache, now int64) (string, res) {
		return func(c *Cache, now int64) (string, res) {
			name, err := c.UnlockKey(now, o, []byte("item"))
			return name, res{Err: err}
		}
	}
	deleteKey := func(o latch.SessionID, cas uint64) func(c *Cache, now int64) (string, res) {
		return func(c *Cache, now int64) (string, res) {
			name, err := c.DeleteKey(now, o, []byte("item"), cas)
			return name, res{Err: err}
		}
	}
	rauKey := func(o latch.SessionID, val string, cas uint64) func(c *Cache, now int64) (string, res) {
		return func(c *Cache, now int64) (string, res) {
			newCAS, name, err := c.ReplaceAndUnlockKey(now, o, []byte("item"), []byte(val), 0, 0, cas)
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

// TestLockFuncAllocs checks that the lock-table variants allocate nothing
// on an existing item, take's closure included: a lock and an unlock, and a
// lock and the holder's delete, which allocates no more than a plain
// delete.
func TestLockFuncAllocs(t *testing.T) {
	// Longer than 32 bytes: string(k) would allocate.
	k := []byte("a-key-longer-than-thirty-two-bytes-so-that-naming-it-allocates")
	table := map[string]latch.SessionID{}
	take := func(name string) error { table[name] = A; return nil }
	c := newCache(t, testConfig())
	if _, err := c.Set(t0, 0, k, nil, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := c.LockFunc(t0, A, k, LockGet, 0, take); err != nil {
			t.Fatal(err)
		}
		name, err := c.UnlockKey(t0, A, k)
		if err != nil {
			t.Fatal(err)
		}
		delete(table, name)
	})
	if allocs != 0 {
		t.Errorf("LockFunc+UnlockKey: %v allocations, want 0", allocs)
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
		if _, err := c.LockFunc(t0, A, k, LockOnly, 0, take); err != nil {
			t.Fatal(err)
		}
		name, err := c.DeleteKey(t0, A, k, 0)
		if err != nil {
			t.Fatal(err)
		}
		delete(table, name)
	})
	if allocs != setDelete {
		t.Errorf("Set+LockFunc+DeleteKey: %v allocations, want %v (Set+Delete's)", allocs, setDelete)
	}
}
