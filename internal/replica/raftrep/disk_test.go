package raftrep

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/latchd/latch/internal/vfs"
)

func openTestDisk(t *testing.T, fsys vfs.FS, dir string) (*disk, error) {
	t.Helper()
	d, err := openDisk(fsys, dir, "n1", slog.New(slog.DiscardHandler))
	if err == nil {
		d.exit = func(msg string) { t.Logf("exit: %s", msg) }
	}
	return d, err
}

// TestDiskRefuses: a data dir is refused, with an error that says why,
// where starting would serve less than the node acknowledged.
func TestDiskRefuses(t *testing.T) {
	for _, tt := range []struct {
		name    string
		damage  func(t *testing.T, dir string)
		wantErr string
	}{
		{"intact", func(*testing.T, string) {}, ""},
		{"log gone", func(t *testing.T, dir string) {
			if err := os.RemoveAll(filepath.Join(dir, logDir)); err != nil {
				t.Fatal(err)
			}
		}, "its log (" + logDir + ") is gone"},
		{"last segment gone", func(t *testing.T, dir string) {
			segs, err := filepath.Glob(filepath.Join(dir, logDir, "*.seg"))
			if err != nil || len(segs) == 0 {
				t.Fatalf("segments: %v, %v", segs, err)
			}
			if err := os.Remove(segs[len(segs)-1]); err != nil {
				t.Fatal(err)
			}
		}, "is gone, with records that were acknowledged"},
		{"stable store gone", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, stableFile)); err != nil {
				t.Fatal(err)
			}
		}, "does not know of it"},
		{"halted", func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, haltedFile), []byte("sync failed\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, "stopped on a disk error (sync failed)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			d, err := openTestDisk(t, vfs.OS, dir)
			if err != nil {
				t.Fatal(err)
			}
			if err := d.log.StoreLogs(entries(1, 3, 1)); err != nil {
				t.Fatal(err)
			}
			d.close()
			tt.damage(t, dir)
			d, err = openTestDisk(t, vfs.OS, dir)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				checkLog(t, d.log, entries(1, 3, 1))
				d.close()
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				if err == nil {
					d.close()
				}
				t.Fatalf("open = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

// TestDiskOlderFormat: a data dir that an unreleased latch wrote (its
// term and vote in bbolt's raft.db, raft's snapshot directory) is refused.
func TestDiskOlderFormat(t *testing.T) {
	for _, old := range []string{"raft.db", "snapshots"} {
		dir := t.TempDir()
		if err := os.Mkdir(filepath.Join(dir, old), 0o700); err != nil {
			t.Fatal(err)
		}
		if d, err := openTestDisk(t, vfs.OS, dir); err == nil || !strings.Contains(err.Error(), "a format no released latch writes") {
			if err == nil {
				d.close()
			}
			t.Fatalf("open with %s = %v, want it refused as an older format", old, err)
		}
	}
}

// TestHalt: a failed write of the log or the stable store stops the node
// and leaves the halted marker; the node then refuses to start until the
// marker is cleared.
func TestHalt(t *testing.T) {
	dir := t.TempDir()
	d, err := openTestDisk(t, vfs.OS, dir)
	if err != nil {
		t.Fatal(err)
	}
	var exited string
	d.exit = func(msg string) { exited = msg }
	d.stable = haltingStable{failingStable{}, d.halt}
	if err := d.stable.SetUint64([]byte("CurrentTerm"), 2); err == nil {
		t.Fatal("a failed Set returned no error")
	}
	if !strings.Contains(exited, "stable store: disk on fire") {
		t.Errorf("exit message %q, want the store's error", exited)
	}
	d.close()
	if d, err := openTestDisk(t, vfs.OS, dir); !errors.Is(err, ErrHalted) {
		if err == nil {
			d.close()
		}
		t.Fatalf("open after a halt = %v, want ErrHalted", err)
	}
	if cleared, err := ClearHalt(dir); !cleared || err != nil {
		t.Fatalf("ClearHalt = %v, %v", cleared, err)
	}
	if cleared, err := ClearHalt(dir); cleared || err != nil {
		t.Fatalf("ClearHalt again = %v, %v; want false, nil", cleared, err)
	}
	d, err = openTestDisk(t, vfs.OS, dir)
	if err != nil {
		t.Fatalf("open after ClearHalt: %v", err)
	}
	d.close()
}

type failingStable struct{ raft.StableStore }

func (failingStable) Set([]byte, []byte) error       { return errors.New("disk on fire") }
func (failingStable) SetUint64([]byte, uint64) error { return errors.New("disk on fire") }

// TestTrimLog: a log that ends before the newest snapshot (a crash while
// Raft emptied it after installing the snapshot) is emptied at start, so
// that the next append, just after the snapshot, leaves no gap.
func TestTrimLog(t *testing.T) {
	dir := t.TempDir()
	d, err := openTestDisk(t, vfs.OS, dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.log.StoreLogs(entries(1, 5, 1)); err != nil {
		t.Fatal(err)
	}
	sink, err := d.snaps.Create(raft.SnapshotVersionMax, 10, 1, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	sink.Write([]byte("state"))
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	d.close()
	d, err = openTestDisk(t, vfs.OS, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	checkLog(t, d.log, nil)
	if err := d.log.StoreLogs(entries(11, 12, 1)); err != nil {
		t.Fatalf("append after the snapshot: %v", err)
	}
}

// TestDiskSyncsFirst: nothing in the data dir is read before everything
// in it was made durable: data a killed process wrote but never synced
// must not be taken as stored.
func TestDiskSyncsFirst(t *testing.T) {
	dir := t.TempDir()
	d, err := openTestDisk(t, vfs.OS, dir)
	if err != nil {
		t.Fatal(err)
	}
	d.log.StoreLogs(entries(1, 2, 1))
	d.close()
	rec := &recordingFS{FS: vfs.OS}
	d, err = openTestDisk(t, rec, dir)
	if err != nil {
		t.Fatal(err)
	}
	d.close()
	synced := false
	for _, op := range rec.ops {
		if op == "syncall "+dir {
			synced = true
		}
		if strings.HasPrefix(op, "read ") && !synced {
			t.Fatalf("%s before the data dir was synced; ops: %q", op, rec.ops)
		}
	}
	if !synced {
		t.Fatalf("the data dir was never synced; ops: %q", rec.ops)
	}
}

// recordingFS records the calls that read or sync, in order.
type recordingFS struct {
	vfs.FS
	mu  sync.Mutex
	ops []string
}

func (r *recordingFS) add(op string) {
	r.mu.Lock()
	r.ops = append(r.ops, op)
	r.mu.Unlock()
}

func (r *recordingFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	r.add("read " + name)
	return r.FS.OpenFile(name, flag, perm)
}

func (r *recordingFS) ReadDir(name string) ([]string, error) {
	r.add("read " + name)
	return r.FS.ReadDir(name)
}

func (r *recordingFS) SyncAll(name string) error {
	r.add("syncall " + name)
	return r.FS.SyncAll(name)
}

func (r *recordingFS) Lock(name string) (io.Closer, error) { return r.FS.Lock(name) }
