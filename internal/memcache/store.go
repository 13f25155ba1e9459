package memcache

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/cache"
)

// Store is the item cache that every memcached connection shares, behind
// one mutex, and the glue between the cache's lock marks and the lock table.
//
// A memcached lock is held in two places: the lock table (so that it
// excludes every protocol's lockers) and the item's lock mark in the cache
// (so that the item never expires, is never evicted, survives flush_all and
// refuses other connections' writes). Both change under the Store's mutex,
// lock table first on lock and cache first on unlock, so no connection ever
// sees one without the other.
type Store struct {
	mu    sync.Mutex
	cache *cache.Cache
	now   func() int64
	keys  [1]string // scratch: the key of a lock or release, under mu
}

// NewStore returns an empty store. now is the clock, in nanoseconds since
// the Unix epoch; nil means the wall clock at NewStore carried on by the
// monotonic clock, as memcached keeps its time: a step of the system
// clock does not move items' expiry, and a reading costs one clock call
// instead of two.
func NewStore(cfg cache.Config, now func() int64) (*Store, error) {
	c, err := cache.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("memcache: %w", err)
	}
	if now == nil {
		start := time.Now()
		base := start.UnixNano()
		now = func() int64 { return base + int64(time.Since(start)) }
	}
	return &Store{cache: c, now: now}, nil
}

// do runs f on the cache under the store's mutex, at time now (from
// Store.now, read by the caller once per batch of requests).
func (st *Store) do(now int64, f func(c *cache.Cache, now int64)) {
	st.mu.Lock()
	f(st.cache, now)
	st.mu.Unlock()
}

// lock takes key's lock for sess and marks the item, as mode says. The key
// must be free in the lock table (cache.ErrLocked otherwise, even when sess
// holds it: yrmcds locks are not re-entrant; the lock table answers before
// the item's presence or mark counts, so a key held over another protocol
// is LOCKED even without an item) and the item live (cache.ErrNotFound).
func (st *Store) lock(now int64, sess latch.Session, key []byte, mode cache.LockMode, exptime int64) (cache.Item, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	taken := false
	it, err := st.cache.LockFunc(now, sess.ID(), key, mode, exptime, func(name string) error {
		st.keys[0] = name
		_, err := sess.Acquire(context.Background(), latch.LockRequest{Keys: st.keys[:], Wait: latch.NoWait})
		switch {
		case errors.Is(err, latch.ErrWouldBlock), errors.Is(err, latch.ErrAlreadyHeld):
			return cache.ErrLocked
		case err != nil:
			return err
		}
		taken = true
		return nil
	})
	if err != nil && taken {
		// No live item (or, after an operator force-released the key in
		// the lock table, an item still marked by its old holder): give
		// the key back.
		_ = sess.Release(st.keys[:]...)
	}
	st.keys[0] = ""
	return it, err
}

// unlock drops sess's lock on key (cache.ErrNotFound, cache.ErrNotLocked).
func (st *Store) unlock(now int64, sess latch.Session, key []byte) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	name, err := st.cache.UnlockKey(now, sess.ID(), key)
	if err != nil {
		return err
	}
	st.release(sess, name)
	return nil
}

// release gives key (the cache's own string for it, so that naming it
// costs no allocation) back to the lock table after the cache dropped
// sess's mark on it: unlock, a holder's delete, RaU. Called with mu held.
func (st *Store) release(sess latch.Session, key string) {
	st.keys[0] = key
	// ErrNotHeld means an operator force-released the key: nothing to do.
	_ = sess.Release(st.keys[:]...)
	st.keys[0] = ""
}

// delete removes key's item for sess; the holder's delete also releases
// the key in the lock table.
func (st *Store) delete(now int64, sess latch.Session, key []byte, cas uint64) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	unlocked, err := st.cache.DeleteKey(now, sess.ID(), key, cas)
	if unlocked != "" {
		st.release(sess, unlocked)
	}
	return err
}

// replaceAndUnlock is RaU: the holder replaces the item and releases the
// lock in one step.
func (st *Store) replaceAndUnlock(now int64, sess latch.Session, key, value []byte, flags uint32, exptime int64, cas uint64) (uint64, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	newCAS, name, err := st.cache.ReplaceAndUnlockKey(now, sess.ID(), key, value, flags, exptime, cas)
	if err == nil {
		st.release(sess, name)
	}
	return newCAS, err
}

// unlockAll drops every lock of sess, in the cache and in the lock table.
func (st *Store) unlockAll(now int64, sess latch.Session) {
	st.mu.Lock()
	st.cache.UnlockAll(now, sess.ID())
	_, _ = sess.ReleaseAll()
	st.mu.Unlock()
}

// unlockAllOnClose drops the cache marks of a connection that ended and
// closes its session. A client that left holding locks died holding them,
// so the session's lock-delay applies to those keys.
func (st *Store) unlockAllOnClose(sess latch.Session) {
	st.mu.Lock()
	st.cache.UnlockAll(st.now(), sess.ID())
	_ = sess.Close()
	st.mu.Unlock()
}

// holdsLocks reports whether sess holds any lock.
func (st *Store) holdsLocks(sess latch.Session) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.cache.Locks(sess.ID()) > 0
}

// sweep removes up to limit expired items.
func (st *Store) sweep(limit int) int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.cache.Sweep(st.now(), limit)
}

// Stats returns the cache's counters.
func (st *Store) Stats() cache.Stats {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.cache.Stats()
}
