package cache

import (
	"fmt"

	"github.com/latchd/latch"
)

// Lock locks the live item of key for owner (yrmcds lock). Locks are not
// re-entrant: an item locked by anyone, owner included, gives ErrLocked.
// While locked the item never expires, is never evicted and survives
// flushes; see the package documentation.
//
// Errors: ErrInvalidKey, ErrNotFound, ErrLocked, and an error wrapping
// latch.ErrNoSession if owner is 0.
func (c *Cache) Lock(now int64, owner latch.SessionID, key []byte) error {
	_, err := c.LockFunc(now, owner, key, LockOnly, 0, nil)
	return err
}

// LockAndGet locks the live item of key for owner, as Lock, and returns it
// (yrmcds LaG). An expired item is not found; it is not brought back.
//
// Errors: as Lock.
func (c *Cache) LockAndGet(now int64, owner latch.SessionID, key []byte) (Item, error) {
	return c.LockFunc(now, owner, key, LockGet, 0, nil)
}

// LockAndTouch is LockAndGet that also sets the item's exptime (yrmcds LaG
// with an exptime). The new exptime is checked once the item is unlocked.
//
// Errors: as Lock.
func (c *Cache) LockAndTouch(now int64, owner latch.SessionID, key []byte, exptime int64) (Item, error) {
	return c.LockFunc(now, owner, key, LockTouch, exptime, nil)
}

// LockMode says what LockFunc does besides locking the item.
type LockMode uint8

const (
	// LockOnly locks the item: Lock.
	LockOnly LockMode = iota
	// LockGet locks the item and reads it, which marks it fetched:
	// LockAndGet.
	LockGet
	// LockTouch is LockGet that also sets the item's exptime:
	// LockAndTouch.
	LockTouch
)

// LockFunc is Lock, LockAndGet or LockAndTouch, as mode says (exptime is
// LockTouch's), for a caller that keeps a lock table beside the cache: the
// memcached front end, whose locks also exclude the lockers of other
// protocols. It looks key up once for both.
//
// Once key and owner are checked and key's item is found (a dead one is
// removed on the way), LockFunc calls take, unless it is nil, with the key
// as a string: the item's own copy when the cache had an item of key, live
// or dead, so that naming the key costs no allocation; a new string
// otherwise. take runs before the item's lock mark is looked at, so that
// the lock table answers first, even when there is no item:
//
//   - if take returns an error, LockFunc returns it unchanged and locks
//     nothing;
//   - otherwise LockFunc locks the item for owner, or fails with
//     ErrNotFound or ErrLocked, and then the caller must give back what
//     take took.
//
// take may keep name. It must not call the cache. The item is returned in
// every mode.
//
// Errors: ErrInvalidKey, an error wrapping latch.ErrNoSession if owner is 0
// (take is not called for either), take's error, ErrNotFound, ErrLocked.
func (c *Cache) LockFunc(now int64, owner latch.SessionID, key []byte, mode LockMode, exptime int64, take func(name string) error) (Item, error) {
	now = c.advance(now)
	if err := checkKey(key); err != nil {
		return Item{}, err
	}
	if owner == 0 {
		return Item{}, fmt.Errorf("%w: lock owner 0", latch.ErrNoSession)
	}
	e, name, _ := c.lookup(now, key)
	if take != nil {
		if name == "" {
			name = string(key)
		}
		if err := take(name); err != nil {
			return Item{}, err
		}
	}
	if e == nil {
		return Item{}, ErrNotFound
	}
	if e.owner != 0 {
		return Item{}, ErrLocked
	}
	c.lock(e, owner)
	if mode == LockTouch {
		e.exp = deadline(now, exptime)
	}
	if mode != LockOnly {
		e.fetched = true
	}
	return e.item(), nil
}

// Unlock releases owner's lock on the live item of key (yrmcds unlock). If
// the item's exptime passed while it was locked, it is removed now.
//
// Errors: ErrInvalidKey, ErrNotFound (no live item: binary 0x0001),
// ErrNotLocked (not locked, or locked by another owner: 0x0011).
func (c *Cache) Unlock(now int64, owner latch.SessionID, key []byte) error {
	_, err := c.UnlockKey(now, owner, key)
	return err
}

// UnlockKey is Unlock for a caller that keeps a lock table beside the cache
// (see LockFunc): it also returns the key as the item's own string, so that
// the caller can release the key in its table without allocating or
// looking the key up again. name is "" when err is not nil.
//
// Errors: as Unlock.
func (c *Cache) UnlockKey(now int64, owner latch.SessionID, key []byte) (name string, err error) {
	now = c.advance(now)
	if err := checkKey(key); err != nil {
		return "", err
	}
	e, _ := c.find(now, key)
	if e == nil {
		return "", ErrNotFound
	}
	if !heldBy(e, owner) {
		return "", ErrNotLocked
	}
	c.unlock(now, e)
	return e.key, nil
}

// UnlockAll releases every lock owner holds (yrmcds unlock_all, and the end
// of a session) and returns how many it released. Items whose exptime passed
// while locked are removed now.
//
// The cache keeps the index of each owner's locked items itself, as intrusive
// lists through the items, so that it cannot disagree with the items' lock
// fields (a holder's Delete drops the item from it in the same step) and so
// that locking costs no allocation.
func (c *Cache) UnlockAll(now int64, owner latch.SessionID) int {
	now = c.advance(now)
	if owner == 0 {
		return 0
	}
	n := 0
	for e := c.owners[owner]; e != nil; {
		next := e.next
		c.unlock(now, e)
		e = next
		n++
	}
	return n
}

// Locks returns how many items owner holds locked.
func (c *Cache) Locks(owner latch.SessionID) int {
	n := 0
	for e := c.owners[owner]; e != nil; e = e.next {
		n++
	}
	return n
}

// ReplaceAndUnlock stores value, flags and exptime in the item of key, which
// owner must hold locked, and releases the lock (yrmcds RaU). It returns the
// new CAS. If cas is not 0 and does not match, nothing changes and the lock
// is kept. If the new exptime is already past, the item is gone once
// unlocked.
//
// Errors: ErrInvalidKey, ErrTooLarge, ErrNotFound, ErrNotLocked (not locked
// by owner), ErrExists (cas), ErrNoMemory (the lock is kept).
func (c *Cache) ReplaceAndUnlock(now int64, owner latch.SessionID, key, value []byte, flags uint32, exptime int64, cas uint64) (uint64, error) {
	newCAS, _, err := c.ReplaceAndUnlockKey(now, owner, key, value, flags, exptime, cas)
	return newCAS, err
}

// ReplaceAndUnlockKey is ReplaceAndUnlock for a caller that keeps a lock
// table beside the cache, as UnlockKey: it also returns the key as the
// item's own string, to release in the caller's table. name is "" when err
// is not nil (the lock is kept).
//
// Errors: as ReplaceAndUnlock.
func (c *Cache) ReplaceAndUnlockKey(now int64, owner latch.SessionID, key, value []byte, flags uint32, exptime int64, cas uint64) (newCAS uint64, name string, err error) {
	now = c.advance(now)
	if err := checkKey(key); err != nil {
		return 0, "", err
	}
	if len(value) > c.cfg.MaxItemSize {
		return 0, "", ErrTooLarge
	}
	c.stats.CmdSet++
	e, _ := c.find(now, key)
	if e == nil {
		return 0, "", ErrNotFound
	}
	if !heldBy(e, owner) {
		return 0, "", ErrNotLocked
	}
	if cas != 0 {
		if err := c.compare(e, cas); err != nil {
			return 0, "", err
		}
	}
	if err := c.room(now, int64(len(value)-len(e.value)), e); err != nil {
		return 0, "", err
	}
	c.setValue(e, clone(value))
	if cas != 0 {
		c.stats.CasHits++
	}
	e.flags = flags
	e.exp = deadline(now, exptime)
	e.fetched = false
	newCAS = e.cas
	c.unlock(now, e)
	return newCAS, e.key, nil
}
