package fsm

import (
	"errors"
	"fmt"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/cache"
	"github.com/latchd/latch/internal/engine"
)

// applyItem applies an item command. A memcached lock lives in both parts
// of the state: in the lock table, so that it excludes every protocol's
// lockers, and as the item's lock mark, so that the item never expires, is
// never evicted, survives flush_all and refuses other sessions' writes.
// Every command here changes both together, so no reader ever sees one
// without the other.
func (s *State) applyItem(c *Command, r *Result) []engine.Event {
	now, ch := c.At, s.cache
	var evs []engine.Event
	switch c.Op {
	case OpItemSet:
		r.CAS, r.Err = ch.Set(now, c.Session, c.Key, c.Value, c.Flags, c.Exptime, c.CAS)
	case OpItemAdd:
		r.CAS, r.Err = ch.Add(now, c.Session, c.Key, c.Value, c.Flags, c.Exptime, c.CAS)
	case OpItemReplace:
		r.CAS, r.Err = ch.Replace(now, c.Session, c.Key, c.Value, c.Flags, c.Exptime, c.CAS)
	case OpItemCAS:
		r.CAS, r.Err = ch.CAS(now, c.Session, c.Key, c.Value, c.Flags, c.Exptime, c.CAS)
	case OpItemAppend:
		r.CAS, r.Err = ch.Append(now, c.Session, c.Key, c.Value, c.CAS)
	case OpItemPrepend:
		r.CAS, r.Err = ch.Prepend(now, c.Session, c.Key, c.Value, c.CAS)
	case OpItemIncr, OpItemDecr:
		if c.Op == OpItemIncr {
			r.Value, r.CAS, r.Err = ch.Incr(now, c.Session, c.Key, c.Delta, c.CAS)
		} else {
			r.Value, r.CAS, r.Err = ch.Decr(now, c.Session, c.Key, c.Delta, c.CAS)
		}
		if errors.Is(r.Err, cache.ErrNotFound) && c.Value != nil && c.CAS == 0 {
			r.Value = decimal(c.Value)
			r.CAS, r.Err = ch.Add(now, c.Session, c.Key, c.Value, 0, c.Exptime, 0)
		}
	case OpItemTouch:
		r.CAS, r.Err = ch.Touch(now, c.Key, c.Exptime)
	case OpItemGetAndTouch:
		r.Item, r.Err = ch.GetAndTouch(now, c.Key, c.Exptime)
	case OpItemFlush:
		ch.FlushAll(now, c.Exptime)
	case OpItemEvict:
		if ch.Evict(now, c.Key, c.CAS) {
			r.Count = 1
		}
	case OpItemDelete:
		var name string
		name, r.Err = ch.Delete(now, c.Session, c.Key, c.CAS)
		if name != "" {
			evs = s.release(now, c.Session, name)
		}
	case OpItemUnlock:
		var name string
		name, r.Err = ch.Unlock(now, c.Session, c.Key)
		if r.Err == nil {
			evs = s.release(now, c.Session, name)
		}
	case OpItemReplaceAndUnlock:
		var name string
		r.CAS, name, r.Err = ch.ReplaceAndUnlock(now, c.Session, c.Key, c.Value, c.Flags, c.Exptime, c.CAS)
		if r.Err == nil {
			evs = s.release(now, c.Session, name)
		}
	case OpItemUnlockAll:
		ch.UnlockAll(now, c.Session)
		// A session that ended already holds nothing.
		r.Count, evs, _ = s.eng.ReleaseAll(now, c.Session)
	case OpItemLock:
		evs = s.lockItem(c, r)
	}
	s.expired(now, evs)
	return evs
}

// lockItem is OpItemLock: the key is taken in the lock table first (try
// once, not re-entrant), so that a key held over another protocol answers
// ErrLocked even without an item; then the item is marked, or the key given
// back when there is no live item or it is marked already.
func (s *State) lockItem(c *Command, r *Result) []engine.Event {
	now := c.At
	if err := cache.CheckKey(c.Key); err != nil {
		r.Err = err
		return nil
	}
	if c.Session == 0 {
		r.Err = fmt.Errorf("lock: %w: no session", latch.ErrNoSession)
		return nil
	}
	ref := s.cache.Find(c.Key)
	name := ref.Name()
	if name == "" {
		name = string(c.Key) // no item: the lock table still answers first
	}
	s.keys[0] = name
	_, evs, err := s.eng.Acquire(now, c.Session, latch.LockRequest{Keys: s.keys[:], Wait: latch.NoWait})
	s.keys[0] = ""
	switch {
	case errors.Is(err, latch.ErrWouldBlock), errors.Is(err, latch.ErrAlreadyHeld):
		r.Err = cache.ErrLocked
		return evs
	case err != nil:
		r.Err = err
		return evs
	}
	r.Item, r.Err = s.cache.LockRef(now, ref, c.Session, c.LockMode, c.Exptime)
	if r.Err != nil {
		// No live item (or a marked one, which the lock table's answer
		// rules out while marks and holds change together): give the key
		// back.
		s.evs = s.evs[:0]
		s.gather(evs)
		s.gather(s.release(now, c.Session, name))
		return s.evs
	}
	return evs
}

// release gives key back in the lock table after the cache dropped the
// session's mark on it. ErrNotHeld cannot happen while marks and holds
// change together; it is ignored as harmless if it does.
func (s *State) release(now int64, id latch.SessionID, key string) []engine.Event {
	s.keys[0] = key
	evs, _ := s.eng.Release(now, id, s.keys[:])
	s.keys[0] = ""
	return evs
}

// unmark drops the lock mark on key's item, whoever holds it: an operator
// force-released the key in the lock table.
func (s *State) unmark(now int64, key []byte) {
	if owner := s.cache.Find(key).Owner(); owner != 0 {
		_, _ = s.cache.Unlock(now, owner, key)
	}
}

// decimal reads the digits of b (an incr's initial value, written by the
// proposer) as a number.
func decimal(b []byte) uint64 {
	var v uint64
	for _, d := range b {
		v = v*10 + uint64(d-'0')
	}
	return v
}
