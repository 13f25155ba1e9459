package cache

// Making room and removing dead items.
//
// Writes never evict: a write that would take the cache over
// Config.MemoryLimit fails with ErrNoMemory. The proposer of a replicated
// cache decides what goes, against its own copy, and proposes the removals
// as Evict commands ahead of the write:
//
//	grow := c.Grow(now, key, len(value), false)
//	victims, err := c.PlanRoom(victims[:0], now, key, grow)
//	// err: ErrNoMemory, the write cannot fit; otherwise propose
//	// Evict(now, v.Key, v.CAS) for each victim, then the write.
//
// An Evict names the item's CAS, so that one planned before a concurrent
// write of the key (which gives the item a new CAS) removes nothing. Dead
// items that no write meets are found the same way, by Expired.

// Victim names an item to remove with Evict: its key and the CAS it had
// when it was chosen.
type Victim struct {
	Key string // the cache's own string of the key: naming it costs nothing
	CAS uint64
}

// Grow returns by how many bytes storing a value of valueLen bytes under key
// at now would grow the cache (negative: shrink), for PlanRoom. It changes
// nothing and costs one map probe.
//
// With concat false it is the growth of Set, Add, Replace, CAS and
// ReplaceAndUnlock: a new item's size, or the difference between the
// values' lengths for a live item (a dead item of key is removed by the
// write, so its size counts as freed). With concat true, valueLen is the
// length Append or Prepend adds to the live item's value (0 without a live
// item: the write fails). For Incr and Decr, pass valueLen 20, the longest
// result (an upper bound: the growth is at most 19 bytes more than
// needed).
//
// For a write that will fail for another reason (Add on a live item, say)
// Grow answers as if it succeeded: at worst room is made that was not
// needed.
func (c *Cache) Grow(now int64, key []byte, valueLen int, concat bool) int64 {
	e := c.items[string(key)]
	if e == nil {
		if concat {
			return 0
		}
		return itemSize(len(key), valueLen)
	}
	if live, _ := c.state(e, c.at(now)); !live {
		if concat {
			return 0
		}
		return itemSize(len(key), valueLen) - e.size()
	}
	if concat {
		return int64(valueLen)
	}
	return int64(valueLen) - int64(len(e.value))
}

// Fits reports whether the cache can grow by grow bytes without going over
// Config.MemoryLimit. It costs no look-up: a proposer checks an upper bound
// of a write's growth with it before every write, and computes the exact
// growth (Grow) and a plan (PlanRoom) only when the bound does not fit.
func (c *Cache) Fits(grow int64) bool { return c.bytes+grow <= c.cfg.MemoryLimit }

// PlanRoom plans the evictions that make room for a write of key that grows
// the cache by grow bytes (Grow), at now, and appends them to dst. It reads
// only: it changes nothing (the proposer applies the plan with Evict).
// Victims are chosen by their place in the LRU list alone, dead or live, so
// the plan does not depend on now (which Grow took into account).
//
// If the write fits (grow <= 0, or the cache's bytes plus grow are within
// Config.MemoryLimit), PlanRoom returns dst at once: it is cheap enough to
// run before every write. Otherwise it walks the LRU list from its least
// recently used end and appends every unlocked item but key's, dead or
// live, until removing them would free enough. If even removing every
// unlocked item but key's could not, it returns dst unchanged and
// ErrNoMemory: the rest is held by locked items, and the write would fail.
func (c *Cache) PlanRoom(dst []Victim, now int64, key []byte, grow int64) ([]Victim, error) {
	over := c.bytes + grow - c.cfg.MemoryLimit
	if grow <= 0 || over <= 0 {
		return dst, nil
	}
	if over > c.bytes-c.lockedBytes {
		return dst, ErrNoMemory
	}
	// key's own item is skipped by comparing keys on the way, which costs
	// less than looking it up. The check above counted it as free: if the
	// other unlocked items are too few, the walk runs out and fails, after
	// no more items than it would have taken (they sum to less than over).
	orig := dst
	for e := c.tail; e != nil; e = e.prev {
		if e.key == string(key) {
			continue
		}
		dst = append(dst, Victim{Key: e.key, CAS: e.cas})
		if over -= e.size(); over <= 0 {
			return dst, nil
		}
	}
	return orig, ErrNoMemory
}

// Evict removes the item of key if it exists, is not locked and has CAS cas
// (a Victim of PlanRoom or Expired), and reports whether it did. It is a
// write. A live item counts as evicted (Stats.Evictions), a dead one as
// reclaimed (Stats.Reclaimed). An item written since it was chosen has
// another CAS and stays; a touch does not change the CAS.
func (c *Cache) Evict(now int64, key []byte, cas uint64) bool {
	now = c.advance(now)
	e := c.items[string(key)]
	if e == nil || e.owner != 0 || e.cas != cas {
		return false
	}
	if c.dead(e, now) {
		c.reclaim(e)
	} else {
		c.evict(e)
	}
	return true
}

// Expired examines at most limit unlocked items, oldest first, continuing
// from where the last call stopped, and appends to dst those that have
// expired or were flushed at now, for the proposer to remove with Evict
// (memcached's LRU crawler, yrmcds's GC: dead items that nobody writes give
// their memory back). A pass over the whole LRU list ends a call early; the
// next call starts a new pass at the oldest item.
//
// It reads only: the place where it stopped is a process-local hint, not
// replicated state, and the items stay until evicted.
func (c *Cache) Expired(dst []Victim, now int64, limit int) []Victim {
	now = c.at(now)
	e := c.cursor
	if e == nil {
		e = c.tail
	}
	for n := 0; e != nil && n < limit; n++ {
		if c.dead(e, now) {
			dst = append(dst, Victim{Key: e.key, CAS: e.cas})
		}
		e = e.prev
	}
	c.cursor = e
	return dst
}
