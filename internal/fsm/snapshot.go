package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/latchd/latch/internal/cache"
	"github.com/latchd/latch/internal/engine"
)

// SnapshotVersion is the format of AppendSnapshot: a version byte, the last
// Seq applied per Origin (a uvarint count, then pairs of uvarints in Origin
// order), then the lock table's and the item cache's own snapshots, each
// prefixed with its length as a uvarint.
const SnapshotVersion = 1

// ErrSnapshot is wrapped by the errors of Restore.
var ErrSnapshot = errors.New("fsm: bad snapshot")

// AppendSnapshot appends the whole state to dst. Equal states (the same
// commands applied from the same state) give identical bytes.
func (s *State) AppendSnapshot(dst []byte) []byte {
	dst = append(dst, SnapshotVersion)
	origins := make([]uint64, 0, len(s.seqs)+1)
	for o := range s.seqs {
		origins = append(origins, o)
	}
	if s.lastOrigin != 0 || s.lastSeq != 0 {
		origins = append(origins, s.lastOrigin)
	}
	slices.Sort(origins)
	dst = binary.AppendUvarint(dst, uint64(len(origins)))
	for _, o := range origins {
		seq := s.seqs[o]
		if o == s.lastOrigin {
			seq = s.lastSeq
		}
		dst = binary.AppendUvarint(dst, o)
		dst = binary.AppendUvarint(dst, seq)
	}
	dst = appendPart(dst, s.eng.AppendSnapshot)
	return appendPart(dst, s.cache.AppendSnapshot)
}

// appendPart appends a length-prefixed part written by write.
func appendPart(dst []byte, write func([]byte) []byte) []byte {
	part := write(nil)
	dst = binary.AppendUvarint(dst, uint64(len(part)))
	return append(dst, part...)
}

// Restore returns the state that AppendSnapshot wrote into snap, configured
// by cfg. It rejects malformed input with an error wrapping ErrSnapshot
// (or the part's own restore error).
func Restore(cfg Config, snap []byte) (*State, error) {
	if len(snap) == 0 || snap[0] != SnapshotVersion {
		return nil, fmt.Errorf("fsm: restore: unknown version: %w", ErrSnapshot)
	}
	b := snap[1:]
	n, b, err := uvarint(b)
	if err != nil {
		return nil, err
	}
	if n > uint64(len(b))/2 {
		return nil, fmt.Errorf("fsm: restore: %d origins in %d bytes: %w", n, len(b), ErrSnapshot)
	}
	st := &State{seqs: make(map[uint64]uint64, n), cfg: cfg}
	var prev uint64
	for i := range n {
		var o, seq uint64
		if o, b, err = uvarint(b); err != nil {
			return nil, err
		}
		if seq, b, err = uvarint(b); err != nil {
			return nil, err
		}
		if o == 0 && seq == 0 || i > 0 && o <= prev {
			return nil, fmt.Errorf("fsm: restore: origins out of order: %w", ErrSnapshot)
		}
		prev = o
		st.seqs[o] = seq
	}
	var part []byte
	if part, b, err = bytesPart(b); err != nil {
		return nil, err
	}
	if st.eng, err = engine.Restore(cfg.Engine, part); err != nil {
		return nil, fmt.Errorf("fsm: restore: %w", err)
	}
	if part, b, err = bytesPart(b); err != nil {
		return nil, err
	}
	if st.cache, err = cache.Restore(cfg.Cache, part); err != nil {
		return nil, fmt.Errorf("fsm: restore: %w", err)
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("fsm: restore: %d trailing bytes: %w", len(b), ErrSnapshot)
	}
	return st, nil
}

func uvarint(b []byte) (uint64, []byte, error) {
	v, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, nil, fmt.Errorf("fsm: restore: bad varint: %w", ErrSnapshot)
	}
	return v, b[n:], nil
}

func bytesPart(b []byte) (part, rest []byte, err error) {
	n, b, err := uvarint(b)
	if err != nil {
		return nil, nil, err
	}
	if n > uint64(len(b)) {
		return nil, nil, fmt.Errorf("fsm: restore: part of %d bytes in %d: %w", n, len(b), ErrSnapshot)
	}
	return b[:n], b[n:], nil
}
