package cache

import (
	"math"
	"time"
	"unsafe"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/peakmap"
)

// Cache is the memcached item store. See the package documentation for its
// rules. It is not safe for concurrent use.
type Cache struct {
	cfg   Config
	items map[string]*entry
	// itemsPeak is items' peak size: a drained map is rebuilt (peakmap).
	itemsPeak peakmap.Peak

	// The LRU list holds every unlocked item, most recently used at head.
	// Locked items are in their owner's list instead (owners), so eviction
	// and sweeping never meet them.
	head, tail *entry
	// cursor is the next LRU item Expired examines, walking from tail to
	// head; nil starts a new pass at the tail. A process-local hint, not
	// replicated state: it is not in a snapshot.
	cursor *entry
	// owners maps a lock owner to its list of locked items. An owner
	// keeps its list, empty or not, until UnlockAll (the end of its
	// session): locking and unlocking one item at a time then costs a
	// look-up, not an insertion and a deletion in the map.
	owners map[latch.SessionID]*ownerList

	now int64  // the latest instant seen
	cas uint64 // the last CAS handed out

	// epoch counts the flushes that took effect. Every live item carries
	// the current epoch; an unlocked item with an older one was flushed.
	epoch        uint64
	flushPending bool
	flushAt      int64

	bytes       int64 // sum of the sizes of all items
	lockedBytes int64 // sum of the sizes of locked items
	locked      int   // number of locked items

	stats Stats
}

// ownerList is an owner's list of locked items, linked through their prev
// and next.
type ownerList struct{ first *entry }

// entry is one stored item.
type entry struct {
	// key and value share one allocation, the key first (storeKV), so
	// that a lookup, which reads the key to compare it, brings the start
	// of the value into the CPU's cache with it. Neither is ever written
	// once stored: readers may keep either.
	key   string
	value []byte
	// prev (towards the head) and next (towards the tail) link the entry
	// into the LRU list, or, while locked, into its owner's list.
	prev, next *entry
	cas        uint64
	exp        int64 // first instant at which the item is expired; never: no expiry
	owner      latch.SessionID
	epoch      uint64
	flags      uint32
	// bumped is when the entry last went to the head of the LRU list, in
	// whole seconds modulo 2^16 (fetchBump). Process-local, like fetched:
	// not in a snapshot.
	bumped  uint16
	fetched bool // read by a get since stored (for the *_unfetched stats)
}

// bumpInterval is how long, in seconds, a fetched item stays where it is in
// the LRU list after it last went to its head, as memcached's
// ITEM_UPDATE_INTERVAL: a hot item is not moved on every get, which would
// touch its two neighbours (cold, in a large cache) each time. Eviction
// order is then least recently used to within the interval.
const bumpInterval = 60

// never is the expiry instant of an item without an exptime.
const never = math.MaxInt64

func (e *entry) size() int64 { return itemSize(len(e.key), len(e.value)) }

func itemSize(keyLen, valueLen int) int64 {
	return int64(keyLen) + int64(valueLen) + ItemOverhead
}

// item returns the read-only view of e.
func (e *entry) item() Item {
	return Item{Value: e.value[:len(e.value):len(e.value)], Flags: e.flags, CAS: e.cas}
}

// New returns an empty cache configured by cfg, which must be valid.
func New(cfg Config) (*Cache, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Cache{
		cfg:    cfg,
		items:  make(map[string]*entry),
		owners: make(map[latch.SessionID]*ownerList),
	}, nil
}

// Config returns the configuration the cache was made with.
func (c *Cache) Config() Config { return c.cfg }

// at returns the instant a read judges liveness at: now, or the latest
// instant a write brought if now is earlier. It changes nothing: reads do not
// move the cache's time (see "What a read may change" in the package
// documentation).
func (c *Cache) at(now int64) int64 {
	return max(now, c.now)
}

// advance brings the cache up to now and returns the instant to use: time
// never runs backwards, an earlier now counts as the latest instant seen. A
// pending flush whose instant has come takes effect here, before the
// operation that brought the time. Only writes call it.
func (c *Cache) advance(now int64) int64 {
	if now < c.now {
		now = c.now
	}
	c.now = now
	if c.flushPending && now >= c.flushAt {
		c.flushPending, c.flushAt = false, 0
		c.epoch++
		// Locked items survive the flush.
		for _, l := range c.owners {
			for e := l.first; e != nil; e = e.next {
				e.epoch = c.epoch
			}
		}
	}
	return now
}

// deadline converts a memcached exptime to the first instant at which the
// item is expired: 0 is never; negative is already; up to
// MaxRelativeExptime is seconds from now; larger is a Unix time in seconds
// (already expired if not after now).
func deadline(now, exptime int64) int64 {
	const sec = int64(time.Second)
	switch {
	case exptime == 0:
		return never
	case exptime < 0:
		return math.MinInt64
	case exptime <= MaxRelativeExptime:
		if now > never-exptime*sec {
			return never
		}
		return now + exptime*sec
	case exptime > never/sec:
		return never
	default:
		return exptime * sec
	}
}

// why an item was not found.
type miss uint8

const (
	missAbsent miss = iota
	missExpired
	missFlushed
)

// state tells whether e is live at now, or why it is not, without changing
// anything. A locked item is always live. An unlocked item is flushed if it
// is from an older epoch (a flush took effect since it was stored) or if a
// pending flush's instant is not after now (the flush would take effect at
// the next write at now: every item stored so far was stored before its
// instant, since advance applies a flush as soon as a write reaches it).
func (c *Cache) state(e *entry, now int64) (live bool, why miss) {
	switch {
	case e.owner != 0:
		return true, 0
	case e.epoch != c.epoch || c.flushPending && c.flushAt <= now:
		return false, missFlushed
	case e.exp <= now:
		return false, missExpired
	}
	return true, 0
}

func (c *Cache) dead(e *entry, now int64) bool {
	live, _ := c.state(e, now)
	return !live
}

// find returns the live item of key, or nil and why there is none. A dead
// item found on the way is removed (lazy expiry): only writes call it.
func (c *Cache) find(now int64, key []byte) (*entry, miss) {
	e, _, why := c.lookup(now, key)
	return e, why
}

// lookup is find that also returns the key of the item it met, live or
// dead: the cache's own copy of key, or "" if there was no item. Only
// writes call it.
func (c *Cache) lookup(now int64, key []byte) (e *entry, name string, why miss) {
	e = c.items[string(key)]
	if e == nil {
		return nil, "", missAbsent
	}
	if live, why := c.state(e, now); !live {
		c.reclaim(e)
		return nil, e.key, why
	}
	return e, e.key, 0
}

// lockedByOther reports whether e is locked by someone other than owner.
func lockedByOther(e *entry, owner latch.SessionID) bool {
	return e.owner != 0 && e.owner != owner
}

// heldBy reports whether owner holds e's lock.
func heldBy(e *entry, owner latch.SessionID) bool {
	return e.owner != 0 && e.owner == owner
}

func (c *Cache) nextCAS() uint64 {
	c.cas++
	return c.cas
}

// insert adds a new unlocked entry for key at the head of the LRU list.
// The caller has checked that it fits.
func (c *Cache) insert(key []byte, value []byte, flags uint32, exp int64) *entry {
	k, v := storeKV(key, value, nil)
	e := &entry{
		key:   k,
		value: v,
		cas:   c.nextCAS(),
		exp:   exp,
		epoch: c.epoch,
		flags: flags,
	}
	c.items[e.key] = e
	c.bytes += e.size()
	c.stats.CurrItems++
	c.stats.TotalItems++
	c.pushFront(e, c.second())
	return e
}

// storeKV copies key, then a and b, into one new allocation, and returns
// the key and the value (a then b, its capacity its length) as views of
// it: one allocation per item, where the key sits just before its value
// (see entry). The bytes are never written again, which is what lets the
// key be a string over them. key must not be empty (CheckKey).
func storeKV[K string | []byte](key K, a, b []byte) (string, []byte) {
	buf := make([]byte, len(key)+len(a)+len(b))
	n := copy(buf, key)
	copy(buf[n+copy(buf[n:], a):], b)
	return unsafe.String(&buf[0], n), buf[n:len(buf):len(buf)]
}

// setValue replaces e's value with a followed by b, stored anew with e's
// key (storeKV), and gives e a new CAS. The item map is given the new key
// string too, so that nothing keeps the old allocation (an assignment to
// a key present keeps the map's copy of the key current). The caller has
// checked that the growth fits.
func (c *Cache) setValue(e *entry, a, b []byte) {
	d := int64(len(a) + len(b) - len(e.value))
	c.bytes += d
	if e.owner != 0 {
		c.lockedBytes += d
	}
	e.key, e.value = storeKV(e.key, a, b)
	c.items[e.key] = e
	e.cas = c.nextCAS()
	c.stats.TotalItems++
}

// remove deletes e from the cache.
func (c *Cache) remove(e *entry) {
	delete(c.items, e.key)
	if c.itemsPeak.Due(len(c.items)) {
		c.items = peakmap.Rebuild(c.items, &c.itemsPeak)
	}
	if e.owner != 0 {
		c.ownerUnlink(e)
		c.lockedBytes -= e.size()
		c.locked--
		e.owner = 0
	} else {
		c.unlink(e)
	}
	c.bytes -= e.size()
	c.stats.CurrItems--
}

// reclaim removes an expired or flushed item.
func (c *Cache) reclaim(e *entry) {
	c.stats.Reclaimed++
	if !e.fetched {
		c.stats.ExpiredUnfetched++
	}
	c.remove(e)
}

// evict removes a live item to make room (Evict).
func (c *Cache) evict(e *entry) {
	c.stats.Evictions++
	if !e.fetched {
		c.stats.EvictedUnfetched++
	}
	c.remove(e)
}

// fits reports whether the cache can grow by grow bytes without going over
// Config.MemoryLimit. A write that does not grow always fits, also in a
// restored cache that is over a smaller limit. Writes never make room
// themselves: the proposer plans evictions (PlanRoom) and applies them
// (Evict) before the write.
func (c *Cache) fits(grow int64) bool {
	return grow <= 0 || c.bytes+grow <= c.cfg.MemoryLimit
}

// LRU list.

// pushFront puts e at the head of the LRU list, bumped at second s.
func (c *Cache) pushFront(e *entry, s uint16) {
	e.bumped = s
	e.prev = nil
	e.next = c.head
	if c.head != nil {
		c.head.prev = e
	} else {
		c.tail = e
	}
	c.head = e
}

func (c *Cache) unlink(e *entry) {
	if c.cursor == e {
		c.cursor = e.prev
	}
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		c.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		c.tail = e.prev
	}
	e.prev, e.next = nil, nil
}

// second is c.now in whole seconds, modulo 2^16 (entry.bumped).
func (c *Cache) second() uint16 { return secondOf(c.now) }

// secondOf is now in whole seconds, modulo 2^16.
func secondOf(now int64) uint16 { return uint16(now / int64(time.Second)) }

// fetchBump marks e, which a get read at now, most recently used, unless it
// went to the head of the LRU list less than bumpInterval ago. (A wrong
// answer of the 16-bit clock, every 18 hours, only skips one bump.) It
// changes only the LRU order, a process-local hint (see the package
// documentation): a get may call it.
func (c *Cache) fetchBump(e *entry, now int64) {
	s := secondOf(now)
	if s-e.bumped < bumpInterval || e.owner != 0 || c.head == e {
		return
	}
	c.unlink(e)
	c.pushFront(e, s)
}

// bump marks e as just written: an unlocked item moves to the LRU head.
func (c *Cache) bump(e *entry) {
	if e.owner != 0 || c.head == e {
		return
	}
	c.unlink(e)
	c.pushFront(e, c.second())
}

// Owner lists.

// lock moves e from the LRU list to owner's list.
func (c *Cache) lock(e *entry, owner latch.SessionID) {
	c.unlink(e)
	e.owner = owner
	l := c.owners[owner]
	if l == nil {
		l = new(ownerList)
		c.owners[owner] = l
	}
	e.next = l.first
	if l.first != nil {
		l.first.prev = e
	}
	l.first = e
	c.lockedBytes += e.size()
	c.locked++
}

// unlock moves e from its owner's list to the LRU head. An item whose
// exptime passed while it was locked is removed at once. (Flushes that took
// effect while it was locked gave it their epoch: it survived them.)
func (c *Cache) unlock(now int64, e *entry) {
	c.ownerUnlink(e)
	c.lockedBytes -= e.size()
	c.locked--
	e.owner = 0
	c.pushFront(e, c.second())
	if c.dead(e, now) {
		c.reclaim(e)
	}
}

func (c *Cache) ownerUnlink(e *entry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		c.owners[e.owner].first = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	}
	e.prev, e.next = nil, nil
}
