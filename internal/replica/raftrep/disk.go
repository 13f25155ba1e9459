package raftrep

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/latchd/latch/internal/vfs"
	"github.com/latchd/latch/internal/wal"
)

// The stable store's file and the snapshots' directory in a data dir.
const (
	stableFile = "stable"
	snapDir    = "snap"
)

// keyLogCreated, in the stable store, records that the node's log was
// created: from then on a missing log is a lost one, never a first start.
var keyLogCreated = []byte("latch-log-created")

// disk is a node's data directory, opened: its lock, its stores, and
// what stops the node when one of them fails to write.
type disk struct {
	fs  vfs.FS
	dir string
	lg  *slog.Logger

	log    *LogStore
	stable raft.StableStore
	snaps  raft.SnapshotStore
	// closers close the stores, the lock last.
	closers []io.Closer
	// exit ends the process once halt has written its marker; tests
	// replace it.
	exit func(msg string)
}

// openDisk opens the data dir dir of node id on fsys, creating it at a node's
// first start. Before it trusts anything there it makes everything under
// the dir durable (vfs.FS.SyncAll): a process killed between a write and
// its sync leaves data that only the page cache holds, and a node that
// read it as stored would acknowledge entries that a power loss then
// takes away. It refuses a dir that a disk error halted (haltedFile), one
// whose log was created and is gone, one of another node, and one that an
// older, unreleased format wrote.
func openDisk(fsys vfs.FS, dir, id string, lg *slog.Logger) (*disk, error) {
	d := &disk{fs: fsys, dir: dir, lg: lg, exit: exitHalted}
	if err := d.open(id); err != nil {
		d.close()
		return nil, err
	}
	return d, nil
}

func (d *disk) open(id string) error {
	if err := vfs.MkdirAll(d.fs, d.dir, 0o700); err != nil {
		return fmt.Errorf("raftrep: data dir: %w", err)
	}
	lock, err := lockDir(d.fs, d.dir)
	if err != nil {
		return err
	}
	d.closers = append(d.closers, lock)
	if err := d.fs.SyncAll(d.dir); err != nil {
		return fmt.Errorf("raftrep: data dir %s: make what is there durable before reading it: %w", d.dir, err)
	}
	// And the dir's own entry, which a process killed as it made the dir
	// may have left unsynced.
	if err := d.fs.SyncDir(filepath.Dir(filepath.Clean(d.dir))); err != nil {
		return fmt.Errorf("raftrep: data dir %s: %w", d.dir, err)
	}
	if err := checkHalted(d.fs, d.dir); err != nil {
		return err
	}
	if err := claimDir(d.fs, d.dir, id); err != nil {
		return err
	}
	for _, old := range []string{"raft.db", "snapshots"} {
		if _, err := d.fs.Stat(filepath.Join(d.dir, old)); err == nil {
			return fmt.Errorf("raftrep: data dir %s holds %s, of a format no released latch writes: start with an empty data dir", d.dir, old)
		}
	}
	stable, err := openStable(d.fs, filepath.Join(d.dir, stableFile))
	if err != nil {
		return fmt.Errorf("raftrep: stable store: %w", err)
	}
	d.stable = stable
	if err := d.openLog(); err != nil {
		return err
	}
	d.stable = haltingStable{stable, d.halt}
	snaps, err := openSnapshots(d.fs, filepath.Join(d.dir, snapDir), 2, d.lg)
	if err != nil {
		return fmt.Errorf("raftrep: snapshots: %w", err)
	}
	snaps.SetFloor(func() (uint64, uint64, error) {
		first, err := d.log.FirstIndex()
		if err != nil {
			return 0, 0, err
		}
		last, err := d.log.LastIndex()
		return first, last, err
	})
	d.snaps = snaps
	return d.trimLog()
}

// openLog opens the log, refusing a log that was created and is gone
// (keyLogCreated), or one that holds entries while the stable store does
// not know it was ever made (the stable store lost: the node would forget
// its term and vote).
func (d *disk) openLog() error {
	path := filepath.Join(d.dir, logDir)
	created, err := d.stable.GetUint64(keyLogCreated)
	if err != nil && err.Error() != "not found" {
		return fmt.Errorf("raftrep: stable store: %w", err)
	}
	_, err = d.fs.Stat(path)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("raftrep: log: %w", err)
	}
	if created != 0 && !exists {
		return fmt.Errorf("raftrep: data dir %s: its log (%s) is gone, though the node created it: starting would forget acknowledged entries while keeping the term and vote; see docs/operations.md (a damaged data dir)", d.dir, logDir)
	}
	l, err := wal.Open(path, wal.Options{FS: d.fs})
	if err != nil {
		return fmt.Errorf("raftrep: open log: %w", err)
	}
	d.log = &LogStore{log: l, halt: d.halt}
	d.closers = append([]io.Closer{d.log}, d.closers...)
	if created == 0 {
		if last, _ := l.LastIndex(); last != 0 {
			return fmt.Errorf("raftrep: data dir %s: its log holds entries to %d but its stable store does not know of it (lost or replaced): starting would forget this node's term and vote; see docs/operations.md (a damaged data dir)", d.dir, last)
		}
		if err := d.stable.SetUint64(keyLogCreated, 1); err != nil {
			return fmt.Errorf("raftrep: stable store: %w", err)
		}
	}
	return nil
}

// trimLog empties a log that ends before the newest snapshot: a crash
// while Raft emptied it after installing that snapshot leaves its head,
// and Raft's next append, just after the snapshot, would leave a gap.
// Every entry there is older than the snapshot, which holds its effect.
func (d *disk) trimLog() error {
	metas, err := d.snaps.List()
	if err != nil || len(metas) == 0 {
		return err
	}
	first, _ := d.log.FirstIndex()
	last, _ := d.log.LastIndex()
	if first == 0 || last >= metas[0].Index {
		return nil
	}
	d.lg.Info("raftrep: the log ends before the newest snapshot; emptying it", "last", last, "snapshot", metas[0].Index)
	return d.log.DeleteRange(first, last)
}

// checkHalted refuses a data dir that a disk error halted.
func checkHalted(fsys vfs.FS, dir string) error {
	b, err := vfs.ReadFile(fsys, filepath.Join(dir, haltedFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("raftrep: data dir %s: %w", dir, err)
	}
	return fmt.Errorf("%w: data dir %s: this node stopped on a disk error (%s); what it wrote last may not be on the disk. Check the disk, then either clear the mark with 'latch datadir clear-halt --data-dir %[2]s' or replace the node (docs/operations.md)", ErrHalted, dir, strings.TrimSpace(string(b)))
}

// ErrHalted is wrapped by the error of New on a data dir that a node left
// when a write or sync to it failed.
var ErrHalted = errors.New("raftrep: halted")

// ClearHalt removes the halted marker from data dir dir, so that its node
// starts again; it reports whether there was one. The operator's command
// for it says what the marker means (docs/operations.md).
func ClearHalt(dir string) (bool, error) { return clearHalt(vfs.OS, dir) }

func clearHalt(fsys vfs.FS, dir string) (bool, error) {
	path := filepath.Join(dir, haltedFile)
	err := fsys.Remove(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, fsys.SyncDir(dir)
}

// haltingStable halts the node on a failed write of the stable store, as
// hashicorp/raft does itself on a failed write of its term, and leaves
// the halted marker.
type haltingStable struct {
	raft.StableStore
	halt func(error)
}

func (s haltingStable) Set(key, val []byte) error {
	if err := s.StableStore.Set(key, val); err != nil {
		s.halt(fmt.Errorf("stable store: %w", err))
		return err
	}
	return nil
}

func (s haltingStable) SetUint64(key []byte, val uint64) error {
	if err := s.StableStore.SetUint64(key, val); err != nil {
		s.halt(fmt.Errorf("stable store: %w", err))
		return err
	}
	return nil
}

// exitHalted ends the process of a node that halt stopped: a panic, as
// hashicorp/raft's on a failed write of its term. Tests that let a node
// fail its disk in process replace it.
var exitHalted = func(msg string) { panic(msg) }

// halt stops the node on a failed write or sync of its log or its
// stable store: it logs err, leaves the halted marker (best effort: a
// disk that fails everything may not take it either), and ends the
// process. Restarted, the node refuses to start until an operator clears
// the marker (ClearHalt).
func (d *disk) halt(err error) {
	d.lg.Error("raftrep: a write to the data dir failed; this node stops and will not start again until an operator clears "+filepath.Join(d.dir, haltedFile), "err", err)
	note := fmt.Sprintf("%s: %v\n", time.Now().UTC().Format(time.RFC3339), err)
	if werr := vfs.WriteFile(d.fs, filepath.Join(d.dir, haltedFile), []byte(note)); werr != nil {
		d.lg.Error("raftrep: could not leave the halted marker", "err", werr)
	}
	d.exit(fmt.Sprintf("raftrep: a write to the data dir %s failed, so this node stops: %v", d.dir, err))
}

func (d *disk) close() {
	for _, c := range d.closers {
		c.Close()
	}
}
