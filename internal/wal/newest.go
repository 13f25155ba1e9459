package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/latchd/latch/internal/vfs"
)

// A log's directory holds, beside its segments, the file newestFile: the
// first index of its newest segment, so that Open can tell a log that
// ends where its last segment ends from one whose last segment is gone
// (a file deleted by hand, a directory entry a disk lost), where the
// records it held were acknowledged. It is written whole or not at all
// (vfs.WriteFile), and kept to one rule: the segment it names exists, or
// a newer one does. So it is written after a new segment's creation is
// durable (startSegment), and before segments are removed from the tail
// (TruncateBack, and removeHead when it empties the log), once every
// DefaultSegmentSize of appends at most.
//
//	magic   8 bytes, "latchnew"
//	first   uint64, little endian: the newest segment's first index, 0 for none
//	version uint32, little endian: formatVersion
//	crc     uint32, little endian: CRC-32C of the 20 bytes before it
const newestFile = "newest"

var newestMagic = [8]byte{'l', 'a', 't', 'c', 'h', 'n', 'e', 'w'}

const newestSize = 24

// readNewest returns the first index that dir's newest file names: 0 when
// it names none, or when there is no such file (a log whose first
// segment's creation a crash interrupted). A file that is not one is an
// error.
func readNewest(fsys vfs.FS, dir string) (uint64, error) {
	path := filepath.Join(dir, newestFile)
	b, err := readSynced(fsys, path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("wal: %w", err)
	}
	if len(b) != newestSize || [8]byte(b[:8]) != newestMagic ||
		binary.LittleEndian.Uint32(b[16:20]) != formatVersion ||
		crc32.Checksum(b[:20], crcTable) != binary.LittleEndian.Uint32(b[20:24]) {
		return 0, fmt.Errorf("wal: %s: damaged at offset 0: not a log's record of its newest segment of format %d (%d bytes)", path, formatVersion, len(b))
	}
	return binary.LittleEndian.Uint64(b[8:16]), nil
}

// setNewest records first as the first index of the log's newest segment.
// A failure breaks the log: which record the disk holds is not known.
func (l *Log) setNewest(first uint64) error {
	b := make([]byte, 0, newestSize)
	b = append(b, newestMagic[:]...)
	b = binary.LittleEndian.AppendUint64(b, first)
	b = binary.LittleEndian.AppendUint32(b, formatVersion)
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crcTable))
	if err := vfs.WriteFile(l.fs, filepath.Join(l.dir, newestFile), b); err != nil {
		l.err = fmt.Errorf("%w: record the newest segment: %w", ErrBroken, err)
		return l.err
	}
	return nil
}

// checkNewest refuses a log whose newest segment, as newestFile names it,
// is gone: firsts are the first indexes of the segments there, in order.
func checkNewest(fsys vfs.FS, dir string, firsts []uint64) error {
	newest, err := readNewest(fsys, dir)
	if err != nil || newest == 0 {
		return err
	}
	if len(firsts) == 0 || firsts[len(firsts)-1] < newest {
		end := "no segment"
		if len(firsts) > 0 {
			end = filepath.Base(segmentPath(dir, firsts[len(firsts)-1]))
		}
		return fmt.Errorf("wal: %s: its newest segment, %s, is gone, with records that were acknowledged: %s names it at offset 8, and the log ends with %s",
			dir, filepath.Base(segmentPath(dir, newest)), filepath.Join(dir, newestFile), end)
	}
	return nil
}

// readSynced returns the contents of the file path once they are synced:
// what a killed process wrote and did not sync is not trusted until it is
// durable (see Open).
func readSynced(fsys vfs.FS, path string) ([]byte, error) {
	f, err := fsys.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return nil, err
	}
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	b := make([]byte, min(size, newestSize+1))
	n, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b[:n], nil
}
