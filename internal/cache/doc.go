// Package cache owns latch's memcached item store: items with flags,
// exptime and CAS; set, add, replace, cas, append, prepend, incr, decr,
// touch, delete and flush_all with memcached's semantics; yrmcds's lock
// extension on items (lock, unlock, unlock_all, lock-and-get,
// replace-and-unlock); a memory limit with LRU eviction planned by the
// caller; the counters of memcached's stats; and snapshots of its state.
//
// The cache is a deterministic state machine, like the lock engine. It owns
// no goroutines, timers or I/O and is not safe for concurrent use: its driver
// serialises calls and passes the current time to every method as now, in
// nanoseconds since the Unix epoch (memcached's absolute exptimes are Unix
// seconds). Time never runs backwards inside the cache: a write's earlier
// now counts as the latest instant a write brought. The same writes in the
// same order give the same state, so the cache can be replicated by applying
// a log of writes on every node, each with the time its proposer stamped
// into it; reads change no replicated state and are served by any node
// outside the log (see "What a read may change").
//
// # Items
//
//   - A key is 1 to latch.MaxKeyLen bytes without space, CR or LF
//     (latch.CheckKey). Values may be empty and at most Config.MaxItemSize
//     bytes long. Keys and values are passed as []byte and copied once when
//     stored, a key and its value into one allocation, the value just after
//     the key, so that the lookup that compares the key also brings the
//     start of the value into the CPU's cache; the cache never keeps the
//     caller's slices. A stored key or value is never written again, so the
//     Item.Value a read returns may be kept.
//   - CAS values come from one counter for the whole cache that only grows:
//     every change to an item gives it the next value, so a key deleted and
//     stored again never accepts an old CAS (memcached; not yrmcds's
//     per-object counter). Touch does not change the CAS.
//   - exptime (seconds, as on the wire): 0 never expires; up to
//     MaxRelativeExptime (30 days) is relative to now; larger is an absolute
//     Unix time, already expired if not in the future; negative is expired at
//     once. An item is expired from its deadline on.
//   - Dead items (expired or flushed) are removed lazily, by a write of their
//     key, and by Evict, which the proposer issues for the dead items that
//     Expired (memcached's LRU crawler) or PlanRoom names. Reads skip them
//     and leave them. Until they go they count in Stats.CurrItems and
//     Stats.Bytes, as in memcached.
//   - FlushAll invalidates the unlocked items stored before it takes effect,
//     and no item stored after (see FlushAll).
//   - An item's size is len(key) + len(value) + ItemOverhead. A write that
//     would take the total over Config.MemoryLimit fails with ErrNoMemory:
//     writes never evict. Eviction is decided by the proposer, against its
//     own copy, before it proposes the write: Grow says how much the write
//     grows the cache, PlanRoom (a read, and nearly free while the write
//     fits) names the unlocked items to remove from the least recently used
//     end, and the proposer puts an Evict for each in the log ahead of the
//     write. Evict names the item's CAS, so that an eviction planned before
//     a concurrent write of that key removes nothing. Writes and touches
//     make an item the most recently used; gets do too, at most once a
//     minute.
//
// # Locks
//
// The cache never asks the lock engine anything. Its caller, which also
// drives the engine, tells it who holds what: every item has a lock owner (a
// latch.SessionID, 0 = unlocked), set by Lock (LockOnly, LockGet, LockTouch)
// and cleared by Unlock, UnlockAll and ReplaceAndUnlock. Every write names
// the acting owner (0 for none). The rules are yrmcds's:
//
//   - Lock needs a live item and fails with ErrLocked on a locked one, even
//     when the owner already holds it (locks are not re-entrant).
//   - Reads (Get, AppendKeys) work whoever holds the lock. So do Touch and
//     GetAndTouch, as in yrmcds.
//   - Writes (Set, Add, Replace, CAS, Append, Prepend, Incr, Decr, Delete)
//     by anyone but the holder fail with ErrLocked, before any other check
//     but the key's and the value's size. The holder may write, and keeps
//     the lock.
//   - The holder's Delete removes the item and its lock, and returns the key
//     as unlocked: the caller must drop the lock it tracks.
//     ReplaceAndUnlock releases the lock too; nothing else releases a lock
//     behind the caller's back.
//   - A locked item never expires, is never evicted and survives flushes.
//     Its exptime is checked once it is unlocked: an item whose exptime passed
//     while it was locked is removed at its unlock.
//
// A caller that keeps a lock table beside the cache (the memcached front
// end, whose locks also exclude other protocols' lockers) names keys in it
// with the cache's own strings, so that naming a key costs no allocation and
// no second lookup: Lock returns the key's string whenever the key had an
// item, live or dead, whatever the error; Unlock and ReplaceAndUnlock return
// it when they released the lock, Delete when the holder's delete dropped
// it. There are no callbacks: the caller checks the item with Name (a read,
// one map probe, which also returns the string) and its own table before it
// proposes a Lock, and gives back what it took in its table if the Lock
// fails.
//
// Locked items leave the LRU list for a list per owner, so PlanRoom and
// Expired never even see them, and UnlockAll costs O(items the owner holds).
// A write or a touch (GetAndTouch included) moves an item to the head of the
// LRU list; a get does so at most once a minute (bumpInterval, memcached's
// ITEM_UPDATE_INTERVAL), so that reading a hot item does not rewrite the list
// each time: eviction takes the least recently used item to within that
// minute.
//
// # What a read may change
//
// The reads are Get, AppendKeys, CountSizes, Stats, Locks, Name, Grow,
// PlanRoom, Expired and AppendSnapshot; every other operation (Touch and
// GetAndTouch included) is a write, for the log. A read changes no replicated
// state: it does not move the cache's time (it judges items at its now, or
// at the latest write's instant if now is earlier), does not apply a pending
// flush (an unlocked item counts as flushed for it once the flush's instant
// is not after now), and does not remove dead items. So any node may serve
// it without the log, and reads need no order among writes. (A read's now
// may be ahead of the log's: it may already miss an item that a write
// stamped a little earlier still finds live.)
//
// What a read may change is process-local hints, which are not replicated
// state and may differ between nodes: a Get counts its hit or miss in Stats,
// marks the item fetched (which feeds only the *_unfetched stats), and may
// move it to the head of the LRU list (at most once every bumpInterval);
// Expired moves its cursor. No write's result depends on them. The LRU order
// decides only what PlanRoom proposes to evict, and the Evicts in the log
// name items by key and CAS, so every node removes the same items whatever
// its order. The LRU order is in a snapshot, though: nodes fed the same
// writes and no gets give identical snapshots; gets may reorder their lists.
//
// # Snapshots
//
// AppendSnapshot encodes the replicated state and Restore rebuilds a cache
// from it, to start a node or compact the log: the instant of the latest
// write, the CAS counter, the flush epoch and any pending flush, and every
// item (key, value, flags, exptime, CAS, lock owner, epoch): the unlocked
// ones in LRU order from the most recently used, the locked ones by owner,
// owners by increasing id, each in its list's order. The item, byte and
// lock counts are recomputed; the stats counters, fetched marks, bump times
// and Expired's cursor are not in it and start afresh. The encoding is
// canonical (equal states give identical bytes), versioned by its first
// byte (1), and made of encoding/binary varints and length-prefixed bytes;
// snapshot.go documents it. Restore checks every byte and rejects what
// AppendSnapshot could not have made with an error wrapping ErrBadSnapshot;
// it never allocates from a count the input does not back. It does not
// enforce Config.MemoryLimit: a state over a smaller limit restores, and
// growing writes fail with ErrNoMemory until evictions bring it under.
//
// # Errors and memcached replies
//
// Errors are the sentinels of errors.go, returned unwrapped. A front end maps
// them per command:
//
//	error          text reply                    binary status
//	ErrNotFound    NOT_FOUND (get: a miss;       0x0001 Key not found
//	               unlock: CLIENT_ERROR object
//	               is not locked or not found)
//	ErrExists      add: NOT_STORED; cas: EXISTS  0x0002 Key exists
//	ErrNotStored   NOT_STORED                    replace: 0x0001 (yrmcds and
//	                                             memcached); append/prepend:
//	                                             0x0001 (yrmcds) or 0x0005
//	ErrTooLarge    ERROR (yrmcds) or             0x0003 Value too large
//	               SERVER_ERROR object too large
//	ErrInvalidKey  ERROR                         0x0004 Invalid arguments
//	ErrNonNumeric  CLIENT_ERROR cannot increment 0x0006 Non-numeric value
//	               or decrement non-numeric value
//	ErrLocked      LOCKED                        0x0010 Locked
//	ErrNotLocked   CLIENT_ERROR object is not    0x0011 Not locked
//	               locked or not found
//	ErrNoMemory    SERVER_ERROR out of memory    0x0082 Out of memory
//	               storing object
//
// Successful operations allocate only what they store: a new key costs its
// record and its key and value; a new value for an existing key costs the
// value and a new copy of the key beside it; reads, touches, locks, deletes
// and evictions allocate
// nothing (PlanRoom and Expired append to the caller's slice; snapshots
// allocate their bytes, and Restore its cache).
package cache
