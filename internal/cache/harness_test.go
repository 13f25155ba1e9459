package cache

import (
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/latchd/latch"
)

// The fake clock: test instants are offsets from t0, a Unix time in
// nanoseconds (absolute exptimes are Unix seconds).
const (
	t0Sec = 1_700_000_000
	t0    = t0Sec * int64(time.Second)
	sec   = time.Second
)

// res is what one step returned, in a comparable form.
type res struct {
	Val   string
	Flags uint32
	CAS   uint64
	N     uint64 // incr/decr value, counts
	B     bool   // Delete's unlocked
	Keys  []string
	Name  string // the key returned by the named ops (lockOp, unlockOp, delOp, rauOp)
	Err   error
}

// op is one call on the cache at an instant.
type op func(c *Cache, now int64) res

// storeWithRoom makes room for a write of key as the proposer of a
// replicated cache will: it asks Grow how much the write grows the cache
// (valueLen and concat as Grow's), plans evictions with PlanRoom, applies
// them with Evict, and then runs write. It returns the victims PlanRoom
// chose, and PlanRoom's error, if any, without running write.
func storeWithRoom(t testing.TB, c *Cache, now int64, key []byte, valueLen int, concat bool, write func()) ([]Victim, error) {
	t.Helper()
	victims, err := c.PlanRoom(nil, now, key, c.Grow(now, key, valueLen, concat))
	if err != nil {
		return nil, err
	}
	for _, v := range victims {
		if !c.Evict(now, []byte(v.Key), v.CAS) {
			t.Fatalf("Evict(%q, %d) of a planned victim removed nothing", v.Key, v.CAS)
		}
	}
	write()
	return victims, nil
}

// setRoom is Set by nobody with room made first (storeWithRoom).
func setRoom(t testing.TB, c *Cache, now int64, key, value string) (uint64, error) {
	t.Helper()
	var cas uint64
	var err error
	if _, perr := storeWithRoom(t, c, now, []byte(key), len(value), false, func() {
		cas, err = c.Set(now, 0, []byte(key), []byte(value), 0, 0, 0)
	}); perr != nil {
		return 0, perr
	}
	return cas, err
}

// step runs op at t0+at and expects want.
type step struct {
	at   time.Duration
	do   op
	want res
}

type scenario struct {
	name  string
	cfg   *Config // nil: testConfig()
	steps []step
	// check, if set, runs after the steps.
	check func(t *testing.T, c *Cache)
}

func testConfig() Config {
	return Config{MemoryLimit: 1 << 20, MaxItemSize: 1024}
}

func newCache(t testing.TB, cfg Config) *Cache {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

func runScenarios(t *testing.T, scenarios []scenario) {
	t.Helper()
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			cfg := testConfig()
			if sc.cfg != nil {
				cfg = *sc.cfg
			}
			c := newCache(t, cfg)
			for i, s := range sc.steps {
				got := s.do(c, t0+int64(s.at))
				if diff := cmp.Diff(s.want, got, cmpopts.EquateErrors(), cmpopts.EquateEmpty()); diff != "" {
					t.Fatalf("step %d (at %v): result mismatch (-want +got):\n%s", i, s.at, diff)
				}
				checkInvariants(t, c)
			}
			if sc.check != nil {
				sc.check(t, c)
			}
		})
	}
}

// Operations, as ops. Owners are latch.SessionIDs; 0 acts as nobody.

func itemRes(it Item, err error) res {
	return res{Val: string(it.Value), Flags: it.Flags, CAS: it.CAS, Err: err}
}

func get(key string) op {
	return func(c *Cache, now int64) res { return itemRes(c.Get(now, []byte(key))) }
}

func gat(key string, exptime int64) op {
	return func(c *Cache, now int64) res { return itemRes(c.GetAndTouch(now, []byte(key), exptime)) }
}

func touch(key string, exptime int64) op {
	return func(c *Cache, now int64) res {
		cas, err := c.Touch(now, []byte(key), exptime)
		return res{CAS: cas, Err: err}
	}
}

func casRes(cas uint64, err error) res { return res{CAS: cas, Err: err} }

func set(o latch.SessionID, key, val string, flags uint32, exptime int64) op {
	return setCAS(o, key, val, flags, exptime, 0)
}

func setCAS(o latch.SessionID, key, val string, flags uint32, exptime int64, cas uint64) op {
	return func(c *Cache, now int64) res {
		return casRes(c.Set(now, o, []byte(key), []byte(val), flags, exptime, cas))
	}
}

func add(o latch.SessionID, key, val string, flags uint32, exptime int64) op {
	return func(c *Cache, now int64) res {
		return casRes(c.Add(now, o, []byte(key), []byte(val), flags, exptime, 0))
	}
}

func replace(o latch.SessionID, key, val string, flags uint32, exptime int64, cas uint64) op {
	return func(c *Cache, now int64) res {
		return casRes(c.Replace(now, o, []byte(key), []byte(val), flags, exptime, cas))
	}
}

func cas(o latch.SessionID, key, val string, flags uint32, exptime int64, cas uint64) op {
	return func(c *Cache, now int64) res {
		return casRes(c.CAS(now, o, []byte(key), []byte(val), flags, exptime, cas))
	}
}

func appendOp(o latch.SessionID, key, val string, cas uint64) op {
	return func(c *Cache, now int64) res {
		return casRes(c.Append(now, o, []byte(key), []byte(val), cas))
	}
}

func prepend(o latch.SessionID, key, val string, cas uint64) op {
	return func(c *Cache, now int64) res {
		return casRes(c.Prepend(now, o, []byte(key), []byte(val), cas))
	}
}

func incr(o latch.SessionID, key string, delta, cas uint64) op {
	return func(c *Cache, now int64) res {
		n, newCAS, err := c.Incr(now, o, []byte(key), delta, cas)
		return res{N: n, CAS: newCAS, Err: err}
	}
}

func decr(o latch.SessionID, key string, delta, cas uint64) op {
	return func(c *Cache, now int64) res {
		n, newCAS, err := c.Decr(now, o, []byte(key), delta, cas)
		return res{N: n, CAS: newCAS, Err: err}
	}
}

// del is Delete; B tells whether it released a lock.
func del(o latch.SessionID, key string, cas uint64) op {
	return func(c *Cache, now int64) res {
		unlocked, err := c.Delete(now, o, []byte(key), cas)
		return res{B: unlocked != "", Err: err}
	}
}

// delOp is del that also returns the released key as Name.
func delOp(o latch.SessionID, key string, cas uint64) op {
	return func(c *Cache, now int64) res {
		unlocked, err := c.Delete(now, o, []byte(key), cas)
		return res{B: unlocked != "", Name: unlocked, Err: err}
	}
}

func flush(delay int64) op {
	return func(c *Cache, now int64) res { c.FlushAll(now, delay); return res{} }
}

// The lock ops of the scenarios leave out the name Lock, Unlock and
// ReplaceAndUnlock return (the ...Op forms keep it); lock also leaves out
// the item, as yrmcds's lock returns none.

func lock(o latch.SessionID, key string) op {
	return func(c *Cache, now int64) res {
		_, _, err := c.Lock(now, o, []byte(key), LockOnly, 0)
		return res{Err: err}
	}
}

func unlock(o latch.SessionID, key string) op {
	return func(c *Cache, now int64) res {
		_, err := c.Unlock(now, o, []byte(key))
		return res{Err: err}
	}
}

func unlockAll(o latch.SessionID) op {
	return func(c *Cache, now int64) res { return res{N: uint64(c.UnlockAll(now, o))} }
}

func lag(o latch.SessionID, key string) op {
	return func(c *Cache, now int64) res {
		r := lockOp(o, key, LockGet, 0)(c, now)
		r.Name = ""
		return r
	}
}

func lat(o latch.SessionID, key string, exptime int64) op {
	return func(c *Cache, now int64) res {
		r := lockOp(o, key, LockTouch, exptime)(c, now)
		r.Name = ""
		return r
	}
}

func rau(o latch.SessionID, key, val string, flags uint32, exptime int64, cas uint64) op {
	return func(c *Cache, now int64) res {
		r := rauOp(o, key, val, flags, exptime, cas)(c, now)
		r.Name = ""
		return r
	}
}

// lockOp is Lock in mode, with its name. LockOnly's item is left out.
func lockOp(o latch.SessionID, key string, mode LockMode, exptime int64) op {
	return func(c *Cache, now int64) res {
		it, name, err := c.Lock(now, o, []byte(key), mode, exptime)
		if mode == LockOnly {
			it = Item{}
		}
		r := itemRes(it, err)
		r.Name = name
		return r
	}
}

func unlockOp(o latch.SessionID, key string) op {
	return func(c *Cache, now int64) res {
		name, err := c.Unlock(now, o, []byte(key))
		return res{Name: name, Err: err}
	}
}

func rauOp(o latch.SessionID, key, val string, flags uint32, exptime int64, cas uint64) op {
	return func(c *Cache, now int64) res {
		newCAS, name, err := c.ReplaceAndUnlock(now, o, []byte(key), []byte(val), flags, exptime, cas)
		return res{CAS: newCAS, Name: name, Err: err}
	}
}

// evictOp is Evict; B is its result.
func evictOp(key string, cas uint64) op {
	return func(c *Cache, now int64) res { return res{B: c.Evict(now, []byte(key), cas)} }
}

func keys(prefix string) op {
	return func(c *Cache, now int64) res {
		k := c.AppendKeys(nil, now, []byte(prefix))
		sortStrings(k)
		return res{Keys: k}
	}
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// checkInvariants verifies the cache's internal bookkeeping.
func checkInvariants(t testing.TB, c *Cache) {
	t.Helper()
	seen := make(map[*entry]bool, len(c.items))
	var bytes, lockedBytes int64
	locked := 0
	// LRU list: unlocked items only, consistent links.
	var prev *entry
	cursorSeen := c.cursor == nil
	for e := c.head; e != nil; e = e.next {
		if e.prev != prev {
			t.Fatalf("LRU: %q.prev is wrong", e.key)
		}
		if e.owner != 0 {
			t.Fatalf("LRU: locked item %q in the LRU list", e.key)
		}
		if seen[e] {
			t.Fatalf("LRU: cycle at %q", e.key)
		}
		if e == c.cursor {
			cursorSeen = true
		}
		seen[e] = true
		prev = e
	}
	if c.tail != prev {
		t.Fatalf("LRU: tail is wrong")
	}
	if !cursorSeen {
		t.Fatalf("Expired's cursor %q is not in the LRU list", c.cursor.key)
	}
	if c.flushPending && c.flushAt <= c.now {
		t.Fatalf("a flush at %d is pending at %d", c.flushAt, c.now)
	}
	for owner, l := range c.owners {
		if l == nil || l.first != nil && l.first.prev != nil {
			t.Fatalf("owner %d: bad list head", owner)
		}
		var prev *entry
		for e := l.first; e != nil; e = e.next {
			if e.prev != prev {
				t.Fatalf("owner %d: %q.prev is wrong", owner, e.key)
			}
			if e.owner != owner {
				t.Fatalf("owner %d: item %q is locked by %d", owner, e.key, e.owner)
			}
			if seen[e] {
				t.Fatalf("owner %d: %q is in two lists", owner, e.key)
			}
			if e.epoch != c.epoch {
				t.Fatalf("locked item %q has epoch %d, cache %d", e.key, e.epoch, c.epoch)
			}
			seen[e] = true
			locked++
			lockedBytes += e.size()
			prev = e
		}
	}
	if len(seen) != len(c.items) {
		t.Fatalf("%d items in lists, %d in the map", len(seen), len(c.items))
	}
	cases := make(map[uint64]string, len(c.items))
	for k, e := range c.items {
		if !seen[e] || e.key != k {
			t.Fatalf("map entry %q is not listed or misnamed", k)
		}
		// The map's key is the item's own, stored just before its value
		// (storeKV): no copy of an older value is kept alive by either.
		afterKey := uintptr(unsafe.Pointer(unsafe.StringData(e.key))) + uintptr(len(e.key))
		if !sameString(k, e.key) || len(e.value) > 0 && afterKey != uintptr(unsafe.Pointer(unsafe.SliceData(e.value))) {
			t.Fatalf("item %q: its key is not the map's, or not stored just before its value", k)
		}
		if cap(e.value) != len(e.value) {
			t.Fatalf("item %q: value capacity %d, length %d", k, cap(e.value), len(e.value))
		}
		if e.cas == 0 || e.cas > c.cas {
			t.Fatalf("item %q: cas %d outside (0, %d]", k, e.cas, c.cas)
		}
		if other, dup := cases[e.cas]; dup {
			t.Fatalf("items %q and %q share cas %d", k, other, e.cas)
		}
		cases[e.cas] = k
		if e.epoch > c.epoch {
			t.Fatalf("item %q from a future epoch", k)
		}
		bytes += e.size()
	}
	if bytes != c.bytes || lockedBytes != c.lockedBytes || locked != c.locked {
		t.Fatalf("accounting: bytes %d/%d locked bytes %d/%d locked %d/%d (counted/recorded)",
			bytes, c.bytes, lockedBytes, c.lockedBytes, locked, c.locked)
	}
	if uint64(len(c.items)) != c.stats.CurrItems {
		t.Fatalf("curr_items %d, map has %d", c.stats.CurrItems, len(c.items))
	}
	if c.bytes > c.cfg.MemoryLimit {
		t.Fatalf("bytes %d over the limit %d", c.bytes, c.cfg.MemoryLimit)
	}
}

func key(n int) string { return strings.Repeat("k", n) }
