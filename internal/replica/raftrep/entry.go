package raftrep

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// An entry is what one Raft log entry of latch carries: the batches
// (fsm.AppendBatch encodings) of one or more proposers, and the instant the
// leader stamped them with:
//
//	version  byte (entryVersion)
//	stamp    varint: the replicated clock, in nanoseconds
//	count    uvarint
//	batches  count times: a uvarint length, then the batch
//
// Every command of the entry's batches is applied at the stamp, whatever
// its proposer wrote into At.
const entryVersion = 1

var (
	errEntry = errors.New("raftrep: malformed entry")
	// errEntryVersion is decodeEntry's error about an entry of a version
	// this latch does not know: a newer latch wrote it.
	errEntryVersion = errors.New("raftrep: unknown entry version")
)

// appendEntry appends the header of an entry of count batches.
func appendEntryHeader(dst []byte, stamp int64, count int) []byte {
	dst = append(dst, entryVersion)
	dst = binary.AppendVarint(dst, stamp)
	return binary.AppendUvarint(dst, uint64(count))
}

// appendUnit appends one batch to an entry.
func appendUnit(dst, batch []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(batch)))
	return append(dst, batch...)
}

// decodeEntry calls visit with the stamp and each batch of data, in order.
func decodeEntry(data []byte, visit func(stamp int64, batch []byte)) error {
	if len(data) == 0 {
		return fmt.Errorf("empty: %w", errEntry)
	}
	if data[0] != entryVersion {
		return fmt.Errorf("version %d, want %d: %w", data[0], entryVersion, errEntryVersion)
	}
	b := data[1:]
	stamp, n := binary.Varint(b)
	if n <= 0 {
		return fmt.Errorf("stamp: %w", errEntry)
	}
	b = b[n:]
	count, n := binary.Uvarint(b)
	if n <= 0 || count > uint64(len(b)) {
		return fmt.Errorf("count: %w", errEntry)
	}
	b = b[n:]
	for i := range count {
		size, n := binary.Uvarint(b)
		if n <= 0 || size > uint64(len(b)-n) {
			return fmt.Errorf("batch %d: %w", i, errEntry)
		}
		visit(stamp, b[n:n+int(size)])
		b = b[n+int(size):]
	}
	if len(b) != 0 {
		return fmt.Errorf("%d trailing bytes: %w", len(b), errEntry)
	}
	return nil
}
