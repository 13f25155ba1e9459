package wal_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"

	"github.com/latchd/latch/internal/vfs"
	"github.com/latchd/latch/internal/vfs/crashfs"
	"github.com/latchd/latch/internal/wal"
)

// The tests here run a workload of appends and truncations at both ends
// on crashfs, and cut its power, kill it or fail its disk at every one of
// its file operations in turn.

const plDir = "/log"

func plOptions(fsys vfs.FS) wal.Options { return wal.Options{FS: fsys, SegmentSize: 512} }

// plPayload is record i's payload in generation gen: a truncation from
// the tail starts a new generation, so that a record it removed that came
// back would show.
func plPayload(i uint64, gen int) []byte {
	return bytes.Repeat([]byte{byte(i), byte(gen)}, 1+int(i*37%300))
}

// plOp is one step of the workload.
type plOp struct {
	kind        string // "append", "front", "back"
	first, last uint64 // append: the records; front, back: first is the index
}

// plWorkload is the steps: appends of 1 to 5 records, a truncation at the
// head, one at the tail (later appends are a new generation of the same
// indexes), and one that empties the log, after which it starts anew.
func plWorkload() []plOp {
	var ops []plOp
	appends := func(first, last uint64) {
		for i := first; i <= last; {
			n := min(1+i%5, last-i+1)
			ops = append(ops, plOp{"append", i, i + n - 1})
			i += n
		}
	}
	appends(1, 40)
	ops = append(ops, plOp{kind: "front", first: 10})
	appends(41, 60)
	ops = append(ops, plOp{kind: "back", first: 47})
	appends(48, 70)
	ops = append(ops, plOp{kind: "front", first: 71}) // empties the log
	appends(100, 112)
	return ops
}

// plState is what the log must hold: records first..last, record i of
// generation gen[i].
type plState struct {
	first, last uint64
	gen         map[uint64]int
	gens        int // generations started
}

func (s plState) clone() plState {
	c := s
	c.gen = make(map[uint64]int, len(s.gen))
	for i, g := range s.gen {
		c.gen[i] = g
	}
	return c
}

// apply returns the state after op.
func (s plState) apply(op plOp) plState {
	s = s.clone()
	switch op.kind {
	case "append":
		if s.first == 0 {
			s.first = op.first
		}
		for i := op.first; i <= op.last; i++ {
			s.gen[i] = s.gens
		}
		s.last = op.last
	case "front":
		if op.first > s.last {
			s.first, s.last = 0, 0
		} else {
			s.first = max(s.first, op.first)
		}
	case "back":
		s.last = min(s.last, op.first)
		s.gens++
	}
	return s
}

// plRun runs the workload on l until an operation fails, and returns the
// state its acknowledged operations made, the operation that failed (nil
// if none) and its error.
func plRun(l *wal.Log) (acked plState, failed *plOp, err error) {
	acked = plState{gen: map[uint64]int{}}
	for _, op := range plWorkload() {
		switch op.kind {
		case "append":
			var recs [][]byte
			for i := op.first; i <= op.last; i++ {
				recs = append(recs, plPayload(i, acked.gens))
			}
			err = l.Append(op.first, recs)
		case "front":
			err = l.TruncateFront(op.first)
		case "back":
			err = l.TruncateBack(op.first)
		}
		if err != nil {
			return acked, &op, err
		}
		acked = acked.apply(op)
	}
	return acked, nil, nil
}

// plCheck opens the log on fsys and checks it against acked, the state of
// what was acknowledged, with op in flight (nil if none): every record
// acknowledged and not touched by op is there, with its payload, and no
// record holds a payload of a generation a truncation from the tail ended
// (a removed record that came back). It returns what Open reported.
func plCheck(fsys vfs.FS, acked plState, op *plOp) (first, last uint64, err error) {
	l, err := wal.Open(plDir, plOptions(fsys))
	if err != nil {
		return 0, 0, fmt.Errorf("open: %w", err)
	}
	defer l.Close()
	first, _ = l.FirstIndex()
	last, _ = l.LastIndex()
	lo, hi := acked.first, acked.last
	if op != nil {
		switch op.kind {
		case "front":
			lo = max(lo, op.first)
		case "back":
			hi = min(hi, op.first)
		}
	}
	for i := lo; i <= hi && i != 0; i++ {
		if i < first || i > last {
			return first, last, fmt.Errorf("log %d..%d lacks acknowledged record %d", first, last, i)
		}
	}
	for i := first; i <= last && last != 0; i++ {
		got, err := l.Read(i)
		if err != nil {
			return first, last, fmt.Errorf("read %d: %w", i, err)
		}
		want := [][]byte{plPayload(i, acked.gens)}
		if g, ok := acked.gen[i]; ok {
			want = append(want, plPayload(i, g))
		}
		if !bytes.Equal(got, want[0]) && (len(want) == 1 || !bytes.Equal(got, want[1])) {
			return first, last, fmt.Errorf("record %d holds a payload of another generation (%x...): removed, and back", i, got[:2])
		}
	}
	// The log takes appends after its last record, and keeps them.
	next := last + 1
	if last == 0 {
		next = 500
	}
	if err := l.Append(next, [][]byte{[]byte("after")}); err != nil {
		return first, last, fmt.Errorf("append %d after the crash: %w", next, err)
	}
	return first, last, nil
}

// plOps counts the workload's file operations.
func plOps(t *testing.T) int {
	fsys := crashfs.New()
	l, err := wal.Open(plDir, plOptions(fsys))
	if err != nil {
		t.Fatal(err)
	}
	if _, op, err := plRun(l); err != nil {
		t.Fatalf("%s %d: %v", op.kind, op.first, err)
	}
	l.Close()
	return fsys.Ops()
}

// TestPowerLossEveryOp (W1): a power cut after each of the workload's
// file operations in turn, keeping none, some or all of what was not
// synced, leaves a log that opens, holds every acknowledged record, brings
// back none a truncation removed, and takes appends.
func TestPowerLossEveryOp(t *testing.T) {
	var acked plState
	var op *plOp
	run := func(fsys *crashfs.FS) {
		acked, op = plState{}, nil
		if l, err := wal.Open(plDir, plOptions(fsys)); err == nil {
			acked, op, _ = plRun(l)
			l.Close()
		}
	}
	crashfs.Cuts(run, func(k, ops int, fsys *crashfs.FS) {
		for seed, keep := range []float64{0, 0.5, 0.5, 0.5, 0.9, 1} {
			c := fsys.CrashClone(rand.New(rand.NewPCG(uint64(k), uint64(seed))), keep)
			if _, _, err := plCheck(c, acked, op); err != nil {
				t.Fatalf("power cut at op %d of %d (keep %v, seed %d), in %+v: %v", k, ops, keep, seed, op, err)
			}
		}
	})
}

// TestKillThenPowerLoss (W2): killed at any operation, reopened, then cut
// from power keeping nothing it did not sync, the log still holds
// everything the reopen reported: Open syncs what it reads before it
// reports it.
func TestKillThenPowerLoss(t *testing.T) {
	ops := plOps(t)
	for k := 1; k <= ops+1; k++ {
		// Killed before op k: what was written and not synced stays, in
		// the page cache, not yet on the disk.
		fsys := crashfs.New()
		fsys.SetFault(func(ev crashfs.Event) error {
			if ev.Seq >= k {
				return crashfs.ErrKilled
			}
			return nil
		})
		var op *plOp
		if l, err := wal.Open(plDir, plOptions(fsys)); err == nil {
			_, op, _ = plRun(l)
			l.Close()
		}
		fsys.Kill()
		fsys.SetFault(nil)
		killed := fsys
		l, err := wal.Open(plDir, plOptions(killed))
		if err != nil {
			t.Fatalf("kill at op %d: open: %v", k, err)
		}
		first, _ := l.FirstIndex()
		last, _ := l.LastIndex()
		var recs [][]byte
		for i := first; i <= last && last != 0; i++ {
			b, err := l.Read(i)
			if err != nil {
				t.Fatalf("kill at op %d: read %d: %v", k, i, err)
			}
			recs = append(recs, b)
		}
		l.Close()
		cut := killed.CrashClone(nil, 0)
		l, err = wal.Open(plDir, plOptions(cut))
		if err != nil {
			t.Fatalf("kill at op %d, reopen, power cut: open: %v", k, err)
		}
		f2, _ := l.FirstIndex()
		l2, _ := l.LastIndex()
		if l2 != last || (last != 0 && f2 > first) {
			t.Fatalf("kill at op %d (in %+v): the reopen reported %d..%d, after a power cut the log holds %d..%d", k, op, first, last, f2, l2)
		}
		for i := first; i <= last && last != 0; i++ {
			if b, err := l.Read(i); err != nil || !bytes.Equal(b, recs[i-first]) {
				t.Fatalf("kill at op %d, reopen, power cut: record %d = %v; it was there before the cut", k, i, err)
			}
		}
		l.Close()
	}
}

// TestDiskErrors (W3): each write, sync, directory sync, removal, rename
// and truncation of the workload failing in turn (an I/O error, or a
// short write for lack of room) breaks the log: that call and every later one
// fail with ErrBroken; and after a power cut, the log holds every record
// acknowledged before, although the failed sync's pages stayed readable
// (crashfs drops them at the cut, as Linux may after a failed fsync).
func TestDiskErrors(t *testing.T) {
	ops := plOps(t)
	for k := 1; k <= ops; k++ {
		fsys := crashfs.New()
		var failed crashfs.Op
		fsys.SetFault(func(ev crashfs.Event) error {
			if ev.Seq != k {
				return nil
			}
			failed = ev.Op
			switch ev.Op {
			case crashfs.OpWriteAt:
				if ev.Len <= 16 {
					// An end mark set in place (TruncateBack): blocks
					// already written take it, and a full disk cannot
					// cut it short.
					return syscall.EIO
				}
				return &crashfs.ShortWrite{N: ev.Len / 2}
			case crashfs.OpSync, crashfs.OpDatasync, crashfs.OpSyncDir, crashfs.OpRemove, crashfs.OpTruncate, crashfs.OpRename:
				return syscall.EIO
			}
			return nil
		})
		l, err := wal.Open(plDir, plOptions(fsys))
		if err != nil {
			continue // Open itself failed: nothing to check
		}
		acked, op, err := plRun(l)
		if err == nil {
			l.Close()
			continue // op k was not one that fails
		}
		if errors.Is(err, wal.ErrBroken) {
			if err2 := l.Append(1000, [][]byte{[]byte("x")}); !errors.Is(err2, wal.ErrBroken) {
				t.Errorf("%v failed at op %d (%s %d), and the next append returned %v, want ErrBroken", failed, k, op.kind, op.first, err2)
			}
		}
		l.Close()
		for seed, keep := range []float64{0, 0.5, 1} {
			c := fsys.CrashClone(rand.New(rand.NewPCG(uint64(k), uint64(seed))), keep)
			if _, _, err := plCheck(c, acked, op); err != nil {
				t.Fatalf("%v failed at op %d, in %+v, then a power cut (keep %v): %v", failed, k, op, keep, err)
			}
		}
	}
}
