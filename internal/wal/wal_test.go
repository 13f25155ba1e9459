package wal

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/latchd/latch/internal/vfs"
	"github.com/latchd/latch/internal/vfs/crashfs"
)

// rec is the payload of record i in these tests: its size varies with i.
func rec(i uint64) []byte {
	return bytes.Repeat([]byte{byte(i)}, 1+int(i%37))
}

func recs(first, last uint64) [][]byte {
	var out [][]byte
	for i := first; i <= last; i++ {
		out = append(out, rec(i))
	}
	return out
}

func open(t *testing.T, dir string, segSize int64) *Log {
	t.Helper()
	return openFS(t, dir, segSize, nil)
}

// openFS opens the log in dir on fsys. The tests of what a log holds,
// with segments small enough that appends start new ones all the time,
// run on crashfs.NoSync, whose syncs cost nothing: TestOpenSyncs checks the
// syncs.
func openFS(t *testing.T, dir string, segSize int64, fsys vfs.FS) *Log {
	t.Helper()
	l, err := Open(dir, Options{SegmentSize: segSize, FS: fsys})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// check fails unless l holds exactly the records first..last of rec.
func check(t *testing.T, l *Log, first, last uint64) {
	t.Helper()
	f, err := l.FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	la, _ := l.LastIndex()
	if f != first || la != last {
		t.Fatalf("log holds %d..%d, want %d..%d", f, la, first, last)
	}
	for i := first; i <= last && first != 0; i++ {
		got, err := l.Read(i)
		if err != nil {
			t.Fatalf("Read(%d): %v", i, err)
		}
		if !bytes.Equal(got, rec(i)) {
			t.Fatalf("Read(%d) = %x, want %x", i, got, rec(i))
		}
	}
	for _, i := range []uint64{first - 1, last + 1} {
		if i == 0 {
			continue
		}
		if _, err := l.Read(i); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Read(%d) outside %d..%d: %v, want ErrNotFound", i, first, last, err)
		}
	}
}

func appendRange(t *testing.T, l *Log, first, last uint64) {
	t.Helper()
	for i := first; i <= last; i += 7 { // several records per append
		end := min(i+6, last)
		if err := l.Append(i, recs(i, end)); err != nil {
			t.Fatalf("Append(%d..%d): %v", i, end, err)
		}
	}
}

// written returns a new log directory holding records 1..last of rec,
// in segments of segSize bytes, closed.
func written(t *testing.T, segSize int64, last uint64) string {
	t.Helper()
	dir := t.TempDir()
	l := open(t, dir, segSize)
	appendRange(t, l, 1, last)
	l.Close()
	return dir
}

func segments(t *testing.T, dir string) int {
	t.Helper()
	firsts, _, err := listSegments(vfs.OS, dir)
	if err != nil {
		t.Fatal(err)
	}
	return len(firsts)
}

func TestAppendReadReopen(t *testing.T) {
	for _, segSize := range []int64{0, 64, 1000} {
		t.Run(fmt.Sprint(segSize), func(t *testing.T) {
			dir := t.TempDir()
			l := open(t, dir, segSize)
			check(t, l, 0, 0)
			appendRange(t, l, 1, 300)
			check(t, l, 1, 300)
			l.Close()
			if _, err := l.Read(1); !errors.Is(err, ErrClosed) {
				t.Fatalf("Read after Close: %v", err)
			}
			l = open(t, dir, segSize)
			check(t, l, 1, 300)
			appendRange(t, l, 301, 320)
			check(t, l, 1, 320)
			if segSize > 0 && segments(t, dir) < 2 {
				t.Fatalf("segment size %d: %d segments", segSize, segments(t, dir))
			}
		})
	}
}

func TestAppendRefuses(t *testing.T) {
	l := open(t, t.TempDir(), 0)
	if err := l.Append(0, recs(1, 1)); err == nil {
		t.Fatal("Append at index 0 succeeded")
	}
	if err := l.Append(5, [][]byte{{}}); err == nil {
		t.Fatal("Append of an empty record succeeded")
	}
	if err := l.Append(5, recs(5, 9)); err != nil { // an empty log starts anywhere
		t.Fatal(err)
	}
	for _, first := range []uint64{5, 9, 11} {
		if err := l.Append(first, recs(first, first)); err == nil {
			t.Fatalf("Append at %d after 5..9 succeeded", first)
		}
	}
	check(t, l, 5, 9)
}

// TestBroken: an append whose write fails breaks the log: that call and
// every later one fail with ErrBroken, and refusals of a bad request do
// not. Opened again, the log holds what was appended before.
func TestBroken(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, 0)
	appendRange(t, l, 1, 20)
	if err := l.Append(22, recs(22, 22)); err == nil || errors.Is(err, ErrBroken) {
		t.Fatalf("Append past the end: %v, want a refusal that is not ErrBroken", err)
	}
	l.segs[len(l.segs)-1].f.Close() // the disk goes away under the log
	if err := l.Append(21, recs(21, 21)); !errors.Is(err, ErrBroken) {
		t.Fatalf("Append after its file failed: %v, want ErrBroken", err)
	}
	if _, err := l.LastIndex(); !errors.Is(err, ErrBroken) {
		t.Fatalf("LastIndex of a broken log: %v, want ErrBroken", err)
	}
	if err := l.TruncateBack(10); !errors.Is(err, ErrBroken) {
		t.Fatalf("TruncateBack of a broken log: %v, want ErrBroken", err)
	}
	l.Close()
	check(t, open(t, dir, 0), 1, 20)
}

func TestTruncate(t *testing.T) {
	tests := []struct {
		name        string
		front, back uint64 // TruncateFront(front), then TruncateBack(back); 0: skipped
		first, last uint64 // what remains
	}{
		{"front within the first segment", 3, 0, 3, 100},
		{"front across segments", 57, 0, 57, 100},
		{"front to the last record", 100, 0, 100, 100},
		{"front past the end", 101, 0, 0, 0},
		{"front before the start", 1, 0, 1, 100},
		{"back within the last segment", 0, 99, 1, 99},
		{"back across segments", 0, 42, 1, 42},
		{"back to the first record", 0, 1, 1, 1},
		{"back at the end", 0, 100, 1, 100},
		{"both", 20, 80, 20, 80},
		{"back before the new front", 50, 49, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			l := openFS(t, dir, 200, crashfs.NoSync(vfs.OS))
			appendRange(t, l, 1, 100)
			if tt.front != 0 {
				if err := l.TruncateFront(tt.front); err != nil {
					t.Fatal(err)
				}
			}
			if tt.back != 0 {
				if err := l.TruncateBack(tt.back); err != nil {
					t.Fatal(err)
				}
			}
			check(t, l, tt.first, tt.last)
			// It goes on from where it ends, or anywhere once empty.
			next := tt.last + 1
			if tt.last == 0 {
				next = 1000
			}
			appendRange(t, l, next, next+30)
			first := tt.first
			if first == 0 {
				first = next
			}
			check(t, l, first, next+30)
			l.Close()

			// After a restart, the head may come back to its segment's
			// start (see the package doc), never further, and the
			// records after it are the same.
			l = openFS(t, dir, 200, crashfs.NoSync(vfs.OS))
			got, _ := l.FirstIndex()
			if got > first || got == 0 || (tt.last == 0 && got != next) {
				t.Fatalf("after a restart the log starts at %d; it started at %d", got, first)
			}
			check(t, l, got, next+30)
		})
	}
}

// lastSegment returns the path of dir's last segment.
func lastSegment(t *testing.T, dir string) string {
	t.Helper()
	firsts, _, err := listSegments(vfs.OS, dir)
	if err != nil || len(firsts) == 0 {
		t.Fatalf("no segments: %v", err)
	}
	return segmentPath(dir, firsts[len(firsts)-1])
}

// payloadEnd returns where the payload of record index of rec ends in a
// segment that starts with record first.
func payloadEnd(first, index uint64) int64 {
	return segHeader + framesSize(first, index-1) + frameHeader + int64(len(rec(index)))
}

// TestDamageRefused: a frame that a crash cannot have left (written whole
// and acknowledged, then changed), or a missing segment, loses records
// that were acknowledged: Open refuses the log rather than cut it short.
func TestDamageRefused(t *testing.T) {
	flip := func(index uint64) func(dir string) error {
		return func(dir string) error {
			firsts, _, _ := listSegments(vfs.OS, dir)
			i, _ := slices.BinarySearch(firsts, index+1)
			first := firsts[i-1]
			p := segmentPath(dir, first)
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			b[payloadEnd(first, index)-1] ^= 0xff // the record's last byte
			return os.WriteFile(p, b, 0o600)
		}
	}
	tests := []struct {
		name   string
		damage func(dir string) error
	}{
		{"a flipped byte in a segment before the last", flip(30)},
		{"a flipped byte early in the last segment", flip(91)},
		// The last append (99..100) is not here: damage to it alone is what
		// a crash during it leaves, and Open cuts it (TestW4).
		{"a flipped byte in the append before the last", flip(98)},
		{"a segment missing", func(dir string) error {
			firsts, _, _ := listSegments(vfs.OS, dir)
			return os.Remove(segmentPath(dir, firsts[1]))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := written(t, 1000, 100)
			if firsts, _, _ := listSegments(vfs.OS, dir); len(firsts) < 3 || firsts[len(firsts)-1] > 90 {
				t.Fatalf("segments %v: the test needs three, the last from before 91", firsts)
			}
			if err := tt.damage(dir); err != nil {
				t.Fatal(err)
			}
			if l, err := Open(dir, Options{SegmentSize: 1000}); err == nil {
				l.Close()
				t.Fatal("Open accepted the log")
			}
		})
	}
}

// TestWrittenAhead: a segment's file is written with zeros ahead of its
// frames, once: an append into them writes its frames alone. The zeros
// are not records, after a restart either.
func TestWrittenAhead(t *testing.T) {
	dir := t.TempDir()
	w := &writeCountFS{FS: vfs.OS}
	l := openFS(t, dir, 0, w)
	appendRange(t, l, 1, 3)
	w.n.Store(0)
	appendRange(t, l, 4, 10)
	if n, want := w.n.Load(), int64(segHeader)+framesSize(1, 10)-l.segs[0].offs[3]; n != want {
		t.Fatalf("appends into the zeros wrote %d bytes, want their frames' %d", n, want)
	}
	fi, err := os.Stat(lastSegment(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != growBy {
		t.Fatalf("segment of %d bytes, want %d", fi.Size(), growBy)
	}
	// A record that passes the end grows the file by whole steps.
	big := bytes.Repeat([]byte{7}, growBy+100)
	if err := l.Append(11, [][]byte{big}); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(lastSegment(t, dir)); fi.Size() != 2*growBy {
		t.Fatalf("segment of %d bytes, want %d", fi.Size(), 2*growBy)
	}
	l.Close()
	l = open(t, dir, 0)
	if last, _ := l.LastIndex(); last != 11 {
		t.Fatalf("last index %d after a restart, want 11", last)
	}
	if got, err := l.Read(11); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("Read(11): %d bytes, %v", len(got), err)
	}
}

// framesSize returns the size of the frames of records first..last of
// rec.
func framesSize(first, last uint64) int64 {
	var n int64
	for i := first; i <= last; i++ {
		n += frameSize(len(rec(i)))
	}
	return n
}

// writeCountFS counts the bytes written to its files.
type writeCountFS struct {
	vfs.FS
	n atomic.Int64
}

func (w *writeCountFS) OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error) {
	f, err := w.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return writeCountFile{f, w}, nil
}

type writeCountFile struct {
	vfs.File
	w *writeCountFS
}

func (f writeCountFile) WriteAt(b []byte, off int64) (int, error) {
	f.w.n.Add(int64(len(b)))
	return f.File.WriteAt(b, off)
}

// TestEmptyLastSegmentRemoved: a crash between a segment's creation and
// its first append's sync leaves it with its header and no record, or,
// before its rename, under its temporary name: Open removes either. A
// segment under its own name with no header is damage, not a crash's.
func TestEmptyLastSegmentRemoved(t *testing.T) {
	dir := written(t, 0, 10)
	if err := os.WriteFile(segmentPath(dir, 11), segmentHeader(11), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(segmentPath(dir, 12)+tmpSuffix, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// Files that are not segments are left alone.
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	l := open(t, dir, 0)
	check(t, l, 1, 10)
	if names, _ := os.ReadDir(dir); len(names) != 3 {
		t.Fatalf("%d files, want the first segment, the newest file and notes.txt", len(names))
	}
	appendRange(t, l, 11, 20)
	check(t, l, 1, 20)
	l.Close()

	if err := os.WriteFile(segmentPath(dir, 21), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if l, err := Open(dir, Options{}); err == nil {
		l.Close()
		t.Fatal("Open accepted a segment with no header")
	}
}

// TestAgainstModel runs random appends, truncations at both ends and
// restarts against a slice that holds what the log should, with small
// segments so that every operation crosses them.
func TestAgainstModel(t *testing.T) {
	for seed := range int64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rnd := rand.New(rand.NewPCG(uint64(seed), 0))
			dir := t.TempDir()
			l := openFS(t, dir, 150, crashfs.NoSync(vfs.OS))
			var first uint64 // 0: empty
			var model [][]byte
			last := func() uint64 { return first + uint64(len(model)) - 1 }
			for op := range 300 {
				switch k := rnd.IntN(10); {
				case k < 6: // append
					at := uint64(1 + rnd.IntN(1000))
					if first != 0 {
						at = last() + 1
					}
					n := 1 + rnd.IntN(5)
					var recs [][]byte
					for i := range n {
						recs = append(recs, fmt.Appendf(nil, "%d:%d:%s", op, i, bytes.Repeat([]byte{'x'}, rnd.IntN(40))))
					}
					if err := l.Append(at, recs); err != nil {
						t.Fatalf("op %d: Append(%d): %v", op, at, err)
					}
					if first == 0 {
						first = at
					}
					model = append(model, recs...)
				case k < 7 && first != 0: // drop from the head
					to := first + uint64(rnd.IntN(len(model)+1))
					if err := l.TruncateFront(to); err != nil {
						t.Fatalf("op %d: TruncateFront(%d): %v", op, to, err)
					}
					model = model[to-first:]
					first = to
					if len(model) == 0 {
						first = 0
					}
				case k < 8 && first != 0: // drop from the tail
					keep := first - 1 + uint64(rnd.IntN(len(model)+1))
					if err := l.TruncateBack(keep); err != nil {
						t.Fatalf("op %d: TruncateBack(%d): %v", op, keep, err)
					}
					model = model[:keep+1-first]
					if len(model) == 0 {
						first = 0
					}
				case k < 9: // restart
					l.Close()
					l = openFS(t, dir, 150, crashfs.NoSync(vfs.OS))
					got, _ := l.FirstIndex()
					if first != 0 && (got == 0 || got > first) {
						t.Fatalf("op %d: after a restart the log starts at %d, want at most %d", op, got, first)
					}
					if first == 0 && got != 0 {
						t.Fatalf("op %d: an empty log starts at %d after a restart", op, got)
					}
					// The head may come back: its records are not in the
					// model, so move the log's head up to the model's.
					if first != 0 && got < first {
						if err := l.TruncateFront(first); err != nil {
							t.Fatal(err)
						}
					}
				default: // read one
					if first == 0 {
						continue
					}
					i := first + uint64(rnd.IntN(len(model)))
					got, err := l.Read(i)
					if err != nil || !bytes.Equal(got, model[i-first]) {
						t.Fatalf("op %d: Read(%d) = %q, %v; want %q", op, i, got, err, model[i-first])
					}
				}
				f, _ := l.FirstIndex()
				la, _ := l.LastIndex()
				if first == 0 && (f != 0 || la != 0) || first != 0 && (f != first || la != last()) {
					t.Fatalf("op %d: log holds %d..%d, model %d..%d", op, f, la, first, last())
				}
			}
			for i, want := range model {
				if got, err := l.Read(first + uint64(i)); err != nil || !bytes.Equal(got, want) {
					t.Fatalf("Read(%d) = %q, %v; want %q", first+uint64(i), got, err, want)
				}
			}
		})
	}
}

// TestNewestSegmentGone: a log whose newest segment is gone is refused,
// naming it, where it ended at the segment before and lost what the last
// held; after a truncation from the tail or one that empties the log, the
// segments it removed are not missed.
func TestNewestSegmentGone(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, Options{SegmentSize: 300})
	if err != nil {
		t.Fatal(err)
	}
	appendRange(t, l, 1, 30)
	firsts, _, _ := listSegments(vfs.OS, dir)
	if len(firsts) < 3 {
		t.Fatalf("%d segments, want 3 or more", len(firsts))
	}
	if err := l.TruncateBack(firsts[1]); err != nil { // the last segments go
		t.Fatal(err)
	}
	l.Close()
	l = open(t, dir, 300)
	check(t, l, 1, firsts[1])
	if err := l.TruncateFront(firsts[1] + 1); err != nil { // the log empties
		t.Fatal(err)
	}
	l.Close()
	l = open(t, dir, 300)
	check(t, l, 0, 0)
	appendRange(t, l, 100, 130)
	l.Close()
	firsts, _, _ = listSegments(vfs.OS, dir)
	if err := os.Remove(segmentPath(dir, firsts[len(firsts)-1])); err != nil {
		t.Fatal(err)
	}
	_, err = Open(dir, Options{SegmentSize: 300})
	if want := filepath.Base(segmentPath(dir, firsts[len(firsts)-1])) + ", is gone"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Open without the newest segment = %v, want an error containing %q", err, want)
	}
}
