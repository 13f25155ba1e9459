package wal

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/latchd/latch/internal/vfs"
	"github.com/latchd/latch/internal/vfs/crashfs"
)

// BenchmarkAppend appends batches of records of 200 bytes, each batch
// one append (one fdatasync: the Raft replicator's StoreLogs is one), into
// segments small enough that rolls are counted too. The nosync runs skip
// the syncs, to show the CPU an append costs apart from the disk.
func BenchmarkAppend(b *testing.B) {
	for _, sync := range []bool{true, false} {
		for _, n := range []int{1, 16, 256} {
			name := fmt.Sprintf("batch=%d", n)
			var fsys vfs.FS = vfs.OS
			if !sync {
				name += "/nosync"
				fsys = crashfs.NoSync(vfs.OS)
			}
			b.Run(name, func(b *testing.B) {
				l, err := Open(b.TempDir(), Options{SegmentSize: 4 << 20, FS: fsys})
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				batch := make([][]byte, n)
				for i := range batch {
					batch[i] = bytes.Repeat([]byte{byte(i)}, 200)
				}
				b.SetBytes(int64(n * 200))
				next := uint64(1)
				for b.Loop() {
					if err := l.Append(next, batch); err != nil {
						b.Fatal(err)
					}
					next += uint64(n)
				}
			})
		}
	}
}
