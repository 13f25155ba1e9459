package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/latchd/latch/internal/vfs"
	"github.com/latchd/latch/internal/vfs/crashfs"
)

// These tests damage logs on disk and open them again. Open's promise
// (see the package doc): it refuses the log, or it reports every record
// that was acknowledged, with its payload, except that damage confined
// to the sectors the last append wrote is what a crash during that
// append leaves, and then Open may cut the records in those sectors. And
// what a crash alone leaves, Open never refuses.
//
// They run on crashfs.NoSync: what they check is what Open makes of the bytes
// in the files; TestOpenSyncs checks its syncs.

// payload220 is record i's payload in these tests: 200 to 239 bytes,
// each record's own.
func payload220(i uint64) []byte {
	b := make([]byte, 200+i%40)
	r := rand.New(rand.NewPCG(i, 220))
	for j := range b {
		b[j] = byte(r.Uint32())
	}
	return b
}

// sample is a log written in appends of known bounds, closed, and the
// bytes of its files.
type sample struct {
	segSize int64
	appends [][2]uint64 // each append's first and last index
	files   map[string][]byte
	firsts  []uint64 // its segments'
	dir     string   // where place puts damaged copies
	// where each record's frame is: at[i-1] for record i
	at []frameAt
}

type frameAt struct {
	seg  string // the segment's file name
	off  int64
	size int64 // header, payload and padding
}

// appends returns the bounds of appends of records 1..n, of the given
// sizes, cycled.
func appends(n uint64, sizes ...uint64) [][2]uint64 {
	var out [][2]uint64
	for i, k := uint64(1), 0; i <= n; k++ {
		last := min(i+sizes[k%len(sizes)]-1, n)
		out = append(out, [2]uint64{i, last})
		i = last + 1
	}
	return out
}

// writeSample writes records of payload220 in appends of the given
// bounds, with segments of segSize bytes (0: the default).
func writeSample(t testing.TB, segSize int64, bounds [][2]uint64) *sample {
	t.Helper()
	dir := t.TempDir()
	l, err := Open(dir, Options{SegmentSize: segSize, FS: crashfs.NoSync(vfs.OS)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	sm := &sample{segSize: segSize, appends: bounds, files: map[string][]byte{}, dir: t.TempDir()}
	for _, a := range bounds {
		var recs [][]byte
		for j := a[0]; j <= a[1]; j++ {
			recs = append(recs, payload220(j))
		}
		if err := l.Append(a[0], recs); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range l.segs {
		sm.firsts = append(sm.firsts, s.first)
		for i, off := range s.offs {
			end := s.size
			if i+1 < len(s.offs) {
				end = s.offs[i+1]
			}
			sm.at = append(sm.at, frameAt{filepath.Base(s.path), off, end - off})
		}
	}
	l.Close()
	names, _ := os.ReadDir(dir)
	for _, e := range names {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		sm.files[e.Name()] = b
	}
	return sm
}

func segName(first uint64) string { return filepath.Base(segmentPath("", first)) }

func (sm *sample) last() uint64 { return sm.appends[len(sm.appends)-1][1] }

// place writes the sample's files into sm.dir, emptied first, with
// name's replaced by b (left out if b is nil), and returns sm.dir.
func (sm *sample) place(t testing.TB, name string, b []byte) string {
	t.Helper()
	names, _ := os.ReadDir(sm.dir)
	for _, e := range names {
		if err := os.Remove(filepath.Join(sm.dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	for n, data := range sm.files {
		if n == name {
			if b == nil {
				continue
			}
			data = b
		}
		if err := os.WriteFile(filepath.Join(sm.dir, n), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return sm.dir
}

// cuttable returns the first record that Open may cut when all damage
// lies from offset lo on in file name: where name is the last segment,
// and lo not before the sector where the last append starts, the first
// record of the first append with a byte in that sector or after (the
// last append rewrote that sector whole, and a crash that tears a sector
// can leave anything there); else none (the one after the last).
func (sm *sample) cuttable(name string, lo int64) uint64 {
	last := sm.appends[len(sm.appends)-1]
	f := sm.at[last[0]-1]
	sector := f.off / 512 * 512
	if name != f.seg || lo < sector {
		return last[1] + 1
	}
	for _, a := range sm.appends {
		p := sm.at[a[1]-1]
		if p.seg == name && p.off+p.size > sector {
			return a[0]
		}
	}
	return last[0]
}

// judge opens dir, a damaged copy of the sample, and fails unless Open
// refused it, naming the file and an offset, or kept records first..last, each with
// its payload, where last is at least keep-1 and ends an append. It
// reports whether Open refused.
func (sm *sample) judge(t *testing.T, what, dir string, first, keep uint64) bool {
	t.Helper()
	l, err := Open(dir, Options{SegmentSize: sm.segSize, FS: crashfs.NoSync(vfs.OS)})
	if err != nil {
		if !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "offset") {
			t.Errorf("%s: refused without naming the file and an offset: %v", what, err)
		}
		return true
	}
	defer l.Close()
	f, _ := l.FirstIndex()
	la, _ := l.LastIndex()
	ends := slices.ContainsFunc(sm.appends, func(a [2]uint64) bool { return a[1] == la })
	if f != first || la+1 < keep || la > sm.last() || !ends {
		t.Errorf("%s: Open kept %d..%d; want a refusal or %d..%d, from %d..%d at least, ending an append",
			what, f, la, first, sm.last(), first, keep-1)
		return false
	}
	for i := f; i <= la; i++ {
		if got, err := l.Read(i); err != nil || !bytes.Equal(got, payload220(i)) {
			t.Errorf("%s: Read(%d) = %d bytes, %v; not the payload appended", what, i, len(got), err)
			return false
		}
	}
	return false
}

// damage is one change to one file of a sample.
type damage struct {
	what string
	name string
	b    []byte // the file's new bytes; nil: removed
}

// damages returns, for the sample: every bit of every segment header;
// every bit of the frame headers of the records in full (all if nil),
// and one bit of each other frame header; one bit of each sector's
// payload bytes; each sector zeroed; and each segment removed, emptied
// and shortened by a byte.
func (sm *sample) damages(full []uint64) []damage {
	var ds []damage
	rnd := rand.New(rand.NewPCG(4, 4))
	flip := func(what, name string, bit int64) {
		b := bytes.Clone(sm.files[name])
		b[bit/8] ^= 1 << (bit % 8)
		ds = append(ds, damage{fmt.Sprintf("%s: %s bit %d", name, what, bit), name, b})
	}
	for _, first := range sm.firsts {
		for bit := range int64(segHeader * 8) {
			flip("segment header", segName(first), bit)
		}
	}
	for i, f := range sm.at {
		index := uint64(i + 1)
		if full == nil || slices.Contains(full, index) {
			for bit := range int64(frameHeader * 8) {
				flip(fmt.Sprintf("record %d's header", index), f.seg, f.off*8+bit)
			}
		} else {
			flip(fmt.Sprintf("record %d's header", index), f.seg, f.off*8+rnd.Int64N(frameHeader*8))
		}
	}
	for _, first := range sm.firsts {
		name := segName(first)
		data := sm.files[name]
		var inSector []int64 // payload bytes, in sector k
		k := int64(0)
		for i, f := range sm.at {
			if f.seg != name {
				continue
			}
			for off := f.off + frameHeader; off < f.off+frameHeader+int64(len(payload220(uint64(i+1)))); off++ {
				if off/512 != k {
					if len(inSector) > 0 {
						flip("payload", name, 8*inSector[rnd.IntN(len(inSector))]+rnd.Int64N(8))
					}
					inSector, k = inSector[:0], off/512
				}
				inSector = append(inSector, off)
			}
		}
		if len(inSector) > 0 {
			flip("payload", name, 8*inSector[rnd.IntN(len(inSector))]+rnd.Int64N(8))
		}
		framesEnd := int64(segHeader)
		for _, f := range sm.at {
			if f.seg == name {
				framesEnd = f.off + f.size
			}
		}
		for at := int64(0); at < min(int64(len(data)), framesEnd+1024); at += 512 {
			b := bytes.Clone(data)
			clear(b[at:min(at+512, int64(len(b)))])
			if !bytes.Equal(b, data) {
				ds = append(ds, damage{fmt.Sprintf("%s: sector at %d zeroed", name, at), name, b})
			}
		}
		ds = append(ds,
			damage{name + ": removed", name, nil},
			damage{name + ": emptied", name, []byte{}},
			damage{name + ": a byte short", name, data[:len(data)-1]})
	}
	return ds
}

// TestW4 damages logs in every way damages lists, and opens each: Open
// must refuse it or report every acknowledged record (judge), except
// where the log cannot tell the damage from what it does itself: the
// first segment removed is a truncation of the log there, and damage
// confined to the last append's sectors a crash during it. (The last
// segment removed is refused: the log's newest file names it.) The old
// format (a checksum of the payload alone, and any frame with a zero
// sector or past the end of the file taken for a torn tail) lost records
// here: record 50's length flipped in bits 14 to 25 ended the log at 49,
// and a zeroed sector of it at 46.
func TestW4(t *testing.T) {
	tests := []struct {
		name string
		sm   *sample
		segs int
		full []uint64 // records whose header bits are all flipped
	}{
		// The review's case: 100 records of about 220 bytes in one
		// segment, one at a time.
		{"one segment", writeSample(t, 1<<16, appends(100, 1)), 1, []uint64{1, 49, 50, 51, 99, 100}},
		// Three segments, appends of 1 to 5 records.
		{"three segments", writeSample(t, 9000, appends(100, 3, 1, 5, 2)), 3, []uint64{1, 2, 36, 37, 38, 50, 98, 99, 100}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sm := tt.sm
			if len(sm.firsts) != tt.segs {
				t.Fatalf("segments from %v, want %d", sm.firsts, tt.segs)
			}
			refused := 0
			ds := sm.damages(tt.full)
			for _, d := range ds {
				lo := int64(0) // the first byte changed
				if old := sm.files[d.name]; d.b != nil {
					lo = int64(min(len(old), len(d.b)))
					for i := range lo {
						if old[i] != d.b[i] {
							lo = i
							break
						}
					}
				}
				first, keep := uint64(1), sm.cuttable(d.name, lo)
				if d.b == nil { // a removed segment
					switch d.name {
					case segName(sm.firsts[0]):
						if len(sm.firsts) > 1 {
							first = sm.firsts[1]
						}
					case segName(sm.firsts[len(sm.firsts)-1]):
						keep = sm.firsts[len(sm.firsts)-1]
					}
				}
				if len(sm.firsts) == 1 && d.b == nil {
					// No segment left: an empty log.
					l, err := Open(sm.place(t, d.name, nil), Options{FS: crashfs.NoSync(vfs.OS)})
					if err == nil {
						l.Close()
					}
					continue
				}
				if sm.judge(t, d.what, sm.place(t, d.name, d.b), first, keep) {
					refused++
				}
			}
			t.Logf("%d damages, %d refused", len(ds), refused)
		})
	}
}

// TestF1 is the review's case alone: 100 records of about 220 bytes in
// one segment, one bit of bits 14 to 25 of record 50's length flipped.
// Open must refuse (records 51..100 were acknowledged after it).
func TestF1(t *testing.T) {
	sm := writeSample(t, 1<<16, appends(100, 1))
	f := sm.at[49]
	for bit := int64(14); bit <= 25; bit++ {
		b := bytes.Clone(sm.files[f.seg])
		lenAt := f.off + 8 // the length field
		b[lenAt+bit/8] ^= 1 << (bit % 8)
		l, err := Open(sm.place(t, f.seg, b), Options{FS: crashfs.NoSync(vfs.OS)})
		if err == nil {
			last, _ := l.LastIndex()
			l.Close()
			t.Errorf("bit %d of record 50's length flipped: Open kept 1..%d, want a refusal", bit, last)
		}
	}
}

// TestTornAppend: what a crash during an append can leave of it (each
// byte from where it is cut on not written, written with garbage, or the
// file cut there; each sector of it alone not written, or garbage) is
// cut off, exactly that append, and nothing before it; the log then goes
// on, and a restart agrees. Garbage after a whole append is cut off and
// the append kept.
func TestTornAppend(t *testing.T) {
	for _, segSize := range []int64{1 << 16, 9000} {
		t.Run(fmt.Sprint(segSize), func(t *testing.T) {
			before := writeSample(t, segSize, appends(40, 3, 1, 2))
			after := writeSample(t, segSize, append(appends(40, 3, 1, 2), [2]uint64{41, 45}))
			if want := [2]uint64{41, 45}; after.appends[len(after.appends)-1] != want {
				t.Fatalf("last append %v, want %v", after.appends[len(after.appends)-1], want)
			}
			name := after.at[40].seg
			old, full := before.files[name], after.files[name]
			if old == nil { // the append started the segment: its header is there before it
				old = full[:segHeader]
			}
			start := after.at[40].off
			end := after.at[44].off + after.at[44].size
			// intact reports whether b holds the append's frames whole.
			intact := func(b []byte) bool {
				for i := 40; i < 45; i++ {
					f := after.at[i]
					n := f.off + frameHeader + int64(len(payload220(uint64(i+1))))
					if int64(len(b)) < f.off+f.size || !bytes.Equal(b[f.off:n], full[f.off:n]) {
						return false
					}
				}
				return true
			}
			oldAt := func(i int64) byte {
				if i < int64(len(old)) {
					return old[i]
				}
				return 0
			}
			garbage := func(b []byte, lo, hi int64) {
				r := rand.New(rand.NewPCG(uint64(lo), uint64(hi)))
				for i := lo; i < hi; i++ {
					b[i] = byte(r.Uint32()) | 1
				}
			}
			type torn struct {
				what string
				b    []byte
			}
			var cases []torn
			for c := start; c <= end; c++ {
				// Every byte near the append's ends and the sector
				// boundaries, every 7th elsewhere: under 10 s in all.
				if c-start > 48 && end-c > 48 && (c+1)%512 > 2 && c%7 != 0 {
					continue
				}
				unwritten := bytes.Clone(full)
				for i := c; i < int64(len(full)); i++ {
					unwritten[i] = oldAt(i)
				}
				garbled := bytes.Clone(full)
				garbage(garbled, c, end+64)
				cases = append(cases,
					torn{fmt.Sprintf("not written from %d", c), unwritten},
					torn{fmt.Sprintf("garbage from %d", c), garbled},
					torn{fmt.Sprintf("file cut at %d", c), bytes.Clone(full[:c])})
			}
			for at := start / 512 * 512; at < end; at += 512 {
				lo, hi := max(at, start), min(at+512, end)
				unwritten := bytes.Clone(full)
				for i := lo; i < hi; i++ {
					unwritten[i] = oldAt(i)
				}
				garbled := bytes.Clone(full)
				garbage(garbled, lo, hi)
				cases = append(cases,
					torn{fmt.Sprintf("sector at %d not written", at), unwritten},
					torn{fmt.Sprintf("sector at %d garbage", at), garbled})
			}
			for _, c := range cases {
				want := uint64(40)
				if intact(c.b) {
					want = 45
				}
				dir := after.place(t, name, c.b)
				opts := Options{SegmentSize: segSize, FS: crashfs.NoSync(vfs.OS)}
				l, err := Open(dir, opts)
				if err != nil {
					t.Fatalf("%s: %v", c.what, err)
				}
				if la, _ := l.LastIndex(); la != want {
					l.Close()
					t.Fatalf("%s: Open kept 1..%d, want 1..%d", c.what, la, want)
				}
				for i := want - 2; i <= want; i++ {
					if got, err := l.Read(i); err != nil || !bytes.Equal(got, payload220(i)) {
						t.Fatalf("%s: Read(%d): %v", c.what, i, err)
					}
				}
				if err := l.Append(want+1, [][]byte{payload220(want + 1), payload220(want + 2)}); err != nil {
					t.Fatalf("%s: Append after the cut: %v", c.what, err)
				}
				l.Close()
				if l, err = Open(dir, opts); err != nil {
					t.Fatalf("%s: reopen: %v", c.what, err)
				}
				la, _ := l.LastIndex()
				got, err := l.Read(want + 2)
				l.Close()
				if la != want+2 || err != nil || !bytes.Equal(got, payload220(want+2)) {
					t.Fatalf("%s: reopened, the log ends at %d (Read: %v), want %d", c.what, la, err, want+2)
				}
			}
			t.Logf("%d torn appends", len(cases))
		})
	}
}

// TestTruncateBackMarksEnd: after TruncateBack to a record inside an
// append, that record ends an append, so that the next append, torn,
// is cut without it; a crash inside TruncateBack (its mark made, the
// records after it not yet cut) brings them all back whole, as
// TruncateBack had not returned.
func TestTruncateBackMarksEnd(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, 0)
	if err := l.Append(1, recs(1, 10)); err != nil {
		t.Fatal(err)
	}
	s := l.segs[0]
	if err := l.markEnd(s, 6); err != nil { // a crash after the mark
		t.Fatal(err)
	}
	l.Close()
	l = open(t, dir, 0)
	check(t, l, 1, 10)
	if err := l.TruncateBack(6); err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateBack(4); err != nil {
		t.Fatal(err)
	}
	end := l.segs[0].size
	l.Close()
	// An append of 5..9, torn: its first frame whole, then garbage.
	b := appendFrame(nil, 1, 5, 0, false, rec(5))
	b = append(b, bytes.Repeat([]byte{0x5a}, 300)...)
	f, err := os.OpenFile(lastSegment(t, dir), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(b, end); err != nil {
		t.Fatal(err)
	}
	f.Close()
	l = open(t, dir, 0)
	check(t, l, 1, 4)
}

// FuzzOpen opens a log whose only segment holds, after its header,
// arbitrary bytes. Its rule: let the sound prefix be the frames from the
// header on, each sound (its checksum right) and of the next index from 1,
// up to the first that is not, and E the last of them that ends an
// append (0 if none). Open either refuses, or keeps exactly records 1..E
// with their payloads, and then only if no sound frame of an append other
// than the one from E+1 lies after E's frame (in the prefix, or after it,
// found stepping 8 bytes at a time, and over each sound frame): such a
// frame was written after the damage, and the records it ends were
// acknowledged. Then the log takes an append at E+1, and a restart agrees.
func FuzzOpen(f *testing.F) {
	var good []byte
	good = appendFrame(good, 1, 1, 0, false, rec(1))
	good = appendFrame(good, 1, 2, 1, true, rec(2))
	mid := len(good)
	good = appendFrame(good, 1, 3, 0, true, []byte("third"))
	f.Add(good)
	f.Add(good[:len(good)-3])
	f.Add(good[:mid+9])
	f.Add(append(bytes.Clone(good), make([]byte, 64)...))
	f.Add(append(append(bytes.Clone(good[:mid]), bytes.Repeat([]byte{0xee}, 40)...), good[mid:]...))
	f.Add(append(bytes.Clone(good[:mid]), bytes.Repeat([]byte{0xee}, 40)...))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		file := append(segmentHeader(1), data...)
		if err := os.WriteFile(segmentPath(dir, 1), file, 0o600); err != nil {
			t.Fatal(err)
		}
		// The sound prefix, E, and whether a frame of it after E is of
		// another append than the one from E+1.
		var payloads [][]byte
		e, off := 0, int64(segHeader)
		later := false
		for {
			h, ok := parseHead(file[off:], 1)
			if !ok || off+h.size() > int64(len(file)) || !h.sound(file[off:]) || h.index != uint64(len(payloads)+1) {
				break
			}
			payloads = append(payloads, file[off+frameHeader:off+frameHeader+int64(h.length)])
			off += h.size()
			later = later || h.appendStart() != uint64(e+1)
			if h.flags&flagEnd != 0 {
				e = len(payloads)
				later = false
			}
		}
		for at := off; at+frameHeader <= int64(len(file)); at += frameAlign {
			h, ok := parseHead(file[at:], 1)
			if !ok || at+h.size() > int64(len(file)) || !h.sound(file[at:]) {
				continue
			}
			if h.appendStart() != uint64(e+1) {
				later = true
				break
			}
			at += h.size() - frameAlign
		}
		opts := Options{FS: crashfs.NoSync(vfs.OS)}
		l, err := Open(dir, opts)
		if err != nil {
			return
		}
		defer l.Close()
		if later {
			t.Fatalf("Open kept the log, though a sound frame of a later append follows the damage")
		}
		first, _ := l.FirstIndex()
		last, _ := l.LastIndex()
		if last != uint64(e) || (e == 0) != (first == 0) || (e != 0 && first != 1) {
			t.Fatalf("log holds %d..%d, want 1..%d", first, last, e)
		}
		for i := 1; i <= e; i++ {
			got, err := l.Read(uint64(i))
			if err != nil || !bytes.Equal(got, payloads[i-1]) {
				t.Fatalf("Read(%d) = %q, %v; want %q", i, got, err, payloads[i-1])
			}
		}
		next := uint64(e + 1)
		if err := l.Append(next, [][]byte{[]byte("next")}); err != nil {
			t.Fatalf("Append after the kept frames: %v", err)
		}
		l.Close()
		l, err = Open(dir, opts)
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		defer l.Close()
		if got, err := l.Read(next); err != nil || string(got) != "next" {
			t.Fatalf("reopened, Read(%d) = %q, %v", next, got, err)
		}
	})
}

// TestOpenSyncs: Open syncs the log's directory, its parent, and each
// segment before it reads it, so that what a killed process wrote but
// never synced is on disk before Open reports it (the review's F2: the
// old Open synced nothing unless it cut a torn tail). A sync that fails
// fails Open.
func TestOpenSyncs(t *testing.T) {
	dir := written(t, 1000, 100)
	segs := segments(t, dir)
	tests := []struct {
		name string
		fail string // the path whose sync fails
	}{
		{"all synced", ""},
		{"a segment's sync fails", segmentPath(dir, 1)},
		{"the last segment's sync fails", lastSegment(t, dir)},
		{"the directory's sync fails", dir},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &countFS{FS: vfs.OS, fail: tt.fail, synced: map[string]int{}}
			l, err := Open(dir, Options{SegmentSize: 1000, FS: c})
			if tt.fail != "" {
				if err == nil {
					l.Close()
					t.Fatalf("Open succeeded, though the sync of %s failed", tt.fail)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.synced[dir] == 0 || c.synced[filepath.Dir(dir)] == 0 {
				t.Errorf("directory syncs %v: the log's directory and its parent not both synced", c.synced)
			}
			n := 0
			for _, s := range l.segs {
				if c.synced[s.path] == 0 {
					t.Errorf("segment %s not synced", s.path)
				}
				n++
			}
			if n != segs {
				t.Fatalf("%d segments open, %d on disk", n, segs)
			}
			if len(c.readFirst) > 0 {
				t.Errorf("read before they were synced: %v", c.readFirst)
			}
		})
	}
}

// countFS counts the syncs of each file and directory, fails those of
// the path fail, and notes the files read before they were synced.
type countFS struct {
	vfs.FS
	fail string

	mu        sync.Mutex
	synced    map[string]int
	readFirst []string
}

var errInjected = errors.New("injected sync failure")

func (c *countFS) sync(name string) error {
	if name == c.fail {
		return errInjected
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.synced[name]++
	return nil
}

func (c *countFS) OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error) {
	f, err := c.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &countFile{File: f, c: c}, nil
}

func (c *countFS) SyncDir(name string) error {
	if err := c.sync(name); err != nil {
		return err
	}
	return c.FS.SyncDir(name)
}

type countFile struct {
	vfs.File
	c *countFS
}

func (f *countFile) ReadAt(b []byte, off int64) (int, error) {
	f.c.mu.Lock()
	if f.c.synced[f.Name()] == 0 {
		f.c.readFirst = append(f.c.readFirst, fmt.Sprintf("%s at %d", f.Name(), off))
	}
	f.c.mu.Unlock()
	return f.File.ReadAt(b, off)
}

func (f *countFile) Sync() error {
	if err := f.c.sync(f.Name()); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *countFile) Datasync() error {
	if err := f.c.sync(f.Name()); err != nil {
		return err
	}
	return f.File.Datasync()
}

// TestErrorsName: a refusal names the file and the offset of the damage.
func TestErrorsName(t *testing.T) {
	sm := writeSample(t, 9000, appends(100, 3, 1, 5, 2))
	mid := sm.at[49]
	tests := []struct {
		name string
		file string
		off  int64 // the offset the error must name
	}{
		{"a segment header", segName(sm.firsts[1]), 0},
		{"a frame in a segment before the last", mid.seg, mid.off},
		{"a frame in the last segment", sm.at[90].seg, sm.at[90].off},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := bytes.Clone(sm.files[tt.file])
			b[tt.off+frameHeader-1] ^= 0x80
			_, err := Open(sm.place(t, tt.file, b), Options{SegmentSize: 9000, FS: crashfs.NoSync(vfs.OS)})
			if err == nil {
				t.Fatal("Open accepted the log")
			}
			if !strings.Contains(err.Error(), tt.file) || !strings.Contains(err.Error(), fmt.Sprintf("offset %d", tt.off)) {
				t.Fatalf("error %q names not %s and offset %d", err, tt.file, tt.off)
			}
		})
	}
}

// TestFrameSum: a frame's checksum is CRC-32C of its index, 8 bytes
// little endian, then the rest, as the package doc says.
func TestFrameSum(t *testing.T) {
	for _, tt := range []struct {
		index uint64
		b     []byte
	}{
		{1, nil},
		{1, []byte("x")},
		{0x0102030405060708, []byte("a header and a payload")},
		{^uint64(0), bytes.Repeat([]byte{0xff}, 100)},
	} {
		want := crc32.Checksum(binary.LittleEndian.AppendUint64(nil, tt.index), crcTable)
		want = crc32.Update(want, crcTable, tt.b)
		if got := frameSum(tt.index, tt.b); got != want {
			t.Errorf("frameSum(%#x, %q) = %#x, want %#x", tt.index, tt.b, got, want)
		}
	}
}
