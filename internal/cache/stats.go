package cache

// Stats are the counters of memcached's stats command that the item store
// owns, named after them. Gauges describe the moment; the rest count since
// the cache was made.
type Stats struct {
	CurrItems   uint64 // curr_items: stored items, including dead ones not yet removed
	Bytes       uint64 // bytes: sum of item sizes (see ItemOverhead)
	LockedItems uint64 // items locked now
	LockedBytes uint64 // sum of the sizes of locked items

	TotalItems       uint64 // total_items: successful stores (set, add, append, incr, ...)
	Evictions        uint64 // evictions: live items removed to make room
	EvictedUnfetched uint64 // evicted_unfetched: evicted items never read
	Reclaimed        uint64 // reclaimed: expired or flushed items removed
	ExpiredUnfetched uint64 // expired_unfetched: reclaimed items never read

	CmdGet   uint64 // cmd_get: keys looked up by get and gat
	CmdSet   uint64 // cmd_set: storage commands (set, add, replace, cas, append, prepend, RaU)
	CmdFlush uint64 // cmd_flush
	CmdTouch uint64 // cmd_touch: touch and gat

	GetHits      uint64 // get_hits
	GetMisses    uint64 // get_misses
	GetExpired   uint64 // get_expired: misses on an item that had expired
	GetFlushed   uint64 // get_flushed: misses on an item that was flushed
	DeleteHits   uint64 // delete_hits
	DeleteMisses uint64 // delete_misses
	IncrHits     uint64 // incr_hits
	IncrMisses   uint64 // incr_misses
	DecrHits     uint64 // decr_hits
	DecrMisses   uint64 // decr_misses
	CasHits      uint64 // cas_hits: writes with a CAS that matched
	CasMisses    uint64 // cas_misses: writes with a CAS that found no item
	CasBadval    uint64 // cas_badval: writes with a CAS that did not match
	TouchHits    uint64 // touch_hits (touch and gat)
	TouchMisses  uint64 // touch_misses (touch and gat)

	LimitMaxbytes uint64 // limit_maxbytes: Config.MemoryLimit
}

// Stats returns the current counters.
func (c *Cache) Stats() Stats {
	s := c.stats
	s.Bytes = uint64(c.bytes)
	s.LockedItems = uint64(c.locked)
	s.LockedBytes = uint64(c.lockedBytes)
	s.LimitMaxbytes = uint64(c.cfg.MemoryLimit)
	return s
}
