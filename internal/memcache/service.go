package memcache

import (
	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/cache"
	"github.com/latchd/latch/internal/fsm"
)

// Service is what the front end serves: the lock service, and the item
// cache that lives beside the lock table in the same state. The front end
// never holds the cache: every change to items is one command (Do), so
// that a memcached lock takes the key in the lock table and marks the item
// in one step, and an operator who force-releases the key or ends the
// session frees both. internal/node implements it.
type Service interface {
	latch.Service

	// Now reads the service's clock, in nanoseconds since the Unix
	// epoch. The front end reads it once per read from a socket: the
	// requests of a pipelined batch share it, as memcached's requests
	// share its clock of one-second ticks.
	Now() int64
	// Do applies the item command c (one of fsm's OpItem commands but
	// OpItemEvict, with the fields it reads set, and At a reading of Now,
	// or 0 for the service to read it) on behalf of sess, and returns its
	// result. c is borrowed for the call only.
	Do(sess latch.Session, c *fsm.Command) fsm.Result
	// Get returns the live item of key at now (a reading of Now). It
	// changes nothing replicated.
	Get(now int64, key []byte) (cache.Item, error)
	// ItemLive reports whether key has a live item at now (a reading of
	// Now), changing nothing at all: no get is counted and no item moves
	// in the LRU list. Its errors are Get's but ErrNotFound.
	ItemLive(now int64, key []byte) (bool, error)
	// ItemKeys returns the keys of live items starting with prefix, in
	// no order.
	ItemKeys(prefix []byte) []string
	// ItemEntries lists up to limit live items (limit <= 0: all), in no
	// order.
	ItemEntries(limit int) []cache.Entry
	// ItemStats returns the cache's counters; ItemSizes counts live items
	// by size; ItemConfig returns the cache's limits.
	ItemStats() cache.Stats
	ItemSizes(bounds []int64) []uint64
	ItemConfig() cache.Config
	// HoldsItemLocks reports whether sess holds an item lock.
	HoldsItemLocks(sess latch.Session) bool
	// SweepItems removes the expired items among the next limit of the
	// LRU list and returns how many it removed.
	SweepItems(limit int) int
}
