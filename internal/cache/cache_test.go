package cache

import (
	"errors"
	"fmt"
	"testing"

	"github.com/latchd/latch"
)

// Lock owners.
const (
	A latch.SessionID = 1
	B latch.SessionID = 2
)

const month = MaxRelativeExptime

func TestGet(t *testing.T) {
	runScenarios(t, []scenario{
		{name: "miss", steps: []step{
			{0, get("k"), res{Err: ErrNotFound}},
		}},
		{name: "hit returns value flags and cas", steps: []step{
			{0, set(0, "k", "v", 42, 0), res{CAS: 1}},
			{0, get("k"), res{Val: "v", Flags: 42, CAS: 1}},
			{0, get("k"), res{Val: "v", Flags: 42, CAS: 1}},
		}},
		{name: "empty value", steps: []step{
			{0, set(0, "k", "", 0, 0), res{CAS: 1}},
			{0, get("k"), res{Val: "", CAS: 1}},
		}},
		{name: "invalid keys", steps: []step{
			{0, get(""), res{Err: ErrInvalidKey}},
			{0, get("a b"), res{Err: ErrInvalidKey}},
			{0, get("a\r"), res{Err: ErrInvalidKey}},
			{0, get("a\n"), res{Err: ErrInvalidKey}},
			{0, get(key(251)), res{Err: ErrInvalidKey}},
			{0, get(key(250)), res{Err: ErrNotFound}},
			{0, get("a\tb"), res{Err: ErrNotFound}},
		}},
		{name: "reads work on a locked item", steps: []step{
			{0, set(0, "k", "v", 0, 0), res{CAS: 1}},
			{0, lock(A, "k"), res{}},
			{0, get("k"), res{Val: "v", CAS: 1}},
			{0, keys(""), res{Keys: []string{"k"}}},
		}},
	})
}

func TestValueCopies(t *testing.T) {
	c := newCache(t, testConfig())
	buf := []byte("hello")
	if _, err := c.Set(t0, 0, []byte("k"), buf, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	copy(buf, "XXXXX") // the caller reuses its buffer
	it, err := c.Get(t0, []byte("k"))
	if err != nil || string(it.Value) != "hello" {
		t.Fatalf("Get = %q, %v; want hello", it.Value, err)
	}
	if cap(it.Value) != len(it.Value) {
		t.Errorf("returned value has spare capacity %d > %d", cap(it.Value), len(it.Value))
	}
	// A value read earlier is not changed by later writes.
	c.Append(t0, 0, []byte("k"), []byte(" world"), 0)
	c.Set(t0, 0, []byte("k"), []byte("other"), 0, 0, 0)
	if string(it.Value) != "hello" {
		t.Errorf("a value read earlier changed to %q", it.Value)
	}
	// Keys are copied too.
	k := []byte("key2")
	c.Set(t0, 0, k, nil, 0, 0, 0)
	copy(k, "XXXX")
	if _, err := c.Get(t0, []byte("key2")); err != nil {
		t.Errorf("Get(key2) after the caller reused the key buffer: %v", err)
	}
}

func TestSet(t *testing.T) {
	small := Config{MemoryLimit: 1 << 20, MaxItemSize: 4}
	runScenarios(t, []scenario{
		{name: "store and overwrite", steps: []step{
			{0, set(0, "k", "v1", 1, 0), res{CAS: 1}},
			{0, set(0, "k", "v2", 2, 0), res{CAS: 2}},
			{0, get("k"), res{Val: "v2", Flags: 2, CAS: 2}},
		}},
		{name: "cas is one counter for all keys", steps: []step{
			{0, set(0, "a", "1", 0, 0), res{CAS: 1}},
			{0, set(0, "b", "1", 0, 0), res{CAS: 2}},
			{0, set(0, "a", "1", 0, 0), res{CAS: 3}},
		}},
		{name: "size limit", cfg: &small, steps: []step{
			{0, set(0, "k", "12345", 0, 0), res{Err: ErrTooLarge}},
			{0, set(0, "k", "1234", 0, 0), res{CAS: 1}},
			{0, set(0, "k", "12345", 0, 0), res{Err: ErrTooLarge}},
			{0, get("k"), res{Val: "1234", CAS: 1}},
		}},
		{name: "invalid key", steps: []step{
			{0, set(0, "", "v", 0, 0), res{Err: ErrInvalidKey}},
			{0, set(0, "a b", "v", 0, 0), res{Err: ErrInvalidKey}},
			{0, set(0, key(251), "v", 0, 0), res{Err: ErrInvalidKey}},
			{0, set(0, key(250), "v", 0, 0), res{CAS: 1}},
		}},
		{name: "with cas (binary Set)", steps: []step{
			{0, setCAS(0, "k", "v", 0, 0, 7), res{Err: ErrNotFound}},
			{0, set(0, "k", "v", 0, 0), res{CAS: 1}},
			{0, setCAS(0, "k", "w", 0, 0, 2), res{Err: ErrExists}},
			{0, setCAS(0, "k", "w", 0, 0, 1), res{CAS: 2}},
			{0, get("k"), res{Val: "w", CAS: 2}},
		}},
		{name: "a new item after an expired one", steps: []step{
			{0, set(0, "k", "v", 0, 1), res{CAS: 1}},
			{sec, set(0, "k", "w", 0, 0), res{CAS: 2}},
			{sec, get("k"), res{Val: "w", CAS: 2}},
		}},
	})
}

func TestAdd(t *testing.T) {
	runScenarios(t, []scenario{
		{name: "missing key", steps: []step{
			{0, add(0, "k", "v", 3, 0), res{CAS: 1}},
			{0, get("k"), res{Val: "v", Flags: 3, CAS: 1}},
		}},
		{name: "live key", steps: []step{
			{0, set(0, "k", "v", 0, 0), res{CAS: 1}},
			{0, add(0, "k", "w", 0, 0), res{Err: ErrExists}},
			{0, get("k"), res{Val: "v", CAS: 1}},
		}},
		{name: "expired key", steps: []step{
			{0, set(0, "k", "v", 0, 1), res{CAS: 1}},
			{sec, add(0, "k", "w", 0, 0), res{CAS: 2}},
		}},
		{name: "deleted key", steps: []step{
			{0, set(0, "k", "v", 0, 0), res{CAS: 1}},
			{0, del(0, "k", 0), res{}},
			{0, add(0, "k", "w", 0, 0), res{CAS: 2}},
		}},
	})
}

func TestReplace(t *testing.T) {
	runScenarios(t, []scenario{
		{name: "missing key", steps: []step{
			{0, replace(0, "k", "v", 0, 0, 0), res{Err: ErrNotStored}},
			{0, get("k"), res{Err: ErrNotFound}},
		}},
		{name: "live key", steps: []step{
			{0, set(0, "k", "v", 1, 0), res{CAS: 1}},
			{0, replace(0, "k", "w", 2, 0, 0), res{CAS: 2}},
			{0, get("k"), res{Val: "w", Flags: 2, CAS: 2}},
		}},
		{name: "expired key", steps: []step{
			{0, set(0, "k", "v", 0, 1), res{CAS: 1}},
			{sec, replace(0, "k", "w", 0, 0, 0), res{Err: ErrNotStored}},
		}},
		{name: "with cas", steps: []step{
			{0, replace(0, "k", "v", 0, 0, 1), res{Err: ErrNotStored}},
			{0, set(0, "k", "v", 0, 0), res{CAS: 1}},
			{0, replace(0, "k", "w", 0, 0, 5), res{Err: ErrExists}},
			{0, replace(0, "k", "w", 0, 0, 1), res{CAS: 2}},
		}},
	})
}

func TestCAS(t *testing.T) {
	runScenarios(t, []scenario{
		{name: "match", steps: []step{
			{0, set(0, "k", "v", 0, 0), res{CAS: 1}},
			{0, cas(0, "k", "w", 9, 0, 1), res{CAS: 2}},
			{0, get("k"), res{Val: "w", Flags: 9, CAS: 2}},
		}},
		{name: "mismatch", steps: []step{
			{0, set(0, "k", "v", 0, 0), res{CAS: 1}},
			{0, set(0, "k", "v2", 0, 0), res{CAS: 2}},
			{0, cas(0, "k", "w", 0, 0, 1), res{Err: ErrExists}},
			{0, get("k"), res{Val: "v2", CAS: 2}},
		}},
		{name: "zero never matches", steps: []step{
			{0, set(0, "k", "v", 0, 0), res{CAS: 1}},
			{0, cas(0, "k", "w", 0, 0, 0), res{Err: ErrExists}},
		}},
		{name: "missing", steps: []step{
			{0, cas(0, "k", "w", 0, 0, 1), res{Err: ErrNotFound}},
		}},
		{name: "expired", steps: []step{
			{0, set(0, "k", "v", 0, 1), res{CAS: 1}},
			{sec, cas(0, "k", "w", 0, 0, 1), res{Err: ErrNotFound}},
		}},
		{name: "deleted and re-created key refuses the old cas", steps: []step{
			{0, set(0, "k", "v", 0, 0), res{CAS: 1}},
			{0, del(0, "k", 0), res{}},
			{0, set(0, "k", "v", 0, 0), res{CAS: 2}},
			{0, cas(0, "k", "w", 0, 0, 1), res{Err: ErrExists}},
			{0, cas(0, "k", "w", 0, 0, 2), res{CAS: 3}},
		}},
		{name: "touch keeps the cas", steps: []step{
			{0, set(0, "k", "v", 0, 0), res{CAS: 1}},
			{0, touch("k", 100), res{CAS: 1}},
			{0, cas(0, "k", "w", 0, 0, 1), res{CAS: 2}},
		}},
	})
}

func TestAppendPrepend(t *testing.T) {
	small := Config{MemoryLimit: 1 << 20, MaxItemSize: 4}
	runScenarios(t, []scenario{
		{name: "missing", steps: []step{
			{0, appendOp(0, "k", "x", 0), res{Err: ErrNotStored}},
			{0, prepend(0, "k", "x", 0), res{Err: ErrNotStored}},
			{0, get("k"), res{Err: ErrNotFound}},
		}},
		{name: "append and prepend keep flags and exptime", steps: []step{
			{0, set(0, "k", "b", 5, 10), res{CAS: 1}},
			{0, appendOp(0, "k", "c", 0), res{CAS: 2}},
			{0, prepend(0, "k", "a", 0), res{CAS: 3}},
			{0, appendOp(0, "k", "", 0), res{CAS: 4}},
			{9 * sec, get("k"), res{Val: "abc", Flags: 5, CAS: 4}},
			{10 * sec, get("k"), res{Err: ErrNotFound}},
		}},
		{name: "expired", steps: []step{
			{0, set(0, "k", "v", 0, 1), res{CAS: 1}},
			{sec, appendOp(0, "k", "x", 0), res{Err: ErrNotStored}},
		}},
		{name: "result too large", cfg: &small, steps: []step{
			{0, set(0, "k", "abc", 0, 0), res{CAS: 1}},
			{0, appendOp(0, "k", "de", 0), res{Err: ErrTooLarge}},
			{0, prepend(0, "k", "de", 0), res{Err: ErrTooLarge}},
			{0, appendOp(0, "k", "d", 0), res{CAS: 2}},
			{0, get("k"), res{Val: "abcd", CAS: 2}},
		}},
		{name: "with cas", steps: []step{
			{0, set(0, "k", "a", 0, 0), res{CAS: 1}},
			{0, appendOp(0, "k", "b", 9), res{Err: ErrExists}},
			{0, prepend(0, "k", "b", 9), res{Err: ErrExists}},
			{0, appendOp(0, "k", "b", 1), res{CAS: 2}},
			{0, prepend(0, "k", "c", 2), res{CAS: 3}},
			{0, get("k"), res{Val: "cab", CAS: 3}},
		}},
	})
}

func TestIncrDecr(t *testing.T) {
	runScenarios(t, []scenario{
		{name: "missing", steps: []step{
			{0, incr(0, "k", 1, 0), res{Err: ErrNotFound}},
			{0, decr(0, "k", 1, 0), res{Err: ErrNotFound}},
		}},
		{name: "incr and decr", steps: []step{
			{0, set(0, "k", "10", 7, 0), res{CAS: 1}},
			{0, incr(0, "k", 5, 0), res{N: 15, CAS: 2}},
			{0, decr(0, "k", 6, 0), res{N: 9, CAS: 3}},
			{0, get("k"), res{Val: "9", Flags: 7, CAS: 3}}, // just the digits
			{0, incr(0, "k", 1, 0), res{N: 10, CAS: 4}},
			{0, get("k"), res{Val: "10", Flags: 7, CAS: 4}},
		}},
		{name: "incr wraps at 2^64", steps: []step{
			{0, set(0, "k", "18446744073709551615", 0, 0), res{CAS: 1}},
			{0, incr(0, "k", 2, 0), res{N: 1, CAS: 2}},
			{0, get("k"), res{Val: "1", CAS: 2}},
		}},
		{name: "decr stops at 0", steps: []step{
			{0, set(0, "k", "5", 0, 0), res{CAS: 1}},
			{0, decr(0, "k", 6, 0), res{N: 0, CAS: 2}},
			{0, decr(0, "k", 1, 0), res{N: 0, CAS: 3}},
			{0, get("k"), res{Val: "0", CAS: 3}},
		}},
		{name: "leading zeros", steps: []step{
			{0, set(0, "k", "007", 0, 0), res{CAS: 1}},
			{0, incr(0, "k", 1, 0), res{N: 8, CAS: 2}},
			{0, get("k"), res{Val: "8", CAS: 2}},
		}},
		{name: "keeps exptime", steps: []step{
			{0, set(0, "k", "1", 0, 2), res{CAS: 1}},
			{sec, incr(0, "k", 1, 0), res{N: 2, CAS: 2}},
			{2 * sec, get("k"), res{Err: ErrNotFound}},
		}},
		{name: "with cas", steps: []step{
			{0, set(0, "k", "1", 0, 0), res{CAS: 1}},
			{0, incr(0, "k", 1, 5), res{Err: ErrExists}},
			{0, incr(0, "k", 1, 1), res{N: 2, CAS: 2}},
			{0, decr(0, "k", 1, 1), res{Err: ErrExists}},
			{0, decr(0, "k", 1, 2), res{N: 1, CAS: 3}},
		}},
	})
	for _, v := range []string{"", "abc", "12abc", " 1", "1 ", "-1", "+1", "1.0", "0x10", "18446744073709551616", "99999999999999999999", "00000000000000000000018446744073709551616"} {
		t.Run(fmt.Sprintf("non-numeric %q", v), func(t *testing.T) {
			c := newCache(t, testConfig())
			c.Set(t0, 0, []byte("k"), []byte(v), 0, 0, 0)
			for _, f := range []func(int64, latch.SessionID, []byte, uint64, uint64) (uint64, uint64, error){c.Incr, c.Decr} {
				if _, _, err := f(t0, 0, []byte("k"), 1, 0); err != ErrNonNumeric {
					t.Errorf("err = %v, want ErrNonNumeric", err)
				}
			}
			if it, _ := c.Get(t0, []byte("k")); string(it.Value) != v || it.CAS != 1 {
				t.Errorf("item changed to %q cas %d", it.Value, it.CAS)
			}
		})
	}
	for v, want := range map[string]uint64{
		"0": 1, "18446744073709551614": 18446744073709551615, "00000000000000000009": 10, "000000000000000000000000001": 2,
	} {
		c := newCache(t, testConfig())
		c.Set(t0, 0, []byte("k"), []byte(v), 0, 0, 0)
		if n, _, err := c.Incr(t0, 0, []byte("k"), 1, 0); err != nil || n != want {
			t.Errorf("incr %q by 1 = %d, %v; want %d", v, n, err, want)
		}
	}
}

func TestTouch(t *testing.T) {
	runScenarios(t, []scenario{
		{name: "missing", steps: []step{
			{0, touch("k", 10), res{Err: ErrNotFound}},
			{0, gat("k", 10), res{Err: ErrNotFound}},
		}},
		{name: "touch extends the life", steps: []step{
			{0, set(0, "k", "v", 0, 2), res{CAS: 1}},
			{sec, touch("k", 5), res{CAS: 1}},
			{5 * sec, get("k"), res{Val: "v", CAS: 1}},
			{6 * sec, get("k"), res{Err: ErrNotFound}},
			{6 * sec, touch("k", 5), res{Err: ErrNotFound}},
		}},
		{name: "touch to never", steps: []step{
			{0, set(0, "k", "v", 0, 2), res{CAS: 1}},
			{sec, touch("k", 0), res{CAS: 1}},
			{1000 * sec, get("k"), res{Val: "v", CAS: 1}},
		}},
		{name: "touch with negative exptime expires", steps: []step{
			{0, set(0, "k", "v", 0, 0), res{CAS: 1}},
			{0, touch("k", -1), res{CAS: 1}},
			{0, get("k"), res{Err: ErrNotFound}},
		}},
		{name: "gat returns and touches", steps: []step{
			{0, set(0, "k", "v", 3, 2), res{CAS: 1}},
			{sec, gat("k", 10), res{Val: "v", Flags: 3, CAS: 1}},
			{10 * sec, get("k"), res{Val: "v", Flags: 3, CAS: 1}},
			{11 * sec, gat("k", 10), res{Err: ErrNotFound}},
		}},
		{name: "touch ignores locks and locked items do not expire", steps: []step{
			{0, set(0, "k", "v", 0, 0), res{CAS: 1}},
			{0, lock(A, "k"), res{}},
			{0, touch("k", 1), res{CAS: 1}},
			{0, gat("k", 2), res{Val: "v", CAS: 1}},
			{5 * sec, get("k"), res{Val: "v", CAS: 1}},
			{5 * sec, unlock(A, "k"), res{}},
			{5 * sec, get("k"), res{Err: ErrNotFound}},
		}},
	})
}

func TestDelete(t *testing.T) {
	runScenarios(t, []scenario{
		{name: "missing", steps: []step{
			{0, del(0, "k", 0), res{Err: ErrNotFound}},
		}},
		{name: "hit", steps: []step{
			{0, set(0, "k", "v", 0, 0), res{CAS: 1}},
			{0, del(0, "k", 0), res{}},
			{0, get("k"), res{Err: ErrNotFound}},
			{0, del(0, "k", 0), res{Err: ErrNotFound}},
		}},
		{name: "expired is not found (memcached, not yrmcds)", steps: []step{
			{0, set(0, "k", "v", 0, 1), res{CAS: 1}},
			{sec, del(0, "k", 0), res{Err: ErrNotFound}},
		}},
		{name: "with cas", steps: []step{
			{0, set(0, "k", "v", 0, 0), res{CAS: 1}},
			{0, del(0, "k", 2), res{Err: ErrExists}},
			{0, get("k"), res{Val: "v", CAS: 1}},
			{0, del(0, "k", 1), res{}},
		}},
	})
}

func TestExptime(t *testing.T) {
	runScenarios(t, []scenario{
		{name: "zero never expires", steps: []step{
			{0, set(0, "k", "v", 0, 0), res{CAS: 1}},
			{100 * 365 * 24 * 3600 * sec, get("k"), res{Val: "v", CAS: 1}},
		}},
		{name: "relative", steps: []step{
			{0, set(0, "k", "v", 0, 10), res{CAS: 1}},
			{10*sec - 1, get("k"), res{Val: "v", CAS: 1}},
			{10 * sec, get("k"), res{Err: ErrNotFound}},
		}},
		{name: "30 days is still relative", steps: []step{
			{0, set(0, "k", "v", 0, month), res{CAS: 1}},
			{month*sec - 1, get("k"), res{Val: "v", CAS: 1}},
			{month * sec, get("k"), res{Err: ErrNotFound}},
		}},
		{name: "30 days and a second is absolute, long past", steps: []step{
			{0, set(0, "k", "v", 0, month+1), res{CAS: 1}},
			{0, get("k"), res{Err: ErrNotFound}},
		}},
		{name: "absolute future", steps: []step{
			{0, set(0, "k", "v", 0, t0Sec+100), res{CAS: 1}},
			{100*sec - 1, get("k"), res{Val: "v", CAS: 1}},
			{100 * sec, get("k"), res{Err: ErrNotFound}},
		}},
		{name: "absolute now is expired", steps: []step{
			{0, set(0, "k", "v", 0, t0Sec), res{CAS: 1}},
			{0, get("k"), res{Err: ErrNotFound}},
		}},
		{name: "negative is expired at once", steps: []step{
			{0, set(0, "k", "old", 0, 0), res{CAS: 1}},
			{0, set(0, "k", "v", 0, -1), res{CAS: 2}},
			{0, get("k"), res{Err: ErrNotFound}},
		}},
		{name: "huge absolute never overflows", steps: []step{
			{0, set(0, "k", "v", 0, 1<<62), res{CAS: 1}},
			{1000 * sec, get("k"), res{Val: "v", CAS: 1}},
		}},
		{name: "time never runs backwards", steps: []step{
			{10 * sec, set(0, "k", "v", 0, 5), res{CAS: 1}}, // expires at 15s
			{0, get("k"), res{Val: "v", CAS: 1}},            // 0 counts as 10s
			{14 * sec, get("k"), res{Val: "v", CAS: 1}},
			{15 * sec, get("k"), res{Err: ErrNotFound}},
		}},
	})
}

func TestFlushAll(t *testing.T) {
	runScenarios(t, []scenario{
		{name: "now", steps: []step{
			{0, set(0, "a", "1", 0, 0), res{CAS: 1}},
			{0, set(0, "b", "2", 0, 0), res{CAS: 2}},
			{0, flush(0), res{}},
			{0, get("a"), res{Err: ErrNotFound}},
			{0, get("b"), res{Err: ErrNotFound}},
			{0, add(0, "a", "x", 0, 0), res{CAS: 3}},
			{0, replace(0, "b", "x", 0, 0, 0), res{Err: ErrNotStored}},
		}},
		{name: "items stored after the flush at the same instant stay", steps: []step{
			{0, set(0, "a", "1", 0, 0), res{CAS: 1}},
			{0, flush(0), res{}},
			{0, set(0, "b", "2", 0, 0), res{CAS: 2}},
			{0, get("b"), res{Val: "2", CAS: 2}},
			{sec, get("b"), res{Val: "2", CAS: 2}},
			{sec, keys(""), res{Keys: []string{"b"}}},
		}},
		{name: "delayed", steps: []step{
			{0, set(0, "a", "1", 0, 0), res{CAS: 1}},
			{0, flush(10), res{}},
			{5 * sec, set(0, "b", "2", 0, 0), res{CAS: 2}}, // before the flush instant: flushed too
			{10*sec - 1, get("a"), res{Val: "1", CAS: 1}},
			{10*sec - 1, get("b"), res{Val: "2", CAS: 2}},
			{10 * sec, set(0, "c", "3", 0, 0), res{CAS: 3}}, // at the instant, after it took effect
			{10 * sec, get("a"), res{Err: ErrNotFound}},
			{10 * sec, get("b"), res{Err: ErrNotFound}},
			{11 * sec, get("c"), res{Val: "3", CAS: 3}},
		}},
		{name: "delayed with absolute time", steps: []step{
			{0, set(0, "a", "1", 0, 0), res{CAS: 1}},
			{0, flush(t0Sec + 60), res{}},
			{59 * sec, get("a"), res{Val: "1", CAS: 1}},
			{60 * sec, get("a"), res{Err: ErrNotFound}},
		}},
		{name: "absolute time in the past is now", steps: []step{
			{0, set(0, "a", "1", 0, 0), res{CAS: 1}},
			{0, flush(t0Sec - 60), res{}},
			{0, get("a"), res{Err: ErrNotFound}},
		}},
		{name: "a later flush replaces a pending one", steps: []step{
			{0, set(0, "a", "1", 0, 0), res{CAS: 1}},
			{0, flush(10), res{}},
			{sec, flush(100), res{}},
			{50 * sec, get("a"), res{Val: "1", CAS: 1}},
			{101 * sec, get("a"), res{Err: ErrNotFound}},
		}},
		{name: "locked items survive and stay after unlock", steps: []step{
			{0, set(0, "a", "1", 0, 0), res{CAS: 1}},
			{0, set(0, "b", "2", 0, 0), res{CAS: 2}},
			{0, lock(A, "a"), res{}},
			{0, flush(0), res{}},
			{0, get("a"), res{Val: "1", CAS: 1}},
			{0, get("b"), res{Err: ErrNotFound}},
			{sec, unlock(A, "a"), res{}},
			{sec, get("a"), res{Val: "1", CAS: 1}},
			{sec, flush(0), res{}},
			{sec, get("a"), res{Err: ErrNotFound}},
		}},
		{name: "delayed: locked at the instant survives, unlocked before is flushed", steps: []step{
			{0, set(0, "a", "1", 0, 0), res{CAS: 1}},
			{0, set(0, "b", "2", 0, 0), res{CAS: 2}},
			{0, lock(A, "a"), res{}},
			{0, lock(B, "b"), res{}},
			{0, flush(10), res{}},
			{5 * sec, unlock(B, "b"), res{}},
			{20 * sec, unlock(A, "a"), res{}},
			{20 * sec, get("a"), res{Val: "1", CAS: 1}},
			{20 * sec, get("b"), res{Err: ErrNotFound}},
		}},
	})
}

func TestLock(t *testing.T) {
	runScenarios(t, []scenario{
		{name: "missing", steps: []step{
			{0, lock(A, "k"), res{Err: ErrNotFound}},
		}},
		{name: "expired", steps: []step{
			{0, set(0, "k", "v", 0, 1), res{CAS: 1}},
			{sec, lock(A, "k"), res{Err: ErrNotFound}},
		}},
		{name: "not re-entrant", steps: []step{
			{0, set(0, "k", "v", 0, 0), res{CAS: 1}},
			{0, lock(A, "k"), res{}},
			{0, lock(A, "k"), res{Err: ErrLocked}},
			{0, lock(B, "k"), res{Err: ErrLocked}},
		}},
		{name: "owner 0", steps: []step{
			{0, set(0, "k", "v", 0, 0), res{CAS: 1}},
			{0, lock(0, "k"), res{Err: latch.ErrNoSession}},
			{0, set(0, "k", "w", 0, 0), res{CAS: 2}},
		}},
		{name: "invalid key", steps: []step{
			{0, lock(A, ""), res{Err: ErrInvalidKey}},
			{0, unlock(A, "a b"), res{Err: ErrInvalidKey}},
		}},
		{name: "lock does not change the cas or the exptime", steps: []step{
			{0, set(0, "k", "v", 0, 5), res{CAS: 1}},
			{0, lock(A, "k"), res{}},
			{0, unlock(A, "k"), res{}},
			{4 * sec, get("k"), res{Val: "v", CAS: 1}},
			{5 * sec, get("k"), res{Err: ErrNotFound}},
		}},
		{name: "lock after unlock", steps: []step{
			{0, set(0, "k", "v", 0, 0), res{CAS: 1}},
			{0, lock(A, "k"), res{}},
			{0, unlock(A, "k"), res{}},
			{0, lock(B, "k"), res{}},
			{0, set(A, "k", "w", 0, 0), res{Err: ErrLocked}},
		}},
	})
}

// TestWritesOnLockedItem checks every write against an item locked by
// another owner (LOCKED, nothing changes), and by the acting owner (the
// write works, the lock stays).
func TestWritesOnLockedItem(t *testing.T) {
	writes := []struct {
		name string
		do   func(c *Cache, o latch.SessionID) error
	}{
		{"set", func(c *Cache, o latch.SessionID) error {
			_, err := c.Set(t0, o, []byte("k"), []byte("2"), 0, 0, 0)
			return err
		}},
		{"set with cas", func(c *Cache, o latch.SessionID) error {
			_, err := c.Set(t0, o, []byte("k"), []byte("2"), 0, 0, 1)
			return err
		}},
		{"replace", func(c *Cache, o latch.SessionID) error {
			_, err := c.Replace(t0, o, []byte("k"), []byte("2"), 0, 0, 0)
			return err
		}},
		{"cas", func(c *Cache, o latch.SessionID) error {
			_, err := c.CAS(t0, o, []byte("k"), []byte("2"), 0, 0, 1)
			return err
		}},
		{"append", func(c *Cache, o latch.SessionID) error {
			_, err := c.Append(t0, o, []byte("k"), []byte("2"), 0)
			return err
		}},
		{"prepend", func(c *Cache, o latch.SessionID) error {
			_, err := c.Prepend(t0, o, []byte("k"), []byte("2"), 0)
			return err
		}},
		{"incr", func(c *Cache, o latch.SessionID) error {
			_, _, err := c.Incr(t0, o, []byte("k"), 1, 0)
			return err
		}},
		{"decr", func(c *Cache, o latch.SessionID) error {
			_, _, err := c.Decr(t0, o, []byte("k"), 1, 0)
			return err
		}},
	}
	for _, w := range writes {
		t.Run(w.name, func(t *testing.T) {
			for _, writer := range []latch.SessionID{0, B} {
				c := newCache(t, testConfig())
				c.Set(t0, 0, []byte("k"), []byte("1"), 0, 0, 0)
				if _, _, err := c.Lock(t0, A, []byte("k"), LockOnly, 0); err != nil {
					t.Fatal(err)
				}
				if err := w.do(c, writer); err != ErrLocked {
					t.Errorf("by owner %d: err = %v, want ErrLocked", writer, err)
				}
				if it, _ := c.Get(t0, []byte("k")); string(it.Value) != "1" || it.CAS != 1 {
					t.Errorf("by owner %d: item changed to %q cas %d", writer, it.Value, it.CAS)
				}
				checkInvariants(t, c)
			}
			c := newCache(t, testConfig())
			c.Set(t0, 0, []byte("k"), []byte("1"), 0, 0, 0)
			c.Lock(t0, A, []byte("k"), LockOnly, 0)
			if err := w.do(c, A); err != nil {
				t.Errorf("by the holder: %v", err)
			}
			if it, _ := c.Get(t0, []byte("k")); it.CAS != 2 {
				t.Errorf("by the holder: cas %d, want 2", it.CAS)
			}
			if _, _, err := c.Lock(t0, B, []byte("k"), LockOnly, 0); err != ErrLocked {
				t.Errorf("the holder's write dropped the lock: Lock by B = %v", err)
			}
			if _, err := c.Unlock(t0, A, []byte("k")); err != nil {
				t.Errorf("Unlock by the holder after its write: %v", err)
			}
			checkInvariants(t, c)
		})
	}
	runScenarios(t, []scenario{
		{name: "add on a locked item", steps: []step{
			{0, set(0, "k", "v", 0, 0), res{CAS: 1}},
			{0, lock(A, "k"), res{}},
			{0, add(B, "k", "w", 0, 0), res{Err: ErrLocked}},
			{0, add(A, "k", "w", 0, 0), res{Err: ErrExists}},
		}},
		{name: "cas by another with the right cas", steps: []step{
			{0, set(0, "k", "v", 0, 0), res{CAS: 1}},
			{0, lock(A, "k"), res{}},
			{0, cas(B, "k", "w", 0, 0, 1), res{Err: ErrLocked}},
		}},
		{name: "delete by another", steps: []step{
			{0, set(0, "k", "v", 0, 0), res{CAS: 1}},
			{0, lock(A, "k"), res{}},
			{0, del(B, "k", 0), res{Err: ErrLocked}},
			{0, del(0, "k", 0), res{Err: ErrLocked}},
			{0, get("k"), res{Val: "v", CAS: 1}},
		}},
		{name: "delete by the holder drops item and lock", steps: []step{
			{0, set(0, "k", "v", 0, 0), res{CAS: 1}},
			{0, lock(A, "k"), res{}},
			{0, del(A, "k", 0), res{B: true}},
			{0, get("k"), res{Err: ErrNotFound}},
			{0, set(B, "k", "w", 0, 0), res{CAS: 2}},
			{0, lock(B, "k"), res{}},
			{0, unlockAll(A), res{N: 0}},
			{0, unlock(B, "k"), res{}},
		}},
		{name: "holder's set with an expired exptime keeps the item while locked", steps: []step{
			{0, set(0, "k", "v", 0, 0), res{CAS: 1}},
			{0, lock(A, "k"), res{}},
			{0, set(A, "k", "w", 0, -1), res{CAS: 2}},
			{sec, get("k"), res{Val: "w", CAS: 2}},
			{sec, unlock(A, "k"), res{}},
			{sec, get("k"), res{Err: ErrNotFound}},
		}},
	})
}

func TestUnlock(t *testing.T) {
	runScenarios(t, []scenario{
		{name: "every case of yrmcds 5.2", steps: []step{
			{0, unlock(A, "k"), res{Err: ErrNotFound}},
			{0, set(0, "k", "v", 0, 0), res{CAS: 1}},
			{0, unlock(A, "k"), res{Err: ErrNotLocked}},
			{0, lock(B, "k"), res{}},
			{0, unlock(A, "k"), res{Err: ErrNotLocked}},
			{0, unlock(0, "k"), res{Err: ErrNotLocked}},
			{0, unlock(B, "k"), res{}},
			{0, unlock(B, "k"), res{Err: ErrNotLocked}},
		}},
		{name: "expired while locked: unlock works, then the item is gone", steps: []step{
			{0, set(0, "k", "v", 0, 1), res{CAS: 1}},
			{0, lock(A, "k"), res{}},
			{5 * sec, get("k"), res{Val: "v", CAS: 1}},
			{5 * sec, keys(""), res{Keys: []string{"k"}}},
			{5 * sec, unlock(A, "k"), res{}},
			{5 * sec, get("k"), res{Err: ErrNotFound}},
			{5 * sec, unlock(A, "k"), res{Err: ErrNotFound}},
		}},
		{name: "unlock_all", steps: []step{
			{0, set(0, "a", "1", 0, 0), res{CAS: 1}},
			{0, set(0, "b", "2", 0, 1), res{CAS: 2}},
			{0, set(0, "c", "3", 0, 0), res{CAS: 3}},
			{0, lock(A, "a"), res{}},
			{0, lock(A, "b"), res{}},
			{0, lock(B, "c"), res{}},
			{0, unlockAll(0), res{N: 0}},
			{5 * sec, unlockAll(A), res{N: 2}},
			{5 * sec, unlockAll(A), res{N: 0}},
			{5 * sec, get("b"), res{Err: ErrNotFound}}, // expired while locked
			{5 * sec, set(B, "a", "x", 0, 0), res{CAS: 4}},
			{5 * sec, set(A, "c", "x", 0, 0), res{Err: ErrLocked}},
		}},
	})
}

func TestLockAndGet(t *testing.T) {
	runScenarios(t, []scenario{
		{name: "missing", steps: []step{
			{0, lag(A, "k"), res{Err: ErrNotFound}},
			{0, lat(A, "k", 10), res{Err: ErrNotFound}},
		}},
		{name: "locks and returns", steps: []step{
			{0, set(0, "k", "v", 4, 0), res{CAS: 1}},
			{0, lag(A, "k"), res{Val: "v", Flags: 4, CAS: 1}},
			{0, lag(A, "k"), res{Err: ErrLocked}},
			{0, lag(B, "k"), res{Err: ErrLocked}},
			{0, set(B, "k", "w", 0, 0), res{Err: ErrLocked}},
			{0, unlock(A, "k"), res{}},
		}},
		{name: "an expired item is not revived (unlike yrmcds)", steps: []step{
			{0, set(0, "k", "v", 0, 1), res{CAS: 1}},
			{sec, lag(A, "k"), res{Err: ErrNotFound}},
			{sec, get("k"), res{Err: ErrNotFound}},
		}},
		{name: "with exptime", steps: []step{
			{0, set(0, "k", "v", 0, 0), res{CAS: 1}},
			{0, lat(A, "k", 10), res{Val: "v", CAS: 1}},
			{20 * sec, get("k"), res{Val: "v", CAS: 1}}, // locked: no expiry
			{20 * sec, unlock(A, "k"), res{}},
			{20 * sec, get("k"), res{Err: ErrNotFound}},
		}},
		{name: "with exptime, unlocked in time", steps: []step{
			{0, set(0, "k", "v", 0, 0), res{CAS: 1}},
			{0, lat(A, "k", 10), res{Val: "v", CAS: 1}},
			{5 * sec, unlock(A, "k"), res{}},
			{9 * sec, get("k"), res{Val: "v", CAS: 1}},
			{10 * sec, get("k"), res{Err: ErrNotFound}},
		}},
	})
}

func TestReplaceAndUnlock(t *testing.T) {
	small := Config{MemoryLimit: 1 << 20, MaxItemSize: 2}
	runScenarios(t, []scenario{
		{name: "missing", steps: []step{
			{0, rau(A, "k", "v", 0, 0, 0), res{Err: ErrNotFound}},
		}},
		{name: "not locked or locked by another", steps: []step{
			{0, set(0, "k", "v", 0, 0), res{CAS: 1}},
			{0, rau(A, "k", "w", 0, 0, 0), res{Err: ErrNotLocked}},
			{0, lock(B, "k"), res{}},
			{0, rau(A, "k", "w", 0, 0, 0), res{Err: ErrNotLocked}},
			{0, get("k"), res{Val: "v", CAS: 1}},
		}},
		{name: "replaces and unlocks", steps: []step{
			{0, set(0, "k", "v", 1, 0), res{CAS: 1}},
			{0, lock(A, "k"), res{}},
			{0, rau(A, "k", "w", 2, 10, 0), res{CAS: 2}},
			{0, get("k"), res{Val: "w", Flags: 2, CAS: 2}},
			{0, unlock(A, "k"), res{Err: ErrNotLocked}},
			{0, set(B, "k", "x", 0, 0), res{CAS: 3}},
		}},
		{name: "its exptime applies at once", steps: []step{
			{0, set(0, "k", "v", 0, 0), res{CAS: 1}},
			{0, lock(A, "k"), res{}},
			{0, rau(A, "k", "w", 0, 10, 0), res{CAS: 2}},
			{10 * sec, get("k"), res{Err: ErrNotFound}},
		}},
		{name: "past exptime: gone once unlocked", steps: []step{
			{0, set(0, "k", "v", 0, 0), res{CAS: 1}},
			{0, lock(A, "k"), res{}},
			{0, rau(A, "k", "w", 0, -1, 0), res{CAS: 2}},
			{0, get("k"), res{Err: ErrNotFound}},
		}},
		{name: "cas mismatch keeps the lock", steps: []step{
			{0, set(0, "k", "v", 0, 0), res{CAS: 1}},
			{0, lock(A, "k"), res{}},
			{0, rau(A, "k", "w", 0, 0, 9), res{Err: ErrExists}},
			{0, set(B, "k", "w", 0, 0), res{Err: ErrLocked}},
			{0, rau(A, "k", "w", 0, 0, 1), res{CAS: 2}},
		}},
		{name: "too large keeps the lock", cfg: &small, steps: []step{
			{0, set(0, "k", "v", 0, 0), res{CAS: 1}},
			{0, lock(A, "k"), res{}},
			{0, rau(A, "k", "www", 0, 0, 0), res{Err: ErrTooLarge}},
			{0, set(B, "k", "w", 0, 0), res{Err: ErrLocked}},
		}},
	})
}

func TestKeys(t *testing.T) {
	runScenarios(t, []scenario{
		{name: "prefix, locked included, expired not", steps: []step{
			{0, keys(""), res{}},
			{0, set(0, "user:1", "", 0, 0), res{CAS: 1}},
			{0, set(0, "user:2", "", 0, 1), res{CAS: 2}},
			{0, set(0, "user:3", "", 0, 1), res{CAS: 3}},
			{0, set(0, "session:1", "", 0, 0), res{CAS: 4}},
			{0, set(0, "u", "", 0, 0), res{CAS: 5}},
			{0, lock(A, "user:3"), res{}},
			{sec, keys("user:"), res{Keys: []string{"user:1", "user:3"}}},
			{sec, keys(""), res{Keys: []string{"session:1", "u", "user:1", "user:3"}}},
			{sec, keys("user:1"), res{Keys: []string{"user:1"}}},
			{sec, keys("x"), res{}},
		}},
	})
}

// TestExpired checks Expired and Evict, the proposer's sweep: Expired names
// dead unlocked items, limit at a time, and changes nothing; Evict removes
// them.
func TestExpired(t *testing.T) {
	c := newCache(t, testConfig())
	for i := range 10 {
		exptime := int64(0)
		if i%2 == 0 {
			exptime = 1
		}
		c.Set(t0, 0, fmt.Appendf(nil, "k%d", i), []byte("v"), 0, exptime, 0)
	}
	c.Set(t0, 0, []byte("locked"), nil, 0, 1, 0)
	c.Lock(t0, A, []byte("locked"), LockOnly, 0)
	if v := c.Expired(nil, t0, 100); len(v) != 0 {
		t.Fatalf("Expired before expiry named %v", v)
	}
	now := t0 + int64(sec)
	var victims []Victim
	for range 10 {
		before := c.AppendSnapshot(nil)
		n := len(victims)
		victims = c.Expired(victims, now, 3)
		if len(victims)-n > 3 {
			t.Fatalf("Expired(3) named %d", len(victims)-n)
		}
		if after := c.AppendSnapshot(nil); string(after) != string(before) {
			t.Fatalf("Expired changed the state")
		}
		checkInvariants(t, c)
	}
	// A pass over the ten unlocked items takes four calls of three (the
	// last one ends the pass early): ten calls make two passes and a half.
	want := map[string]int{"k0": 3, "k2": 3, "k4": 3, "k6": 2, "k8": 2}
	got := map[string]int{}
	for _, v := range victims {
		got[v.Key]++
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Expired named %v, want %v", got, want)
	}
	if s := c.Stats(); s.CurrItems != 11 || s.Reclaimed != 0 {
		t.Errorf("Expired removed items: curr_items %d reclaimed %d", s.CurrItems, s.Reclaimed)
	}
	removed := 0
	for _, v := range victims {
		if c.Evict(now, []byte(v.Key), v.CAS) {
			removed++
		}
	}
	if removed != 5 {
		t.Errorf("Evict removed %d, want 5 (the first of each)", removed)
	}
	s := c.Stats()
	if s.CurrItems != 6 || s.Reclaimed != 5 || s.ExpiredUnfetched != 5 || s.Evictions != 0 {
		t.Errorf("stats after evicting: curr_items %d reclaimed %d expired_unfetched %d evictions %d; want 6 5 5 0",
			s.CurrItems, s.Reclaimed, s.ExpiredUnfetched, s.Evictions)
	}
	// Flushed items are named too, also before the flush took effect;
	// locked ones are not.
	c.FlushAll(now, 1)
	later := now + int64(sec)
	if got := sweep(t, c, later); len(got) != 5 {
		t.Errorf("sweep after flush removed %v, want 5 items", got)
	}
	if s := c.Stats(); s.CurrItems != 1 || s.LockedItems != 1 {
		t.Errorf("after flush and sweep: curr_items %d locked %d, want 1 1", s.CurrItems, s.LockedItems)
	}
	if v := c.Expired(nil, later, 0); len(v) != 0 {
		t.Errorf("Expired(0) named %v", v)
	}
	if v := c.Expired(nil, later, -1); len(v) != 0 {
		t.Errorf("Expired(-1) named %v", v)
	}
	checkInvariants(t, c)
}

// TestExpiredCursor checks that Expired's cursor survives the removal and
// move of the item it points at.
func TestExpiredCursor(t *testing.T) {
	c := newCache(t, testConfig())
	t1 := t0 + bumpInterval*int64(sec)
	for i := range 6 {
		c.Set(t0, 0, fmt.Appendf(nil, "k%d", i), []byte("v"), 0, 0, 0)
	}
	c.Set(t0, 0, []byte("k0"), []byte("v"), 0, 1, 0) // k0 expires, and is now the newest
	c.Expired(nil, t0, 2)                            // cursor now at k3 (k1, k2 examined)
	if c.cursor == nil || c.cursor.key != "k3" {
		t.Fatalf("cursor at %v, want k3", c.cursor)
	}
	c.Get(t1, []byte("k3")) // moves to the head; cursor moves on to k4
	checkInvariants(t, c)
	c.Delete(t0, 0, []byte("k4"), 0)
	checkInvariants(t, c)
	c.Lock(t0, A, []byte("k5"), LockOnly, 0)
	checkInvariants(t, c)
	now := t0 + int64(sec)
	if v := c.Expired(nil, now, 100); len(v) != 1 || v[0].Key != "k0" { // k0, k3 (k5 locked)
		t.Errorf("Expired named %v, want k0", v)
	}
	if v := c.Expired(nil, now, 100); len(v) != 1 { // a new pass: k1, k2, k0, k3
		t.Errorf("second Expired named %v, want k0 again", v)
	}
	checkInvariants(t, c)
}

// TestEviction checks that writes never evict, and that PlanRoom and Evict,
// as the proposer uses them (setRoom), take the least recently used
// unlocked items.
func TestEviction(t *testing.T) {
	// Room for exactly 4 items of size 1 (key) + 10 (value) + overhead.
	const size = 1 + 10 + ItemOverhead
	cfg := Config{MemoryLimit: 4 * size, MaxItemSize: 4*size - 250 - ItemOverhead}
	v := "0123456789"
	t1 := t0 + bumpInterval*int64(sec) // a get bumps what was bumped at t0
	fill := func(t *testing.T, now int64, keys ...string) *Cache {
		c := newCache(t, cfg)
		for _, k := range keys {
			if _, err := c.Set(now, 0, []byte(k), []byte(v), 0, 0, 0); err != nil {
				t.Fatal(err)
			}
		}
		return c
	}
	t.Run("a write never evicts", func(t *testing.T) {
		c := fill(t, t0, "a", "b", "c", "d")
		before := c.AppendSnapshot(nil)
		if _, err := c.Set(t0, 0, []byte("e"), []byte(v), 0, 0, 0); err != ErrNoMemory {
			t.Errorf("Set over the limit: %v, want ErrNoMemory", err)
		}
		if _, err := c.Append(t0, 0, []byte("a"), []byte("x"), 0); err != ErrNoMemory {
			t.Errorf("Append over the limit: %v, want ErrNoMemory", err)
		}
		if after := c.AppendSnapshot(nil); string(after) != string(before) {
			t.Errorf("a failed write changed the state")
		}
		// Writes that do not grow need no room.
		if _, err := c.Set(t0, 0, []byte("a"), []byte("x"), 0, 0, 0); err != nil {
			t.Errorf("shrinking Set: %v", err)
		}
		if s := c.Stats(); s.Evictions != 0 || s.Reclaimed != 0 || s.CurrItems != 4 {
			t.Errorf("evictions %d reclaimed %d curr_items %d; want 0 0 4", s.Evictions, s.Reclaimed, s.CurrItems)
		}
		checkInvariants(t, c)
	})
	t.Run("the dead item of the written key makes room", func(t *testing.T) {
		c := newCache(t, cfg)
		c.Set(t0, 0, []byte("a"), []byte(v), 0, 1, 0)
		for _, k := range []string{"b", "c", "d"} {
			c.Set(t0, 0, []byte(k), []byte(v), 0, 0, 0)
		}
		now := t0 + int64(sec)
		if g := c.Grow(now, []byte("a"), len(v), false); g != 0 {
			t.Errorf("Grow over a dead item of the same size = %d, want 0", g)
		}
		if _, err := c.Set(now, 0, []byte("a"), []byte(v), 0, 0, 0); err != nil {
			t.Errorf("Set over its own dead item: %v", err)
		}
		if s := c.Stats(); s.Reclaimed != 1 || s.Evictions != 0 {
			t.Errorf("reclaimed %d evictions %d; want 1 0", s.Reclaimed, s.Evictions)
		}
	})
	t.Run("least recently used first", func(t *testing.T) {
		c := fill(t, t0, "a", "b", "c", "d")
		c.Get(t1, []byte("a"))      // a is now the most recent
		c.Touch(t1, []byte("b"), 0) // then b
		setRoom(t, c, t1, "e", v)   // evicts c
		setRoom(t, c, t1, "f", v)   // evicts d
		assertKeys(t, c, "a", "b", "e", "f")
		s := c.Stats()
		if s.Evictions != 2 || s.EvictedUnfetched != 2 || s.Bytes != 4*size {
			t.Errorf("evictions %d evicted_unfetched %d bytes %d; want 2 2 %d", s.Evictions, s.EvictedUnfetched, s.Bytes, 4*size)
		}
		setRoom(t, c, t1, "g", v) // evicts a, which was fetched
		if s := c.Stats(); s.Evictions != 3 || s.EvictedUnfetched != 2 {
			t.Errorf("evictions %d evicted_unfetched %d; want 3 2", s.Evictions, s.EvictedUnfetched)
		}
		checkInvariants(t, c)
	})
	t.Run("a get within the bump interval leaves the item in place", func(t *testing.T) {
		c := fill(t, t0, "a", "b", "c", "d")
		c.Get(t1-1, []byte("a"))    // not bumped: a is still the least recent
		setRoom(t, c, t1-1, "e", v) // evicts a
		assertKeys(t, c, "b", "c", "d", "e")
		c.Get(t1, []byte("b"))    // bumped: b was last moved at t0
		setRoom(t, c, t1, "f", v) // evicts c
		assertKeys(t, c, "b", "d", "e", "f")
		checkInvariants(t, c)
	})
	t.Run("get-and-touch is a touch: it always bumps", func(t *testing.T) {
		c := fill(t, t0, "a", "b", "c", "d")
		c.GetAndTouch(t0, []byte("a"), 0)
		setRoom(t, c, t0, "e", v) // evicts b
		assertKeys(t, c, "a", "c", "d", "e")
		checkInvariants(t, c)
	})
	t.Run("expired items are reclaimed, not evicted", func(t *testing.T) {
		c := newCache(t, cfg)
		c.Set(t0, 0, []byte("a"), []byte(v), 0, 0, 0)
		c.Set(t1, 0, []byte("b"), []byte(v), 0, 1, 0)
		c.Set(t1, 0, []byte("c"), []byte(v), 0, 0, 0)
		c.Set(t1, 0, []byte("d"), []byte(v), 0, 0, 0)
		c.Get(t1, []byte("a"))
		setRoom(t, c, t1+int64(sec), "e", v)
		assertKeys(t, c, "a", "c", "d", "e")
		if s := c.Stats(); s.Evictions != 0 || s.Reclaimed != 1 {
			t.Errorf("evictions %d reclaimed %d; want 0 1", s.Evictions, s.Reclaimed)
		}
	})
	t.Run("locked items are never evicted", func(t *testing.T) {
		c := fill(t, t0, "a", "b", "c", "d")
		c.Lock(t0, A, []byte("a"), LockOnly, 0)
		c.Lock(t0, B, []byte("b"), LockOnly, 0)
		setRoom(t, c, t0, "e", v) // evicts c
		setRoom(t, c, t0, "f", v) // evicts d
		setRoom(t, c, t0, "g", v) // evicts e
		assertKeys(t, c, "a", "b", "f", "g")
		c.Lock(t0, A, []byte("f"), LockOnly, 0)
		c.Lock(t0, A, []byte("g"), LockOnly, 0)
		// Everything is locked: no room.
		if _, err := setRoom(t, c, t0, "h", v); err != ErrNoMemory {
			t.Errorf("Set with every item locked: %v, want ErrNoMemory", err)
		}
		// The holder may still rewrite its item in the same size, not grow it.
		if g := c.Grow(t0, []byte("a"), len(v), false); g != 0 {
			t.Errorf("Grow of a same-size rewrite = %d", g)
		}
		if _, err := c.Set(t0, A, []byte("a"), []byte("9999999999"), 0, 0, 0); err != nil {
			t.Errorf("same-size rewrite by the holder: %v", err)
		}
		if _, err := c.PlanRoom(nil, t0, []byte("a"), c.Grow(t0, []byte("a"), 1, true)); err != ErrNoMemory {
			t.Errorf("PlanRoom for a growing append with every item locked: %v, want ErrNoMemory", err)
		}
		if _, err := c.Append(t0, A, []byte("a"), []byte("x"), 0); err != ErrNoMemory {
			t.Errorf("growing append with every item locked: %v, want ErrNoMemory", err)
		}
		if _, _, err := c.Incr(t0, A, []byte("a"), 1, 0); err != ErrNoMemory {
			t.Errorf("growing incr with every item locked: %v, want ErrNoMemory", err)
		}
		assertKeys(t, c, "a", "b", "f", "g")
		c.UnlockAll(t0, A)
		if _, err := setRoom(t, c, t0, "h", v); err != nil {
			t.Errorf("Set after unlock: %v", err)
		}
		// UnlockAll made g, f, a the most recently used, in this order; g went.
		assertKeys(t, c, "a", "b", "f", "h")
		checkInvariants(t, c)
	})
	t.Run("no room: nothing is planned", func(t *testing.T) {
		c := fill(t, t0, "a", "b", "c", "d")
		c.Lock(t0, A, []byte("b"), LockOnly, 0)
		c.Lock(t0, A, []byte("c"), LockOnly, 0)
		c.Lock(t0, B, []byte("d"), LockOnly, 0)
		big := make([]byte, 10+size) // needs two items' room; only a is free
		dst := []Victim{{"x", 1}}
		got, err := c.PlanRoom(dst, t0, []byte("e"), c.Grow(t0, []byte("e"), len(big), false))
		if err != ErrNoMemory || len(got) != 1 {
			t.Fatalf("PlanRoom = %v, %v; want dst unchanged, ErrNoMemory", got, err)
		}
		if _, err := c.Set(t0, 0, []byte("e"), big, 0, 0, 0); err != ErrNoMemory {
			t.Fatalf("Set = %v, want ErrNoMemory", err)
		}
		assertKeys(t, c, "a", "b", "c", "d")
		if s := c.Stats(); s.Evictions != 0 {
			t.Errorf("evictions %d, want 0", s.Evictions)
		}
		checkInvariants(t, c)
	})
	t.Run("growing an item never evicts it", func(t *testing.T) {
		c := fill(t, t0, "a", "b", "c", "d")
		// a is the least recently used; growing it evicts b instead.
		big := make([]byte, 10+size)
		victims, err := storeWithRoom(t, c, t0, []byte("a"), len(big), false, func() {
			if _, err := c.Set(t0, 0, []byte("a"), big, 0, 0, 0); err != nil {
				t.Fatalf("Set = %v", err)
			}
		})
		if err != nil || len(victims) != 1 || victims[0].Key != "b" {
			t.Fatalf("planned %v, %v; want b", victims, err)
		}
		assertKeys(t, c, "a", "c", "d")
		// Locked and grown by its holder to the largest item: evicts c.
		c.Lock(t0, A, []byte("a"), LockOnly, 0)
		more := make([]byte, cfg.MaxItemSize-len(big))
		if _, err := storeWithRoom(t, c, t0, []byte("a"), len(more), true, func() {
			if _, err := c.Append(t0, A, []byte("a"), more, 0); err != nil {
				t.Fatalf("Append = %v", err)
			}
		}); err != nil {
			t.Fatal(err)
		}
		assertKeys(t, c, "a", "d")
		if _, err := c.Append(t0, A, []byte("a"), []byte("x"), 0); err != ErrTooLarge {
			t.Errorf("Append over the item size: %v", err)
		}
		checkInvariants(t, c)
	})
	t.Run("an eviction planned before a new write of its key removes nothing", func(t *testing.T) {
		c := fill(t, t0, "a", "b", "c", "d")
		victims, err := c.PlanRoom(nil, t0, []byte("e"), c.Grow(t0, []byte("e"), len(v), false))
		if err != nil || len(victims) != 1 || victims[0].Key != "a" {
			t.Fatalf("planned %v, %v; want a", victims, err)
		}
		c.Set(t0, 0, []byte("a"), []byte(v), 0, 0, 0) // a concurrent write: a new CAS
		if c.Evict(t0, []byte("a"), victims[0].CAS) {
			t.Errorf("Evict removed the rewritten item")
		}
		c.Lock(t0, A, []byte("b"), LockOnly, 0)
		if c.Evict(t0, []byte("b"), c.items["b"].cas) {
			t.Errorf("Evict removed a locked item")
		}
		if c.Evict(t0, []byte("zz"), 1) || c.Evict(t0, []byte("a b"), 1) {
			t.Errorf("Evict of a missing item")
		}
		if !c.Evict(t0, []byte("a"), c.items["a"].cas) {
			t.Errorf("Evict with the right CAS removed nothing")
		}
		assertKeys(t, c, "b", "c", "d")
		if s := c.Stats(); s.Evictions != 1 {
			t.Errorf("evictions %d, want 1", s.Evictions)
		}
		checkInvariants(t, c)
	})
	t.Run("a replaced value's size is accounted", func(t *testing.T) {
		c := newCache(t, cfg)
		c.Set(t0, 0, []byte("a"), []byte(v), 0, 0, 0)
		c.Set(t0, 0, []byte("a"), []byte("x"), 0, 0, 0)
		if s := c.Stats(); s.Bytes != 1+1+ItemOverhead {
			t.Errorf("bytes %d, want %d", s.Bytes, 1+1+ItemOverhead)
		}
		c.Delete(t0, 0, []byte("a"), 0)
		if s := c.Stats(); s.Bytes != 0 || s.CurrItems != 0 {
			t.Errorf("bytes %d curr_items %d after delete, want 0 0", s.Bytes, s.CurrItems)
		}
	})
}

// TestGrow checks Grow against the growth the writes make.
func TestGrow(t *testing.T) {
	c := newCache(t, testConfig())
	c.Set(t0, 0, []byte("live"), []byte("12345"), 0, 0, 0)
	c.Set(t0, 0, []byte("dead"), []byte("12345"), 0, 1, 0)
	c.Set(t0, 0, []byte("num"), []byte("0099"), 0, 0, 0)
	now := t0 + int64(sec)
	for _, tt := range []struct {
		key      string
		valueLen int
		concat   bool
		want     int64
	}{
		{"new", 3, false, 3 + 3 + ItemOverhead},
		{"new", 3, true, 0},
		{"live", 3, false, -2},
		{"live", 3, true, 3},
		{"dead", 7, false, 2},
		{"dead", 7, true, 0},
		{"num", 20, false, 16},
	} {
		if got := c.Grow(now, []byte(tt.key), tt.valueLen, tt.concat); got != tt.want {
			t.Errorf("Grow(%q, %d, %v) = %d, want %d", tt.key, tt.valueLen, tt.concat, got, tt.want)
		}
	}
	// Each is the growth, or above it (incr: an upper bound), asked of the
	// cache as each write finds it.
	for _, w := range []struct {
		name   string
		key    string
		n      int
		concat bool
		exact  bool
		do     func() error
	}{
		{"set new", "new", 3, false, true, func() error { _, err := c.Set(now, 0, []byte("new"), []byte("abc"), 0, 0, 0); return err }},
		{"set live", "live", 3, false, true, func() error { _, err := c.Set(now, 0, []byte("live"), []byte("abc"), 0, 0, 0); return err }},
		{"append live", "live", 3, true, true, func() error { _, err := c.Append(now, 0, []byte("live"), []byte("abc"), 0); return err }},
		{"set dead", "dead", 7, false, true, func() error { _, err := c.Set(now, 0, []byte("dead"), []byte("abcdefg"), 0, 0, 0); return err }},
		{"incr", "num", 20, false, false, func() error { _, _, err := c.Incr(now, 0, []byte("num"), 1, 0); return err }},
	} {
		grow := c.Grow(now, []byte(w.key), w.n, w.concat)
		before := c.bytes
		if err := w.do(); err != nil {
			t.Fatalf("%s: %v", w.name, err)
		}
		if got := c.bytes - before; got != grow && (w.exact || got > grow) {
			t.Errorf("%s: grew by %d, Grow said %d", w.name, got, grow)
		}
	}
}

func assertKeys(t *testing.T, c *Cache, want ...string) {
	t.Helper()
	got := c.AppendKeys(nil, c.now, nil)
	sortStrings(got)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("keys %v, want %v", got, want)
	}
}

func TestStats(t *testing.T) {
	c := newCache(t, testConfig())
	k := []byte("k")
	c.Get(t0, k)                                             // get miss
	c.Set(t0, 0, k, []byte("1"), 0, 0, 0)                    // set 1
	c.Get(t0, k)                                             // get hit
	c.Add(t0, 0, k, []byte("1"), 0, 0, 0)                    // set 2 (not stored)
	c.CAS(t0, 0, k, []byte("2"), 0, 0, 1)                    // set 3, cas hit
	c.CAS(t0, 0, k, []byte("2"), 0, 0, 1)                    // set 4, cas badval
	c.CAS(t0, 0, []byte("x"), nil, 0, 0, 1)                  // set 5, cas miss
	c.Incr(t0, 0, k, 1, 0)                                   // incr hit
	c.Incr(t0, 0, []byte("x"), 1, 0)                         // incr miss
	c.Decr(t0, 0, k, 1, 0)                                   // decr hit
	c.Decr(t0, 0, []byte("x"), 1, 0)                         // decr miss
	c.Touch(t0, k, 1)                                        // touch hit
	c.Touch(t0, []byte("x"), 1)                              // touch miss
	c.GetAndTouch(t0, k, 1)                                  // gat: touch hit
	c.Get(t0+int64(sec), k)                                  // get miss, expired (a read: not removed)
	c.Set(t0+int64(sec), 0, k, []byte("1"), 0, 0, 0)         // set 6, reclaims the expired item
	c.FlushAll(t0, 0)                                        // flush
	c.Get(t0+int64(sec), k)                                  // get miss, flushed
	c.Set(t0, 0, k, []byte("1"), 0, 0, 0)                    // set 7
	c.Delete(t0, 0, k, 0)                                    // delete hit
	c.Delete(t0, 0, k, 0)                                    // delete miss
	c.Set(t0, 0, []byte("big"), make([]byte, 2000), 0, 0, 0) // too large: not counted
	got := c.Stats()
	want := Stats{
		TotalItems: 6,                      // set, cas, incr, decr, set, set
		Reclaimed:  2, ExpiredUnfetched: 1, // the flushed item was never read

		CmdGet: 5, CmdSet: 7, CmdFlush: 1, CmdTouch: 3,
		GetHits: 1, GetMisses: 3, GetExpired: 1, GetFlushed: 1,
		DeleteHits: 1, DeleteMisses: 1,
		IncrHits: 1, IncrMisses: 1, DecrHits: 1, DecrMisses: 1,
		CasHits: 1, CasMisses: 1, CasBadval: 1,
		TouchHits: 2, TouchMisses: 1,
		LimitMaxbytes: 1 << 20,
	}
	if got != want {
		t.Errorf("stats:\n got %+v\nwant %+v", got, want)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Errorf("DefaultConfig: %v", err)
	}
	if d := DefaultConfig(); d.MemoryLimit != 1<<30 || d.MaxItemSize != 1<<20 {
		t.Errorf("DefaultConfig = %+v", d)
	}
	for _, cfg := range []Config{
		{MemoryLimit: 0, MaxItemSize: 1},
		{MemoryLimit: -1, MaxItemSize: 1},
		{MemoryLimit: 1 << 20, MaxItemSize: -1},
		{MemoryLimit: 1000, MaxItemSize: 1000},
	} {
		if err := cfg.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil", cfg)
		}
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) = nil error", cfg)
		}
	}
	if err := (Config{MemoryLimit: 250 + ItemOverhead, MaxItemSize: 0}).Validate(); err != nil {
		t.Errorf("smallest config: %v", err)
	}
}

// TestCheckKeyAgrees keeps CheckKey in step with latch.CheckKey.
func TestCheckKeyAgrees(t *testing.T) {
	try := func(k []byte) {
		t.Helper()
		got, want := CheckKey(k), latch.CheckKey(string(k))
		if (got == nil) != (want == nil) {
			t.Errorf("CheckKey(%q) = %v, latch.CheckKey = %v", k, got, want)
		}
		if got != nil && !errors.Is(got, ErrInvalidKey) {
			t.Errorf("CheckKey(%q) = %v, not ErrInvalidKey", k, got)
		}
	}
	for b := range 256 {
		try([]byte{byte(b)})
		try([]byte{'a', byte(b), 'z'})
	}
	for _, n := range []int{0, 1, 32, 33, 249, 250, 251, 1000} {
		try([]byte(key(n)))
	}
}
