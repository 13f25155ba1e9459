package vfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// FS is the file system as latch uses it. Names are paths as the os
// package takes them. Every method is safe for concurrent use.
type FS interface {
	// OpenFile opens or creates the file name with the os package's
	// flags (O_RDONLY, O_RDWR, O_WRONLY, O_CREATE, O_EXCL, O_TRUNC).
	// A created file's entry is durable only after SyncDir of its
	// directory.
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	// Remove removes the file or empty directory name.
	Remove(name string) error
	// Rename renames oldpath to newpath, replacing a file there, in one
	// step: after a crash one of the two names holds the file, never
	// neither. Both entries are durable only after SyncDir of their
	// directories.
	Rename(oldpath, newpath string) error
	// Mkdir creates the directory name; its parent must exist.
	Mkdir(name string, perm fs.FileMode) error
	// ReadDir returns the names in directory name, sorted.
	ReadDir(name string) ([]string, error)
	// Stat describes the file or directory name.
	Stat(name string) (fs.FileInfo, error)
	// SyncDir makes the entries of directory name durable.
	SyncDir(name string) error
	// SyncAll makes everything under directory name durable: the data
	// of its files and the entries of its directories (syncfs(2) on
	// Linux, which syncs the whole file system that holds it, then an
	// fsync of each file and directory under name, which a FUSE file
	// system sees where it never sees syncfs).
	SyncAll(name string) error
	// Lock takes an exclusive lock on the file name, creating it, until
	// the returned Closer is closed or the process ends. A second Lock of
	// the same name, by this process or another, fails at once with an
	// error that wraps ErrLocked. The file's contents are the FS's own.
	Lock(name string) (io.Closer, error)
}

// ErrLocked is wrapped by the error of a Lock that another holder has.
var ErrLocked = errors.New("locked by another process")

// File is an open file of an FS.
type File interface {
	io.ReaderAt
	io.WriterAt
	// Name returns the name the file was opened with.
	Name() string
	// Size returns the file's current size.
	Size() (int64, error)
	// Truncate changes the file's size; its new size is durable after
	// Sync or Datasync.
	Truncate(size int64) error
	// Sync makes the file's data and metadata durable.
	Sync() error
	// Datasync makes the file's data durable, and the metadata needed to
	// read it back (its size), but not its times.
	Datasync() error
	Close() error
}

// ReadFile returns the contents of the file name.
func ReadFile(fsys FS, name string) ([]byte, error) {
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	b := make([]byte, size)
	n, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b[:n], nil
}

// WriteFile writes a new file at name holding data, whole or not at all,
// and makes it durable before it returns: it writes name+".tmp", syncs
// it, renames it to name and syncs the directory.
func WriteFile(fsys FS, name string, data []byte) error {
	tmp := name + ".tmp"
	f, err := fsys.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(data, 0)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(tmp, name)
	}
	if err != nil {
		fsys.Remove(tmp)
		return err
	}
	return fsys.SyncDir(filepath.Dir(name))
}

// MkdirAll creates directory name and the parents it lacks, and makes
// each new entry durable (syncs the directory that holds it), so that a
// crash cannot leave a directory that later files were synced into
// without its own name.
func MkdirAll(fsys FS, name string, perm fs.FileMode) error {
	name = filepath.Clean(name)
	var missing []string
	for dir := name; ; dir = filepath.Dir(dir) {
		fi, err := fsys.Stat(dir)
		if err == nil {
			if !fi.IsDir() {
				return fmt.Errorf("vfs: %s is not a directory", dir)
			}
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		missing = append(missing, dir)
		if filepath.Dir(dir) == dir {
			break
		}
	}
	slices.Reverse(missing)
	for _, dir := range missing {
		if err := fsys.Mkdir(dir, perm); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		if err := fsys.SyncDir(filepath.Dir(dir)); err != nil {
			return err
		}
	}
	return nil
}
