package wal_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/latchd/latch/internal/vfs"
	"github.com/latchd/latch/internal/vfs/crashfs"
	"github.com/latchd/latch/internal/wal"
)

// TestCrashFS runs the log on crashfs: what it appends reads back after a
// reopen, and a power loss after any of its file operations leaves every
// acknowledged record, and after them only whole records.
func TestCrashFS(t *testing.T) {
	const dir, n = "/wal", 30
	// Records of up to 1200 bytes, so that a frame spans sectors, and a
	// power loss can tear it.
	payload := func(i uint64) []byte { return bytes.Repeat([]byte{byte(i)}, 1+int(i*97%1200)) }
	opts := func(fsys vfs.FS) wal.Options { return wal.Options{FS: fsys, SegmentSize: 4096} }
	// appendAll appends records 1..n one at a time, and returns the last
	// one acknowledged.
	appendAll := func(fsys vfs.FS) (acked uint64) {
		l, err := wal.Open(dir, opts(fsys))
		if err != nil {
			return 0
		}
		defer l.Close()
		for i := uint64(1); i <= n; i++ {
			if l.Append(i, [][]byte{payload(i)}) != nil {
				break
			}
			acked = i
		}
		return acked
	}
	// check opens the log, and fails unless it holds records 1..acked,
	// and then whole records only.
	check := func(fsys vfs.FS, acked uint64) error {
		l, err := wal.Open(dir, opts(fsys))
		if err != nil {
			return err
		}
		defer l.Close()
		first, _ := l.FirstIndex()
		last, err := l.LastIndex()
		if err != nil || last < acked || (last > 0 && first != 1) {
			return fmt.Errorf("log holds %d..%d (%v), want 1..%d at least", first, last, err, acked)
		}
		for i := first; i <= last && last > 0; i++ {
			if got, err := l.Read(i); err != nil || !bytes.Equal(got, payload(i)) {
				return fmt.Errorf("Read(%d) = %x, %v; want %x", i, got, err, payload(i))
			}
		}
		return nil
	}

	fsys := crashfs.New()
	if acked := appendAll(fsys); acked != n {
		t.Fatalf("appended 1..%d, want 1..%d", acked, n)
	}
	ops := fsys.Ops()
	if err := check(fsys, n); err != nil {
		t.Fatalf("reopened: %v", err)
	}

	errCut := errors.New("power cut")
	for k := 1; k <= ops+1; k++ {
		fsys := crashfs.New()
		fsys.SetFault(func(ev crashfs.Event) error {
			if ev.Seq >= k {
				return errCut
			}
			return nil
		})
		acked := appendAll(fsys)
		for seed, keep := range []float64{0, 0.5, 0.5, 0.5, 1} {
			c := fsys.CrashClone(rand.New(rand.NewPCG(uint64(k), uint64(seed))), keep)
			if err := check(c, acked); err != nil {
				t.Fatalf("power cut before op %d of %d, after record %d, keep %v (seed %d): %v", k, ops, acked, keep, seed, err)
			}
		}
	}
}
