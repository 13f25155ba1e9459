package cache

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/latchd/latch"
)

// model is a trivial reference implementation of the cache's semantics
// without a memory limit: a map, eager expiry and eager flushes at every
// write. Reads judge liveness at their instant and change nothing, as the
// cache's.
//
// ghosts are the items the model dropped (expired or flushed) that the
// cache still holds, by their CAS: the cache removes a dead item only when
// a write of its key meets it (every write that gets as far as looking the
// key up: forget) or when it is evicted, and Lock names the key of a dead
// item it removes.
type model struct {
	items    map[string]*mItem
	ghosts   map[string]uint64
	now      int64
	cas      uint64
	maxValue int

	flushPending bool
	flushAt      int64
}

type mItem struct {
	val   string
	flags uint32
	exp   int64 // absolute; math.MaxInt64 = never
	cas   uint64
	owner latch.SessionID
}

func newModel(maxValue int) *model {
	return &model{items: map[string]*mItem{}, ghosts: map[string]uint64{}, maxValue: maxValue}
}

func mDeadline(now, exptime int64) int64 {
	switch {
	case exptime == 0:
		return math.MaxInt64
	case exptime < 0:
		return math.MinInt64
	case exptime <= 30*24*3600:
		return now + exptime*1e9
	}
	return exptime * 1e9
}

// advance moves the clock and applies what is due: a pending flush drops
// every unlocked item, expiry drops every unlocked expired item. Only
// writes call it.
func (m *model) advance(now int64) int64 {
	if now < m.now {
		now = m.now
	}
	m.now = now
	if m.flushPending && now >= m.flushAt {
		m.flushPending = false
		for k, it := range m.items {
			if it.owner == 0 {
				m.drop(k, it)
			}
		}
	}
	for k, it := range m.items {
		if it.owner == 0 && it.exp <= now {
			m.drop(k, it)
		}
	}
	return now
}

// drop removes a dead item, which the cache keeps until a write or an
// eviction meets it.
func (m *model) drop(k string, it *mItem) {
	delete(m.items, k)
	m.ghosts[k] = it.cas
}

// forget records that the cache met k: a dead item of k is gone.
func (m *model) forget(k string) { delete(m.ghosts, k) }

// live returns the item of k if it is live at now, for reads: a read
// changes nothing.
func (m *model) live(now int64, k string) *mItem {
	now = max(now, m.now)
	it := m.items[k]
	if it == nil || it.owner == 0 && (it.exp <= now || m.flushPending && m.flushAt <= now) {
		return nil
	}
	return it
}

func (m *model) next() uint64 { m.cas++; return m.cas }

func (m *model) get(now int64, k string) res {
	it := m.live(now, k)
	if it == nil {
		return res{Err: ErrNotFound}
	}
	return res{Val: it.val, Flags: it.flags, CAS: it.cas}
}

func (m *model) touch(now int64, k string, exptime int64, withValue bool) res {
	now = m.advance(now)
	m.forget(k)
	it := m.items[k]
	if it == nil {
		return res{Err: ErrNotFound}
	}
	it.exp = mDeadline(now, exptime)
	if withValue {
		return res{Val: it.val, Flags: it.flags, CAS: it.cas}
	}
	return res{CAS: it.cas}
}

func (m *model) store(now int64, mode storeMode, o latch.SessionID, k, v string, flags uint32, exptime int64, cas uint64) res {
	now = m.advance(now)
	if len(v) > m.maxValue {
		return res{Err: ErrTooLarge}
	}
	m.forget(k)
	it := m.items[k]
	if it != nil && it.owner != 0 && it.owner != o {
		return res{Err: ErrLocked}
	}
	if mode == modeAdd && it != nil {
		return res{Err: ErrExists}
	}
	if mode == modeReplace && it == nil {
		return res{Err: ErrNotStored}
	}
	if mode == modeCAS || cas != 0 {
		if it == nil {
			return res{Err: ErrNotFound}
		}
		if it.cas != cas {
			return res{Err: ErrExists}
		}
	}
	if it == nil {
		it = &mItem{}
		m.items[k] = it
	}
	it.val, it.flags, it.exp, it.cas = v, flags, mDeadline(now, exptime), m.next()
	return res{CAS: it.cas}
}

func (m *model) concat(now int64, o latch.SessionID, k, v string, cas uint64, before bool) res {
	m.advance(now)
	m.forget(k)
	it := m.items[k]
	if it == nil {
		return res{Err: ErrNotStored}
	}
	if it.owner != 0 && it.owner != o {
		return res{Err: ErrLocked}
	}
	if cas != 0 && cas != it.cas {
		return res{Err: ErrExists}
	}
	if len(it.val)+len(v) > m.maxValue {
		return res{Err: ErrTooLarge}
	}
	if before {
		it.val = v + it.val
	} else {
		it.val += v
	}
	it.cas = m.next()
	return res{CAS: it.cas}
}

func (m *model) arith(now int64, o latch.SessionID, k string, delta, cas uint64, incr bool) res {
	m.advance(now)
	m.forget(k)
	it := m.items[k]
	if it == nil {
		return res{Err: ErrNotFound}
	}
	if it.owner != 0 && it.owner != o {
		return res{Err: ErrLocked}
	}
	if cas != 0 && cas != it.cas {
		return res{Err: ErrExists}
	}
	n, err := strconv.ParseUint(it.val, 10, 64)
	if err != nil {
		return res{Err: ErrNonNumeric}
	}
	switch {
	case incr:
		n += delta
	case delta > n:
		n = 0
	default:
		n -= delta
	}
	it.val = strconv.FormatUint(n, 10)
	it.cas = m.next()
	return res{N: n, CAS: it.cas}
}

func (m *model) del(now int64, o latch.SessionID, k string, cas uint64) res {
	m.advance(now)
	m.forget(k)
	it := m.items[k]
	if it == nil {
		return res{Err: ErrNotFound}
	}
	if it.owner != 0 && it.owner != o {
		return res{Err: ErrLocked}
	}
	if cas != 0 && cas != it.cas {
		return res{Err: ErrExists}
	}
	delete(m.items, k)
	if it.owner != 0 {
		return res{B: true, Name: k}
	}
	return res{}
}

// evict removes k's item, dead or alive, if it is unlocked and has CAS cas.
func (m *model) evict(now int64, k string, cas uint64) res {
	m.advance(now)
	if it := m.items[k]; it != nil && it.owner == 0 && it.cas == cas {
		delete(m.items, k)
		return res{B: true}
	}
	if g, ok := m.ghosts[k]; ok && g == cas {
		m.forget(k)
		return res{B: true}
	}
	return res{}
}

func (m *model) flush(now, delay int64) res {
	now = m.advance(now)
	at := now
	if delay > 0 {
		at = max(now, mDeadline(now, delay))
	}
	m.flushPending, m.flushAt = true, at
	m.advance(now)
	return res{}
}

// lock is Lock with its name: the key whenever the cache had an item of
// it, live or dead.
func (m *model) lock(now int64, o latch.SessionID, k string, mode LockMode, exptime int64) res {
	now = m.advance(now)
	if o == 0 {
		return res{Err: latch.ErrNoSession}
	}
	_, ghost := m.ghosts[k]
	m.forget(k)
	it := m.items[k]
	if it == nil {
		if ghost {
			return res{Err: ErrNotFound, Name: k}
		}
		return res{Err: ErrNotFound}
	}
	if it.owner != 0 {
		return res{Err: ErrLocked, Name: k}
	}
	it.owner = o
	if mode == LockTouch {
		it.exp = mDeadline(now, exptime)
	}
	if mode == LockOnly {
		return res{Name: k}
	}
	return res{Val: it.val, Flags: it.flags, CAS: it.cas, Name: k}
}

// release unlocks it; an item expired while locked goes at once.
func (m *model) release(k string, it *mItem) {
	it.owner = 0
	if it.exp <= m.now {
		delete(m.items, k)
	}
}

func (m *model) unlock(now int64, o latch.SessionID, k string) res {
	m.advance(now)
	m.forget(k)
	it := m.items[k]
	if it == nil {
		return res{Err: ErrNotFound}
	}
	if it.owner == 0 || it.owner != o {
		return res{Err: ErrNotLocked}
	}
	m.release(k, it)
	return res{Name: k}
}

func (m *model) unlockAll(now int64, o latch.SessionID) res {
	m.advance(now)
	n := 0
	for k, it := range m.items {
		if o != 0 && it.owner == o {
			m.release(k, it)
			n++
		}
	}
	return res{N: uint64(n)}
}

func (m *model) rau(now int64, o latch.SessionID, k, v string, flags uint32, exptime int64, cas uint64) res {
	now = m.advance(now)
	if len(v) > m.maxValue {
		return res{Err: ErrTooLarge}
	}
	m.forget(k)
	it := m.items[k]
	if it == nil {
		return res{Err: ErrNotFound}
	}
	if it.owner == 0 || it.owner != o {
		return res{Err: ErrNotLocked}
	}
	if cas != 0 && cas != it.cas {
		return res{Err: ErrExists}
	}
	it.val, it.flags, it.exp, it.cas = v, flags, mDeadline(now, exptime), m.next()
	m.release(k, it)
	return res{CAS: it.cas, Name: k}
}

func (m *model) keys(now int64, prefix string) res {
	var ks []string
	for k := range m.items {
		if len(k) >= len(prefix) && k[:len(prefix)] == prefix && m.live(now, k) != nil {
			ks = append(ks, k)
		}
	}
	sort.Strings(ks)
	return res{Keys: ks}
}

// twin is one random operation, applied to both the cache and the model,
// and a description of it. read tells that it is a read, which changes no
// replicated state.
type twin struct {
	name string
	c    op
	m    func(m *model, now int64) res
	read bool
}

var (
	modelKeys   = []string{"a", "b", "c", "ab"}
	modelValues = []string{"", "x", "hello", "0", "9", "42", "18446744073709551615", "12abc", "007", "0123456789012345678901234567890123456789"}
	modelExps   = []int64{0, 0, 0, 1, 2, 5, -1, month, month + 1, t0Sec + 3, t0Sec - 3}
)

// randomTwin returns a random operation of every kind but Expired.
func randomTwin(r *rand.Rand, m *model) twin {
	k := modelKeys[r.IntN(len(modelKeys))]
	v := modelValues[r.IntN(len(modelValues))]
	o := latch.SessionID(r.IntN(4)) // 0 = nobody, 1..3
	flags := uint32(r.IntN(3))
	exp := modelExps[r.IntN(len(modelExps))]
	var casv uint64
	switch r.IntN(4) {
	case 0: // none
	case 1:
		if it := m.items[k]; it != nil {
			casv = it.cas
		} else if g, ok := m.ghosts[k]; ok {
			casv = g
		} else {
			casv = m.cas
		}
	case 2:
		casv = m.cas
	case 3:
		casv = uint64(r.IntN(int(m.cas) + 2))
	}
	delta := []uint64{0, 1, 5, math.MaxUint64}[r.IntN(4)]
	name := func(op string) string {
		return fmt.Sprintf("%s(owner=%d key=%q val=%q flags=%d exp=%d cas=%d delta=%d)", op, o, k, v, flags, exp, casv, delta)
	}
	switch r.IntN(23) {
	case 0, 1:
		return twin{name("get"), get(k), func(m *model, now int64) res { return m.get(now, k) }, true}
	case 2:
		return twin{name("gat"), gat(k, exp), func(m *model, now int64) res { return m.touch(now, k, exp, true) }, false}
	case 3:
		return twin{name("touch"), touch(k, exp), func(m *model, now int64) res { return m.touch(now, k, exp, false) }, false}
	case 4, 5:
		return twin{name("set"), setCAS(o, k, v, flags, exp, casv), func(m *model, now int64) res {
			return m.store(now, modeSet, o, k, v, flags, exp, casv)
		}, false}
	case 6:
		return twin{name("add"), add(o, k, v, flags, exp), func(m *model, now int64) res {
			return m.store(now, modeAdd, o, k, v, flags, exp, 0)
		}, false}
	case 7:
		return twin{name("replace"), replace(o, k, v, flags, exp, casv), func(m *model, now int64) res {
			return m.store(now, modeReplace, o, k, v, flags, exp, casv)
		}, false}
	case 8:
		return twin{name("cas"), cas(o, k, v, flags, exp, casv), func(m *model, now int64) res {
			return m.store(now, modeCAS, o, k, v, flags, exp, casv)
		}, false}
	case 9:
		return twin{name("append"), appendOp(o, k, v, casv), func(m *model, now int64) res { return m.concat(now, o, k, v, casv, false) }, false}
	case 10:
		return twin{name("prepend"), prepend(o, k, v, casv), func(m *model, now int64) res { return m.concat(now, o, k, v, casv, true) }, false}
	case 11:
		return twin{name("incr"), incr(o, k, delta, casv), func(m *model, now int64) res { return m.arith(now, o, k, delta, casv, true) }, false}
	case 12:
		return twin{name("decr"), decr(o, k, delta, casv), func(m *model, now int64) res { return m.arith(now, o, k, delta, casv, false) }, false}
	case 13:
		return twin{name("delete"), delOp(o, k, casv), func(m *model, now int64) res { return m.del(now, o, k, casv) }, false}
	case 14:
		if r.IntN(4) != 0 {
			return randomTwin(r, m) // flushes are rarer
		}
		d := []int64{0, 0, 1, 3, t0Sec + 2}[r.IntN(5)]
		return twin{fmt.Sprintf("flush_all(%d)", d), flush(d), func(m *model, now int64) res { return m.flush(now, d) }, false}
	case 15, 16, 17, 18:
		mode := []LockMode{LockOnly, LockOnly, LockGet, LockTouch}[r.IntN(4)]
		return twin{name(fmt.Sprintf("lock(mode=%d)", mode)), lockOp(o, k, mode, exp),
			func(m *model, now int64) res { return m.lock(now, o, k, mode, exp) }, false}
	case 19:
		return twin{name("unlock"), unlockOp(o, k), func(m *model, now int64) res { return m.unlock(now, o, k) }, false}
	case 20:
		if r.IntN(3) == 0 {
			return twin{name("unlock_all"), unlockAll(o), func(m *model, now int64) res { return m.unlockAll(now, o) }, false}
		}
		return twin{name("rau"), rauOp(o, k, v, flags, exp, casv), func(m *model, now int64) res {
			return m.rau(now, o, k, v, flags, exp, casv)
		}, false}
	case 21:
		return twin{name("evict"), evictOp(k, casv), func(m *model, now int64) res { return m.evict(now, k, casv) }, false}
	default:
		p := []string{"", "a", "b"}[r.IntN(3)]
		return twin{fmt.Sprintf("keys(%q)", p), keys(p), func(m *model, now int64) res { return m.keys(now, p) }, true}
	}
}

// sweep removes every dead unlocked item at now, as the proposer would:
// Expired over a whole pass (two calls: the first may start mid-list), and
// Evict for each. It returns the keys removed, sorted.
func sweep(t testing.TB, c *Cache, now int64) []string {
	t.Helper()
	victims := c.Expired(nil, now, math.MaxInt)
	victims = c.Expired(victims, now, math.MaxInt)
	var removed []string
	for _, v := range victims {
		if c.Evict(now, []byte(v.Key), v.CAS) {
			removed = append(removed, v.Key)
		}
	}
	sort.Strings(removed)
	return removed
}

// TestModel runs random operations against the cache and the model and
// compares every result.
func TestModel(t *testing.T) {
	seeds := 200
	if testing.Short() {
		seeds = 20
	}
	const maxValue = 48
	for seed := range seeds {
		r := rand.New(rand.NewPCG(uint64(seed), 0xcafe))
		c := newCache(t, Config{MemoryLimit: 1 << 30, MaxItemSize: maxValue})
		m := newModel(maxValue)
		now := t0
		var history []string
		for i := range 400 {
			// The clock moves on in half seconds, and now and then
			// backwards (which counts as not moving).
			switch r.IntN(10) {
			case 0:
				now -= int64(sec)
			case 1, 2, 3:
				now += int64(sec) / 2
			}
			tw := randomTwin(r, m)
			history = append(history, fmt.Sprintf("t=%+.1fs %s", float64(now-t0)/1e9, tw.name))
			want := tw.m(m, now)
			var before []byte
			if tw.read {
				before = stateOf(c)
			}
			got := tw.c(c, now)
			if diff := cmp.Diff(want, got, cmpopts.EquateErrors(), cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("seed %d op %d: %s: mismatch (-model +cache):\n%s\nhistory:\n%s", seed, i, tw.name, diff, tail(history, 30))
			}
			if tw.read && string(stateOf(c)) != string(before) {
				t.Fatalf("seed %d op %d: the read %s changed the replicated state\nhistory:\n%s", seed, i, tw.name, tail(history, 30))
			}
			checkInvariants(t, c)
			if i%50 == 49 {
				// A sweep removes exactly the dead items the cache
				// still holds, and then only live ones are left.
				removed := sweep(t, c, now)
				m.advance(now)
				var ghosts []string
				for k := range m.ghosts {
					ghosts = append(ghosts, k)
				}
				sort.Strings(ghosts)
				if !slices.Equal(removed, ghosts) {
					t.Fatalf("seed %d op %d: the sweep removed %q, the model has dead %q\nhistory:\n%s", seed, i, removed, ghosts, tail(history, 30))
				}
				clear(m.ghosts)
				if got := c.Stats().CurrItems; got != uint64(len(m.items)) {
					t.Fatalf("seed %d op %d: curr_items %d after sweeping, model has %d\nhistory:\n%s", seed, i, got, len(m.items), tail(history, 30))
				}
			}
		}
	}
}

func tail(s []string, n int) string {
	if len(s) > n {
		s = s[len(s)-n:]
	}
	out := ""
	for _, l := range s {
		out += "  " + l + "\n"
	}
	return out
}
