package cache

import (
	"errors"
	"fmt"

	"github.com/latchd/latch"
)

// ItemOverhead is the fixed number of bytes accounted for every item on top
// of its key and value: an estimate of its record, its map entry and
// allocation rounding in the Go heap. Stats.Bytes and Config.MemoryLimit
// count item sizes as len(key) + len(value) + ItemOverhead.
const ItemOverhead = 128

// MaxRelativeExptime is memcached's boundary between relative and absolute
// exptimes: a positive exptime up to it (30 days) is a number of seconds from
// now; a larger one is a Unix time in seconds.
const MaxRelativeExptime = 60 * 60 * 24 * 30

// Config configures a Cache.
type Config struct {
	// MemoryLimit bounds the bytes of all items (see ItemOverhead). A write
	// that would go over it fails with ErrNoMemory: the proposer makes room
	// first, evicting unlocked items least recently used first (PlanRoom,
	// Evict). memcached's -m, yrmcds's memory_limit.
	MemoryLimit int64
	// MaxItemSize is the longest value accepted, in bytes (memcached's
	// item_size_max, yrmcds's max_data_size). Longer values, including the
	// result of an append or prepend, give ErrTooLarge.
	MaxItemSize int
}

// DefaultConfig returns a 1 GiB memory limit and a 1 MiB item size limit.
func DefaultConfig() Config {
	return Config{
		MemoryLimit: 1 << 30,
		MaxItemSize: 1 << 20,
	}
}

// Validate reports every invalid setting of c, joined into one error. The
// largest item (a key of latch.MaxKeyLen bytes with a MaxItemSize value) must
// fit in MemoryLimit, so that PlanRoom refuses a write only when locked items
// hold the memory.
func (c Config) Validate() error {
	var errs []error
	if c.MemoryLimit <= 0 {
		errs = append(errs, fmt.Errorf("cache: invalid memory limit %d: must be positive", c.MemoryLimit))
	}
	if c.MaxItemSize < 0 {
		errs = append(errs, fmt.Errorf("cache: invalid max item size %d: must not be negative", c.MaxItemSize))
	}
	if len(errs) == 0 {
		if largest := int64(latch.MaxKeyLen) + int64(c.MaxItemSize) + ItemOverhead; largest > c.MemoryLimit {
			errs = append(errs, fmt.Errorf("cache: memory limit %d is smaller than the largest item (%d bytes: max item size %d + key %d + overhead %d)",
				c.MemoryLimit, largest, c.MaxItemSize, latch.MaxKeyLen, ItemOverhead))
		}
	}
	return errors.Join(errs...)
}
