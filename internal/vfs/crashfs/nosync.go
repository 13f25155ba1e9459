package crashfs

import (
	"io/fs"

	"github.com/latchd/latch/internal/vfs"
)

// NoSync returns fsys with syncs that do nothing: the files' Sync and
// Datasync, SyncDir and SyncAll return nil and make nothing durable. It is
// the control of a crash test, which must catch it, and a way to run
// tests that check what code writes, not what it syncs, without paying
// for syncs.
func NoSync(fsys vfs.FS) vfs.FS { return noSyncFS{fsys} }

type noSyncFS struct{ vfs.FS }

func (f noSyncFS) OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error) {
	file, err := f.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return noSyncFile{file}, nil
}

func (noSyncFS) SyncDir(string) error { return nil }
func (noSyncFS) SyncAll(string) error { return nil }

type noSyncFile struct{ vfs.File }

func (noSyncFile) Sync() error     { return nil }
func (noSyncFile) Datasync() error { return nil }
