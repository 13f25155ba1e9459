package snapcmd

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/backup"
	"github.com/latchd/latch/internal/fsm"
	"github.com/latchd/latch/internal/replica/raftrep"
)

var taken = time.Date(2026, 11, 28, 3, 0, 0, 0, time.UTC)

func TestFloors(t *testing.T) {
	at := taken.UnixNano()
	m := int64(Margin)
	tests := []struct {
		name       string
		meta       backup.Meta
		wantToken  int64
		wantZxid   int64
		wantOffset int64
	}{
		{"counter behind the clock", backup.Meta{Time: taken, Clock: at - 5, Token: uint64(at - 1000), Zxid: 7},
			at + m, 7 + m, m},
		{"counter ahead of the clock", backup.Meta{Time: taken, Clock: at, Token: uint64(at + 1000), Zxid: 7},
			at + 1000 + m, 7 + m, 1000 + m},
		{"replicated clock ahead of the node's", backup.Meta{Time: taken, Clock: at + 50, Token: 1},
			at + 50 + m, m, m},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok, zxid, off := Floors(tt.meta)
			if int64(tok) != tt.wantToken || zxid != tt.wantZxid || off != tt.wantOffset {
				t.Errorf("Floors = %d, %d, %d; want %d, %d, %d", tok, zxid, off, tt.wantToken, tt.wantZxid, tt.wantOffset)
			}
		})
	}
}

// sampleFile writes a backup of a state with one leased lock and one lock
// of a session that node n1 owns, as a node would, and returns its path.
func sampleFile(t *testing.T) string {
	t.Helper()
	st, err := fsm.New(fsm.OfflineConfig())
	if err != nil {
		t.Fatal(err)
	}
	now := taken.UnixNano()
	var r fsm.Result
	st.Apply(&fsm.Command{Op: fsm.OpSeed, At: now, Token: latch.Token(now)}, &r)
	st.Apply(&fsm.Command{Op: fsm.OpOpenSession, At: now, TTL: 10 * time.Second, Key: []byte("n1")}, &r)
	id := r.Session
	st.Apply(&fsm.Command{Op: fsm.OpAcquire, At: now, Session: id, Req: latch.LockRequest{Keys: []string{"leased"}, Lease: time.Hour}}, &r)
	st.Apply(&fsm.Command{Op: fsm.OpAcquire, At: now, Session: id, Req: latch.LockRequest{Keys: []string{"bound"}}}, &r)
	sum := st.Summary()
	state := st.AppendSnapshot(nil)
	meta := backup.Meta{StateFormat: int(state[0]), Node: "n1", Term: 2, Index: 40, Time: taken, Clock: sum.Now,
		Locks: sum.Locks, Holds: sum.Holds, Leases: sum.Leases, Sessions: sum.Sessions, OwnedSessions: sum.Owned,
		Items: sum.Items, Znodes: sum.Znodes, Token: uint64(sum.Token), Zxid: sum.Zxid}
	var buf bytes.Buffer
	if err := backup.Write(&buf, meta, state); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "b.snap")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestInspect(t *testing.T) {
	path := sampleFile(t)
	var out bytes.Buffer
	if err := Inspect(InspectOptions{File: path, Out: &out}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"verified", "node       n1", "term 2, index 40", "locks      2 (2 holds, 1 leased)", "1 bound to a node's connections"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("inspect output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestRefusals: a changed byte, a truncated file, and metadata that does
// not match the state are refused by inspect and restore, saying what is
// wrong; so is a restore into a data dir that holds a node.
func TestRefusals(t *testing.T) {
	good, err := os.ReadFile(sampleFile(t))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		file func() []byte
		want string
	}{
		{"byte changed in the state", func() []byte {
			b := bytes.Clone(good)
			b[len(b)-40] ^= 0x80
			return b
		}, "part state"},
		{"truncated", func() []byte { return good[:len(good)/2] }, "truncated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bad.snap")
			if err := os.WriteFile(path, tt.file(), 0o600); err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := Inspect(InspectOptions{File: path, Out: &out}); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("inspect: %v, want an error saying %q", err, tt.want)
			}
			dir := filepath.Join(t.TempDir(), "data")
			err := Restore(RestoreOptions{File: path, DataDir: dir, NodeID: "n1", Out: &out})
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "refused") {
				t.Errorf("restore: %v, want refused saying %q", err, tt.want)
			}
			if _, err := os.Stat(dir); err == nil {
				t.Error("a refused restore made the data dir")
			}
		})
	}
	t.Run("data dir in use", func(t *testing.T) {
		path := sampleFile(t)
		dir := t.TempDir()
		var out bytes.Buffer
		if err := Restore(RestoreOptions{File: path, DataDir: dir, NodeID: "n1", Out: &out}); err != nil {
			t.Fatal(err)
		}
		if err := Restore(RestoreOptions{File: path, DataDir: dir, NodeID: "n1", Out: &out}); err == nil || !strings.Contains(err.Error(), "holds a node's state") {
			t.Errorf("second restore into %s: %v", dir, err)
		}
	})
}

// TestRestore: the data dir holds the offset, and the output says what
// the restore changed.
func TestRestore(t *testing.T) {
	path := sampleFile(t)
	dir := filepath.Join(t.TempDir(), "n2")
	var out bytes.Buffer
	peers := []raftrep.Peer{{ID: "n1", Addr: "127.0.0.1:1"}, {ID: "n2", Addr: "127.0.0.1:2"}}
	if err := Restore(RestoreOptions{File: path, DataDir: dir, NodeID: "n2", Peers: peers, Out: &out}); err != nil {
		t.Fatal(err)
	}
	off, err := raftrep.TokenOffset(dir)
	// The counter was 2 grants ahead of the backup's instant.
	if want := int64(Margin) + 2; err != nil || off != want {
		t.Errorf("offset %d, %v; want %d", off, err, want)
	}
	for _, want := range []string{"as node n2 of n1, n2", "locks      1 (1 leased); 1 session bound", "ahead of its clock"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("restore output lacks %q:\n%s", want, out.String())
		}
	}
	// A node that is not a member is refused.
	if err := Restore(RestoreOptions{File: path, DataDir: filepath.Join(t.TempDir(), "n9"), NodeID: "n9", Peers: peers, Out: &out}); err == nil || !strings.Contains(err.Error(), "not one of the members") {
		t.Errorf("restore of a non-member: %v", err)
	}
}
