package vfs

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
)

// OS is the operating system's file system.
var OS FS = osFS{}

type osFS struct{}

func (osFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Remove(name string) error                  { return os.Remove(name) }
func (osFS) Rename(oldpath, newpath string) error      { return os.Rename(oldpath, newpath) }
func (osFS) Mkdir(name string, perm fs.FileMode) error { return os.Mkdir(name, perm) }
func (osFS) Stat(name string) (fs.FileInfo, error)     { return os.Stat(name) }

func (osFS) ReadDir(name string) ([]string, error) {
	ents, err := os.ReadDir(name)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	slices.Sort(names)
	return names, nil
}

func (osFS) SyncDir(name string) error {
	d, err := os.Open(name)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", name, err)
	}
	return nil
}

func (osFS) SyncAll(name string) error { return syncAll(name) }

func (osFS) Lock(name string) (io.Closer, error) { return lock(name) }

type osFile struct{ *os.File }

func (f osFile) Size() (int64, error) {
	fi, err := f.File.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

func (f osFile) Datasync() error { return datasync(f.File) }
