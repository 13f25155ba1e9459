package cache

// FlushAll invalidates every unlocked item stored before the flush takes
// effect (memcached flush_all). delay follows the exptime rules: 0 (or
// negative) is now, up to MaxRelativeExptime is seconds from now, larger is
// a Unix time in seconds. The flush takes effect at the first operation at
// or after that instant, before the operation's own work: every item stored
// before then and unlocked at that moment is gone, including items stored
// after this call but before the instant; items stored afterwards are not
// affected (we do not copy yrmcds's habit of hiding them too until its next
// GC). Items locked at that moment survive, and stay after their unlock.
// A later FlushAll replaces a pending one.
//
// The flush itself is O(locked items): flushed items are removed lazily, by
// the operations that meet them, by Sweep and by eviction.
func (c *Cache) FlushAll(now int64, delay int64) {
	now = c.advance(now)
	c.stats.CmdFlush++
	at := now
	if delay > 0 {
		at = max(now, deadline(now, delay))
	}
	c.flushPending = true
	c.flushAt = at
	c.advance(now)
}

// Sweep examines at most limit unlocked items, continuing from where the last
// call stopped, oldest first, and removes those that have expired or were
// flushed. It returns how many it removed. A pass over the whole LRU list
// ends a call early; the next call starts a new pass at the oldest item.
// The driver calls it from time to time (memcached's LRU crawler, yrmcds's
// GC) so that dead items that nobody reads give their memory back.
func (c *Cache) Sweep(now int64, limit int) int {
	now = c.advance(now)
	e := c.cursor
	if e == nil {
		e = c.tail
	}
	removed := 0
	for n := 0; e != nil && n < limit; n++ {
		prev := e.prev
		if c.dead(e, now) {
			c.reclaim(e)
			removed++
		}
		e = prev
	}
	c.cursor = e
	return removed
}
