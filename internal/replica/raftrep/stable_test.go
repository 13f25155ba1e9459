package raftrep

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/latchd/latch/internal/vfs"
	"github.com/latchd/latch/internal/vfs/crashfs"
)

// faultFS is a vfs.FS whose operations fail where fail says: fail is
// called with the operation's name ("rename", "syncdir", "remove", "open")
// and the path, and a non-nil error is returned in its place.
type faultFS struct {
	vfs.FS
	mu   sync.Mutex
	fail func(op, name string) error
}

func (f *faultFS) check(op, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail == nil {
		return nil
	}
	return f.fail(op, name)
}

func (f *faultFS) setFail(fail func(op, name string) error) {
	f.mu.Lock()
	f.fail = fail
	f.mu.Unlock()
}

func (f *faultFS) OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error) {
	if err := f.check("open", name); err != nil {
		return nil, err
	}
	return f.FS.OpenFile(name, flag, perm)
}

func (f *faultFS) Rename(oldpath, newpath string) error {
	if err := f.check("rename", newpath); err != nil {
		return err
	}
	return f.FS.Rename(oldpath, newpath)
}

func (f *faultFS) Remove(name string) error {
	if err := f.check("remove", name); err != nil {
		return err
	}
	return f.FS.Remove(name)
}

func (f *faultFS) SyncDir(name string) error {
	if err := f.check("syncdir", name); err != nil {
		return err
	}
	return f.FS.SyncDir(name)
}

var errInjected = errors.New("injected fault")

func TestStableRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stable")
	s, err := openStable(vfs.OS, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetUint64([]byte("CurrentTerm"), 7); err != nil {
		t.Fatal(err)
	}
	if err := s.Set([]byte("LastVoteCand"), []byte("n2")); err != nil {
		t.Fatal(err)
	}
	if err := s.SetUint64([]byte("CurrentTerm"), 8); err != nil {
		t.Fatal(err)
	}
	if err := s.Set([]byte("empty"), nil); err != nil {
		t.Fatal(err)
	}
	check := func(s *stableStore) {
		t.Helper()
		if v, err := s.GetUint64([]byte("CurrentTerm")); err != nil || v != 8 {
			t.Errorf("GetUint64(CurrentTerm) = %d, %v; want 8", v, err)
		}
		if v, err := s.Get([]byte("LastVoteCand")); err != nil || string(v) != "n2" {
			t.Errorf("Get(LastVoteCand) = %q, %v; want n2", v, err)
		}
		if v, err := s.Get([]byte("empty")); err != nil || len(v) != 0 {
			t.Errorf("Get(empty) = %q, %v; want empty", v, err)
		}
	}
	check(s)
	// The value returned is a copy, and so is the one stored.
	v, _ := s.Get([]byte("LastVoteCand"))
	v[0] = 'x'
	check(s)

	s2, err := openStable(vfs.OS, path)
	if err != nil {
		t.Fatal(err)
	}
	check(s2)
	if _, err := os.Stat(path + ".tmp"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s.tmp left behind: %v", path, err)
	}
}

func TestStableNotFound(t *testing.T) {
	s, err := openStable(vfs.OS, filepath.Join(t.TempDir(), "stable"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Set([]byte("a"), []byte("1")); err != nil {
		t.Fatal(err)
	}
	// hashicorp/raft compares the text, not the error.
	if _, err := s.Get([]byte("CurrentTerm")); err == nil || err.Error() != "not found" {
		t.Errorf("Get of a missing key: %v; want exactly \"not found\"", err)
	}
	if _, err := s.GetUint64([]byte("CurrentTerm")); err == nil || err.Error() != "not found" {
		t.Errorf("GetUint64 of a missing key: %v; want exactly \"not found\"", err)
	}
	// A value that is not 8 bytes is an error, but not "not found".
	if _, err := s.GetUint64([]byte("a")); err == nil || err.Error() == "not found" {
		t.Errorf("GetUint64 of a 1-byte value: %v; want an error other than not found", err)
	}
}

func TestStableMissingFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "stable")
	s, err := openStable(vfs.OS, path)
	if err != nil {
		t.Fatalf("missing file: %v; want an empty store", err)
	}
	if _, err := s.GetUint64([]byte("CurrentTerm")); err == nil || err.Error() != "not found" {
		t.Errorf("GetUint64 on an empty store: %v; want not found", err)
	}
	// Opening does not create the file; the first Set does.
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("open created %s: %v", path, err)
	}
}

func TestStableCorrupt(t *testing.T) {
	good := encodeStable(map[string][]byte{"CurrentTerm": binary.LittleEndian.AppendUint64(nil, 3), "LastVoteCand": []byte("n1")})
	// resum recomputes the checksum, for the damage that a checksum alone
	// would not tell.
	resum := func(b []byte) []byte {
		b = bytes.Clone(b)
		binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], castagnoli))
		return b
	}
	flip := func(i int) []byte {
		b := bytes.Clone(good)
		b[i] ^= 0x10
		return b
	}
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", []byte{}, "truncated"},
		{"truncated", good[:len(good)-3], "checksum"},
		{"short", good[:10], "truncated"},
		{"flipped value", flip(len(good) - 6), "checksum"},
		{"flipped checksum", flip(len(good) - 1), "checksum"},
		{"magic", resum(append([]byte("XTSS"), good[4:]...)), "not a stable store"},
		{"version", resum(func() []byte {
			b := bytes.Clone(good)
			binary.LittleEndian.PutUint32(b[4:], 2)
			return b
		}()), "format version 2"},
		{"trailing bytes", resum(append(append(bytes.Clone(good[:len(good)-4]), 0, 0, 0), 0, 0, 0, 0)), "after the last"},
		{"count too high", resum(func() []byte {
			b := bytes.Clone(good)
			binary.LittleEndian.PutUint32(b[8:], 3)
			return b
		}()), "runs past the end"},
		{"duplicate key", resum(func() []byte {
			b := bytes.Clone(good[:12])
			binary.LittleEndian.PutUint32(b[8:], 2)
			for range 2 {
				b = binary.LittleEndian.AppendUint32(b, 1)
				b = append(b, 'k')
				b = binary.LittleEndian.AppendUint32(b, 0)
			}
			return append(b, 0, 0, 0, 0)
		}()), "twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "stable")
			if err := os.WriteFile(path, tt.data, 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := openStable(vfs.OS, path)
			if err == nil {
				t.Fatal("opened a damaged stable store")
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q; want it to name %s and say %q", err, path, tt.want)
			}
		})
	}
}

// TestStableFailedWrite: a Set that fails leaves the values as they were,
// wherever it failed, and the next Set that succeeds writes them all.
func TestStableFailedWrite(t *testing.T) {
	for _, op := range []string{"open", "rename", "syncdir"} {
		t.Run(op, func(t *testing.T) {
			ffs := &faultFS{FS: vfs.OS}
			path := filepath.Join(t.TempDir(), "stable")
			s, err := openStable(ffs, path)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.SetUint64([]byte("CurrentTerm"), 1); err != nil {
				t.Fatal(err)
			}
			ffs.setFail(func(o, _ string) error {
				if o == op {
					return errInjected
				}
				return nil
			})
			err = s.SetUint64([]byte("CurrentTerm"), 2)
			if !errors.Is(err, errInjected) || !strings.Contains(err.Error(), path) {
				t.Fatalf("Set with a failing %s: %v; want the fault, naming %s", op, err, path)
			}
			if v, err := s.GetUint64([]byte("CurrentTerm")); err != nil || v != 1 {
				t.Errorf("after a failed Set: %d, %v; want the old 1", v, err)
			}
			ffs.setFail(nil)
			if err := s.Set([]byte("LastVoteCand"), []byte("n3")); err != nil {
				t.Fatal(err)
			}
			s2, err := openStable(vfs.OS, path)
			if err != nil {
				t.Fatal(err)
			}
			if v, err := s2.GetUint64([]byte("CurrentTerm")); err != nil || v != 1 {
				t.Errorf("reopened: CurrentTerm %d, %v; want 1", v, err)
			}
			if v, err := s2.Get([]byte("LastVoteCand")); err != nil || string(v) != "n3" {
				t.Errorf("reopened: LastVoteCand %q, %v; want n3", v, err)
			}
		})
	}
}

func TestStableConcurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stable")
	s, err := openStable(vfs.OS, path)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			key := []byte{'k', byte('0' + i)}
			for j := range 10 {
				if err := s.SetUint64(key, uint64(j)); err != nil {
					t.Error(err)
					return
				}
				if v, err := s.GetUint64(key); err != nil || v != uint64(j) {
					t.Errorf("%s: %d, %v; want %d", key, v, err, j)
				}
			}
		})
	}
	wg.Wait()
	s2, err := openStable(vfs.OS, path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		key := []byte{'k', byte('0' + i)}
		if v, err := s2.GetUint64(key); err != nil || v != 9 {
			t.Errorf("reopened %s: %d, %v; want 9", key, v, err)
		}
	}
}

// TestStableCrash cuts the power before each file operation of a run of
// Sets in turn: what the power loss leaves opens, and holds the last set
// acknowledged or the one being written, never a mix, never a damaged
// file.
func TestStableCrash(t *testing.T) {
	const path = "/data/stable"
	type state struct{ term, vote uint64 }
	// The Sets, a term and then a vote in it, and states[i], what the store
	// holds after the first i.
	type set struct {
		key string
		val uint64
	}
	var sets []set
	states := []state{{}}
	for term := uint64(1); term <= 4; term++ {
		sets = append(sets, set{"CurrentTerm", term}, set{"LastVoteTerm", term})
		states = append(states, state{term, states[len(states)-1].vote}, state{term, term})
	}
	read := func(s *stableStore) (x state) {
		x.term, _ = s.GetUint64([]byte("CurrentTerm"))
		x.vote, _ = s.GetUint64([]byte("LastVoteTerm"))
		return x
	}
	// run makes the Sets in turn and returns how many were acknowledged.
	run := func(fsys vfs.FS) int {
		if err := vfs.MkdirAll(fsys, "/data", 0o700); err != nil {
			return 0
		}
		s, err := openStable(fsys, path)
		if err != nil {
			return 0
		}
		for i, x := range sets {
			if err := s.SetUint64([]byte(x.key), x.val); err != nil {
				if got := read(s); got != states[i] {
					t.Errorf("after a failed Set: %v; want what it held, %v", got, states[i])
				}
				return i
			}
		}
		return len(sets)
	}
	if n := run(crashfs.New()); n != len(sets) {
		t.Fatalf("%d Sets acknowledged, want %d", n, len(sets))
	}
	var acked int
	crashfs.Cuts(func(fsys *crashfs.FS) { acked = run(fsys) }, func(k, ops int, fsys *crashfs.FS) {
		for seed, keep := range []float64{0, 0.5, 0.5, 0.5, 1} {
			c := fsys.CrashClone(rand.New(rand.NewPCG(uint64(k), uint64(seed))), keep)
			s, err := openStable(c, path)
			if err != nil {
				t.Fatalf("power cut before op %d of %d, after %d Sets, keep %v: %v", k, ops, acked, keep, err)
			}
			// What was acknowledged, or what was being written.
			got := read(s)
			if got != states[acked] && (acked == len(sets) || got != states[acked+1]) {
				t.Fatalf("power cut before op %d of %d, after %d Sets, keep %v: the store holds %v; want %v or the next", k, ops, acked, keep, got, states[acked])
			}
		}
	})
}
