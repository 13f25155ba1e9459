package raftrep

import (
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/latchd/latch/internal/fsm"
)

// recorder is a replica.StateMachine that counts the batches it applies.
type recorder struct {
	sync.Mutex
	batches int
}

func (s *recorder) Apply(*fsm.Batch) { s.batches++ }

func (s *recorder) Snapshot(io.Writer) error { return nil }

func (s *recorder) Restore(io.Reader) error { return nil }

// TestMachineUndecodable: a committed entry, or a batch of it, of a
// version this latch does not know halts the node, where skipping it
// would let the node drift from the nodes that apply it; a malformed one
// is skipped, as every node skips it.
func TestMachineUndecodable(t *testing.T) {
	tick := fsm.AppendBatch(nil, []fsm.Command{{Op: fsm.OpTick}})
	entry := func(version byte, batch []byte) []byte {
		e := appendEntryHeader(nil, 5, 1)
		e[0] = version
		return appendUnit(e, batch)
	}
	newer := append([]byte{fsm.BatchVersion + 1}, tick[1:]...)
	for _, tc := range []struct {
		name    string
		data    []byte
		applied int
		halted  error
	}{
		{"valid", entry(entryVersion, tick), 1, nil},
		{"batch of a newer version", entry(entryVersion, newer), 0, fsm.ErrVersion},
		{"entry of a newer version", entry(entryVersion+1, tick), 0, errEntryVersion},
		{"malformed batch", entry(entryVersion, append(tick, 0)), 0, nil},
		{"malformed entry", entry(entryVersion, tick)[:3], 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sm := &recorder{}
			var halted error
			m := &machine{
				r:    &Replicator{sm: sm, log: slog.New(slog.DiscardHandler)},
				halt: func(_ uint64, err error) { halted = err },
			}
			m.ApplyBatch([]*raft.Log{{Index: 7, Type: raft.LogCommand, Data: tc.data}})
			if sm.batches != tc.applied {
				t.Errorf("applied %d batches, want %d", sm.batches, tc.applied)
			}
			if tc.halted == nil && halted != nil || tc.halted != nil && !errors.Is(halted, tc.halted) {
				t.Errorf("halted with %v, want %v", halted, tc.halted)
			}
		})
	}
}
