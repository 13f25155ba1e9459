package raftrep

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"

	"github.com/latchd/latch/internal/wal"
)

// LogStore is Raft's log on a wal.Log: one fdatasync per StoreLogs,
// where raft-boltdb's transaction takes two (package wal). Its entries
// are numbered without gaps, which it tells Raft (IsMonotonic): after a
// snapshot is installed, Raft empties the log rather than leave a gap.
// (hashicorp/raft#697: Raft then keeps its cached last index, which
// matters only to a follower whose log went past the snapshot sent to
// it, with a divergent tail longer than the leader's TrailingLogs; the
// sender's one entry in flight keeps a deposed leader's tail to a few
// entries.)
type LogStore struct {
	log *wal.Log
	// halt stops the node when its log broke (see broke): disk.halt for
	// the log Raft writes, nil for one that is only read (OpenLog), whose
	// errors are returned.
	halt func(error)
}

var (
	_ raft.LogStore          = (*LogStore)(nil)
	_ raft.MonotonicLogStore = (*LogStore)(nil)
)

// logDir is where a node's log lives, in its data directory.
const logDir = "log"

// FirstIndex implements raft.LogStore.
func (s *LogStore) FirstIndex() (uint64, error) { return s.log.FirstIndex() }

// LastIndex implements raft.LogStore.
func (s *LogStore) LastIndex() (uint64, error) { return s.log.LastIndex() }

// IsMonotonic implements raft.MonotonicLogStore.
func (s *LogStore) IsMonotonic() bool { return true }

// GetLog implements raft.LogStore.
func (s *LogStore) GetLog(index uint64, e *raft.Log) error {
	b, err := s.log.Read(index)
	if errors.Is(err, wal.ErrNotFound) {
		return raft.ErrLogNotFound
	}
	if err != nil {
		return err
	}
	if err := decodeLog(b, e); err != nil {
		return fmt.Errorf("raftrep: log entry %d: %w", index, err)
	}
	if e.Index != index {
		return fmt.Errorf("raftrep: log entry %d holds entry %d", index, e.Index)
	}
	return nil
}

// StoreLog implements raft.LogStore.
func (s *LogStore) StoreLog(e *raft.Log) error { return s.StoreLogs([]*raft.Log{e}) }

// StoreLogs implements raft.LogStore: the entries must follow the last
// one without a gap, or start anywhere in an empty log.
func (s *LogStore) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	recs := make([][]byte, len(logs))
	for i, e := range logs {
		if e.Index != logs[0].Index+uint64(i) {
			return fmt.Errorf("raftrep: entries %d and %d stored together", logs[0].Index, e.Index)
		}
		recs[i] = appendLog(nil, e)
	}
	return s.broke(s.log.Append(logs[0].Index, recs))
}

// broke stops the node if err says that the log on disk broke
// (wal.ErrBroken: a write, sync or removal failed, so what reached the
// disk is unknown until the log is opened again), and returns err
// otherwise. Raft meets a failed store by stepping down, and a follower
// refuses every entry after it; a node that went on would keep its
// clients while it could commit nothing for them. So it stops, as etcd
// does on a failed write of its log, and as hashicorp/raft does on a
// failed write of its term: the error is logged and the process panics
// (disk.halt), leaving a marker in its data dir that keeps it from
// starting again until an operator clears it: after a failed sync, what
// the log reads back may never have reached the disk. A log that is not
// Raft's (s.halt nil) returns err, as any other error.
func (s *LogStore) broke(err error) error {
	if s.halt == nil || !errors.Is(err, wal.ErrBroken) {
		return err
	}
	s.halt(err)
	return err
}

// DeleteRange implements raft.LogStore. Raft removes entries from the
// head of its log (compaction, and everything after it installs a
// snapshot) or from its tail (entries a new leader overrides), never
// from the middle.
func (s *LogStore) DeleteRange(lo, hi uint64) error {
	first, err := s.log.FirstIndex()
	if err != nil {
		return err
	}
	last, err := s.log.LastIndex()
	if err != nil {
		return err
	}
	switch {
	case first == 0 || hi < first || lo > last || lo > hi:
		return nil
	case lo <= first:
		return s.broke(s.log.TruncateFront(hi + 1))
	case hi >= last:
		return s.broke(s.log.TruncateBack(lo - 1))
	}
	return fmt.Errorf("raftrep: delete entries %d to %d from the middle of the log %d to %d", lo, hi, first, last)
}

// Close closes the log.
func (s *LogStore) Close() error { return s.log.Close() }

// OpenLog opens the Raft log in a node's data directory dir, for tools
// and tests that read it while the node is stopped.
func OpenLog(dir string) (*LogStore, error) {
	l, err := wal.Open(filepath.Join(dir, logDir), wal.Options{})
	if err != nil {
		return nil, fmt.Errorf("raftrep: open log: %w", err)
	}
	return &LogStore{log: l}, nil
}

// appendLog appends e's encoding to b:
//
//	index, term       uvarint
//	type              byte
//	data, extensions  uvarint length, then the bytes
//	appended at       varint Unix nanoseconds, 0 for none
func appendLog(b []byte, e *raft.Log) []byte {
	b = binary.AppendUvarint(b, e.Index)
	b = binary.AppendUvarint(b, e.Term)
	b = append(b, byte(e.Type))
	b = binary.AppendUvarint(b, uint64(len(e.Data)))
	b = append(b, e.Data...)
	b = binary.AppendUvarint(b, uint64(len(e.Extensions)))
	b = append(b, e.Extensions...)
	var at int64
	if !e.AppendedAt.IsZero() {
		at = e.AppendedAt.UnixNano()
	}
	return binary.AppendVarint(b, at)
}

var errLogEncoding = errors.New("malformed entry")

// decodeLog decodes appendLog's encoding into e. e's Data and Extensions
// are slices of b.
func decodeLog(b []byte, e *raft.Log) error {
	uvarint := func() uint64 {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			b = nil
			return 0
		}
		b = b[n:]
		return v
	}
	bytes := func() ([]byte, bool) {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return nil, false
		}
		v := b[k : k+int(n)]
		b = b[k+int(n):]
		if n == 0 {
			v = nil
		}
		return v, true
	}
	e.Index = uvarint()
	e.Term = uvarint()
	if len(b) == 0 {
		return errLogEncoding
	}
	e.Type = raft.LogType(b[0])
	b = b[1:]
	var ok bool
	if e.Data, ok = bytes(); !ok {
		return errLogEncoding
	}
	if e.Extensions, ok = bytes(); !ok {
		return errLogEncoding
	}
	at, n := binary.Varint(b)
	if n <= 0 || n != len(b) {
		return errLogEncoding
	}
	e.AppendedAt = time.Time{}
	if at != 0 {
		e.AppendedAt = time.Unix(0, at)
	}
	return nil
}
