package raftrep

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/cache"
	"github.com/latchd/latch/internal/fsm"
)

// recorder is a replica.StateMachine that counts the batches it applies.
type recorder struct {
	sync.Mutex
	batches int
}

func (s *recorder) Apply(*fsm.Batch) { s.batches++ }

func (s *recorder) Snapshot() *fsm.Capture { return nil }

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

// stateMachine is a replica.StateMachine over an fsm.State alone.
type stateMachine struct {
	sync.Mutex
	st *fsm.State
}

func (s *stateMachine) Apply(b *fsm.Batch) {
	b.Results = make([]fsm.Result, len(b.Cmds))
	for i := range b.Cmds {
		s.st.Apply(&b.Cmds[i], &b.Results[i])
	}
}

func (s *stateMachine) Snapshot() *fsm.Capture { return s.st.Capture() }

func (s *stateMachine) Restore(io.Reader) error { return errors.New("not here") }

// memSink is a raft.SnapshotSink in memory.
type memSink struct {
	bytes.Buffer
	closed, canceled bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Close() error  { s.closed = true; return nil }
func (s *memSink) Cancel() error { s.canceled = true; return nil }

// TestMachineSnapshot: a snapshot persists the state as it was when Raft
// took it, while commands are applied during its steps; one given up for
// a newer one is canceled.
func TestMachineSnapshot(t *testing.T) {
	st, err := fsm.New(fsm.Config{Cache: cache.DefaultConfig()})
	if err != nil {
		t.Fatal(err)
	}
	sm := &stateMachine{st: st}
	apply := func(cmds ...fsm.Command) {
		sm.Lock()
		sm.Apply(&fsm.Batch{Cmds: cmds})
		sm.Unlock()
	}
	apply(fsm.Command{Op: fsm.OpOpenSession, At: 1})
	keys := make([]string, 5*captureStep)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%05d", i)
	}
	apply(fsm.Command{Op: fsm.OpAcquire, At: 2, Session: 1, Req: latch.LockRequest{Keys: keys}})
	m := &machine{r: &Replicator{sm: sm, log: slog.New(slog.DiscardHandler)}}
	m.r.stamped(42, 1)

	sm.Lock()
	want := binary.AppendVarint(nil, 42)
	want = st.AppendSnapshot(want)
	sm.Unlock()
	snap, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { // releases and new locks while Persist steps
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			apply(fsm.Command{Op: fsm.OpRelease, At: int64(3 + i), Session: 1, Req: latch.LockRequest{Keys: keys[i%len(keys) : i%len(keys)+1]}},
				fsm.Command{Op: fsm.OpAcquire, At: int64(3 + i), Session: 1, Req: latch.LockRequest{Keys: []string{fmt.Sprintf("new%d", i)}}})
		}
	})
	var sink memSink
	err = snap.Persist(&sink)
	close(stop)
	wg.Wait()
	snap.Release()
	if err != nil || !sink.closed {
		t.Fatalf("Persist = %v, sink closed %v", err, sink.closed)
	}
	if !bytes.Equal(sink.Bytes(), want) {
		t.Fatalf("persisted %d bytes, not the %d of the state when the snapshot was taken", sink.Len(), len(want))
	}

	old, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	newer, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink = memSink{}
	if err := old.Persist(&sink); err == nil || !sink.canceled {
		t.Fatalf("Persist of a snapshot given up = %v, sink canceled %v", err, sink.canceled)
	}
	old.Release()
	newer.Release()
}
