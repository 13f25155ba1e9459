package cache

import (
	"errors"

	"github.com/latchd/latch"
)

// Errors the cache's operations end with. They are returned as is, never
// wrapped (except ErrInvalidKey, whose error says what is wrong with the
// key, and ErrBadSnapshot), so comparing with errors.Is or == works and returning one costs no
// allocation. The table in the package documentation maps them to memcached
// replies.
var (
	// ErrInvalidKey: a key is empty, longer than latch.MaxKeyLen, or holds a
	// space, CR or LF. It is latch.ErrInvalidKey.
	ErrInvalidKey = latch.ErrInvalidKey
	// ErrNotFound: the key has no live item (it was never stored, or was
	// deleted, evicted, flushed or has expired).
	ErrNotFound = errors.New("cache: not found")
	// ErrExists: add found a live item, or a CAS did not match the item's.
	ErrExists = errors.New("cache: item exists or CAS mismatch")
	// ErrNotStored: replace, append or prepend found no live item.
	ErrNotStored = errors.New("cache: not stored")
	// ErrLocked: a write by an owner that does not hold the item's lock, or
	// a lock on an item that is already locked (by anyone: locks are not
	// re-entrant).
	ErrLocked = errors.New("cache: item is locked")
	// ErrNotLocked: unlock or replace-and-unlock of a live item that the
	// owner does not hold (not locked, or locked by another owner).
	ErrNotLocked = errors.New("cache: item is not locked by this owner")
	// ErrTooLarge: a value longer than Config.MaxItemSize, also after an
	// append or prepend.
	ErrTooLarge = errors.New("cache: value too large")
	// ErrNonNumeric: incr or decr of a value that is not a decimal uint64.
	ErrNonNumeric = errors.New("cache: cannot increment or decrement non-numeric value")
	// ErrNoMemory: a write would take the cache over Config.MemoryLimit
	// (writes never evict: the proposer makes room first with PlanRoom
	// and Evict), or PlanRoom found that evicting every unlocked item could
	// not make room, because the rest of the memory is held by locked
	// items. Nothing was changed.
	ErrNoMemory = errors.New("cache: out of memory")
	// ErrBadSnapshot: Restore was given bytes that AppendSnapshot could not
	// have made. Restore's errors wrap it and say what is wrong.
	ErrBadSnapshot = errors.New("malformed snapshot")
)
