package raftrep

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/latchd/latch/internal/vfs"
	"github.com/latchd/latch/internal/vfs/crashfs"
)

// TestTokenOffset: the offset a restore left is read back; a damaged
// file is an error that says what it is, never a silent 0.
func TestTokenOffset(t *testing.T) {
	tests := []struct {
		name    string
		content string // "" : no file
		want    int64
		wantErr string
	}{
		{"no file", "", 0, ""},
		{"offset", "token-offset 3600000000042\n", 3600000000042, ""},
		{"garbage", "tokn-offset 5\n", 0, "is damaged"},
		{"negative", "token-offset -5\n", 0, "is damaged"},
		{"empty", "\n", 0, "is damaged"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if tt.content != "" {
				if err := vfs.WriteFile(vfs.OS, filepath.Join(dir, restoredFile), []byte(tt.content)); err != nil {
					t.Fatal(err)
				}
			}
			got, err := TokenOffset(dir)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("TokenOffset = %d, %v; want an error saying %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("TokenOffset = %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

// TestSeedDirPowerCut cuts the power before each file operation of
// SeedDir in turn: what is left is either a whole seeded dir, its
// snapshot with its token offset, or a dir without a snapshot, which a
// second SeedDir seeds. Never a state without its offset: that node would
// seed its token counter from its clock alone. Once SeedDir returned, the
// dir holds the seeded state whatever the power loss.
func TestSeedDirPowerCut(t *testing.T) {
	const dir = "/n1"
	state := []byte("the state")
	seed := func(fsys vfs.FS) Seed {
		return Seed{Dir: dir, FS: fsys, ID: "n1", Peers: []Peer{{ID: "n1", Addr: "a:1"}, {ID: "n2", Addr: "b:1"}},
			Index: 42, Stamp: 7, State: state, TokenOffset: 1234}
	}
	want := append(binary.AppendVarint(nil, 7), state...)
	// snapshots returns the snapshots that dir holds on fsys, read.
	snapshots := func(fsys vfs.FS, where string) [][]byte {
		s, err := openSnapshots(fsys, filepath.Join(dir, snapDir), 2, nil)
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		list, err := s.List()
		if err != nil {
			t.Fatalf("%s: List: %v", where, err)
		}
		var out [][]byte
		for _, m := range list {
			if m.Index != 42 || m.Term != 1 || len(m.Configuration.Servers) != 2 {
				t.Fatalf("%s: snapshot %+v", where, m)
			}
			_, rc, err := s.Open(m.ID)
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			b, err := io.ReadAll(rc)
			rc.Close()
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			out = append(out, b)
		}
		return out
	}
	var acked bool
	crashfs.Cuts(func(fsys *crashfs.FS) { acked = SeedDir(seed(fsys)) == nil }, func(k, ops int, fsys *crashfs.FS) {
		for i, keep := range []float64{0, 0.5, 0.5, 1} {
			c := fsys.CrashClone(rand.New(rand.NewPCG(uint64(k), uint64(i))), keep)
			where := fmt.Sprintf("power cut before op %d of %d (SeedDir returned: %v), keep %v", k, ops, acked, keep)
			snaps := snapshots(c, where)
			if acked && len(snaps) != 1 {
				t.Fatalf("%s: %d snapshots, want 1", where, len(snaps))
			}
			if len(snaps) == 0 {
				if err := SeedDir(seed(c)); err != nil {
					t.Fatalf("%s: seeding again: %v", where, err)
				}
				snaps = snapshots(c, where+", seeded again")
			}
			if len(snaps) != 1 || !bytes.Equal(snaps[0], want) {
				t.Fatalf("%s: snapshots %q, want one holding %q", where, snaps, want)
			}
			if off, err := tokenOffset(c, dir); err != nil || off != 1234 {
				t.Fatalf("%s: token offset %d, %v; want 1234", where, off, err)
			}
		}
	})
}
