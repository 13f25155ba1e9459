package raftrep

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/hashicorp/raft"

	"github.com/latchd/latch/internal/fsm"
	"github.com/latchd/latch/internal/replica"
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
		m.r.setPosition(l.Index, l.Term)
	}
	sm.Unlock()
	return make([]any, len(logs))
}

// Snapshot captures the node's whole state and the stamp of the last entry
// applied, under the node's lock; Persist encodes and writes the capture,
// holding the lock for a step at a time, so that the entries applied
// meanwhile wait for a step (captureStep entries), not for the whole
// state. Raft calls Snapshot from the goroutine that applies entries,
// and Persist from another.
func (m *machine) Snapshot() (raft.FSMSnapshot, error) {
	sm := m.r.sm
	sm.Lock()
	defer sm.Unlock()
	return &capture{sm: sm, stamp: m.r.appliedStamp(), c: sm.Snapshot()}, nil
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
	m.r.setPosition(0, 0) // unknown until the next command entry applied
	return nil
}

// captureStep is how many entries of the lock table (sessions, keys,
// queued requests) Persist encodes per hold of the node's lock: about half
// a millisecond of work (docs/benchmarks-history.md, "Snapshots of a
// million held locks").
const captureStep = 1024

// observeStep, when set (by tests), is called before each step of Persist,
// under the node's lock, and what it returns after the step.
var observeStep func() (stepped func())

// capture is a state captured for a snapshot, to be encoded and persisted.
type capture struct {
	sm    replica.StateMachine
	stamp int64
	c     *fsm.Capture
}

// Persist encodes the capture a step at a time, each under the node's
// lock, then writes it to sink without the lock.
func (s *capture) Persist(sink raft.SnapshotSink) error {
	for done := false; !done; {
		s.sm.Lock()
		var stepped func()
		if observeStep != nil {
			stepped = observeStep()
		}
		done = s.c.Step(captureStep)
		givenUp := s.c.GivenUp()
		if stepped != nil {
			stepped()
		}
		s.sm.Unlock()
		if givenUp {
			sink.Cancel()
			return errors.New("raftrep: persist snapshot: the capture was given up for a newer one")
		}
	}
	b := s.c.AppendTo(binary.AppendVarint(nil, s.stamp))
	if _, err := sink.Write(b); err != nil {
		sink.Cancel()
		return fmt.Errorf("raftrep: persist snapshot: %w", err)
	}
	return sink.Close()
}

// Release closes the capture, if Persist did not complete it.
func (s *capture) Release() {
	s.sm.Lock()
	s.c.Close()
	s.sm.Unlock()
}
