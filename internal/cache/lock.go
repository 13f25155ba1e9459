package cache

import (
	"fmt"

	"github.com/latchd/latch"
)

// LockMode says what Lock does besides locking the item.
type LockMode uint8

const (
	// LockOnly locks the item (yrmcds lock).
	LockOnly LockMode = iota
	// LockGet locks the item and reads it, which marks it fetched (yrmcds
	// LaG).
	LockGet
	// LockTouch is LockGet that also sets the item's exptime (yrmcds LaG
	// with an exptime). The new exptime is checked once the item is
	// unlocked.
	LockTouch
)

// Lock locks the live item of key for owner and returns it, in every mode
// (exptime is LockTouch's). Locks are not re-entrant: an item locked by
// anyone, owner included, gives ErrLocked. While locked the item never
// expires, is never evicted and survives flushes; see the package
// documentation. An expired item is not found; it is not brought back.
//
// name is the key as the cache's own string whenever key had an item, live
// or dead (a dead one is removed on the way), whatever the error; "" if it
// had none or key or owner is invalid.
//
// Errors, in this order: ErrInvalidKey, an error wrapping
// latch.ErrNoSession if owner is 0, ErrNotFound, ErrLocked.
func (c *Cache) Lock(now int64, owner latch.SessionID, key []byte, mode LockMode, exptime int64) (it Item, name string, err error) {
	now = c.advance(now)
	if err := CheckKey(key); err != nil {
		return Item{}, "", err
	}
	if owner == 0 {
		return Item{}, "", fmt.Errorf("%w: lock owner 0", latch.ErrNoSession)
	}
	ref := c.Find(key)
	it, err = c.LockRef(now, ref, owner, mode, exptime)
	return it, ref.Name(), err
}

// Ref is the item of a key as Find found it, for a caller that keeps a lock
// table beside the cache (the memcached lock, whose locks also exclude
// other protocols' lockers): it looks the key up once, takes the key in its
// table under the item's own string (Name, which costs no allocation), and
// then locks the item with LockRef. A Ref is valid until the cache's next
// write.
type Ref struct{ e *entry }

// Find looks key up without changing anything (a read): the Ref names the
// key's item, live or dead, or none.
func (c *Cache) Find(key []byte) Ref { return Ref{c.items[string(key)]} }

// Name is the key as the cache's own string, or "" when the key had no
// item.
func (r Ref) Name() string {
	if r.e == nil {
		return ""
	}
	return r.e.key
}

// Name looks key up without changing anything (a read) and returns the key
// as the cache's own string if key has an item, live or dead ("" otherwise),
// whether the item is live at now, and who holds its lock (0: nobody). An
// invalid key has no item.
func (c *Cache) Name(now int64, key []byte) (name string, live bool, lockedBy latch.SessionID) {
	ref := c.Find(key)
	if ref.e == nil {
		return "", false, 0
	}
	live, _ = c.state(ref.e, c.at(now))
	return ref.e.key, live, ref.Owner()
}

// Owner is who holds the lock of the key's item; 0 when nobody does or
// there is no item.
func (r Ref) Owner() latch.SessionID {
	if r.e == nil {
		return 0
	}
	return r.e.owner
}

// LockRef is Lock of the item that Find returned, with no write to the
// cache in between, for a valid key and owner: it fails with ErrNotFound
// when the item is missing or dead (a dead one is removed) and ErrLocked
// when it is locked.
func (c *Cache) LockRef(now int64, ref Ref, owner latch.SessionID, mode LockMode, exptime int64) (Item, error) {
	now = c.advance(now)
	e := ref.e
	if e == nil {
		return Item{}, ErrNotFound
	}
	if live, _ := c.state(e, now); !live {
		c.reclaim(e)
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
// the item's exptime passed while it was locked, it is removed now. It
// returns the key as the item's own string, so that a caller that keeps a
// lock table beside the cache can release the key in it without allocating
// or looking the key up again; name is "" when err is not nil.
//
// Errors: ErrInvalidKey, ErrNotFound (no live item: binary 0x0001),
// ErrNotLocked (not locked, or locked by another owner: 0x0011).
func (c *Cache) Unlock(now int64, owner latch.SessionID, key []byte) (name string, err error) {
	now = c.advance(now)
	if err := CheckKey(key); err != nil {
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
	l := c.owners[owner]
	if l == nil {
		return 0
	}
	n := 0
	for e := l.first; e != nil; {
		next := e.next
		c.unlock(now, e)
		e = next
		n++
	}
	delete(c.owners, owner)
	return n
}

// Locks returns how many items owner holds locked.
func (c *Cache) Locks(owner latch.SessionID) int {
	l := c.owners[owner]
	if l == nil {
		return 0
	}
	n := 0
	for e := l.first; e != nil; e = e.next {
		n++
	}
	return n
}

// ReplaceAndUnlock stores value, flags and exptime in the item of key, which
// owner must hold locked, and releases the lock (yrmcds RaU). It returns the
// new CAS and, as Unlock, the key as the item's own string. If cas is not 0
// and does not match, nothing changes and the lock is kept. If the new
// exptime is already past, the item is gone once unlocked. name is "" when
// err is not nil (the lock is kept).
//
// Errors: ErrInvalidKey, ErrTooLarge, ErrNotFound, ErrNotLocked (not locked
// by owner), ErrExists (cas), ErrNoMemory (the lock is kept).
func (c *Cache) ReplaceAndUnlock(now int64, owner latch.SessionID, key, value []byte, flags uint32, exptime int64, cas uint64) (newCAS uint64, name string, err error) {
	now = c.advance(now)
	if err := CheckKey(key); err != nil {
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
	if !c.fits(int64(len(value) - len(e.value))) {
		return 0, "", ErrNoMemory
	}
	c.setValue(e, value, nil)
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
