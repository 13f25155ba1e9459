package cache

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/latchd/latch"
)

// fuzzKeys have varied lengths so that eviction meets items of many sizes.
var fuzzKeys = [8][]byte{
	[]byte("a"), []byte("b"), []byte("counter"), []byte("k:1"),
	[]byte("k:2"), bytes.Repeat([]byte("L"), 250), []byte("x y"), []byte("session:0123456789abcdef"),
}

var fuzzExps = [8]int64{0, 0, 1, 2, 10, -1, month + 1, t0Sec + 5}

// maxFuzzOps bounds the operations of one input, so that executions and
// minimization stay fast; longer inputs add little.
const maxFuzzOps = 256

// FuzzCache decodes its input into a sequence of operations, 4 bytes each:
//
//	op, key (low 3 bits) | owner (next 2 bits) | variant (bit 5) | cas (bit 7),
//	value length or number, time+exptime
//
// and runs the first maxFuzzOps of them on a small cache (a few items fill
// it, so room is short often). Bit 5 of the second byte makes a write make
// room first, as the proposer will (storeWithRoom: Grow, PlanRoom, Evict),
// and picks the other form of the operations that have two (see the
// switch). It checks after every step that nothing panics, that the cache's
// bookkeeping is consistent (checkInvariants: lists, byte and item counts,
// unique CAS values below the counter, the memory limit), that every CAS a
// write returns is larger than all before it, that every lock the
// operations took is still held by its owner (locked items are never
// evicted, expired or flushed, and only unlock, unlock_all, RaU and the
// holder's delete release them), that no write by another owner changed a
// locked item, that a write for which room was made does not fail with
// ErrNoMemory, that reads change no replicated state, and that Lock, Unlock,
// Delete and RaU name the key exactly when they should. At the end it
// checks that a snapshot restores to a cache that snapshots the same.
func FuzzCache(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		const limit = 3 * (250 + 200 + ItemOverhead)
		cfg := Config{MemoryLimit: limit, MaxItemSize: 200}
		c := newCache(t, cfg)
		now := t0
		var lastCAS uint64
		locked := map[string]latch.SessionID{}
		var scratch [256]byte
		if len(data) > 4*maxFuzzOps {
			data = data[:4*maxFuzzOps]
		}
		for i := 0; len(data) >= 4; i++ {
			opb, kb, vb, tb := data[0], data[1], data[2], data[3]
			data = data[4:]
			key := fuzzKeys[kb&7]
			owner := latch.SessionID(kb >> 3 & 3)
			variant := kb&0x20 != 0
			now += int64(tb>>3) * int64(sec) / 4
			exptime := fuzzExps[tb&7]
			// The value: digits for small numbers, else a pattern of
			// length vb. The caller's buffer is reused every step.
			var value []byte
			if vb < 16 {
				value = fmt.Appendf(scratch[:0], "%d", uint64(vb)*1e18)
			} else {
				value = scratch[:vb-16]
				for j := range value {
					value[j] = byte(i + j)
				}
			}
			var casArg uint64
			if kb&0x80 != 0 {
				if e := c.items[string(key)]; e != nil {
					casArg = e.cas
				} else {
					casArg = lastCAS
				}
			}
			before := snapshot(c, key)
			holder := locked[string(key)]
			had := c.items[string(key)] != nil // an item of key, live or dead
			wrote := false                     // a write that changes the item succeeded
			name := ""                         // the key a lock operation returned
			// write runs a write, after making room for it if variant.
			roomMade := false
			write := func(valueLen int, concat bool, do func()) {
				if !variant {
					do()
					return
				}
				if _, err := storeWithRoom(t, c, now, key, valueLen, concat, do); err == nil {
					roomMade = true
				}
			}
			var newCAS uint64
			err := error(nil)
			var state []byte // for reads: the replicated state before
			switch opb % 20 {
			case 0, 1:
				if variant && opb%20 == 1 {
					state = c.AppendSnapshot(nil)
					n, live, by := c.Name(now, key)
					e := c.items[string(key)]
					switch {
					case e == nil && (n != "" || live || by != 0):
						t.Fatalf("step %d: Name of a missing item = %q %v %d", i, n, live, by)
					case e != nil && (n != e.key || by != e.owner || live != !c.dead(e, max(now, c.now))):
						t.Fatalf("step %d: Name = %q %v %d, item %+v", i, n, live, by, e)
					}
					break
				}
				state = stateOf(c)
				_, err = c.Get(now, key)
			case 2:
				_, err = c.GetAndTouch(now, key, exptime)
			case 3:
				_, err = c.Touch(now, key, exptime)
			case 4:
				write(len(value), false, func() { newCAS, err = c.Set(now, owner, key, value, 0, exptime, casArg) })
				wrote = true
			case 5:
				write(len(value), false, func() { newCAS, err = c.Add(now, owner, key, value, 0, exptime, 0) })
				wrote = true
			case 6:
				write(len(value), false, func() { newCAS, err = c.Replace(now, owner, key, value, 0, exptime, casArg) })
				wrote = true
			case 7:
				write(len(value), false, func() { newCAS, err = c.CAS(now, owner, key, value, 0, exptime, casArg) })
				wrote = true
			case 8:
				write(len(value), true, func() { newCAS, err = c.Append(now, owner, key, value, casArg) })
				wrote = true
			case 9:
				write(len(value), true, func() { newCAS, err = c.Prepend(now, owner, key, value, casArg) })
				wrote = true
			case 10:
				write(20, false, func() { _, newCAS, err = c.Incr(now, owner, key, uint64(vb)<<56|uint64(vb), casArg) })
				wrote = true
			case 11:
				write(20, false, func() { _, newCAS, err = c.Decr(now, owner, key, uint64(vb), casArg) })
				wrote = true
			case 12:
				name, err = c.Delete(now, owner, key, casArg)
				if err == nil {
					if (name != "") != (holder != 0) || (holder != 0 && holder != owner) {
						t.Fatalf("step %d: delete by %d of an item held by %d reported unlocked=%q", i, owner, holder, name)
					}
					delete(locked, string(key))
				}
			case 13:
				c.FlushAll(now, []int64{0, 1, 3, t0Sec + 2}[vb&3])
			case 14, 15:
				mode := LockOnly
				if opb%20 == 15 {
					mode = []LockMode{LockGet, LockTouch}[vb&1]
				}
				_, name, err = c.Lock(now, owner, key, mode, exptime)
				want := ""
				if had && CheckKey(key) == nil && owner != 0 {
					want = string(key)
				}
				if name != want {
					t.Fatalf("step %d: Lock(%q) by %d named %q, want %q (err %v)", i, key, owner, name, want, err)
				}
				if err == nil {
					locked[string(key)] = owner
				}
			case 16:
				name, err = c.Unlock(now, owner, key)
				if err == nil {
					delete(locked, string(key))
				}
			case 17:
				n := c.UnlockAll(now, owner)
				want := 0
				for k, o := range locked {
					if o == owner && owner != 0 {
						delete(locked, k)
						want++
					}
				}
				if n != want {
					t.Fatalf("step %d: UnlockAll(%d) = %d, want %d", i, owner, n, want)
				}
			case 18:
				write(len(value), false, func() { newCAS, name, err = c.ReplaceAndUnlock(now, owner, key, value, 0, exptime, casArg) })
				if err == nil && (!variant || roomMade) {
					delete(locked, string(key))
					if newCAS <= lastCAS {
						t.Fatalf("step %d: RaU cas %d not above %d", i, newCAS, lastCAS)
					}
					lastCAS = newCAS
				}
			case 19:
				if variant {
					// The proposer makes room for a write that never
					// comes: a plan for vb bytes more, applied.
					_, _ = storeWithRoom(t, c, now, key, int(vb)*4, false, func() {})
					break
				}
				state = c.AppendSnapshot(nil)
				victims := c.Expired(nil, now, int(vb))
				_ = c.AppendKeys(nil, now, key[:1])
				_ = c.CountSizes(now, []int64{200, 400})
				_, _ = c.PlanRoom(nil, now, key, c.Grow(now, key, int(vb), vb&1 != 0))
				if after := c.AppendSnapshot(nil); string(after) != string(state) {
					t.Fatalf("step %d: a read changed the replicated state", i)
				}
				state = nil
				for _, v := range victims {
					if e := c.items[v.Key]; e == nil || e.cas != v.CAS || e.owner != 0 || !c.dead(e, now) {
						t.Fatalf("step %d: Expired named %q (cas %d), not a dead unlocked item: %+v", i, v.Key, v.CAS, e)
					}
					if !c.Evict(now, []byte(v.Key), v.CAS) {
						t.Fatalf("step %d: Evict of Expired's %q removed nothing", i, v.Key)
					}
				}
			}
			if state != nil {
				// A read: Name and the rest change nothing, Get at most
				// the LRU order.
				after, what := c.AppendSnapshot(nil), "snapshot"
				if opb%20 != 1 || !variant {
					after, what = stateOf(c), "state"
				}
				if string(after) != string(state) {
					t.Fatalf("step %d: a read (op %d) changed the replicated %s", i, opb%20, what)
				}
			}
			if opb%20 == 12 || opb%20 == 16 || opb%20 == 18 {
				// The key comes back exactly when a lock was dropped:
				// the holder's delete, an unlock, a RaU.
				switch release := err == nil && (opb%20 != 12 || holder != 0) && (opb%20 != 18 || !variant || roomMade); {
				case release && name != string(key):
					t.Fatalf("step %d: op %d returned key %q, want %q", i, opb%20, name, key)
				case !release && name != "":
					t.Fatalf("step %d: op %d returned key %q, want none", i, opb%20, name)
				}
			}
			if wrote && roomMade && err == ErrNoMemory {
				t.Fatalf("step %d: op %d: ErrNoMemory after room was made", i, opb%20)
			}
			if wrote && err == nil && (!variant || roomMade) {
				if holder != 0 && holder != owner {
					t.Fatalf("step %d: op %d by owner %d succeeded on an item locked by %d", i, opb%20, owner, holder)
				}
				if newCAS <= lastCAS {
					t.Fatalf("step %d: op %d returned cas %d, not above the last %d", i, opb%20, newCAS, lastCAS)
				}
				lastCAS = newCAS
			}
			if err == ErrLocked && wrote && (holder == 0 || holder == owner) {
				t.Fatalf("step %d: ErrLocked for owner %d, holder %d", i, owner, holder)
			}
			if holder != 0 && holder != owner && opb%20 >= 4 && opb%20 <= 12 {
				if after := snapshot(c, key); !after.equal(before) {
					t.Fatalf("step %d: a write by %d changed an item locked by %d: %+v -> %+v", i, owner, holder, before, after)
				}
			}
			checkInvariants(t, c)
			for k, o := range locked {
				e := c.items[k]
				if e == nil || e.owner != o {
					t.Fatalf("step %d: item %q locked by %d is gone or not locked (%v)", i, k, o, e)
				}
			}
			if c.locked != len(locked) {
				t.Fatalf("step %d: %d locked items, the operations took %d", i, c.locked, len(locked))
			}
		}
		snap := c.AppendSnapshot(nil)
		r, err := Restore(cfg, snap)
		if err != nil {
			t.Fatalf("Restore of a snapshot: %v", err)
		}
		checkInvariants(t, r)
		if again := r.AppendSnapshot(nil); string(again) != string(snap) {
			t.Fatalf("a restored cache snapshots differently")
		}
	})
}

// itemState is the stored state of a key's item (ignoring expiry); values
// are never written once stored, so keeping the slice is enough.
type itemState struct {
	exists bool
	value  []byte
	flags  uint32
	cas    uint64
	exp    int64
	owner  latch.SessionID
}

func snapshot(c *Cache, key []byte) itemState {
	e := c.items[string(key)]
	if e == nil {
		return itemState{}
	}
	return itemState{true, e.value, e.flags, e.cas, e.exp, e.owner}
}

func (a itemState) equal(b itemState) bool {
	return a.exists == b.exists && bytes.Equal(a.value, b.value) && a.flags == b.flags &&
		a.cas == b.cas && a.exp == b.exp && a.owner == b.owner
}
