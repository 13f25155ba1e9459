package raftrep

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
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
	// halt stops the node when its log broke (see broke): haltBroken
	// for the log Raft writes, nil for one that is only being copied into
	// (migrateLog) or read (OpenLog), whose errors are returned.
	halt func(error)
	lg   *slog.Logger // nil for a log opened by OpenLog
}

var (
	_ raft.LogStore          = (*LogStore)(nil)
	_ raft.MonotonicLogStore = (*LogStore)(nil)
)

// logDir is where a node's log lives, in its data directory.
const logDir = "log"

// openLogStore opens the log in dir/log. A data directory from before
// the log moved out of bbolt has none: the entries in bolt are copied into
// a new log, which takes the place of theirs.
func openLogStore(dir string, bolt raft.LogStore, log *slog.Logger) (*LogStore, error) {
	path := filepath.Join(dir, logDir)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		n, err := migrateLog(path, bolt)
		if err != nil {
			return nil, fmt.Errorf("raftrep: move the log out of bbolt: %w", err)
		}
		if n > 0 {
			log.Info("raftrep: moved the Raft log out of bbolt", "entries", n, "dir", path)
		}
	}
	l, err := wal.Open(path, wal.Options{})
	if err != nil {
		return nil, fmt.Errorf("raftrep: open log: %w", err)
	}
	s := &LogStore{log: l, lg: log, halt: haltBroken}
	if err := s.emptyBolt(bolt); err != nil {
		l.Close()
		return nil, err
	}
	return s, nil
}

// emptyBolt deletes the entries left in bolt once they were copied into
// s (a crash after the copy leaves them to the next start). Entries that
// go further than s's, or differ from them, were written by an older latch
// after s was made (a downgrade, then an upgrade): it refuses to choose.
func (s *LogStore) emptyBolt(bolt raft.LogStore) error {
	first, err := bolt.FirstIndex()
	if err != nil || first == 0 {
		return err
	}
	last, err := bolt.LastIndex()
	if err != nil {
		return err
	}
	var b, w raft.Log
	if err := bolt.GetLog(last, &b); err != nil {
		return fmt.Errorf("raftrep: bbolt's last entry: %w", err)
	}
	wfirst, _ := s.FirstIndex()
	wlast, _ := s.LastIndex()
	stale := last <= wlast && (last < wfirst || s.GetLog(last, &w) == nil && w.Term == b.Term)
	if !stale {
		return fmt.Errorf("raftrep: both %s and raft.db hold a Raft log, and raft.db's (to entry %d, term %d) is not a copy of it: was this data dir used by an older latch since? Remove %[1]s to move raft.db's log again", logDir, last, b.Term)
	}
	if err := bolt.DeleteRange(first, last); err != nil {
		return fmt.Errorf("raftrep: empty the old log in bbolt: %w", err)
	}
	return nil
}

// migrateLog copies bolt's entries into a new log at path, built aside and
// renamed into place, so that a crash leaves either no log or all of it,
// and returns how many it copied.
func migrateLog(path string, bolt raft.LogStore) (int, error) {
	first, err := bolt.FirstIndex()
	if err != nil {
		return 0, err
	}
	last, err := bolt.LastIndex()
	if err != nil {
		return 0, err
	}
	// Only the entries from the last gap on: bolt, unlike this log, kept
	// entries from before a snapshot it was sent, with a gap after them,
	// until compaction passed it; the snapshot holds their effect.
	start := last
	for start > first {
		var e raft.Log
		err := bolt.GetLog(start-1, &e)
		if errors.Is(err, raft.ErrLogNotFound) {
			break
		}
		if err != nil {
			return 0, fmt.Errorf("entry %d: %w", start-1, err)
		}
		start--
	}
	first = start
	tmp := path + ".new"
	if err := os.RemoveAll(tmp); err != nil {
		return 0, err
	}
	l, err := wal.Open(tmp, wal.Options{})
	if err != nil {
		return 0, err
	}
	n := 0
	s := &LogStore{log: l}
	const chunk = 256
	for i := first; first != 0 && i <= last; i += chunk {
		var logs []*raft.Log
		for j := i; j <= min(i+chunk-1, last); j++ {
			e := new(raft.Log)
			if err := bolt.GetLog(j, e); err != nil {
				l.Close()
				return 0, fmt.Errorf("entry %d: %w", j, err)
			}
			logs = append(logs, e)
		}
		if err := s.StoreLogs(logs); err != nil {
			l.Close()
			return 0, err
		}
		n += len(logs)
	}
	if err := l.Close(); err != nil {
		return 0, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return 0, err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return 0, err
	}
	defer d.Close()
	return n, d.Sync()
}

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
// (haltBroken). Restarted, the node opens its log again, which cuts off
// the append that failed, and catches up from the others. A log that is
// not Raft's (s.halt nil) returns err, as any other error.
func (s *LogStore) broke(err error) error {
	if s.halt == nil || !errors.Is(err, wal.ErrBroken) {
		return err
	}
	if s.lg != nil {
		s.lg.Error("raftrep: the Raft log on disk failed; this node stops", "err", err)
	}
	s.halt(err)
	return err
}

// haltBroken stops the process: the log Raft writes broke (see broke).
func haltBroken(err error) {
	panic(fmt.Sprintf("raftrep: the Raft log on disk failed, so this node stops (a restart opens it again): %v", err))
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
