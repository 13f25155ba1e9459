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
//	op, key (low 3 bits) | owner (next 2 bits) | lock-table variant (bit 5) |
//	table refuses (bit 6) | cas (bit 7), value length or number, time+exptime
//
// and runs the first maxFuzzOps of them on a small cache (a few items fill it, so eviction is
// frequent). Bit 5 of the second byte makes lock, unlock, delete and RaU use
// their lock-table variants (LockFunc, UnlockKey, DeleteKey,
// ReplaceAndUnlockKey), whose take refuses the key when bit 6 is set too. It checks after every step that nothing panics, that the
// cache's bookkeeping is consistent (checkInvariants: lists, byte and item
// counts, unique CAS values below the counter, the memory limit), that every
// CAS a write returns is larger than all before it, that every lock the
// operations took is still held by its owner (locked items are never
// evicted, expired or flushed, and only unlock, unlock_all, RaU and the
// holder's delete release them), and that no write by another owner changed
// a locked item. For the lock-table variants it checks that take is
// called exactly once for a valid key and a real owner, with the key, that a
// refusal changes nothing, and that the key is returned exactly when the
// caller must release it.
func FuzzCache(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		const limit = 3 * (250 + 200 + ItemOverhead)
		c := newCache(t, Config{MemoryLimit: limit, MaxItemSize: 200})
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
			variant, refuse := kb&0x20 != 0, kb&0x60 == 0x60
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
			wrote := false // a write that changes the item succeeded
			// The lock-table variants: how often take was called and
			// with what, the key they returned.
			takes, taken, name := 0, "", ""
			take := func(n string) error {
				takes++
				taken = n
				if refuse {
					return errTable
				}
				return nil
			}
			var newCAS uint64
			var err error
			switch opb % 20 {
			case 0, 1:
				_, err = c.Get(now, key)
			case 2:
				_, err = c.GetAndTouch(now, key, exptime)
			case 3:
				_, err = c.Touch(now, key, exptime)
			case 4:
				newCAS, err = c.Set(now, owner, key, value, 0, exptime, casArg)
				wrote = true
			case 5:
				newCAS, err = c.Add(now, owner, key, value, 0, exptime)
				wrote = true
			case 6:
				newCAS, err = c.Replace(now, owner, key, value, 0, exptime, casArg)
				wrote = true
			case 7:
				newCAS, err = c.CAS(now, owner, key, value, 0, exptime, casArg)
				wrote = true
			case 8:
				newCAS, err = c.Append(now, owner, key, value, casArg)
				wrote = true
			case 9:
				newCAS, err = c.Prepend(now, owner, key, value, casArg)
				wrote = true
			case 10:
				_, newCAS, err = c.Incr(now, owner, key, uint64(vb)<<56|uint64(vb), casArg)
				wrote = true
			case 11:
				_, newCAS, err = c.Decr(now, owner, key, uint64(vb), casArg)
				wrote = true
			case 12:
				var unlocked bool
				if variant {
					name, err = c.DeleteKey(now, owner, key, casArg)
					unlocked = name != ""
				} else {
					unlocked, err = c.Delete(now, owner, key, casArg)
				}
				if err == nil {
					if unlocked != (holder != 0) || (holder != 0 && holder != owner) {
						t.Fatalf("step %d: delete by %d of an item held by %d reported unlocked=%v", i, owner, holder, unlocked)
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
				switch {
				case variant:
					_, err = c.LockFunc(now, owner, key, mode, exptime, take)
					checkTake(t, i, key, owner, takes, taken)
				case mode == LockOnly:
					err = c.Lock(now, owner, key)
				case mode == LockGet:
					_, err = c.LockAndGet(now, owner, key)
				default:
					_, err = c.LockAndTouch(now, owner, key, exptime)
				}
				if refuse && takes > 0 {
					if err != errTable {
						t.Fatalf("step %d: LockFunc refused by the table: %v", i, err)
					}
					if after := snapshot(c, key); after.exists && !after.equal(before) {
						t.Fatalf("step %d: a refused lock changed the item: %+v -> %+v", i, before, after)
					}
				}
				if err == nil {
					locked[string(key)] = owner
				}
			case 16:
				if variant {
					name, err = c.UnlockKey(now, owner, key)
				} else {
					err = c.Unlock(now, owner, key)
				}
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
				if variant {
					newCAS, name, err = c.ReplaceAndUnlockKey(now, owner, key, value, 0, exptime, casArg)
				} else {
					newCAS, err = c.ReplaceAndUnlock(now, owner, key, value, 0, exptime, casArg)
				}
				if err == nil {
					delete(locked, string(key))
					if newCAS <= lastCAS {
						t.Fatalf("step %d: RaU cas %d not above %d", i, newCAS, lastCAS)
					}
					lastCAS = newCAS
				}
			case 19:
				c.Sweep(now, int(vb))
				_ = c.AppendKeys(nil, now, key[:1])
			}
			if variant && (opb%20 == 12 || opb%20 == 16 || opb%20 == 18) {
				// The key comes back exactly when a lock was dropped:
				// the holder's delete, an unlock, a RaU.
				switch release := err == nil && (opb%20 != 12 || holder != 0); {
				case release && name != string(key):
					t.Fatalf("step %d: op %d returned key %q, want %q", i, opb%20, name, key)
				case !release && name != "":
					t.Fatalf("step %d: op %d returned key %q, want none", i, opb%20, name)
				}
			}
			if wrote && err == nil {
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

// checkTake checks LockFunc's calls of take: once, with the key, for a
// valid key and a real owner; never otherwise.
func checkTake(t *testing.T, step int, key []byte, owner latch.SessionID, takes int, taken string) {
	t.Helper()
	want := 1
	if checkKey(key) != nil || owner == 0 {
		want = 0
	}
	if takes != want {
		t.Fatalf("step %d: take called %d times, want %d", step, takes, want)
	}
	if takes == 1 && taken != string(key) {
		t.Fatalf("step %d: take(%q), want take(%q)", step, taken, key)
	}
}
