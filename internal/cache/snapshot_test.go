package cache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/latchd/latch"
)

// stateOf describes the replicated state of c but for the order of the LRU
// list, which a get may change: the clock, the counters, the flush, every
// item by key, and each owner's list in order.
func stateOf(c *Cache) []byte {
	b := fmt.Appendf(nil, "now %d cas %d epoch %d\n", c.now, c.cas, c.epoch)
	if c.flushPending {
		b = fmt.Appendf(b, "flush at %d\n", c.flushAt)
	}
	keys := make([]string, 0, len(c.items))
	for k := range c.items {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		e := c.items[k]
		b = fmt.Appendf(b, "%q %q flags %d exp %d cas %d owner %d epoch %d\n", k, e.value, e.flags, e.exp, e.cas, e.owner, e.epoch)
	}
	owners := make([]latch.SessionID, 0, len(c.owners))
	for o, l := range c.owners {
		if l.first != nil { // an owner that holds no lock now is not state
			owners = append(owners, o)
		}
	}
	slices.Sort(owners)
	for _, o := range owners {
		b = fmt.Appendf(b, "owner %d:", o)
		for e := c.owners[o].first; e != nil; e = e.next {
			b = fmt.Appendf(b, " %q", e.key)
		}
		b = append(b, '\n')
	}
	return b
}

// command is one operation of a replicated log (a write), or a read.
type command struct {
	name string
	do   op
	read bool
	get  bool // a read that may move an item in the LRU list
}

// proposer makes random commands as the proposer of a replicated cache
// will: it plans room for writes and sweeps against its own copy of the
// cache, a, and issues Evict commands ahead of the write. Its caller
// applies every command to a before asking for more. The operations and
// their arguments come from randomTwin, whose model here only chooses
// arguments (it has no memory limit, so it may drift from the cache).
type proposer struct {
	r   *rand.Rand
	m   *model
	a   *Cache
	now int64
}

// historyConfig is small: a dozen items fill it.
var historyConfig = Config{MemoryLimit: 2000, MaxItemSize: 48}

// bigKeys are written with room made, to fill the cache.
var bigKeys = func() []string {
	k := make([]string, 16)
	for i := range k {
		k[i] = fmt.Sprintf("big:%d", i)
	}
	return k
}()

func newProposer(seed uint64, a *Cache) *proposer {
	return &proposer{r: rand.New(rand.NewPCG(seed, 0x5eed)), m: newModel(a.cfg.MaxItemSize), a: a, now: t0}
}

// tick moves the clock: mostly by half seconds, now and then backwards
// (which counts as not moving) or past the bump interval.
func (p *proposer) tick() {
	switch p.r.IntN(20) {
	case 0, 1:
		p.now -= int64(sec)
	case 2, 3, 4, 5, 6:
		p.now += int64(sec) / 2
	case 7:
		p.now += (bumpInterval + 1) * int64(sec)
	}
}

// next returns the next commands.
func (p *proposer) next() []command {
	p.tick()
	r, a, now := p.r, p.a, p.now
	switch n := r.IntN(100); {
	case n < 60:
		tw := randomTwin(r, p.m)
		tw.m(p.m, now)
		return []command{{name: tw.name, do: tw.c, read: tw.read, get: tw.read && strings.HasPrefix(tw.name, "get")}}
	case n < 85:
		// A set with room made: Evicts, then the write.
		k := bigKeys[r.IntN(len(bigKeys))]
		v := strings.Repeat("v", r.IntN(a.cfg.MaxItemSize+1))
		exp := modelExps[r.IntN(len(modelExps))]
		var cmds []command
		victims, err := a.PlanRoom(nil, now, []byte(k), a.Grow(now, []byte(k), len(v), false))
		if err == nil {
			for _, vc := range victims {
				cmds = append(cmds, command{name: fmt.Sprintf("evict(%q, %d)", vc.Key, vc.CAS), do: evictOp(vc.Key, vc.CAS)})
			}
		}
		return append(cmds, command{name: fmt.Sprintf("set(%q, %d bytes, exp %d)", k, len(v), exp), do: set(0, k, v, 0, exp)})
	case n < 92:
		// A sweep: Expired, then an Evict per victim.
		var cmds []command
		for _, vc := range a.Expired(nil, now, r.IntN(8)) {
			cmds = append(cmds, command{name: fmt.Sprintf("evict(%q, %d)", vc.Key, vc.CAS), do: evictOp(vc.Key, vc.CAS)})
		}
		return cmds
	case n < 96:
		// An Evict of any key, with its CAS or another.
		k := bigKeys[r.IntN(len(bigKeys))]
		var cas uint64
		if e := a.items[k]; e != nil && r.IntN(2) == 0 {
			cas = e.cas
		} else {
			cas = uint64(r.IntN(int(a.cas) + 2))
		}
		return []command{{name: fmt.Sprintf("evict(%q, %d)", k, cas), do: evictOp(k, cas)}}
	default:
		// A lock or an unlock of a big key.
		k := bigKeys[r.IntN(len(bigKeys))]
		o := latch.SessionID(1 + r.IntN(3))
		if r.IntN(2) == 0 {
			return []command{{name: fmt.Sprintf("lock(%d, %q)", o, k), do: lockOp(o, k, LockOnly, 0)}}
		}
		return []command{{name: fmt.Sprintf("unlock_all(%d)", o), do: unlockAll(o)}}
	}
}

// equalRes compares results, errors by their text (a wrapped
// latch.ErrNoSession is a new error each time).
var equalRes = []cmp.Option{
	cmpopts.EquateEmpty(),
	cmp.Comparer(func(x, y error) bool { return fmt.Sprint(x) == fmt.Sprint(y) }),
}

// TestSnapshotHistory runs random histories of writes, locks, flushes,
// touches and evictions, with time moving, as a replicated log. At random
// points it snapshots the proposer's cache and restores the snapshot into
// a follower, which must re-encode to the same bytes; from then on every
// follower gets the same commands, with the same results, and ends with the
// same snapshot. A cache fed the whole log from the start ends the same
// too, and so does one that also served every read (but for the order of
// its LRU list, which gets move).
func TestSnapshotHistory(t *testing.T) {
	seeds := 30 // 100 take a minute under the race detector
	if testing.Short() {
		seeds = 10
	}
	var total struct {
		evictions, reclaimed uint64
		locked, followers    int
		flushed              int
	}
	for seed := range seeds {
		a := newCache(t, historyConfig)
		fresh := newCache(t, historyConfig)  // every write from the start
		reader := newCache(t, historyConfig) // every write and every read
		p := newProposer(uint64(seed), a)
		type follower struct {
			c    *Cache
			from int
		}
		var followers []follower
		var history []string
		for step := 0; step < 600; step++ {
			if p.r.IntN(40) == 0 {
				snap := a.AppendSnapshot(nil)
				b, err := Restore(historyConfig, snap)
				if err != nil {
					t.Fatalf("seed %d step %d: Restore: %v", seed, step, err)
				}
				checkInvariants(t, b)
				if again := b.AppendSnapshot(nil); string(again) != string(snap) {
					t.Fatalf("seed %d step %d: snapshot(restore(s)) != s", seed, step)
				}
				if string(stateOf(b)) != string(stateOf(a)) {
					t.Fatalf("seed %d step %d: restored state:\n%s\nwant:\n%s", seed, step, stateOf(b), stateOf(a))
				}
				followers = append(followers, follower{b, step})
			}
			for _, cmd := range p.next() {
				history = append(history, fmt.Sprintf("t=%+.1fs %s", float64(p.now-t0)/1e9, cmd.name))
				fail := func(format string, args ...any) {
					t.Helper()
					t.Fatalf("seed %d step %d: %s: %s\nhistory:\n%s", seed, step, cmd.name, fmt.Sprintf(format, args...), tail(history, 30))
				}
				if cmd.get {
					// Only the reader serves gets: they may reorder
					// its LRU list.
					before := stateOf(reader)
					cmd.do(reader, p.now)
					if string(stateOf(reader)) != string(before) {
						fail("a get changed the replicated state")
					}
					continue
				}
				want := cmd.do(a, p.now)
				for _, c := range []*Cache{fresh, reader} {
					if got := cmd.do(c, p.now); !cmp.Equal(want, got, equalRes...) {
						fail("result %+v, the proposer's %+v", got, want)
					}
				}
				for _, f := range followers {
					if got := cmd.do(f.c, p.now); !cmp.Equal(want, got, equalRes...) {
						fail("follower from step %d: result %+v, the proposer's %+v", f.from, got, want)
					}
				}
				checkInvariants(t, a)
			}
		}
		snap := a.AppendSnapshot(nil)
		for _, f := range followers {
			checkInvariants(t, f.c)
			if got := f.c.AppendSnapshot(nil); string(got) != string(snap) {
				t.Fatalf("seed %d: follower from step %d ends with another snapshot:\n%s\nwant:\n%s", seed, f.from, stateOf(f.c), stateOf(a))
			}
		}
		if got := fresh.AppendSnapshot(nil); string(got) != string(snap) {
			t.Fatalf("seed %d: a cache fed the same writes ends with another snapshot", seed)
		}
		if string(stateOf(reader)) != string(stateOf(a)) {
			t.Fatalf("seed %d: the cache that served the reads ends in another state:\n%s\nwant:\n%s", seed, stateOf(reader), stateOf(a))
		}
		st := a.Stats()
		total.evictions += st.Evictions
		total.reclaimed += st.Reclaimed
		total.locked += a.locked
		total.followers += len(followers)
		if a.epoch > 0 {
			total.flushed++
		}
	}
	// The histories saw what they are for.
	if total.evictions == 0 || total.reclaimed == 0 || total.locked == 0 || total.followers == 0 || total.flushed == 0 {
		t.Errorf("the histories are too tame: %+v", total)
	}
}

// snapBuilder writes snapshots by hand, field by field. Every method
// returns a new slice, so that snapshots built from one prefix do not
// share their tails.
type snapBuilder []byte

func (b snapBuilder) u(v uint64) snapBuilder    { return binary.AppendUvarint(slices.Clip(b), v) }
func (b snapBuilder) i(v int64) snapBuilder     { return binary.AppendVarint(slices.Clip(b), v) }
func (b snapBuilder) raw(p ...byte) snapBuilder { return append(slices.Clip(b), p...) }
func (b snapBuilder) bytes(s string) snapBuilder {
	return append(slices.Clip(b.u(uint64(len(s)))), s...)
}

// item appends an item: key, value, flags, exp, cas, epoch age.
func (b snapBuilder) item(key, value string, flags uint32, exp int64, cas, age uint64) snapBuilder {
	return b.bytes(key).bytes(value).u(uint64(flags)).i(exp).u(cas).u(age)
}

// header appends the version, now, cas, epoch and no pending flush.
func (b snapBuilder) header(now int64, cas, epoch uint64) snapBuilder {
	return b.raw(snapshotVersion).i(now).u(cas).u(epoch).raw(0)
}

// TestSnapshotFormat pins version 1 of the format.
func TestSnapshotFormat(t *testing.T) {
	c := newCache(t, testConfig())
	c.Set(t0, 0, []byte("old"), []byte("o"), 0, 0, 0)  // cas 1, flushed below
	c.FlushAll(t0, 0)                                  // epoch 1
	c.Set(t0, 0, []byte("a"), []byte("x"), 7, 10, 0)   // cas 2
	c.Set(t0, 0, []byte("b"), []byte("yy"), 0, 0, 0)   // cas 3
	c.Set(t0, 0, []byte("c"), nil, 0, 0, 0)            // cas 4
	c.Set(t0, 0, []byte("d"), []byte("d"), 0, 0, 0)    // cas 5
	c.Lock(t0, B, []byte("b"), LockOnly, 0)            // owner 2
	c.Lock(t0, A, []byte("c"), LockOnly, 0)            // owner 1
	c.Lock(t0, A, []byte("d"), LockOnly, 0)            // owner 1's list: d, c
	c.FlushAll(t0+int64(sec), 5)                       // pending at t0+6s
	c.Get(t0+2*bumpInterval*int64(sec), []byte("old")) // a miss: nothing moves
	want := snapBuilder(nil).raw(1).i(t0+int64(sec)).u(5).u(1).raw(1).i(t0+6*int64(sec)).
		u(2).
		item("a", "x", 7, t0+10*int64(sec), 2, 0).
		item("old", "o", 0, math.MaxInt64, 1, 1).
		u(2).
		u(1).u(2).item("d", "d", 0, math.MaxInt64, 5, 0).item("c", "", 0, math.MaxInt64, 4, 0).
		u(2).u(1).item("b", "yy", 0, math.MaxInt64, 3, 0)
	if got := c.AppendSnapshot(nil); string(got) != string(want) {
		t.Fatalf("snapshot\n got %x\nwant %x", got, []byte(want))
	}
	// AppendSnapshot appends.
	if got := c.AppendSnapshot([]byte("prefix")); string(got) != "prefix"+string(want) {
		t.Errorf("AppendSnapshot does not append to dst")
	}
}

// TestRestore checks what a restored cache holds and what it starts afresh.
func TestRestore(t *testing.T) {
	c := newCache(t, testConfig())
	c.Set(t0, 0, []byte("a"), []byte("1"), 0, 0, 0)
	c.Set(t0, 0, []byte("b"), []byte("22"), 0, 5, 0)
	c.Set(t0, 0, []byte("c"), []byte("333"), 0, 0, 0)
	c.Lock(t0, A, []byte("c"), LockGet, 0)
	c.Get(t0, []byte("a"))
	c.Delete(t0, 0, []byte("zz"), 0)
	r, err := Restore(testConfig(), c.AppendSnapshot(nil))
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, r)
	s, rs := c.Stats(), r.Stats()
	if rs.CurrItems != s.CurrItems || rs.Bytes != s.Bytes || rs.LockedItems != s.LockedItems || rs.LockedBytes != s.LockedBytes {
		t.Errorf("restored gauges %+v, want those of %+v", rs, s)
	}
	if rs.TotalItems != 0 || rs.CmdGet != 0 || rs.GetHits != 0 || rs.DeleteMisses != 0 {
		t.Errorf("restored counters are not 0: %+v", rs)
	}
	for _, e := range r.items {
		if e.fetched || e.bumped != secondOf(t0) {
			t.Errorf("restored %q: fetched %v bumped %d", e.key, e.fetched, e.bumped)
		}
	}
	// The restored cache goes on as the original.
	for _, cc := range []*Cache{c, r} {
		if it, err := cc.Get(t0+4*int64(sec), []byte("b")); err != nil || string(it.Value) != "22" {
			t.Errorf("Get(b) = %q, %v", it.Value, err)
		}
		if _, err := cc.Get(t0+5*int64(sec), []byte("b")); err != ErrNotFound {
			t.Errorf("Get(b) after its exptime: %v", err)
		}
		if name, err := cc.Unlock(t0, A, []byte("c")); err != nil || name != "c" {
			t.Errorf("Unlock(c) = %q, %v", name, err)
		}
		if n, err := cc.Set(t0, 0, []byte("d"), nil, 0, 0, 0); err != nil || n != 4 {
			t.Errorf("Set(d) = %d, %v; want cas 4", n, err)
		}
	}
	if string(r.AppendSnapshot(nil)) != string(c.AppendSnapshot(nil)) {
		t.Errorf("the restored cache went another way")
	}
}

// TestRestoreOverLimit: a snapshot restores under a smaller memory limit;
// then growing writes fail until evictions bring the cache under it.
func TestRestoreOverLimit(t *testing.T) {
	big := Config{MemoryLimit: 1 << 20, MaxItemSize: 100}
	c := newCache(t, big)
	for i := range 10 {
		c.Set(t0, 0, fmt.Appendf(nil, "k%d", i), make([]byte, 100), 0, 0, 0)
	}
	small := Config{MemoryLimit: 5 * (2 + 100 + ItemOverhead), MaxItemSize: 100}
	r, err := Restore(small, c.AppendSnapshot(nil))
	if err != nil {
		t.Fatal(err)
	}
	if r.bytes <= small.MemoryLimit {
		t.Fatalf("not over the limit: %d", r.bytes)
	}
	if _, err := r.Set(t0, 0, []byte("new"), nil, 0, 0, 0); err != ErrNoMemory {
		t.Errorf("growing Set over the limit: %v", err)
	}
	if _, err := r.Set(t0, 0, []byte("k9"), nil, 0, 0, 0); err != nil {
		t.Errorf("shrinking Set over the limit: %v", err)
	}
	if _, err := setRoom(t, r, t0, "new", ""); err != nil {
		t.Errorf("Set with room made: %v", err)
	}
	if r.bytes > small.MemoryLimit {
		t.Errorf("bytes %d still over %d", r.bytes, small.MemoryLimit)
	}
	checkInvariants(t, r)
}

// TestRestoreErrors feeds Restore malformed snapshots.
func TestRestoreErrors(t *testing.T) {
	cfg := Config{MemoryLimit: 1 << 20, MaxItemSize: 8}
	hdr := snapBuilder(nil).header(t0, 10, 2)
	it := func(b snapBuilder, key string, cas uint64) snapBuilder {
		return b.item(key, "v", 0, math.MaxInt64, cas, 0)
	}
	valid := it(it(hdr.u(2), "a", 1), "b", 2).u(1).u(7).u(1).item("c", "v", 0, 0, 3, 0)
	if _, err := Restore(cfg, valid); err != nil {
		t.Fatalf("the valid base: %v", err)
	}
	tests := []struct {
		name string
		snap []byte
	}{
		{"empty", nil},
		{"version 0", append([]byte{0}, valid[1:]...)},
		{"version 2", append([]byte{2}, valid[1:]...)},
		{"trailing byte", append(slices.Clip(valid), 0)},
		{"flush mark 2", snapBuilder(nil).raw(1).i(t0).u(10).u(2).raw(2).u(0).u(0)},
		{"pending flush at now", snapBuilder(nil).raw(1).i(t0).u(10).u(2).raw(1).i(t0).u(0).u(0)},
		{"overlong varint", snapBuilder(nil).raw(1).i(t0).raw(0x8a, 0x00).u(2).raw(0).u(0).u(0)},
		{"varint over 64 bits", snapBuilder(nil).raw(1).i(t0).raw(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02)},
		{"absurd item count", hdr.u(1 << 60)},
		{"item count past the end", it(hdr.u(2), "a", 1).u(0)},
		{"absurd owner count", hdr.u(0).u(1 << 40)},
		{"absurd locked count", hdr.u(0).u(1).u(7).u(1 << 40)},
		{"absurd key length", hdr.u(1).u(1 << 62)},
		{"absurd value length", hdr.u(1).bytes("a").u(1 << 62)},
		{"empty key", it(hdr.u(1), "", 1).u(0)},
		{"invalid key", it(hdr.u(1), "a b", 1).u(0)},
		{"key too long", it(hdr.u(1), strings.Repeat("k", 251), 1).u(0)},
		{"value too large", hdr.u(1).item("a", "123456789", 0, 0, 1, 0).u(0)},
		{"duplicate key", it(it(hdr.u(2), "a", 1), "a", 2).u(0)},
		{"duplicate key, locked", it(hdr.u(1), "a", 1).u(1).u(7).u(1).item("a", "v", 0, 0, 2, 0)},
		{"cas 0", it(hdr.u(1), "a", 0).u(0)},
		{"cas over the counter", it(hdr.u(1), "a", 11).u(0)},
		{"shared cas", it(it(hdr.u(2), "a", 1), "b", 1).u(0)},
		{"shared cas, locked", it(hdr.u(1), "a", 1).u(1).u(7).u(1).item("c", "v", 0, 0, 1, 0)},
		{"flags over 32 bits", hdr.u(1).bytes("a").bytes("v").u(1 << 32).i(0).u(1).u(0).u(0)},
		{"epoch age over the epoch", hdr.u(1).item("a", "v", 0, 0, 1, 3).u(0)},
		{"locked item from an old epoch", hdr.u(0).u(1).u(7).u(1).item("a", "v", 0, 0, 1, 1)},
		{"owner 0", hdr.u(0).u(1).u(0).u(1).item("a", "v", 0, 0, 1, 0)},
		{"owners out of order", hdr.u(0).u(2).u(7).u(1).item("a", "v", 0, 0, 1, 0).u(3).u(1).item("b", "v", 0, 0, 2, 0)},
		{"owner twice", hdr.u(0).u(2).u(7).u(1).item("a", "v", 0, 0, 1, 0).u(7).u(1).item("b", "v", 0, 0, 2, 0)},
		{"owner without items", hdr.u(0).u(1).u(7).u(0).raw(0, 0, 0, 0, 0, 0, 0, 0, 0)},
	}
	for i := range len(valid) {
		tests = append(tests, struct {
			name string
			snap []byte
		}{fmt.Sprintf("truncated to %d bytes", i), valid[:i]})
	}
	for _, tt := range tests {
		c, err := Restore(cfg, tt.snap)
		switch {
		case err == nil:
			t.Errorf("%s: Restore succeeded: %s", tt.name, stateOf(c))
		case !errors.Is(err, ErrBadSnapshot) || !strings.HasPrefix(err.Error(), "cache: restore: "):
			t.Errorf("%s: %v, want a \"cache: restore: \" error wrapping ErrBadSnapshot", tt.name, err)
		case c != nil:
			t.Errorf("%s: a cache with the error", tt.name)
		}
	}
	if _, err := Restore(Config{}, valid); err == nil || !strings.HasPrefix(err.Error(), "cache: restore: ") {
		t.Errorf("invalid config: %v", err)
	}
}

// snapshotSeeds returns real snapshots: of small hand-made states and of
// random histories.
func snapshotSeeds(t testing.TB) [][]byte {
	var seeds [][]byte
	c := newCache(t, historyConfig)
	seeds = append(seeds, c.AppendSnapshot(nil))
	c.Set(t0, 0, []byte("a"), []byte("1"), 3, 10, 0)
	c.Set(t0, 0, []byte("b"), []byte("two"), 0, 0, 0)
	seeds = append(seeds, c.AppendSnapshot(nil))
	c.Lock(t0, A, []byte("a"), LockOnly, 0)
	c.Lock(t0, B, []byte("b"), LockTouch, 1)
	c.FlushAll(t0, 0)
	c.Set(t0, 0, []byte("c"), nil, 0, -1, 0)
	c.FlushAll(t0, 100)
	seeds = append(seeds, c.AppendSnapshot(nil))
	for seed := range 4 {
		a := newCache(t, historyConfig)
		p := newProposer(uint64(seed), a)
		for step := range 200 {
			for _, cmd := range p.next() {
				cmd.do(a, p.now)
			}
			if step%50 == 49 {
				seeds = append(seeds, a.AppendSnapshot(nil))
			}
		}
	}
	return seeds
}

// FuzzRestore feeds Restore anything: it must not panic, and what it
// accepts must be a consistent cache that snapshots to the same bytes and
// goes on working.
func FuzzRestore(f *testing.F) {
	for _, s := range snapshotSeeds(f) {
		f.Add(s)
	}
	cfg := Config{MemoryLimit: 1 << 30, MaxItemSize: historyConfig.MaxItemSize}
	f.Fuzz(func(t *testing.T, snap []byte) {
		c, err := Restore(cfg, snap)
		if err != nil {
			if c != nil || !errors.Is(err, ErrBadSnapshot) || !strings.HasPrefix(err.Error(), "cache: restore: ") {
				t.Fatalf("Restore: %v (cache %v)", err, c != nil)
			}
			return
		}
		checkInvariants(t, c)
		if again := c.AppendSnapshot(nil); string(again) != string(snap) {
			t.Fatalf("re-encoded differently:\n got %x\nwant %x", again, snap)
		}
		// It goes on working.
		now := c.now + int64(sec)
		sweep(t, c, now)
		for o := range c.owners {
			c.UnlockAll(now, o)
		}
		c.FlushAll(now, 0)
		if c.cas < math.MaxUint64 { // the counter would wrap (2^64 writes)
			if _, err := c.Set(now, 0, []byte("new"), []byte("v"), 0, 0, 0); err != nil {
				t.Fatalf("Set after restore: %v", err)
			}
		}
		checkInvariants(t, c)
	})
}
