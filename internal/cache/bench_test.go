package cache

import (
	"fmt"
	"testing"
)

// benchKeys returns n keys of about 30 bytes, like session or user keys.
func benchKeys(n int) [][]byte {
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "user:session:%016d", i)
	}
	return keys
}

func filledCache(b *testing.B, n, valueLen int) (*Cache, [][]byte) {
	c := newCache(b, DefaultConfig())
	keys := benchKeys(n)
	value := make([]byte, valueLen)
	for _, k := range keys {
		if _, err := c.Set(t0, 0, k, value, 0, 0, 0); err != nil {
			b.Fatal(err)
		}
	}
	return c, keys
}

func BenchmarkGet(b *testing.B) {
	const n = 1 << 16
	c, keys := filledCache(b, n, 100)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := c.Get(t0, keys[i&(n-1)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func BenchmarkGetMiss(b *testing.B) {
	c, _ := filledCache(b, 1<<16, 100)
	key := []byte("user:session:missing-key-0000000")
	b.ReportAllocs()
	for b.Loop() {
		c.Get(t0, key)
	}
}

// BenchmarkSet overwrites existing keys: the value copy is the only
// allocation.
func BenchmarkSet(b *testing.B) {
	for _, size := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("value=%d", size), func(b *testing.B) {
			const n = 1 << 16
			c, keys := filledCache(b, n, size)
			value := make([]byte, size)
			b.ReportAllocs()
			b.SetBytes(int64(size))
			i := 0
			for b.Loop() {
				if _, err := c.Set(t0, 0, keys[i&(n-1)], value, 0, 0, 0); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// BenchmarkSetNew stores new keys in a cache at its memory limit, so that
// every store also evicts, as the proposer of a replicated cache makes room:
// Grow, PlanRoom, an Evict per victim, then the write.
func BenchmarkSetNew(b *testing.B) {
	const n = 1 << 16
	c := newCache(b, Config{MemoryLimit: n * (32 + 100 + ItemOverhead), MaxItemSize: 1 << 10})
	keys := benchKeys(4 * n)
	value := make([]byte, 100)
	var victims []Victim
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		k := keys[i&(4*n-1)]
		var err error
		victims, err = c.PlanRoom(victims[:0], t0, k, c.Grow(t0, k, len(value), false))
		if err != nil {
			b.Fatal(err)
		}
		for _, v := range victims {
			c.Evict(t0, []byte(v.Key), v.CAS)
		}
		if _, err := c.Set(t0, 0, k, value, 0, 0, 0); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkPlanRoom is what the proposer adds to every write that fits:
// Grow and PlanRoom's early return.
func BenchmarkPlanRoom(b *testing.B) {
	const n = 1 << 16
	c, keys := filledCache(b, n, 100)
	var victims []Victim
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		k := keys[i&(n-1)]
		var err error
		victims, err = c.PlanRoom(victims[:0], t0, k, c.Grow(t0, k, 100, false))
		if err != nil || len(victims) != 0 {
			b.Fatal(err, victims)
		}
		i++
	}
}

// BenchmarkSnapshot encodes a cache of 2^16 items of 100 bytes.
func BenchmarkSnapshot(b *testing.B) {
	c, _ := filledCache(b, 1<<16, 100)
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = c.AppendSnapshot(buf[:0])
	}
	b.SetBytes(int64(len(buf)))
}

// BenchmarkRestore decodes BenchmarkSnapshot's snapshot.
func BenchmarkRestore(b *testing.B) {
	c, _ := filledCache(b, 1<<16, 100)
	snap := c.AppendSnapshot(nil)
	b.SetBytes(int64(len(snap)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Restore(c.Config(), snap); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLockUnlock(b *testing.B) {
	const n = 1 << 10
	c, keys := filledCache(b, n, 100)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		k := keys[i&(n-1)]
		if _, _, err := c.Lock(t0, A, k, LockOnly, 0); err != nil {
			b.Fatal(err)
		}
		if _, err := c.Unlock(t0, A, k); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func BenchmarkIncr(b *testing.B) {
	c := newCache(b, DefaultConfig())
	k := []byte("counter")
	c.Set(t0, 0, k, []byte("0"), 0, 0, 0)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := c.Incr(t0, 0, k, 1, 0); err != nil {
			b.Fatal(err)
		}
	}
}
