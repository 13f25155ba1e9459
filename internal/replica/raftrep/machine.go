package raftrep

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/hashicorp/raft"

	"github.com/latchd/latch/internal/fsm"
)

// machine is the node's state machine as Raft sees it (raft.BatchingFSM):
// it decodes each committed entry and has the node apply its batches at
// the entry's stamp, under the node's lock.
type machine struct {
	r     *Replicator
	batch fsm.Batch
	// halt stops the node at a committed entry it cannot apply
	// (haltNewer; tests record the call instead).
	halt func(index uint64, err error)
}

// haltNewer panics: the entry at index is of a version that a newer latch
// wrote (err wraps fsm.ErrVersion or errEntryVersion). Skipping it would
// let this node's state drift from the nodes that apply it, and answer
// clients from a lock table the cluster does not have; stopping leaves the
// others to serve, and the node resumes once it runs the newer latch.
func haltNewer(index uint64, err error) {
	panic(fmt.Sprintf("raftrep: log entry %d was written by a newer latch (%v): this node cannot apply it and stops; upgrade it", index, err))
}

// undecodable handles a committed entry, or a batch of it, that does not
// decode. A malformed one is skipped, as every node running this latch
// skips it; one of an unknown version halts the node.
func (m *machine) undecodable(index uint64, what string, err error) {
	if errors.Is(err, fsm.ErrVersion) || errors.Is(err, errEntryVersion) {
		m.r.log.Error("raftrep: stopping at "+what+" of a newer latch", "index", index, "err", err)
		m.halt(index, err)
		return
	}
	m.r.log.Error("raftrep: skipping "+what+" that does not decode", "index", index, "err", err)
}

var _ raft.BatchingFSM = (*machine)(nil)

func (m *machine) Apply(l *raft.Log) any { return m.ApplyBatch([]*raft.Log{l})[0] }

// ApplyBatch applies the committed entries logs, in order, under one hold
// of the node's lock.
func (m *machine) ApplyBatch(logs []*raft.Log) []any {
	sm := m.r.sm
	sm.Lock()
	for _, l := range logs {
		if l.Type != raft.LogCommand {
			continue
		}
		var stamp int64
		err := decodeEntry(l.Data, func(at int64, batch []byte) {
			stamp = at
			if err := fsm.DecodeBatch(batch, &m.batch); err != nil {
				m.undecodable(l.Index, "a batch", err)
				return
			}
			for i := range m.batch.Cmds {
				m.batch.Cmds[i].At = at
			}
			sm.Apply(&m.batch)
			m.r.applied(&m.batch)
		})
		if err != nil {
			m.undecodable(l.Index, "an entry", err)
		}
		m.r.stamped(stamp, l.Index)
	}
	sm.Unlock()
	return make([]any, len(logs))
}

// Snapshot writes the stamp of the last entry applied and the node's whole
// state, under the node's lock.
func (m *machine) Snapshot() (raft.FSMSnapshot, error) {
	sm := m.r.sm
	sm.Lock()
	defer sm.Unlock()
	buf := bytes.NewBuffer(binary.AppendVarint(nil, m.r.appliedStamp()))
	if err := sm.Snapshot(buf); err != nil {
		return nil, fmt.Errorf("raftrep: snapshot: %w", err)
	}
	return snapshot(buf.Bytes()), nil
}

// Restore replaces the node's state with a snapshot.
func (m *machine) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return fmt.Errorf("raftrep: restore: %w", err)
	}
	stamp, n := binary.Varint(data)
	if n <= 0 {
		return fmt.Errorf("raftrep: restore: bad stamp")
	}
	sm := m.r.sm
	sm.Lock()
	defer sm.Unlock()
	if err := sm.Restore(bytes.NewReader(data[n:])); err != nil {
		return fmt.Errorf("raftrep: restore: %w", err)
	}
	m.r.restoredStamp(stamp)
	return nil
}

// snapshot is a state written out whole, to be persisted.
type snapshot []byte

func (s snapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s); err != nil {
		sink.Cancel()
		return fmt.Errorf("raftrep: persist snapshot: %w", err)
	}
	return sink.Close()
}

func (s snapshot) Release() {}
