// Package cache owns latch's memcached item store: items with flags,
// exptime and CAS; set, add, replace, cas, append, prepend, incr, decr,
// touch, delete and flush_all with memcached's semantics; yrmcds's lock
// extension on items (lock, unlock, unlock_all, lock-and-get,
// replace-and-unlock); a memory limit with LRU eviction; and the counters of
// memcached's stats.
//
// The cache is a deterministic state machine, like the lock engine. It owns
// no goroutines, timers or I/O and is not safe for concurrent use: its driver
// serialises calls and passes the current time to every method as now, in
// nanoseconds since the Unix epoch (memcached's absolute exptimes are Unix
// seconds). Time never runs backwards inside the cache: an earlier now counts
// as the latest instant seen. The same calls in the same order give the same
// state, so the cache can be replicated by applying a log of them.
//
// # Items
//
//   - A key is 1 to latch.MaxKeyLen bytes without space, CR or LF
//     (latch.CheckKey). Values may be empty and at most Config.MaxItemSize
//     bytes long. Keys and values are passed as []byte and copied once when
//     stored; the cache never keeps the caller's slices. A stored value is
//     never written again, so the Item.Value a read returns may be kept.
//   - CAS values come from one counter for the whole cache that only grows:
//     every change to an item gives it the next value, so a key deleted and
//     stored again never accepts an old CAS (memcached; not yrmcds's
//     per-object counter). Touch does not change the CAS.
//   - exptime (seconds, as on the wire): 0 never expires; up to
//     MaxRelativeExptime (30 days) is relative to now; larger is an absolute
//     Unix time, already expired if not in the future; negative is expired at
//     once. An item is expired from its deadline on.
//   - Expired items are removed lazily by the operation that meets them,
//     incrementally by Sweep, and first when room is needed. Until then they
//     count in Stats.CurrItems and Stats.Bytes, as in memcached.
//   - FlushAll invalidates the unlocked items stored before it takes effect,
//     and no item stored after (see FlushAll).
//   - An item's size is len(key) + len(value) + ItemOverhead. A write that
//     would take the total over Config.MemoryLimit first removes unlocked
//     items from the least recently used end; reads, writes and touches make
//     an item the most recently used.
//
// # Locks
//
// The cache never asks the lock engine anything. Its caller, which also
// drives the engine, tells it who holds what: every item has a lock owner (a
// latch.SessionID, 0 = unlocked), set by Lock, LockAndGet and LockAndTouch
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
//   - The holder's Delete removes the item and its lock, and reports
//     unlocked = true: the caller must drop the lock it tracks.
//     ReplaceAndUnlock releases the lock too; nothing else releases a lock
//     behind the caller's back.
//   - A locked item never expires, is never evicted and survives flushes.
//     Its exptime is checked once it is unlocked: an item whose exptime passed
//     while it was locked is removed at its unlock.
//
// A caller that keeps a lock table beside the cache (the memcached front
// end, whose locks also exclude other protocols' lockers) uses LockFunc,
// UnlockKey, DeleteKey and ReplaceAndUnlockKey, which look the key up once
// for the cache and the table: LockFunc calls back to take the key in the
// table, naming it with the item's own key string, before it looks at the
// item's lock mark; the others return that string for the caller to release.
//
// Locked items leave the LRU list for a list per owner, so eviction and Sweep
// never even see them, and UnlockAll costs O(items the owner holds). A write
// or a touch moves an item to the head of the LRU list; a get does so at
// most once a minute (bumpInterval, memcached's ITEM_UPDATE_INTERVAL), so
// that reading a hot item does not rewrite the list each time: eviction
// takes the least recently used item to within that minute.
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
// record, its key string and its value; a new value for an existing key costs
// the value alone; reads, touches, locks and deletes allocate nothing.
package cache
