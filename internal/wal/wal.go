package wal

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/latchd/latch/internal/vfs"
)

// DefaultSegmentSize is the size at which a segment is closed when
// Options.SegmentSize is zero.
const DefaultSegmentSize = 64 << 20

// MaxRecord is the largest record a log takes.
const MaxRecord = 64 << 20

// The format on disk (see the package doc).
const (
	formatVersion = 1
	segHeader     = 24        // magic, first index, format version, checksum
	frameHeader   = 16        // checksum, flags, place, length, index in the segment
	frameAlign    = 8         // frames start at multiples of it
	flagEnd       = 1         // a frame's flag: the last record of an append
	maxAppend     = 1<<24 - 1 // the most records an append takes: places are 24 bits

	segSuffix = ".seg"
	tmpSuffix = ".tmp" // a segment being created, until it is renamed
	// growBy is how far ahead of its frames a segment's file is written
	// with zeros (see Append).
	growBy = 1 << 20
)

var segMagic = [8]byte{'l', 'a', 't', 'c', 'h', 'w', 'a', 'l'}

// zeros is what a segment grows by.
var zeros [growBy]byte

var crcTable = crc32.MakeTable(crc32.Castagnoli)

var (
	// ErrNotFound is returned by Read for an index outside the log.
	ErrNotFound = errors.New("wal: no record at that index")
	// ErrClosed is returned by every method of a closed log.
	ErrClosed = errors.New("wal: closed")
	// ErrBroken is wrapped by the error of a write, sync or removal that
	// failed, and by that of every later call: what reached the disk is
	// not known until the log is opened again.
	ErrBroken = errors.New("wal: broken")
)

// Options tune a log. The zero value is ready to use.
type Options struct {
	// SegmentSize is the size in bytes past which an append starts a new
	// segment; 0 means DefaultSegmentSize.
	SegmentSize int64
	// FS is the file system the log lives on; nil means vfs.OS.
	FS vfs.FS
}

// Log is a write-ahead log open on a directory. Its methods are safe for
// concurrent use; reads run in parallel with each other, and wait for an
// append, which holds the log through its sync.
type Log struct {
	fs      vfs.FS
	dir     string
	segSize int64
	grow    int64 // growBy, or segSize if smaller

	mu    sync.RWMutex
	segs  []*segment // oldest first; the last one takes appends
	first uint64     // the first record's index; 0 when the log is empty
	last  uint64     // the last record's index; 0 when the log is empty
	err   error      // set once a write or a sync failed (ErrBroken), or Close ran
}

// segment is one file of a log.
type segment struct {
	first uint64   // the index of its first record, from its name and header
	path  string   // its name in the log's directory
	f     vfs.File // open for reading and writing
	offs  []int64  // offs[i] is where record first+i's frame starts
	size  int64    // the end of its last frame (segHeader when it has none)
	alloc int64    // the file's size: size, then zeros
}

// frameSize is the size of the frame of a payload of n bytes: its
// header, the payload, and zeros up to a multiple of frameAlign.
func frameSize(n int) int64 {
	return (frameHeader + int64(n) + frameAlign - 1) &^ (frameAlign - 1)
}

// putFrame writes into b, frameSize(len(p)) bytes of zeros, the frame of
// payload p, the record at index in the segment whose first record is
// segFirst, at place pos in its append, marked as the append's last if
// end.
func putFrame(b []byte, segFirst, index uint64, pos uint32, end bool, p []byte) {
	var flags uint64
	if end {
		flags = flagEnd
	}
	b = b[:frameHeader+len(p)]
	binary.LittleEndian.PutUint64(b[0:8], (flags|uint64(pos)<<8)<<32) // the checksum after
	binary.LittleEndian.PutUint64(b[8:16], uint64(len(p))|(index-segFirst)<<32)
	copy(b[frameHeader:], p)
	binary.LittleEndian.PutUint32(b[0:4], frameSum(index, b[4:]))
}

// frameSum is the checksum of a frame of the record at index, whose
// header after its checksum, and payload, are b: CRC-32C of the index (8
// bytes, little endian), then b.
func frameSum(index uint64, b []byte) uint32 {
	// The index's 8 bytes in one step of slicing-by-8 (crc32 takes bytes
	// only in a slice, and one of the index would escape to the heap).
	t := &indexTables
	crc := ^uint32(0) ^ uint32(index)
	hi := uint32(index >> 32)
	crc = t[0][hi>>24] ^ t[1][byte(hi>>16)] ^ t[2][byte(hi>>8)] ^ t[3][byte(hi)] ^
		t[4][crc>>24] ^ t[5][byte(crc>>16)] ^ t[6][byte(crc>>8)] ^ t[7][byte(crc)]
	return crc32.Update(^crc, crcTable, b)
}

// indexTables are the tables of slicing-by-8 for CRC-32C: indexTables[0]
// is crcTable, and indexTables[k][i] is the CRC of byte i followed by k
// zeros.
var indexTables = func() (t [8][256]uint32) {
	t[0] = *crcTable
	for i := range 256 {
		for k := 1; k < 8; k++ {
			prev := t[k-1][i]
			t[k][i] = prev>>8 ^ t[0][byte(prev)]
		}
	}
	return t
}()

// appendFrame appends to b the frame putFrame writes.
func appendFrame(b []byte, segFirst, index uint64, pos uint32, end bool, p []byte) []byte {
	at := len(b)
	b = append(b, make([]byte, frameSize(len(p)))...)
	putFrame(b[at:], segFirst, index, pos, end, p)
	return b
}

// frameHead is a frame's header, decoded.
type frameHead struct {
	sum    uint32 // CRC-32C of the index, the header after it, and the payload
	flags  byte
	pos    uint32 // the record's place in its append, 0 for the first
	length uint32 // the payload's
	index  uint64 // the segment's first index, plus the header's
}

// parseHead decodes the frame header at the start of b, in the segment
// whose first record is segFirst, and reports whether it is one Append
// writes: no flag but flagEnd, a length from 1 to MaxRecord and an index
// past its place in its append. It does not check the checksum (see
// sound).
func parseHead(b []byte, segFirst uint64) (frameHead, bool) {
	if len(b) < frameHeader {
		return frameHead{}, false
	}
	w := binary.LittleEndian.Uint32(b[4:8])
	h := frameHead{
		sum:    binary.LittleEndian.Uint32(b[0:4]),
		flags:  byte(w),
		pos:    w >> 8,
		length: binary.LittleEndian.Uint32(b[8:12]),
		index:  segFirst + uint64(binary.LittleEndian.Uint32(b[12:16])),
	}
	ok := h.flags&^flagEnd == 0 && h.length >= 1 && h.length <= MaxRecord && uint64(h.pos) < h.index
	return h, ok
}

// size is the frame's size, padding included.
func (h frameHead) size() int64 { return frameSize(int(h.length)) }

// appendStart is the index of the first record of the frame's append.
func (h frameHead) appendStart() uint64 { return h.index - uint64(h.pos) }

// sound reports whether b, the frame's header and payload, matches its
// checksum.
func (h frameHead) sound(b []byte) bool {
	return frameSum(h.index, b[4:frameHeader+h.length]) == h.sum
}

// segmentHeader returns the header of the segment whose first record is
// first.
func segmentHeader(first uint64) []byte {
	b := append([]byte(nil), segMagic[:]...)
	b = binary.LittleEndian.AppendUint64(b, first)
	b = binary.LittleEndian.AppendUint32(b, formatVersion)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crcTable))
}

// Open opens the log in dir, creating the directory if it does not exist.
// It syncs what it reads before it trusts it, cuts off the append a
// crash interrupted, and refuses a log with any other damage, naming the
// file and the offset (see the package doc).
func Open(dir string, opts Options) (*Log, error) {
	l := &Log{fs: opts.FS, dir: dir, segSize: opts.SegmentSize}
	if l.fs == nil {
		l.fs = vfs.OS
	}
	if l.segSize <= 0 {
		l.segSize = DefaultSegmentSize
	}
	l.grow = min(growBy, l.segSize)
	if err := vfs.MkdirAll(l.fs, dir, 0o700); err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	firsts, temps, err := listSegments(l.fs, dir)
	if err != nil {
		return nil, err
	}
	// A segment still under its temporary name was never part of the log
	// (startSegment).
	for _, name := range temps {
		if err := l.fs.Remove(filepath.Join(dir, name)); err != nil {
			return nil, fmt.Errorf("wal: %w", err)
		}
	}
	// A process killed after writing, before its sync, leaves its writes
	// in the page cache, where Open would read them, and a power loss
	// later would take them away: the entries of the directory (and its
	// own, in its parent, which a kill inside MkdirAll can leave unsynced)
	// are synced here, and each segment's data in openSegment, before
	// anything read is reported.
	if err := l.fs.SyncDir(filepath.Dir(filepath.Clean(dir))); err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	if err := l.syncDir(); err != nil {
		return nil, err
	}
	if err := checkNewest(l.fs, dir, firsts); err != nil {
		return nil, err
	}
	if err := l.load(firsts); err != nil {
		l.closeFiles()
		return nil, err
	}
	return l, nil
}

// load opens and checks the segments whose first indexes are firsts, in
// order, and cuts off the append a crash interrupted.
func (l *Log) load(firsts []uint64) error {
	var sc scanned
	for i, first := range firsts {
		s, err := l.openSegment(first)
		if err != nil {
			return err
		}
		l.segs = append(l.segs, s)
		if sc, err = s.scan(); err != nil {
			return err
		}
		if i > 0 {
			prev := l.segs[i-1]
			if want := prev.first + uint64(len(prev.offs)); first != want {
				return fmt.Errorf("wal: segment %s: damaged at offset 0 or before: it starts at record %d, and the segment before it, %s, ends at record %d, at offset %d",
					s.path, first, prev.path, want-1, prev.size)
			}
		}
		if i < len(firsts)-1 {
			if err := s.checkInner(sc); err != nil {
				return err
			}
		}
	}
	if len(l.segs) == 0 {
		return nil
	}
	if err := l.segs[len(l.segs)-1].cutInFlight(sc); err != nil {
		return err
	}
	// A crash between a segment's creation and its first append's sync
	// leaves it with no record: it takes nothing but the next index.
	if s := l.segs[len(l.segs)-1]; len(s.offs) == 0 {
		var prev uint64
		if len(l.segs) > 1 {
			prev = l.segs[len(l.segs)-2].first
		}
		if err := l.setNewest(prev); err != nil {
			return err
		}
		if err := l.removeSegment(len(l.segs) - 1); err != nil {
			return err
		}
	}
	if len(l.segs) > 0 {
		s := l.segs[len(l.segs)-1]
		l.first = l.segs[0].first
		l.last = s.first + uint64(len(s.offs)) - 1
	}
	return nil
}

// listSegments returns the first indexes of dir's segments, in order, and
// the names of the segments left under their temporary names.
func listSegments(fsys vfs.FS, dir string) (firsts []uint64, temps []string, err error) {
	names, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("wal: %w", err)
	}
	for _, e := range names {
		name, tmp := strings.CutSuffix(e, tmpSuffix)
		name, ok := strings.CutSuffix(name, segSuffix)
		if !ok || len(name) != 20 {
			continue
		}
		first, err := strconv.ParseUint(name, 10, 64)
		if err != nil || first == 0 {
			continue
		}
		if tmp {
			temps = append(temps, e)
			continue
		}
		firsts = append(firsts, first)
	}
	slices.Sort(firsts)
	return firsts, temps, nil
}

func segmentPath(dir string, first uint64) string {
	return filepath.Join(dir, fmt.Sprintf("%020d%s", first, segSuffix))
}

// openSegment opens the segment whose first record is first, syncs it,
// and checks its header.
func (l *Log) openSegment(first uint64) (*segment, error) {
	path := segmentPath(l.dir, first)
	f, err := l.fs.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	s := &segment{first: first, path: path, f: f}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, fmt.Errorf("wal: segment %s: sync: %w", path, err)
	}
	if s.alloc, err = f.Size(); err != nil {
		f.Close()
		return nil, fmt.Errorf("wal: segment %s: %w", path, err)
	}
	hdr := make([]byte, segHeader)
	if _, err := f.ReadAt(hdr, 0); err != nil && !(errors.Is(err, io.EOF) && s.alloc < segHeader) {
		f.Close()
		return nil, fmt.Errorf("wal: segment %s: read its header: %w", path, err)
	}
	if !bytes.Equal(hdr, segmentHeader(first)) {
		f.Close()
		return nil, fmt.Errorf("wal: segment %s: damaged at offset 0: its header (%d bytes of %d) is not that of a segment of format %d from record %d",
			path, min(s.alloc, segHeader), segHeader, formatVersion, first)
	}
	s.size = segHeader
	return s, nil
}

// scanned is what scan found in a segment.
type scanned struct {
	ends  int    // how many of its records precede the end of the last append in it
	endAt int64  // where the frame of the last of those ends (segHeader if none)
	stop  int64  // where its frames stop: the end of the file, or a frame that is not sound
	why   string // why the frame at stop is not sound; "" at the end of the file
	// stray is the first sound frame after the last end mark that is not
	// of the append after it: where it is, and its header (at < 0: none).
	stray struct {
		at int64
		h  frameHead
	}
}

// scan reads the segment's frames from its header on, up to the first
// that is cut short, fails its checksum, or is not a frame at all (zeros
// written ahead, say), recording their offsets and s.size; it reports
// where the last end mark is, and why it stopped. A sound frame that
// holds another index than the one due is damage, and an error, as is a
// failed read.
func (s *segment) scan() (scanned, error) {
	sc := scanned{endAt: segHeader, stop: segHeader}
	sc.stray.at = -1
	r := bufio.NewReaderSize(io.NewSectionReader(s.f, segHeader, s.alloc-segHeader), 1<<16)
	var buf []byte
	for {
		buf = slices.Grow(buf[:0], frameHeader)[:frameHeader]
		if _, err := io.ReadFull(r, buf); err != nil {
			switch err {
			case io.EOF:
				return sc, nil
			case io.ErrUnexpectedEOF:
				sc.why = "frame header cut short by the end of the file"
				return sc, nil
			}
			return sc, fmt.Errorf("wal: segment %s: read at offset %d: %w", s.path, sc.stop, err)
		}
		h, ok := parseHead(buf, s.first)
		if !ok {
			sc.why = "not a frame header"
			return sc, nil
		}
		if sc.stop+h.size() > s.alloc {
			sc.why = fmt.Sprintf("a frame of %d bytes runs past the end of the file", h.size())
			return sc, nil
		}
		buf = slices.Grow(buf, int(h.size()))[:h.size()]
		if _, err := io.ReadFull(r, buf[frameHeader:]); err != nil {
			return sc, fmt.Errorf("wal: segment %s: read at offset %d: %w", s.path, sc.stop, err)
		}
		if !h.sound(buf) {
			sc.why = "checksum mismatch"
			return sc, nil
		}
		if want := s.first + uint64(len(s.offs)); h.index != want {
			return sc, fmt.Errorf("wal: segment %s: damaged at offset %d: a frame of record %d where %d belongs", s.path, sc.stop, h.index, want)
		}
		if sc.stray.at < 0 && h.appendStart() != s.first+uint64(sc.ends) {
			sc.stray.at, sc.stray.h = sc.stop, h
		}
		s.offs = append(s.offs, sc.stop)
		sc.stop += h.size()
		s.size = sc.stop
		if h.flags&flagEnd != 0 {
			sc.ends, sc.endAt = len(s.offs), sc.stop
			sc.stray.at = -1
		}
	}
}

// checkInner checks a segment that is not the last, which no append
// writes to any more: its frames end with an append's end and the file
// holds only zeros after them. Anything else is damage.
func (s *segment) checkInner(sc scanned) error {
	if sc.why != "" {
		zero, err := zeroFrom(s.f, sc.stop)
		if err != nil {
			return fmt.Errorf("wal: segment %s: %w", s.path, err)
		}
		if !zero {
			return fmt.Errorf("wal: segment %s: damaged at offset %d: %s", s.path, sc.stop, sc.why)
		}
	}
	if len(s.offs) == 0 {
		return fmt.Errorf("wal: segment %s: damaged at offset %d: it holds no record, and is not the last", s.path, int64(segHeader))
	}
	if sc.ends != len(s.offs) {
		return fmt.Errorf("wal: segment %s: damaged at offset %d: its last record, %d, ends no append, and later segments follow",
			s.path, s.offs[len(s.offs)-1], s.first+uint64(len(s.offs))-1)
	}
	return nil
}

// zeroFrom reports whether f holds only zeros from off to its end.
func zeroFrom(f vfs.File, off int64) (bool, error) {
	r := bufio.NewReaderSize(io.NewSectionReader(f, off, 1<<62), 1<<16)
	for {
		b, err := r.ReadByte()
		if err == io.EOF {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		if b != 0 {
			return false, nil
		}
	}
}

// cutInFlight applies Open's rule to the last segment, scanned as sc.
// Past the last end mark lies at most the one append a crash interrupted,
// never acknowledged: its records, sound or not, are cut off, and so is
// whatever follows them, provided that no sound frame of another append
// lies anywhere after the last end mark. Such a frame was written after the damage,
// so the damage is not a crash's, and records after it were
// acknowledged: Open refuses. Zeros alone after the last end mark are
// those written ahead, and stay.
func (s *segment) cutInFlight(sc scanned) error {
	if sc.why == "" && sc.ends == len(s.offs) {
		return nil
	}
	rest := make([]byte, s.alloc-sc.stop)
	if _, err := s.f.ReadAt(rest, sc.stop); err != nil {
		return fmt.Errorf("wal: segment %s: read at offset %d: %w", s.path, sc.stop, err)
	}
	if sc.ends == len(s.offs) && !slices.ContainsFunc(rest, func(b byte) bool { return b != 0 }) {
		return nil
	}
	start := s.first + uint64(sc.ends) // the interrupted append's first record
	if sc.stray.at >= 0 {
		return fmt.Errorf("wal: segment %s: damaged at offset %d: record %d, after the last end mark, is of an append from %d, not of the append a crash interrupted (from record %d)",
			s.path, sc.stray.at, sc.stray.h.index, sc.stray.h.appendStart(), start)
	}
	for off := int64(0); off+frameHeader <= int64(len(rest)); off += frameAlign {
		h, ok := parseHead(rest[off:], s.first)
		if !ok || off+h.size() > int64(len(rest)) || !h.sound(rest[off:]) {
			continue
		}
		if h.appendStart() != start {
			what := "the frame there"
			if sc.why != "" {
				what = fmt.Sprintf("the frame at offset %d (%s)", sc.stop, sc.why)
			}
			return fmt.Errorf("wal: segment %s: damaged at offset %d: %s is not the append a crash interrupted (from record %d), as record %d, of an append from %d, lies after it at offset %d: records acknowledged would be lost",
				s.path, sc.stop, what, start, h.index, h.appendStart(), sc.stop+off)
		}
		off += h.size() - frameAlign
	}
	if err := s.f.Truncate(sc.endAt); err != nil {
		return fmt.Errorf("wal: segment %s: cut the interrupted append at offset %d: %w", s.path, sc.endAt, err)
	}
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("wal: segment %s: sync: %w", s.path, err)
	}
	s.offs = s.offs[:sc.ends]
	s.size, s.alloc = sc.endAt, sc.endAt
	return nil
}

// FirstIndex returns the index of the log's first record, 0 if it is
// empty.
func (l *Log) FirstIndex() (uint64, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.first, l.err
}

// LastIndex returns the index of the log's last record, 0 if it is
// empty.
func (l *Log) LastIndex() (uint64, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.last, l.err
}

// Read returns the payload of the record at index, in a new slice, or
// ErrNotFound.
func (l *Log) Read(index uint64) ([]byte, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.err != nil {
		return nil, l.err
	}
	if l.first == 0 || index < l.first || index > l.last {
		return nil, ErrNotFound
	}
	s := l.segs[l.find(index)]
	h, frame, err := s.readFrame(index)
	if err != nil {
		return nil, err
	}
	return frame[frameHeader : frameHeader+h.length], nil
}

// readFrame reads the frame of the record at index, which s holds, and
// checks it.
func (s *segment) readFrame(index uint64) (frameHead, []byte, error) {
	i := index - s.first
	off, end := s.offs[i], s.size
	if int(i)+1 < len(s.offs) {
		end = s.offs[i+1]
	}
	frame := make([]byte, end-off)
	if _, err := s.f.ReadAt(frame, off); err != nil {
		return frameHead{}, nil, fmt.Errorf("wal: read record %d in %s at offset %d: %w", index, s.path, off, err)
	}
	h, ok := parseHead(frame, s.first)
	if !ok || h.size() != end-off || !h.sound(frame) || h.index != index {
		return frameHead{}, nil, fmt.Errorf("wal: record %d in %s at offset %d fails its checksum", index, s.path, off)
	}
	return h, frame, nil
}

// find returns the position in l.segs of the segment holding index,
// which must be in the log.
func (l *Log) find(index uint64) int {
	i, _ := slices.BinarySearchFunc(l.segs, index, func(s *segment, index uint64) int {
		switch {
		case s.first > index:
			return 1
		case s.first+uint64(len(s.offs)) <= index:
			return -1
		}
		return 0
	})
	return i
}

// Append adds records numbered from first on, and returns once they are
// synced to disk. first must follow the last record, unless the log is
// empty, where it may be any index from 1 on. Each record is 1 to
// MaxRecord bytes, and an append at most 2^24-1 records. A failed write or
// sync makes the log fail every later call: what reached the disk is not
// known until it is opened again.
func (l *Log) Append(first uint64, recs [][]byte) error {
	if len(recs) == 0 {
		return nil
	}
	if len(recs) > maxAppend {
		return fmt.Errorf("wal: append of %d records (at most %d)", len(recs), maxAppend)
	}
	var size int64
	for _, r := range recs {
		if len(r) == 0 || len(r) > MaxRecord {
			return fmt.Errorf("wal: record of %d bytes (1 to %d)", len(r), MaxRecord)
		}
		size += frameSize(len(r))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return l.err
	}
	if first == 0 || (l.last != 0 && first != l.last+1) {
		return fmt.Errorf("wal: append at %d to a log that ends at %d", first, l.last)
	}
	// A frame holds its index less its segment's first, in 32 bits.
	if n := len(l.segs); n == 0 || l.segs[n-1].size >= l.segSize ||
		first+uint64(len(recs))-1-l.segs[n-1].first > math.MaxUint32 {
		if err := l.startSegment(first); err != nil {
			return err
		}
	}
	s := l.segs[len(l.segs)-1]
	// An append that grows the file changes its size, and its sync then
	// writes metadata too. So the file is written with zeros up to the
	// next multiple of l.grow along with the frames that pass its end,
	// and the appends into the zeros change nothing but data: a third
	// less time per sync on this repository's test machine
	// (docs/benchmarks-history.md).
	at := s.size + size
	alloc, ahead := s.alloc, int64(0)
	if at > alloc {
		alloc = (at + l.grow - 1) / l.grow * l.grow
		ahead = alloc - at
	}
	buf := make([]byte, size+ahead)
	offs := make([]int64, len(recs))
	at = 0
	for i, r := range recs {
		offs[i] = s.size + at
		putFrame(buf[at:], s.first, first+uint64(i), uint32(i), i == len(recs)-1, r)
		at += frameSize(len(r))
	}
	at += s.size
	if _, err := s.f.WriteAt(buf, s.size); err != nil {
		l.err = fmt.Errorf("%w: append to %s at offset %d: %w", ErrBroken, s.path, s.size, err)
		return l.err
	}
	if err := s.f.Datasync(); err != nil {
		l.err = fmt.Errorf("%w: sync %s: %w", ErrBroken, s.path, err)
		return l.err
	}
	s.offs = append(s.offs, offs...)
	s.size, s.alloc = at, alloc
	if l.first == 0 {
		l.first = first
	}
	l.last = first + uint64(len(recs)) - 1
	return nil
}

// startSegment creates the segment whose first record is first: its
// header and the zeros written ahead go to a file under a temporary name,
// synced, then renamed, and the rename synced, so that a segment under
// its own name always has its header on disk. A file that cannot be
// written or renamed changes nothing, and the append may be tried again;
// a directory that cannot be synced breaks the log, as a failed removal
// does (removeSegment): what its entries are on disk is not known.
func (l *Log) startSegment(first uint64) error {
	path := segmentPath(l.dir, first)
	tmp := path + tmpSuffix
	f, err := l.fs.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("wal: new segment: %w", err)
	}
	alloc := (segHeader + l.grow - 1) / l.grow * l.grow
	buf := append(segmentHeader(first), zeros[:alloc-segHeader]...)
	_, err = f.WriteAt(buf, 0)
	if err == nil {
		err = f.Datasync()
	}
	if err == nil {
		err = l.fs.Rename(tmp, path)
	}
	if err != nil {
		f.Close()
		l.fs.Remove(tmp)
		return fmt.Errorf("wal: new segment %s: %w", path, err)
	}
	if err := l.syncDir(); err != nil {
		f.Close()
		l.fs.Remove(path)
		l.err = fmt.Errorf("%w: new segment %s: %w", ErrBroken, path, err)
		return l.err
	}
	l.segs = append(l.segs, &segment{first: first, path: path, f: f, size: segHeader, alloc: alloc})
	return l.setNewest(first)
}

// TruncateFront removes every record before index. An index past the
// last record empties the log, which then takes its next append at any
// index.
func (l *Log) TruncateFront(index uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return l.err
	}
	if l.first == 0 || index <= l.first {
		return nil
	}
	if index > l.last {
		return l.removeHead(len(l.segs))
	}
	keep := l.find(index)
	if err := l.removeHead(keep); err != nil {
		return err
	}
	l.first = index
	return nil
}

// TruncateBack removes every record after index. An index before the
// first record empties the log, which then takes its next append at any
// index.
//
// The record at index becomes the end of an append first (markEnd), so
// that Open, which cuts what follows the last end, keeps it; then later
// segments are deleted, newest first, and the one that holds index is
// cut to the end of its frame, each step synced. A crash midway leaves
// the removed records, all or some of the later segments' whole, sound
// after an end mark: Open keeps them, and no removed record comes back
// once TruncateBack has returned.
func (l *Log) TruncateBack(index uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return l.err
	}
	if l.first == 0 || index >= l.last {
		return nil
	}
	if index < l.first {
		return l.removeHead(len(l.segs))
	}
	keep := l.find(index)
	s := l.segs[keep]
	n := index - s.first + 1
	if n < uint64(len(s.offs)) {
		if err := l.markEnd(s, index); err != nil {
			return err
		}
	}
	// Newest first, so that a crash leaves the log contiguous, once the
	// segment that stays is recorded as the newest.
	if keep < len(l.segs)-1 {
		if err := l.setNewest(s.first); err != nil {
			return err
		}
	}
	for i := len(l.segs) - 1; i > keep; i-- {
		if err := l.removeSegment(i); err != nil {
			return err
		}
	}
	size := s.size
	if n < uint64(len(s.offs)) {
		size = s.offs[n]
	}
	if err := s.f.Truncate(size); err != nil {
		l.err = fmt.Errorf("%w: truncate %s at offset %d: %w", ErrBroken, s.path, size, err)
		return l.err
	}
	if err := s.f.Sync(); err != nil {
		l.err = fmt.Errorf("%w: sync %s: %w", ErrBroken, s.path, err)
		return l.err
	}
	s.offs, s.size, s.alloc = s.offs[:n], size, size
	l.last = index
	return nil
}

// markEnd sets the end mark of the frame of the record at index, in s,
// and syncs it, unless it has one. Only the checksum and the flags
// change: the first 5 bytes of a frame, which lie in one sector, as
// frames start at multiples of 8.
func (l *Log) markEnd(s *segment, index uint64) error {
	h, frame, err := s.readFrame(index)
	if err != nil {
		return err
	}
	if h.flags&flagEnd != 0 {
		return nil
	}
	frame[4] |= flagEnd
	binary.LittleEndian.PutUint32(frame, frameSum(index, frame[4:frameHeader+h.length]))
	off := s.offs[index-s.first]
	if _, err := s.f.WriteAt(frame[:5], off); err != nil {
		l.err = fmt.Errorf("%w: mark the end at record %d in %s at offset %d: %w", ErrBroken, index, s.path, off, err)
		return l.err
	}
	if err := s.f.Datasync(); err != nil {
		l.err = fmt.Errorf("%w: sync %s: %w", ErrBroken, s.path, err)
		return l.err
	}
	return nil
}

// removeHead deletes the first n segments, oldest first, so that a crash
// midway leaves the log contiguous. Removing every segment empties the
// log.
func (l *Log) removeHead(n int) error {
	all := n == len(l.segs)
	if all {
		if err := l.setNewest(0); err != nil {
			return err
		}
	}
	for range n {
		if err := l.removeSegment(0); err != nil {
			return err
		}
	}
	if all {
		l.first, l.last = 0, 0
		return nil
	}
	l.first = l.segs[0].first
	return nil
}

// removeSegment deletes l.segs[i], and makes its deletion durable before
// anything else changes: deleted segments that came back after a crash
// would leave a gap in the log, or, after a truncation from the tail,
// bring back the records it removed.
func (l *Log) removeSegment(i int) error {
	s := l.segs[i]
	if err := l.fs.Remove(s.path); err != nil {
		l.err = fmt.Errorf("%w: %w", ErrBroken, err)
		return l.err
	}
	s.f.Close()
	l.segs = slices.Delete(l.segs, i, i+1)
	if err := l.syncDir(); err != nil {
		l.err = fmt.Errorf("%w: %w", ErrBroken, err)
		return l.err
	}
	return nil
}

// Close closes the log's files. Appends are synced as they are made, so
// Close has nothing left to write.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if errors.Is(l.err, ErrClosed) {
		return nil
	}
	l.err = ErrClosed
	return l.closeFiles()
}

func (l *Log) closeFiles() error {
	var errs []error
	for _, s := range l.segs {
		errs = append(errs, s.f.Close())
	}
	l.segs = nil
	return errors.Join(errs...)
}

// syncDir makes the entries of the log's directory durable.
func (l *Log) syncDir() error {
	if err := l.fs.SyncDir(l.dir); err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	return nil
}
