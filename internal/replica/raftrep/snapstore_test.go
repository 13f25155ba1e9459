package raftrep

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/latchd/latch/internal/vfs"
	"github.com/latchd/latch/internal/vfs/crashfs"
)

var testConf = raft.Configuration{Servers: []raft.Server{
	{Suffrage: raft.Voter, ID: "n1", Address: "10.0.0.1:7000"},
	{Suffrage: raft.Voter, ID: "n2", Address: "10.0.0.2:7000"},
	{Suffrage: raft.Nonvoter, ID: "n3", Address: "10.0.0.3:7000"},
}}

// logBuffer is a slog.Logger's output, for tests that look for a warning.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// testSnaps opens a snapshot store in dir on fsys whose clock moves a
// millisecond at every Create, so that names are told apart by their time.
func testSnaps(t *testing.T, fsys vfs.FS, dir string, retain int, logs io.Writer) *snapshotStore {
	t.Helper()
	var lg *slog.Logger
	if logs != nil {
		lg = slog.New(slog.NewTextHandler(logs, nil))
	}
	s, err := openSnapshots(fsys, dir, retain, lg)
	if err != nil {
		t.Fatal(err)
	}
	ms := int64(1_700_000_000_000)
	s.now = func() time.Time { ms++; return time.UnixMilli(ms) }
	return s
}

// writeSnap takes a snapshot of state at index and term, written in a few
// pieces, and returns its ID.
func writeSnap(t *testing.T, s *snapshotStore, index, term uint64, state []byte) string {
	t.Helper()
	sink, err := s.Create(1, index, term, testConf, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	for len(state) > 0 {
		n := min(len(state), 100_000)
		if _, err := sink.Write(state[:n]); err != nil {
			t.Fatal(err)
		}
		state = state[n:]
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	return sink.ID()
}

func readSnap(t *testing.T, s *snapshotStore, id string) (*raft.SnapshotMeta, []byte) {
	t.Helper()
	m, rc, err := s.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return m, b
}

// dirNames returns the names in dir.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	names, err := vfs.OS.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func randomState(n int) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{1})
	r.Read(b)
	return b
}

func TestSnapRoundTrip(t *testing.T) {
	for _, size := range []int{0, 1, 300_000, 1 << 20} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "snapshots") // Create makes it
			s := testSnaps(t, vfs.OS, dir, 2, nil)
			state := randomState(size)
			id := writeSnap(t, s, 42, 5, state)
			if !strings.HasPrefix(id, "5-42-") {
				t.Errorf("ID %s; want 5-42-<unixmilli>", id)
			}
			want := &raft.SnapshotMeta{Version: 1, ID: id, Index: 42, Term: 5, Configuration: testConf, ConfigurationIndex: 3, Size: int64(size)}
			list, err := s.List()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]*raft.SnapshotMeta{want}, list); diff != "" {
				t.Errorf("List (-want +got):\n%s", diff)
			}
			m, got := readSnap(t, s, id)
			if diff := cmp.Diff(want, m); diff != "" {
				t.Errorf("Open's meta (-want +got):\n%s", diff)
			}
			if !bytes.Equal(got, state) {
				t.Errorf("Open read %d bytes, not the %d written", len(got), len(state))
			}
			if names := dirNames(t, dir); !slices.Equal(names, []string{id + ".snap"}) {
				t.Errorf("dir holds %q; want only %s.snap", names, id)
			}
			// The trailer's checksum covers all before it, meta included.
			b, _ := os.ReadFile(filepath.Join(dir, id+".snap"))
			end := len(b) - snapTrailerLen
			if sum := binary.LittleEndian.Uint32(b[end+8:]); sum != crc32.Checksum(b[:end], castagnoli) {
				t.Errorf("trailer's checksum %08x; the file before it sums to %08x", sum, crc32.Checksum(b[:end], castagnoli))
			}
			// And a reopened store finds it.
			s2 := testSnaps(t, vfs.OS, dir, 2, nil)
			if list, err := s2.List(); err != nil || len(list) != 1 || list[0].ID != id {
				t.Errorf("reopened: List = %v, %v; want %s", list, err, id)
			}
		})
	}
}

// TestSnapSinkCloseTwice: an FSM's Persist that closes the sink itself is
// followed by Raft's own Close; a Cancel after Close must not remove the
// snapshot.
func TestSnapSinkCloseTwice(t *testing.T) {
	dir := t.TempDir()
	s := testSnaps(t, vfs.OS, dir, 2, nil)
	sink, err := s.Create(1, 7, 1, testConf, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	sink.Write([]byte("state"))
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := sink.Cancel(); err != nil {
		t.Errorf("Cancel after Close: %v", err)
	}
	if _, err := sink.Write([]byte("more")); err == nil {
		t.Error("Write after Close succeeded")
	}
	if _, got := readSnap(t, s, sink.ID()); string(got) != "state" {
		t.Errorf("state %q after Close, Close, Cancel; want %q", got, "state")
	}
}

func TestSnapCancel(t *testing.T) {
	dir := t.TempDir()
	s := testSnaps(t, vfs.OS, dir, 2, nil)
	sink, err := s.Create(1, 7, 1, testConf, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sink.Write(randomState(1000)); err != nil {
		t.Fatal(err)
	}
	if err := sink.Cancel(); err != nil {
		t.Fatal(err)
	}
	if err := sink.Cancel(); err != nil {
		t.Errorf("second Cancel: %v", err)
	}
	if err := sink.Close(); err == nil {
		t.Error("Close after Cancel succeeded")
	}
	if names := dirNames(t, dir); len(names) != 0 {
		t.Errorf("Cancel left %q", names)
	}
	if list, err := s.List(); err != nil || len(list) != 0 {
		t.Errorf("List after Cancel: %v, %v; want none", list, err)
	}
}

func TestSnapRetain(t *testing.T) {
	dir := t.TempDir()
	s := testSnaps(t, vfs.OS, dir, 2, nil)
	var ids []string
	for i := range 4 {
		ids = append(ids, writeSnap(t, s, uint64(10*(i+1)), 1, []byte{byte(i)}))
	}
	want := []string{ids[2] + ".snap", ids[3] + ".snap"}
	if names := dirNames(t, dir); !slices.Equal(names, want) {
		t.Errorf("dir holds %q; want the newest two, %q", names, want)
	}
	list, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	if got := metaIDs(list); !slices.Equal(got, []string{ids[3], ids[2]}) {
		t.Errorf("List: %q; want %q", got, []string{ids[3], ids[2]})
	}
}

func metaIDs(ms []*raft.SnapshotMeta) []string {
	var ids []string
	for _, m := range ms {
		ids = append(ids, m.ID)
	}
	return ids
}

func TestSnapListOrder(t *testing.T) {
	s := testSnaps(t, vfs.OS, t.TempDir(), 10, nil)
	// Taken in this order; listed by index, then term, then time.
	taken := []struct{ index, term uint64 }{{20, 2}, {30, 2}, {10, 1}, {30, 3}, {20, 2}}
	var ids []string
	for _, x := range taken {
		ids = append(ids, writeSnap(t, s, x.index, x.term, nil))
	}
	list, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{ids[3], ids[1], ids[4], ids[0], ids[2]}
	if got := metaIDs(list); !slices.Equal(got, want) {
		t.Errorf("List: %q; want %q", got, want)
	}
}

func TestSnapTmpRemovedAtOpen(t *testing.T) {
	dir := t.TempDir()
	s := testSnaps(t, vfs.OS, dir, 2, nil)
	done := writeSnap(t, s, 5, 1, []byte("done"))
	sink, err := s.Create(1, 9, 1, testConf, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	sink.Write([]byte("never finished"))
	// The node stops here: the sink is neither closed nor cancelled.
	if err := os.WriteFile(filepath.Join(dir, "other"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var logs logBuffer
	s2 := testSnaps(t, vfs.OS, dir, 2, &logs)
	want := []string{done + ".snap", "other"}
	if names := dirNames(t, dir); !slices.Equal(names, want) {
		t.Errorf("after open the dir holds %q; want %q", names, want)
	}
	if !strings.Contains(logs.String(), sink.ID()+".snap.tmp") {
		t.Errorf("open did not log the removal of %s.snap.tmp: %s", sink.ID(), logs.String())
	}
	if list, err := s2.List(); err != nil || !slices.Equal(metaIDs(list), []string{done}) {
		t.Errorf("List: %v, %v; want %s", list, err, done)
	}
}

// damage changes the file of snapshot id.
func damage(t *testing.T, dir, id string, f func([]byte) []byte) {
	t.Helper()
	path := filepath.Join(dir, id+".snap")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, f(b), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestSnapCorrupt(t *testing.T) {
	state := randomState(5000)
	tests := []struct {
		name   string
		damage func([]byte) []byte
		want   string
		listed bool // List still reads its head
	}{
		{"flipped state byte", func(b []byte) []byte { b[len(b)-snapTrailerLen-2000] ^= 1; return b }, "checksum mismatch", true},
		{"flipped last state byte", func(b []byte) []byte { b[len(b)-snapTrailerLen-1] ^= 0x80; return b }, "checksum mismatch", true},
		{"flipped checksum", func(b []byte) []byte { b[len(b)-1] ^= 1; return b }, "checksum mismatch", true},
		{"truncated by a byte", func(b []byte) []byte { return b[:len(b)-1] }, "truncated", true},
		{"truncated trailer", func(b []byte) []byte { return b[:len(b)-snapTrailerLen] }, "truncated", true},
		{"truncated state", func(b []byte) []byte { return b[:len(b)-3000] }, "truncated", true},
		{"truncated meta", func(b []byte) []byte { return b[:30] }, "truncated", false},
		{"empty", func(b []byte) []byte { return nil }, "truncated", false},
		{"extended", func(b []byte) []byte { return append(b, 0) }, "truncated or overwritten", true},
		{"trailer's length", func(b []byte) []byte { b[len(b)-snapTrailerLen] ^= 1; return b }, "trailer gives a state of", true},
		{"flipped meta byte", func(b []byte) []byte { b[20] ^= 1; return b }, "meta checksum mismatch", false},
		{"magic", func(b []byte) []byte { b[0] = 'X'; return b }, "not a snapshot", false},
		{"version", func(b []byte) []byte { b[8] = 9; return b }, "format version 9", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s := testSnaps(t, vfs.OS, dir, 2, nil)
			id := writeSnap(t, s, 10, 2, state)
			damage(t, dir, id, tt.damage)
			path := filepath.Join(dir, id+".snap")
			_, rc, err := s.Open(id)
			if err == nil {
				rc.Close()
				t.Fatal("opened a damaged snapshot")
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Open: %q; want it to name %s and say %q", err, path, tt.want)
			}
			list, err := s.List()
			if tt.listed {
				if err != nil || len(list) != 1 {
					t.Errorf("List: %v, %v; want the snapshot, whose head is whole", list, err)
				}
			} else if err == nil {
				t.Errorf("List: %v; want an error: its only snapshot is unreadable", list)
			}
		})
	}
}

// TestSnapUnreadableSkipped: List skips, with a warning, a snapshot whose
// head is unreadable, and lists the others.
func TestSnapUnreadableSkipped(t *testing.T) {
	dir := t.TempDir()
	var logs logBuffer
	s := testSnaps(t, vfs.OS, dir, 3, &logs)
	old := writeSnap(t, s, 10, 1, []byte("old"))
	bad := writeSnap(t, s, 20, 1, []byte("bad"))
	damage(t, dir, bad, func(b []byte) []byte { return b[:20] })
	// Not a snapshot's name: ignored, with a warning.
	if err := os.WriteFile(filepath.Join(dir, "x-1.snap"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	list, err := s.List()
	if err != nil || !slices.Equal(metaIDs(list), []string{old}) {
		t.Errorf("List: %v, %v; want %s alone", metaIDs(list), err, old)
	}
	for _, name := range []string{bad + ".snap", "x-1.snap"} {
		if !strings.Contains(logs.String(), name) {
			t.Errorf("no warning names %s: %s", name, logs.String())
		}
	}
	// A snapshot renamed: its name and meta disagree.
	if err := os.Rename(filepath.Join(dir, old+".snap"), filepath.Join(dir, "1-30-5.snap")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Open("1-30-5"); err == nil || !strings.Contains(err.Error(), "not of its name") {
		t.Errorf("Open of a renamed snapshot: %v; want its name refused", err)
	}
}

func TestSnapOpenBadID(t *testing.T) {
	dir := t.TempDir()
	s := testSnaps(t, vfs.OS, dir, 2, nil)
	for _, id := range []string{"", "../x", "1-2", "1-2-3/../4", "01-2-3", "1-2-3.snap", "1-2-3"} {
		if _, _, err := s.Open(id); err == nil {
			t.Errorf("Open(%q) succeeded", id)
		}
	}
}

func TestSnapFloor(t *testing.T) {
	type bounds struct{ first, last uint64 }
	tests := []struct {
		name    string
		floor   *bounds // nil: none set
		bad     []int   // indexes whose snapshot's head is unreadable
		want    []uint64
		wantErr string
	}{
		{name: "no floor", want: []uint64{30, 20, 10}},
		{name: "log from 1", floor: &bounds{1, 50}, want: []uint64{30, 20, 10}},
		{name: "log from 11", floor: &bounds{11, 50}, want: []uint64{30, 20, 10}},
		{name: "log from 12", floor: &bounds{12, 50}, want: []uint64{30, 20}},
		{name: "log from 31", floor: &bounds{31, 50}, want: []uint64{30}},
		{name: "log from 32", floor: &bounds{32, 50}, wantErr: "no snapshot reaches entry 31"},
		{name: "log behind the snapshots", floor: &bounds{5, 8}, want: []uint64{30, 20, 10}},
		{name: "empty log", floor: &bounds{0, 0}, want: []uint64{30}},
		{name: "empty log, last kept", floor: &bounds{0, 50}, want: []uint64{30}},
		{name: "empty log, first past last", floor: &bounds{51, 50}, want: []uint64{30}},
		{name: "empty log, newest unreadable", floor: &bounds{0, 0}, bad: []int{30}, wantErr: "none of the snapshots"},
		{name: "newest unreadable, log from 21", floor: &bounds{21, 50}, bad: []int{30}, want: []uint64{20}},
		{name: "newest unreadable, log from 22", floor: &bounds{22, 50}, bad: []int{30}, wantErr: "none of the snapshots"},
		{name: "no floor, all unreadable", bad: []int{10, 20, 30}, wantErr: "none of the snapshots"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s := testSnaps(t, vfs.OS, dir, 3, nil)
			for _, i := range []uint64{10, 20, 30} {
				id := writeSnap(t, s, i, 1, nil)
				if slices.Contains(tt.bad, int(i)) {
					damage(t, dir, id, func(b []byte) []byte { b[0] = 0; return b })
				}
			}
			if tt.floor != nil {
				s.SetFloor(func() (uint64, uint64, error) { return tt.floor.first, tt.floor.last, nil })
			}
			list, err := s.List()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), dir) {
					t.Errorf("List: %v, %v; want an error naming %s and saying %q", metaIDs(list), err, dir, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []uint64
			for _, m := range list {
				got = append(got, m.Index)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("List's indexes: %v; want %v", got, tt.want)
			}
		})
	}
	t.Run("no snapshots", func(t *testing.T) {
		for _, b := range []bounds{{0, 0}, {1, 5}, {2, 5}} {
			s := testSnaps(t, vfs.OS, t.TempDir(), 2, nil)
			s.SetFloor(func() (uint64, uint64, error) { return b.first, b.last, nil })
			list, err := s.List()
			if b.first > 1 {
				if err == nil || !strings.Contains(err.Error(), "no snapshot reaches") {
					t.Errorf("log from %d, no snapshot: %v, %v; want an error", b.first, list, err)
				}
			} else if err != nil || len(list) != 0 {
				t.Errorf("log %v, no snapshot: %v, %v; want none, no error", b, list, err)
			}
		}
	})
	t.Run("the floor's error", func(t *testing.T) {
		s := testSnaps(t, vfs.OS, t.TempDir(), 2, nil)
		writeSnap(t, s, 10, 1, nil)
		s.SetFloor(func() (uint64, uint64, error) { return 0, 0, errInjected })
		if _, err := s.List(); !errors.Is(err, errInjected) {
			t.Errorf("List: %v; want the floor's error", err)
		}
	})
}

// TestSnapFailedClose: a Close that fails before the rename leaves no
// snapshot, and a failed sync of the directory after it is an error.
func TestSnapFailedClose(t *testing.T) {
	for _, op := range []string{"rename", "syncdir"} {
		t.Run(op, func(t *testing.T) {
			dir := t.TempDir()
			ffs := &faultFS{FS: vfs.OS}
			s := testSnaps(t, ffs, dir, 2, nil)
			sink, err := s.Create(1, 7, 1, testConf, 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			sink.Write([]byte("state"))
			ffs.setFail(func(o, _ string) error {
				if o == op {
					return errInjected
				}
				return nil
			})
			err = sink.Close()
			if !errors.Is(err, errInjected) || !strings.Contains(err.Error(), sink.ID()) {
				t.Fatalf("Close with a failing %s: %v; want the fault, naming the snapshot", op, err)
			}
			if err2 := sink.Close(); err2 != err {
				t.Errorf("second Close: %v; want the first's error", err2)
			}
			if err := sink.Cancel(); err != nil {
				t.Errorf("Cancel after a failed Close: %v", err)
			}
			ffs.setFail(nil)
			names := dirNames(t, dir)
			switch op {
			case "rename":
				if len(names) != 0 {
					t.Errorf("a Close that failed left %q", names)
				}
			case "syncdir":
				// Renamed, whole and synced: it may or may not survive.
				if !slices.Equal(names, []string{sink.ID() + ".snap"}) {
					t.Errorf("dir holds %q; want %s.snap", names, sink.ID())
				}
			}
		})
	}
}

// TestSnapConcurrent lists and opens snapshots while others are taken and
// the old removed: List never fails, and Open either finds a whole
// snapshot or none (removed since it was listed).
func TestSnapConcurrent(t *testing.T) {
	dir := t.TempDir()
	s := testSnaps(t, vfs.OS, dir, 2, nil)
	writeSnap(t, s, 1, 1, []byte("1"))
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			list, err := s.List()
			if err != nil || len(list) == 0 {
				t.Errorf("List: %v, %v", metaIDs(list), err)
				return
			}
			m, rc, err := s.Open(list[0].ID)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				t.Errorf("Open: %v", err)
				return
			}
			b, err := io.ReadAll(rc)
			rc.Close()
			if err != nil || string(b) != fmt.Sprint(m.Index) {
				t.Errorf("snapshot %s: %q, %v; want %d", m.ID, b, err, m.Index)
			}
		}
	})
	for i := uint64(2); i <= 30; i++ {
		writeSnap(t, s, i, 1, fmt.Append(nil, i))
	}
	close(stop)
	wg.Wait()
	if names := dirNames(t, dir); len(names) != 2 {
		t.Errorf("dir holds %q; want 2 snapshots", names)
	}
}

// TestSnapCrash cuts the power before each file operation of taking
// snapshots in turn (retain 1, so that each removes the one before): what
// the power loss leaves opens with no unfinished file, lists at least one
// snapshot, the newest acknowledged or the one being taken, and every
// snapshot listed opens whole, holding its own state.
func TestSnapCrash(t *testing.T) {
	const dir = "/data/snapshots"
	// State of 3000 bytes and more, so that a write spans sectors and a
	// power loss can tear it.
	stateOf := func(index uint64) []byte { return bytes.Repeat([]byte{byte(index)}, 3000+int(index)*7) }
	indexes := []uint64{10, 20, 30}
	// run takes the snapshots in turn and returns the index of the last
	// one acknowledged (Close returned nil), 0 if none.
	run := func(fsys vfs.FS) (acked uint64) {
		s, err := openSnapshots(fsys, dir, 1, nil)
		if err != nil {
			return 0
		}
		for _, i := range indexes {
			sink, err := s.Create(1, i, 1, testConf, 1, nil)
			if err != nil {
				return acked
			}
			if _, err := sink.Write(stateOf(i)); err != nil {
				sink.Cancel()
				return acked
			}
			if sink.Close() != nil {
				return acked
			}
			acked = i
		}
		return acked
	}
	if acked := run(crashfs.New()); acked != 30 {
		t.Fatalf("acknowledged to %d, want 30", acked)
	}
	var acked uint64
	crashfs.Cuts(func(fsys *crashfs.FS) { acked = run(fsys) }, func(k, ops int, fsys *crashfs.FS) {
		for seed, keep := range []float64{0, 0.5, 0.5, 0.5, 1} {
			c := fsys.CrashClone(rand.New(rand.NewPCG(uint64(k), uint64(seed))), keep)
			where := fmt.Sprintf("power cut before op %d of %d, acknowledged to %d, keep %v", k, ops, acked, keep)
			var logs logBuffer
			s, err := openSnapshots(c, dir, 1, slog.New(slog.NewTextHandler(&logs, nil)))
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			if names, _ := c.ReadDir(dir); slices.ContainsFunc(names, func(n string) bool { return strings.HasSuffix(n, ".tmp") }) {
				t.Fatalf("%s: open left %q", where, names)
			}
			list, err := s.List()
			if err != nil {
				t.Fatalf("%s: List: %v", where, err)
			}
			if strings.Contains(logs.String(), "skipping") {
				t.Fatalf("%s: List skipped a snapshot: %s", where, logs.String())
			}
			if acked > 0 && (len(list) == 0 || list[0].Index < acked) {
				t.Fatalf("%s: List %q; want the snapshot at %d or a newer first", where, metaIDs(list), acked)
			}
			for _, m := range list {
				_, rc, err := s.Open(m.ID)
				if err != nil {
					t.Fatalf("%s: %v", where, err)
				}
				b, err := io.ReadAll(rc)
				rc.Close()
				if err != nil || !bytes.Equal(b, stateOf(m.Index)) {
					t.Fatalf("%s: snapshot %s holds %d bytes (%v), not its state", where, m.ID, len(b), err)
				}
			}
		}
	})
}

func TestCRCJoin(t *testing.T) {
	data := randomState(200_000)
	for _, split := range [][2]int{{0, 0}, {0, 10}, {10, 0}, {7, 100}, {100, 65536}, {3, 65537}, {1000, 199_000}} {
		a, b := data[:split[0]], data[split[0]:split[0]+split[1]]
		raw := crc32.Update(^uint32(0), castagnoli, b)
		want := crc32.Checksum(data[:len(a)+len(b)], castagnoli)
		if got := crcJoin(crc32.Checksum(a, castagnoli), raw, int64(len(b))); got != want {
			t.Errorf("crcJoin of %d and %d bytes: %08x; want %08x", len(a), len(b), got, want)
		}
	}
}

// countFSM is an FSM whose state is the entries it applied.
type countFSM struct {
	mu       sync.Mutex
	entries  []string
	restored int // how many entries the last Restore brought back
}

func (f *countFSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.entries = append(f.entries, string(l.Data))
	return nil
}

func (f *countFSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return countSnapshot(strings.Join(f.entries, "\n")), nil
}

func (f *countFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.entries = nil
	if len(b) > 0 {
		f.entries = strings.Split(string(b), "\n")
	}
	f.restored = len(f.entries)
	return nil
}

func (f *countFSM) state() ([]string, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.entries), f.restored
}

type countSnapshot string

// Persist closes the sink itself, as machine.go's does: Raft closes it
// again.
func (s countSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := io.WriteString(sink, string(s)); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (countSnapshot) Release() {}

// raftOnStores is a one-node Raft on the two stores in dir, and a log
// that outlives its nodes, as one on disk does.
type raftOnStores struct {
	t    *testing.T
	dir  string
	logs *raft.InmemStore
}

func newRaftOnStores(t *testing.T) *raftOnStores {
	return &raftOnStores{t: t, dir: t.TempDir(), logs: raft.NewInmemStore()}
}

func (n *raftOnStores) config() *raft.Config {
	c := raft.DefaultConfig()
	c.LocalID = "n1"
	c.HeartbeatTimeout = 50 * time.Millisecond
	c.ElectionTimeout = 50 * time.Millisecond
	c.LeaderLeaseTimeout = 50 * time.Millisecond
	c.CommitTimeout = 5 * time.Millisecond
	c.SnapshotThreshold = 1 << 30 // only the test's
	c.TrailingLogs = 2
	c.Logger = hclog.NewNullLogger()
	return c
}

func (n *raftOnStores) stable() *stableStore {
	n.t.Helper()
	stable, err := openStable(vfs.OS, filepath.Join(n.dir, "stable"))
	if err != nil {
		n.t.Fatal(err)
	}
	return stable
}

// start starts the node, bootstrapping it first if asked, and waits until
// it leads; it returns raft.NewRaft's error.
func (n *raftOnStores) start(bootstrap bool) (*raft.Raft, *countFSM, error) {
	t := n.t
	t.Helper()
	stable := n.stable()
	snaps := testSnaps(t, vfs.OS, filepath.Join(n.dir, "snapshots"), 2, nil)
	snaps.SetFloor(func() (uint64, uint64, error) {
		first, err := n.logs.FirstIndex()
		if err != nil {
			return 0, 0, err
		}
		last, err := n.logs.LastIndex()
		return first, last, err
	})
	addr, trans := raft.NewInmemTransport("n1")
	if bootstrap {
		boot := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: "n1", Address: addr}}}
		if err := raft.BootstrapCluster(n.config(), n.logs, stable, snaps, trans, boot); err != nil {
			t.Fatal(err)
		}
	}
	fsm := &countFSM{}
	r, err := raft.NewRaft(n.config(), fsm, n.logs, stable, snaps, trans)
	if err != nil {
		return nil, nil, err
	}
	t.Cleanup(func() { r.Shutdown() })
	deadline := time.Now().Add(10 * time.Second)
	for r.State() != raft.Leader {
		if time.Now().After(deadline) {
			t.Fatal("no leader in 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return r, fsm, nil
}

func (n *raftOnStores) apply(r *raft.Raft, from, to int) {
	n.t.Helper()
	for i := from; i < to; i++ {
		if err := r.Apply(fmt.Appendf(nil, "e%d", i), 5*time.Second).Error(); err != nil {
			n.t.Fatal(err)
		}
	}
}

func (n *raftOnStores) snapshot(r *raft.Raft) string {
	n.t.Helper()
	f := r.Snapshot()
	if err := f.Error(); err != nil {
		n.t.Fatal(err)
	}
	m, rc, err := f.Open()
	if err != nil {
		n.t.Fatal(err)
	}
	rc.Close()
	return m.ID
}

// TestSnapStoresRaftRestart runs a real Raft node on the two stores:
// entries applied, a snapshot taken and the log compacted under it, the
// node stopped and started again on the same files: its state comes back
// from the snapshot and the log, and its term from the stable store.
func TestSnapStoresRaftRestart(t *testing.T) {
	n := newRaftOnStores(t)
	r, _, err := n.start(true)
	if err != nil {
		t.Fatal(err)
	}
	n.apply(r, 0, 10)
	n.snapshot(r)
	n.apply(r, 10, 15)
	term, err := n.stable().GetUint64([]byte("CurrentTerm"))
	if err != nil || term == 0 {
		t.Fatalf("CurrentTerm in the stable store: %d, %v", term, err)
	}
	if first, _ := n.logs.FirstIndex(); first <= 2 {
		t.Fatalf("the log begins at %d: the snapshot did not compact it", first)
	}
	if err := r.Shutdown().Error(); err != nil {
		t.Fatal(err)
	}

	if got, err := n.stable().GetUint64([]byte("CurrentTerm")); err != nil || got != term {
		t.Errorf("CurrentTerm after the restart: %d, %v; want %d", got, err, term)
	}
	r, fsm, err := n.start(false)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Barrier(5 * time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	entries, restored := fsm.state()
	if restored != 10 {
		t.Errorf("restored %d entries from the snapshot; want 10", restored)
	}
	var want []string
	for i := range 15 {
		want = append(want, fmt.Sprintf("e%d", i))
	}
	if !slices.Equal(entries, want) {
		t.Errorf("state after the restart: %q; want %q", entries, want)
	}
	if got := r.CurrentTerm(); got <= term {
		t.Errorf("term %d after the restart; want past %d", got, term)
	}
}

// TestSnapStoresRaftNoFallback: when the newest snapshot is damaged and
// the log was compacted past the one before it, Raft must not fall back
// to that one (it would start without the entries between them): the
// floor keeps it from List, and raft.NewRaft fails.
func TestSnapStoresRaftNoFallback(t *testing.T) {
	n := newRaftOnStores(t)
	r, _, err := n.start(true)
	if err != nil {
		t.Fatal(err)
	}
	n.apply(r, 0, 10)
	n.snapshot(r)
	n.apply(r, 10, 20)
	newest := n.snapshot(r)
	n.apply(r, 20, 25)
	if err := r.Shutdown().Error(); err != nil {
		t.Fatal(err)
	}
	if names := dirNames(t, filepath.Join(n.dir, "snapshots")); len(names) != 2 {
		t.Fatalf("snapshots: %q; want 2", names)
	}
	damage(t, filepath.Join(n.dir, "snapshots"), newest, func(b []byte) []byte { b[len(b)-snapTrailerLen-1] ^= 1; return b })
	_, _, err = n.start(false)
	if err == nil || !strings.Contains(err.Error(), "failed to load any existing snapshots") {
		t.Errorf("NewRaft with the newest snapshot damaged: %v; want it to fail to load a snapshot", err)
	}
}

// TestSnapNewest: Newest describes the newest snapshot by index, then
// term, then time, whether Close finished it or open found it; a snapshot
// of an older entry finished later leaves it be, and a cancelled one is
// not counted.
func TestSnapNewest(t *testing.T) {
	dir := t.TempDir()
	s := testSnaps(t, vfs.OS, dir, 10, nil)
	if info, ok := s.Newest(); ok {
		t.Fatalf("Newest() of an empty store = %+v, want none", info)
	}
	size := func(id string) int64 {
		fi, err := os.Stat(filepath.Join(dir, id+snapSuffix))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	want := func(id string) SnapshotInfo {
		n, ok := parseSnapName(id)
		if !ok {
			t.Fatalf("snapshot ID %q does not parse", id)
		}
		return SnapshotInfo{Index: n.index, Term: n.term, Taken: time.UnixMilli(n.milli), Size: size(id)}
	}
	check := func(what string, s *snapshotStore, id string) {
		t.Helper()
		if got, ok := s.Newest(); !ok || got != want(id) {
			t.Errorf("%s: Newest() = %+v, %v; want %+v", what, got, ok, want(id))
		}
	}
	first := writeSnap(t, s, 10, 1, randomState(1000))
	check("after one", s, first)
	second := writeSnap(t, s, 20, 1, randomState(5000))
	check("after a second", s, second)
	writeSnap(t, s, 15, 1, nil)
	check("after one of an older entry", s, second)
	sink, err := s.Create(1, 30, 1, testConf, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := sink.Cancel(); err != nil {
		t.Fatal(err)
	}
	check("after a cancelled one", s, second)
	check("after a reopen", testSnaps(t, vfs.OS, dir, 10, nil), second)
}
