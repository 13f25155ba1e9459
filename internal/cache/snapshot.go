package cache

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/latchd/latch"
)

// snapshotVersion is the first byte of a snapshot.
const snapshotVersion = 1

// A snapshot, version 1, is, in this order (uvarint and varint are
// encoding/binary's, in their shortest form; bytes are a uvarint length and
// the bytes):
//
//	version    byte: 1
//	now        varint: the latest instant a write brought
//	cas        uvarint: the last CAS handed out
//	epoch      uvarint: flushes that took effect
//	flush      byte: 0 none pending, 1 pending, then
//	flushAt    varint: its instant, after now
//	unlocked   uvarint: the number of unlocked items, then each, from the
//	           most recently used to the least
//	owners     uvarint: the number of owners that hold locks, then for each,
//	           by increasing id: its id (uvarint, not 0), the number of items
//	           it holds (uvarint, not 0), and each, in its list's order
//
// and an item is
//
//	key        bytes: a valid key, unique in the snapshot
//	value      bytes: at most Config.MaxItemSize
//	flags      uvarint (a uint32)
//	exp        varint: its first expired instant (math.MaxInt64: never)
//	cas        uvarint: in [1, cas], unique in the snapshot
//	age        uvarint: epoch minus the item's epoch (0 for a locked item)
//
// A snapshot holds the replicated state and nothing else: no stats
// counters, no fetched marks, no bump times, no Expired cursor; the item and
// byte counts are recomputed. The state is fully ordered (the LRU list, the
// owners and their lists), so equal states give equal bytes.
const (
	// minItemLen is the fewest bytes an item takes: a one-byte key and
	// one byte for each other field.
	minItemLen = 7
	// minOwnerLen is the fewest bytes an owner takes: its id, its count
	// and one item.
	minOwnerLen = 2 + minItemLen
)

// AppendSnapshot appends the cache's replicated state to dst, in the
// versioned binary form Restore reads, and returns the extended slice. It
// reads only. Two caches in the same state give the same bytes; since a get
// may move an item in the LRU list, which is part of the state, caches fed
// the same writes in the same order (and no gets) give the same bytes.
func (c *Cache) AppendSnapshot(dst []byte) []byte {
	n := int64(len(c.items))
	dst = slices.Grow(dst, int(c.bytes-n*ItemOverhead+n*(3*binary.MaxVarintLen64)+64))
	dst = append(dst, snapshotVersion)
	dst = binary.AppendVarint(dst, c.now)
	dst = binary.AppendUvarint(dst, c.cas)
	dst = binary.AppendUvarint(dst, c.epoch)
	if c.flushPending {
		dst = append(dst, 1)
		dst = binary.AppendVarint(dst, c.flushAt)
	} else {
		dst = append(dst, 0)
	}
	dst = binary.AppendUvarint(dst, uint64(len(c.items)-c.locked))
	for e := c.head; e != nil; e = e.next {
		dst = c.appendItem(dst, e)
	}
	owners := make([]latch.SessionID, 0, len(c.owners))
	for o, l := range c.owners {
		if l.first != nil { // an owner that holds no lock now is not state
			owners = append(owners, o)
		}
	}
	slices.Sort(owners)
	dst = binary.AppendUvarint(dst, uint64(len(owners)))
	for _, o := range owners {
		dst = binary.AppendUvarint(dst, uint64(o))
		first := c.owners[o].first
		k := 0
		for e := first; e != nil; e = e.next {
			k++
		}
		dst = binary.AppendUvarint(dst, uint64(k))
		for e := first; e != nil; e = e.next {
			dst = c.appendItem(dst, e)
		}
	}
	return dst
}

func (c *Cache) appendItem(dst []byte, e *entry) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(e.key)))
	dst = append(dst, e.key...)
	dst = binary.AppendUvarint(dst, uint64(len(e.value)))
	dst = append(dst, e.value...)
	dst = binary.AppendUvarint(dst, uint64(e.flags))
	dst = binary.AppendVarint(dst, e.exp)
	dst = binary.AppendUvarint(dst, e.cas)
	return binary.AppendUvarint(dst, c.epoch-e.epoch)
}

// Restore returns a cache configured by cfg in the state of snap, which
// AppendSnapshot made: feeding it the writes that followed the snapshot
// gives the same results and the same state as feeding them to the cache
// that made it. What the snapshot leaves out starts afresh: the stats
// counters are 0 (but the gauges: items, bytes, locks), no item counts as
// fetched, every item counts as last moved in the LRU list at the
// snapshot's instant, and Expired starts a new pass.
//
// snap is not kept. Restore checks all of it and rejects anything
// AppendSnapshot could not have made (an unknown version, truncation,
// trailing bytes, a varint not in its shortest form, an invalid or
// duplicate key, a value over cfg.MaxItemSize, a CAS out of range or
// shared, counts larger than the bytes left could hold, ...) with an error
// that starts "cache: restore: " and wraps ErrBadSnapshot; it never panics.
// It does not enforce cfg.MemoryLimit: a snapshot taken under a larger
// limit restores over a smaller one, and then writes that grow the cache
// fail with ErrNoMemory until evictions bring it under.
func Restore(cfg Config, snap []byte) (*Cache, error) {
	c, err := New(cfg)
	if err != nil {
		return nil, fmt.Errorf("cache: restore: %w", err)
	}
	r := reader{b: snap}
	if v := r.byte(); r.err == nil && v != snapshotVersion {
		return nil, r.fail(0, fmt.Sprintf("unknown version %d", v))
	}
	c.now = r.varint()
	c.cas = r.uvarint()
	c.epoch = r.uvarint()
	switch flush := r.byte(); {
	case r.err != nil:
	case flush == 1:
		at := r.off
		c.flushPending, c.flushAt = true, r.varint()
		if r.err == nil && c.flushAt <= c.now {
			return nil, r.fail(at, "pending flush not after the snapshot's instant")
		}
	case flush != 0:
		return nil, r.fail(r.off-1, fmt.Sprintf("bad flush mark %d", flush))
	}
	if r.err != nil {
		return nil, r.err
	}
	second := secondOf(c.now)
	var cases []uint64

	// item reads one item and adds it to the map, or returns an error.
	item := func(owner latch.SessionID) (*entry, error) {
		at := r.off
		key := r.bytes(latch.MaxKeyLen, "key")
		value := r.bytes(c.cfg.MaxItemSize, "value")
		flagsAt := r.off
		flags := r.uvarint()
		exp := r.varint()
		casAt := r.off
		cas := r.uvarint()
		ageAt := r.off
		age := r.uvarint()
		switch {
		case r.err != nil:
			return nil, r.err
		case CheckKey(key) != nil:
			return nil, r.fail(at, fmt.Sprintf("invalid key %q", key))
		case flags > 1<<32-1:
			return nil, r.fail(flagsAt, "flags over 32 bits")
		case cas == 0 || cas > c.cas:
			return nil, r.fail(casAt, fmt.Sprintf("item CAS %d outside [1, %d]", cas, c.cas))
		case age > c.epoch || owner != 0 && age != 0:
			return nil, r.fail(ageAt, fmt.Sprintf("bad epoch age %d", age))
		}
		if c.items[string(key)] != nil {
			return nil, r.fail(at, fmt.Sprintf("duplicate key %q", key))
		}
		k, v := storeKV(key, value, nil)
		e := &entry{
			key:    k,
			value:  v,
			cas:    cas,
			exp:    exp,
			owner:  owner,
			epoch:  c.epoch - age,
			flags:  uint32(flags),
			bumped: second,
		}
		c.items[e.key] = e
		c.bytes += e.size()
		cases = append(cases, cas)
		return e, nil
	}

	n, err := r.count(minItemLen, "unlocked items")
	if err != nil {
		return nil, err
	}
	c.items = make(map[string]*entry, n)
	cases = make([]uint64, 0, n)
	for range n {
		e, err := item(0)
		if err != nil {
			return nil, err
		}
		e.prev = c.tail
		if c.tail != nil {
			c.tail.next = e
		} else {
			c.head = e
		}
		c.tail = e
	}
	owners, err := r.count(minOwnerLen, "owners")
	if err != nil {
		return nil, err
	}
	var last latch.SessionID
	for range owners {
		at := r.off
		o := latch.SessionID(r.uvarint())
		if r.err == nil && o <= last {
			return nil, r.fail(at, fmt.Sprintf("owner %d after %d", o, last))
		}
		last = o
		k, err := r.count(minItemLen, "locked items")
		if err != nil {
			return nil, err
		}
		if k == 0 {
			return nil, r.fail(at, fmt.Sprintf("owner %d holds no item", o))
		}
		var prev *entry
		for range k {
			e, err := item(o)
			if err != nil {
				return nil, err
			}
			if prev == nil {
				c.owners[o] = &ownerList{first: e}
			} else {
				prev.next = e
				e.prev = prev
			}
			prev = e
			c.lockedBytes += e.size()
			c.locked++
		}
	}
	if len(r.b) > r.off {
		return nil, r.fail(r.off, fmt.Sprintf("%d trailing bytes", len(r.b)-r.off))
	}
	slices.Sort(cases)
	for i := 1; i < len(cases); i++ {
		if cases[i] == cases[i-1] {
			return nil, r.fail(-1, fmt.Sprintf("CAS %d shared by two items", cases[i]))
		}
	}
	c.stats.CurrItems = uint64(len(c.items))
	c.itemsPeak.Due(len(c.items))
	return c, nil
}

// reader decodes a snapshot. The first error sticks: later reads return
// zeros.
type reader struct {
	b   []byte
	off int
	err error
}

// fail records and returns the error of what is wrong at byte at (-1: not
// at one place).
func (r *reader) fail(at int, what string) error {
	if r.err == nil {
		if at >= 0 {
			what = fmt.Sprintf("%s at byte %d", what, at)
		}
		r.err = fmt.Errorf("cache: restore: %w: %s", ErrBadSnapshot, what)
	}
	return r.err
}

func (r *reader) byte() byte {
	if r.err != nil {
		return 0
	}
	if r.off >= len(r.b) {
		r.fail(r.off, "truncated")
		return 0
	}
	r.off++
	return r.b[r.off-1]
}

// uvarint reads a uvarint in its shortest form.
func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.off:])
	switch {
	case n == 0:
		r.fail(r.off, "truncated")
		return 0
	case n < 0:
		r.fail(r.off, "varint overflows 64 bits")
		return 0
	case n > 1 && r.b[r.off+n-1] == 0:
		r.fail(r.off, "varint not in its shortest form")
		return 0
	}
	r.off += n
	return v
}

// varint reads a varint in its shortest form.
func (r *reader) varint() int64 {
	u := r.uvarint()
	// encoding/binary's zig-zag, as binary.Varint.
	x := int64(u >> 1)
	if u&1 != 0 {
		x = ^x
	}
	return x
}

// bytes reads a length and that many bytes, at most limit, and returns them
// without copying.
func (r *reader) bytes(limit int, what string) []byte {
	at := r.off
	n := r.uvarint()
	switch {
	case r.err != nil:
		return nil
	case n > uint64(limit):
		r.fail(at, fmt.Sprintf("%s of %d bytes, over %d", what, n, limit))
		return nil
	case n > uint64(len(r.b)-r.off):
		r.fail(r.off, "truncated")
		return nil
	}
	b := r.b[r.off : r.off+int(n)]
	r.off += int(n)
	return b
}

// count reads a number of elements of at least minLen bytes each, and
// rejects it if the bytes left could not hold them, so that nothing is
// allocated for a count that the snapshot does not back.
func (r *reader) count(minLen int, what string) (int, error) {
	at := r.off
	n := r.uvarint()
	if r.err != nil {
		return 0, r.err
	}
	if n > uint64((len(r.b)-r.off)/minLen) {
		return 0, r.fail(at, fmt.Sprintf("%d %s cannot fit in the %d bytes left", n, what, len(r.b)-r.off))
	}
	return int(n), nil
}
