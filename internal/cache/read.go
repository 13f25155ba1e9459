package cache

// Item is a read-only view of a stored item.
type Item struct {
	// Value is the item's value. It is shared with the cache, which never
	// writes into a stored value (every change stores a new slice), so it
	// stays valid and unchanged after later calls; the caller must not
	// modify it. Its capacity is its length.
	Value []byte
	Flags uint32
	// CAS is the item's CAS unique. Every change to an item gives it a new
	// one from a counter shared by all items, so a CAS is never reused.
	CAS uint64
}

// Get returns the live item of key and marks it most recently used (at
// most once every bumpInterval). It ignores locks: everyone may read a
// locked item.
//
// Get is a read: it changes no replicated state (see "What a read may
// change" in the package documentation). It judges the item at now (or at
// the latest write's instant, if now is earlier) without moving the cache's
// time or applying a pending flush, and leaves a dead item where it is.
//
// Errors: ErrInvalidKey, ErrNotFound.
func (c *Cache) Get(now int64, key []byte) (Item, error) {
	now = c.at(now)
	if err := CheckKey(key); err != nil {
		return Item{}, err
	}
	c.stats.CmdGet++
	e := c.items[string(key)]
	if e == nil {
		c.stats.GetMisses++
		return Item{}, ErrNotFound
	}
	if live, why := c.state(e, now); !live {
		c.stats.GetMisses++
		c.countMiss(why)
		return Item{}, ErrNotFound
	}
	c.stats.GetHits++
	e.fetched = true
	c.fetchBump(e, now)
	return e.item(), nil
}

// GetAndTouch is Get that also sets the item's exptime (memcached gat,
// binary GaT, and yrmcds's Get with an exptime). Like Touch it ignores
// locks; a locked item keeps its lock and, while locked, does not expire.
// Unlike Get it is a write: it moves the cache's time, removes a dead item
// of key, and, like Touch, always makes the item the most recently used.
//
// Errors: ErrInvalidKey, ErrNotFound.
func (c *Cache) GetAndTouch(now int64, key []byte, exptime int64) (Item, error) {
	now = c.advance(now)
	if err := CheckKey(key); err != nil {
		return Item{}, err
	}
	c.stats.CmdGet++
	c.stats.CmdTouch++
	e, why := c.find(now, key)
	if e == nil {
		c.stats.TouchMisses++
		c.countMiss(why)
		return Item{}, ErrNotFound
	}
	c.stats.TouchHits++
	e.exp = deadline(now, exptime)
	e.fetched = true
	c.bump(e)
	return e.item(), nil
}

// Touch sets the exptime of the live item of key, marks it most recently
// used and returns its CAS, which does not change. It ignores locks (as
// yrmcds does): anyone may touch a locked item.
//
// Errors: ErrInvalidKey, ErrNotFound.
func (c *Cache) Touch(now int64, key []byte, exptime int64) (cas uint64, err error) {
	now = c.advance(now)
	if err := CheckKey(key); err != nil {
		return 0, err
	}
	c.stats.CmdTouch++
	e, _ := c.find(now, key)
	if e == nil {
		c.stats.TouchMisses++
		return 0, ErrNotFound
	}
	c.stats.TouchHits++
	e.exp = deadline(now, exptime)
	c.bump(e)
	return e.cas, nil
}

func (c *Cache) countMiss(why miss) {
	switch why {
	case missExpired:
		c.stats.GetExpired++
	case missFlushed:
		c.stats.GetFlushed++
	}
}

// AppendKeys appends to dst the key of every live item that starts with
// prefix, locked ones included (yrmcds's keys command), and returns the
// extended slice. The order is unspecified. It reads only: dead items are
// skipped, not removed, no item changes its LRU position, and the cache's
// time does not move.
func (c *Cache) AppendKeys(dst []string, now int64, prefix []byte) []string {
	now = c.at(now)
	for k, e := range c.items {
		if len(k) < len(prefix) || k[:len(prefix)] != string(prefix) {
			continue
		}
		if !c.dead(e, now) {
			dst = append(dst, k)
		}
	}
	return dst
}

// Entry describes a live item for a listing (memcached's stats
// cachedump): its key, its size as Stats.Bytes counts it, and its expiry
// instant (0: none).
type Entry struct {
	Key  string
	Size int64
	Exp  int64
}

// AppendEntries appends to dst up to limit live items (limit <= 0: all),
// locked ones included, in no order. It reads only, like AppendKeys.
func (c *Cache) AppendEntries(dst []Entry, now int64, limit int) []Entry {
	now = c.at(now)
	for k, e := range c.items {
		if limit > 0 && len(dst) >= limit {
			break
		}
		if c.dead(e, now) {
			continue
		}
		exp := e.exp
		if exp == never {
			exp = 0
		}
		dst = append(dst, Entry{Key: k, Size: e.size(), Exp: exp})
	}
	return dst
}

// CountSizes counts the live items by size (key + value + ItemOverhead):
// counts[i] is the number of items of size at most bounds[i] (and above
// bounds[i-1]); the last element counts the items larger than every bound.
// It reads only, like AppendKeys.
func (c *Cache) CountSizes(now int64, bounds []int64) []uint64 {
	now = c.at(now)
	counts := make([]uint64, len(bounds)+1)
	for _, e := range c.items {
		if c.dead(e, now) {
			continue
		}
		size := e.size()
		i := 0
		for i < len(bounds) && size > bounds[i] {
			i++
		}
		counts[i]++
	}
	return counts
}
