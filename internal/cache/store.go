package cache

import (
	"strconv"

	"github.com/latchd/latch"
)

// Every write names the acting owner: the session doing it, or 0 for none.
// A write on an item locked by another owner (any owner, for owner 0) fails
// with ErrLocked and changes nothing; the holder's writes keep the lock.
// Writes that take a cas argument compare it when it is not 0 (binary
// protocol requests carry one): a live item with another CAS gives ErrExists,
// no live item gives ErrNotFound (for Replace, Append and Prepend, their own
// ErrNotStored comes first). A write that would grow the cache over
// Config.MemoryLimit fails with ErrNoMemory, after every other check, and
// changes nothing but what every write does (the time, a pending flush, the
// removal of key's own dead item): writes never evict other items. The
// proposer makes room first, with PlanRoom and Evict. A successful write
// gives the item a new CAS, which it returns. The value is copied: the
// caller may reuse its buffer.

type storeMode uint8

const (
	modeSet storeMode = iota
	modeAdd
	modeReplace
	modeCAS
)

// Set stores value under key, whether or not the key has an item.
//
// Errors: ErrInvalidKey, ErrTooLarge, ErrLocked, ErrNotFound and ErrExists
// (cas given), ErrNoMemory.
func (c *Cache) Set(now int64, owner latch.SessionID, key, value []byte, flags uint32, exptime int64, cas uint64) (uint64, error) {
	return c.store(now, modeSet, owner, key, value, flags, exptime, cas)
}

// Add stores value under key if the key has no live item. A non-zero cas
// (binary Add carries one) can match no item, so Add never stores then:
// ErrNotFound without a live item, as yrmcds answers, ErrExists with one.
//
// Errors: ErrInvalidKey, ErrTooLarge, ErrLocked, ErrExists (a live item),
// ErrNotFound (cas given), ErrNoMemory.
func (c *Cache) Add(now int64, owner latch.SessionID, key, value []byte, flags uint32, exptime int64, cas uint64) (uint64, error) {
	return c.store(now, modeAdd, owner, key, value, flags, exptime, cas)
}

// Replace stores value under key if the key has a live item.
//
// Errors: ErrInvalidKey, ErrTooLarge, ErrLocked, ErrNotStored (no live
// item), ErrExists (cas given), ErrNoMemory.
func (c *Cache) Replace(now int64, owner latch.SessionID, key, value []byte, flags uint32, exptime int64, cas uint64) (uint64, error) {
	return c.store(now, modeReplace, owner, key, value, flags, exptime, cas)
}

// CAS stores value under key if the key's live item has CAS cas (memcached's
// cas command). Unlike the other writes it always compares: a cas of 0 never
// matches.
//
// Errors: ErrInvalidKey, ErrTooLarge, ErrLocked (even when cas matches),
// ErrNotFound (no live item), ErrExists (another CAS), ErrNoMemory.
func (c *Cache) CAS(now int64, owner latch.SessionID, key, value []byte, flags uint32, exptime int64, cas uint64) (uint64, error) {
	return c.store(now, modeCAS, owner, key, value, flags, exptime, cas)
}

func (c *Cache) store(now int64, mode storeMode, owner latch.SessionID, key, value []byte, flags uint32, exptime int64, cas uint64) (uint64, error) {
	now = c.advance(now)
	if err := CheckKey(key); err != nil {
		return 0, err
	}
	if len(value) > c.cfg.MaxItemSize {
		return 0, ErrTooLarge
	}
	c.stats.CmdSet++
	e, _ := c.find(now, key)
	if e != nil && lockedByOther(e, owner) {
		return 0, ErrLocked
	}
	switch {
	case mode == modeAdd && e != nil:
		return 0, ErrExists
	case mode == modeReplace && e == nil:
		return 0, ErrNotStored
	}
	compare := mode == modeCAS || cas != 0
	if compare {
		if err := c.compare(e, cas); err != nil {
			return 0, err
		}
	}
	exp := deadline(now, exptime)
	if e == nil {
		if !c.fits(itemSize(len(key), len(value))) {
			return 0, ErrNoMemory
		}
		e = c.insert(key, value, flags, exp)
	} else {
		if !c.fits(int64(len(value) - len(e.value))) {
			return 0, ErrNoMemory
		}
		c.setValue(e, value, nil)
		e.flags = flags
		e.exp = exp
		e.fetched = false
		c.bump(e)
	}
	if compare {
		c.stats.CasHits++
	}
	return e.cas, nil
}

// compare checks a CAS against e (nil: no live item) and counts the outcome
// in the cas stats, except the hit, which the caller counts once it stored.
func (c *Cache) compare(e *entry, cas uint64) error {
	switch {
	case e == nil:
		c.stats.CasMisses++
		return ErrNotFound
	case e.cas != cas:
		c.stats.CasBadval++
		return ErrExists
	}
	return nil
}

// Append adds data after the value of the live item of key. Flags and
// exptime do not change.
//
// Errors: ErrInvalidKey, ErrNotStored (no live item), ErrLocked, ErrExists
// (cas given), ErrTooLarge (the result), ErrNoMemory.
func (c *Cache) Append(now int64, owner latch.SessionID, key, data []byte, cas uint64) (uint64, error) {
	return c.concat(now, owner, key, data, cas, false)
}

// Prepend adds data before the value of the live item of key. Flags and
// exptime do not change.
//
// Errors: as Append.
func (c *Cache) Prepend(now int64, owner latch.SessionID, key, data []byte, cas uint64) (uint64, error) {
	return c.concat(now, owner, key, data, cas, true)
}

func (c *Cache) concat(now int64, owner latch.SessionID, key, data []byte, cas uint64, before bool) (uint64, error) {
	now = c.advance(now)
	if err := CheckKey(key); err != nil {
		return 0, err
	}
	c.stats.CmdSet++
	e, _ := c.find(now, key)
	if e == nil {
		return 0, ErrNotStored
	}
	if lockedByOther(e, owner) {
		return 0, ErrLocked
	}
	if cas != 0 {
		if err := c.compare(e, cas); err != nil {
			return 0, err
		}
	}
	if len(e.value)+len(data) > c.cfg.MaxItemSize {
		return 0, ErrTooLarge
	}
	if !c.fits(int64(len(data))) {
		return 0, ErrNoMemory
	}
	if before {
		c.setValue(e, data, e.value)
	} else {
		c.setValue(e, e.value, data)
	}
	c.bump(e)
	if cas != 0 {
		c.stats.CasHits++
	}
	return e.cas, nil
}

// Incr adds delta to the value of the live item of key, which must be a
// decimal uint64 (ASCII digits only, leading zeros allowed, at most
// 18446744073709551615), wrapping at 2^64. The value is stored again as just
// the decimal digits of the result, so its length may change; flags and
// exptime do not. It returns the new value and the new CAS.
//
// Errors: ErrInvalidKey, ErrNotFound, ErrLocked, ErrExists (cas given),
// ErrNonNumeric, ErrNoMemory.
func (c *Cache) Incr(now int64, owner latch.SessionID, key []byte, delta, cas uint64) (value, newCAS uint64, err error) {
	return c.arith(now, owner, key, delta, cas, true)
}

// Decr subtracts delta from the value of the live item of key, stopping at
// 0. Otherwise it is Incr.
func (c *Cache) Decr(now int64, owner latch.SessionID, key []byte, delta, cas uint64) (value, newCAS uint64, err error) {
	return c.arith(now, owner, key, delta, cas, false)
}

func (c *Cache) arith(now int64, owner latch.SessionID, key []byte, delta, cas uint64, incr bool) (uint64, uint64, error) {
	now = c.advance(now)
	if err := CheckKey(key); err != nil {
		return 0, 0, err
	}
	e, _ := c.find(now, key)
	if e == nil {
		if incr {
			c.stats.IncrMisses++
		} else {
			c.stats.DecrMisses++
		}
		return 0, 0, ErrNotFound
	}
	if lockedByOther(e, owner) {
		return 0, 0, ErrLocked
	}
	if cas != 0 && e.cas != cas {
		return 0, 0, ErrExists
	}
	n, ok := parseUint(e.value)
	if !ok {
		return 0, 0, ErrNonNumeric
	}
	if incr {
		n += delta
		c.stats.IncrHits++
	} else {
		n -= min(n, delta)
		c.stats.DecrHits++
	}
	var buf [20]byte
	digits := strconv.AppendUint(buf[:0], n, 10)
	if !c.fits(int64(len(digits) - len(e.value))) {
		return 0, 0, ErrNoMemory
	}
	c.setValue(e, digits, nil)
	c.bump(e)
	return n, e.cas, nil
}

// parseUint parses b as a decimal uint64: one or more ASCII digits, nothing
// else, no overflow.
func parseUint(b []byte) (uint64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	var n uint64
	for _, ch := range b {
		d := uint64(ch - '0')
		if d > 9 {
			return 0, false
		}
		if n > (1<<64-1-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// Delete removes the live item of key. Its holder may delete a locked item:
// the lock goes with it, and unlocked is the key as the item's own string
// (never empty: keys are not), so that a caller that keeps a lock table
// beside the cache can release the key in it without allocating or looking
// the key up again. Otherwise unlocked is "".
//
// Errors: ErrInvalidKey, ErrNotFound, ErrLocked, ErrExists (cas given).
func (c *Cache) Delete(now int64, owner latch.SessionID, key []byte, cas uint64) (unlocked string, err error) {
	now = c.advance(now)
	if err := CheckKey(key); err != nil {
		return "", err
	}
	e, _ := c.find(now, key)
	if e == nil {
		c.stats.DeleteMisses++
		return "", ErrNotFound
	}
	if lockedByOther(e, owner) {
		return "", ErrLocked
	}
	if cas != 0 && e.cas != cas {
		return "", ErrExists
	}
	if e.owner != 0 {
		unlocked = e.key
	}
	c.remove(e)
	c.stats.DeleteHits++
	return unlocked, nil
}
