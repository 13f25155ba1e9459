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
// the writes that meet them and by Evict (the proposer finds them with
// Expired and PlanRoom). Reads see them as gone at once, also before the
// flush took effect, once its instant has come.
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
