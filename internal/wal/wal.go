package wal

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
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

const (
	frameHeader = 8
	segSuffix   = ".seg"
	// growBy is how far ahead of its frames a segment's file is written
	// with zeros (see Append).
	growBy = 1 << 20
)

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
	first uint64   // the index of its first record, from its name
	f     vfs.File // open for reading and writing
	offs  []int64  // offs[i] is where record first+i's frame starts
	size  int64    // the end of its last whole frame
	alloc int64    // the file's size: size, then zeros
}

// Open opens the log in dir, creating the directory if it does not exist,
// and cuts off a torn tail left by a crash (see the package doc).
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
	firsts, err := listSegments(l.fs, dir)
	if err != nil {
		return nil, err
	}
	for i, first := range firsts {
		s, err := openSegment(l.fs, dir, first, i == len(firsts)-1)
		if err != nil {
			l.closeFiles()
			return nil, err
		}
		if l.last != 0 && len(s.offs) > 0 && first != l.last+1 {
			s.f.Close()
			l.closeFiles()
			return nil, fmt.Errorf("wal: segment %s starts at %d, after a segment that ends at %d", s.f.Name(), first, l.last)
		}
		l.segs = append(l.segs, s)
		if len(s.offs) > 0 {
			if l.first == 0 {
				l.first = first
			}
			l.last = s.first + uint64(len(s.offs)) - 1
		}
	}
	// A crash between creating a segment and syncing its first append
	// leaves it empty; an empty segment takes nothing but the next index.
	for len(l.segs) > 0 && len(l.segs[len(l.segs)-1].offs) == 0 {
		if err := l.removeSegment(len(l.segs) - 1); err != nil {
			l.closeFiles()
			return nil, err
		}
	}
	for _, s := range l.segs {
		if len(s.offs) == 0 {
			l.closeFiles()
			return nil, fmt.Errorf("wal: segment %s is empty, and not the last", s.f.Name())
		}
	}
	if len(l.segs) == 0 {
		l.first, l.last = 0, 0
	}
	return l, nil
}

// listSegments returns the first indexes of dir's segments, in order.
func listSegments(fsys vfs.FS, dir string) ([]uint64, error) {
	names, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	var firsts []uint64
	for _, e := range names {
		name, ok := strings.CutSuffix(e, segSuffix)
		if !ok || len(name) != 20 {
			continue
		}
		first, err := strconv.ParseUint(name, 10, 64)
		if err != nil || first == 0 {
			continue
		}
		firsts = append(firsts, first)
	}
	slices.Sort(firsts)
	return firsts, nil
}

func segmentPath(dir string, first uint64) string {
	return filepath.Join(dir, fmt.Sprintf("%020d%s", first, segSuffix))
}

// openSegment reads a segment's frames. After the last good frame comes
// nothing, or zeros (written ahead by Append), or, in the last segment
// only, the torn tail of an append a crash cut short, which is cut off;
// anything else is damage, and an error.
func openSegment(fsys vfs.FS, dir string, first uint64, last bool) (*segment, error) {
	f, err := fsys.OpenFile(segmentPath(dir, first), os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	s := &segment{first: first, f: f}
	fail := func(err error) (*segment, error) {
		f.Close()
		return nil, fmt.Errorf("wal: segment %s: %w", f.Name(), err)
	}
	fsize, err := f.Size()
	if err != nil {
		return fail(err)
	}
	why, err := s.scan(fsize)
	if err != nil {
		return fail(err)
	}
	if why == "" {
		s.alloc = s.size
		return s, nil
	}
	zero, err := zeroFrom(f, s.size)
	if err != nil {
		return fail(err)
	}
	if zero {
		s.alloc = fsize
		return s, nil
	}
	if !last {
		return fail(fmt.Errorf("damaged at offset %d: %s", s.size, why))
	}
	torn, err := tornFrame(f, s.size, fsize)
	if err != nil {
		return fail(err)
	}
	if !torn {
		return fail(fmt.Errorf("damaged at offset %d (%s), where a crash leaves no such frame; the records after it were acknowledged", s.size, why))
	}
	if err := f.Truncate(s.size); err != nil {
		return fail(fmt.Errorf("cut the torn tail: %w", err))
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	s.alloc = s.size
	return s, nil
}

// sectorSize is the unit a disk writes whole or not at all.
const sectorSize = 512

// tornFrame reports whether the bad frame at off, in a file of fsize
// bytes, is what a crash during its append leaves: a frame that runs past
// the end of the file, or one whose bytes in some sector are all zeros
// (that sector of the append never reached the disk, and the zeros
// written ahead show through). A frame damaged otherwise was written
// whole, and acknowledged.
func tornFrame(f vfs.File, off, fsize int64) (bool, error) {
	var hdr [frameHeader]byte
	if off+frameHeader > fsize {
		return true, nil
	}
	if _, err := f.ReadAt(hdr[:], off); err != nil {
		return false, err
	}
	end := off + frameHeader
	if n := int64(binary.LittleEndian.Uint32(hdr[0:4])); n > 0 && n <= MaxRecord {
		end += n
	}
	if end > fsize {
		return true, nil
	}
	buf := make([]byte, sectorSize)
	for at := off; at < end; {
		piece := buf[:min(end, (at/sectorSize+1)*sectorSize)-at]
		if _, err := f.ReadAt(piece, at); err != nil {
			return false, err
		}
		if !slices.ContainsFunc(piece, func(b byte) bool { return b != 0 }) {
			return true, nil
		}
		at += int64(len(piece))
	}
	return false, nil
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

// scan reads the segment's frames from the start, recording their
// offsets and the end of the last good one (s.size), and says why the
// next one is not good ("" at the end of the file). Zeros after the
// frames are such a bad frame. A failed read is an error.
func (s *segment) scan(fsize int64) (string, error) {
	r := bufio.NewReaderSize(io.NewSectionReader(s.f, 0, fsize), 1<<16)
	var hdr [frameHeader]byte
	var buf []byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			switch err {
			case io.EOF:
				return "", nil
			case io.ErrUnexpectedEOF:
				return "frame header cut short", nil
			}
			return "", err
		}
		n := int64(binary.LittleEndian.Uint32(hdr[0:4]))
		if n == 0 || n > MaxRecord || s.size+frameHeader+n > fsize {
			return fmt.Sprintf("bad frame size %d", n), nil
		}
		buf = slices.Grow(buf[:0], int(n))[:n]
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err // within the file's size: a failed read
		}
		if crc32.Checksum(buf, crcTable) != binary.LittleEndian.Uint32(hdr[4:8]) {
			return "checksum mismatch", nil
		}
		s.offs = append(s.offs, s.size)
		s.size += frameHeader + n
	}
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
	i := index - s.first
	off, end := s.offs[i], s.size
	if int(i)+1 < len(s.offs) {
		end = s.offs[i+1]
	}
	frame := make([]byte, end-off)
	if _, err := s.f.ReadAt(frame, off); err != nil {
		return nil, fmt.Errorf("wal: read record %d: %w", index, err)
	}
	payload := frame[frameHeader:]
	if crc32.Checksum(payload, crcTable) != binary.LittleEndian.Uint32(frame[4:8]) {
		return nil, fmt.Errorf("wal: record %d in %s fails its checksum", index, s.f.Name())
	}
	return payload, nil
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
// MaxRecord bytes. A failed write or sync makes the log fail every later
// call: what reached the disk is not known until it is opened again.
func (l *Log) Append(first uint64, recs [][]byte) error {
	if len(recs) == 0 {
		return nil
	}
	size := 0
	for _, r := range recs {
		if len(r) == 0 || len(r) > MaxRecord {
			return fmt.Errorf("wal: record of %d bytes (1 to %d)", len(r), MaxRecord)
		}
		size += frameHeader + len(r)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return l.err
	}
	if first == 0 || (l.last != 0 && first != l.last+1) {
		return fmt.Errorf("wal: append at %d to a log that ends at %d", first, l.last)
	}
	if len(l.segs) == 0 || l.segs[len(l.segs)-1].size >= l.segSize {
		if err := l.startSegment(first); err != nil {
			return err
		}
	}
	s := l.segs[len(l.segs)-1]
	buf := make([]byte, 0, size)
	offs := make([]int64, 0, len(recs))
	at := s.size
	for _, r := range recs {
		offs = append(offs, at)
		buf = binary.LittleEndian.AppendUint32(buf, uint32(len(r)))
		buf = binary.LittleEndian.AppendUint32(buf, crc32.Checksum(r, crcTable))
		buf = append(buf, r...)
		at += frameHeader + int64(len(r))
	}
	// An append that grows the file changes its size, and its sync then
	// writes metadata too. So the file is written with zeros up to the
	// next multiple of l.grow along with the frames that pass its end,
	// and the appends into the zeros change nothing but data: a third
	// less time per sync on this repository's test machine
	// (docs/benchmarks.md).
	alloc := s.alloc
	if at > alloc {
		alloc = (at + l.grow - 1) / l.grow * l.grow
		buf = append(buf, zeros[:alloc-at]...)
	}
	if _, err := s.f.WriteAt(buf, s.size); err != nil {
		l.err = fmt.Errorf("%w: append to %s: %w", ErrBroken, s.f.Name(), err)
		return l.err
	}
	if err := s.f.Datasync(); err != nil {
		l.err = fmt.Errorf("%w: sync %s: %w", ErrBroken, s.f.Name(), err)
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

// startSegment creates the segment whose first record is first, and
// makes its name durable before anything is written to it. A file that
// cannot be created changes nothing, and the append may be tried again; a
// directory that cannot be synced breaks the log, as a failed removal
// does (removeSegment): what its entries are on disk is not known.
func (l *Log) startSegment(first uint64) error {
	f, err := l.fs.OpenFile(segmentPath(l.dir, first), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("wal: new segment: %w", err)
	}
	if err := l.syncDir(); err != nil {
		f.Close()
		l.fs.Remove(f.Name())
		l.err = fmt.Errorf("%w: new segment: %w", ErrBroken, err)
		return l.err
	}
	l.segs = append(l.segs, &segment{first: first, f: f})
	return nil
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
	// Newest first, so that a crash leaves the log contiguous.
	for i := len(l.segs) - 1; i > keep; i-- {
		if err := l.removeSegment(i); err != nil {
			return err
		}
	}
	s := l.segs[keep]
	n := index - s.first + 1
	size := s.size
	if n < uint64(len(s.offs)) {
		size = s.offs[n]
	}
	if err := s.f.Truncate(size); err != nil {
		l.err = fmt.Errorf("%w: truncate %s: %w", ErrBroken, s.f.Name(), err)
		return l.err
	}
	if err := s.f.Sync(); err != nil {
		l.err = fmt.Errorf("%w: sync %s: %w", ErrBroken, s.f.Name(), err)
		return l.err
	}
	s.offs, s.size, s.alloc = s.offs[:n], size, size
	l.last = index
	return nil
}

// removeHead deletes the first n segments, oldest first, so that a crash
// midway leaves the log contiguous. Removing every segment empties the
// log.
func (l *Log) removeHead(n int) error {
	all := n == len(l.segs)
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
	if err := l.fs.Remove(s.f.Name()); err != nil {
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
