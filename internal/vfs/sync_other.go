//go:build !linux

package vfs

import (
	"io/fs"
	"os"
	"path/filepath"
)

// datasync is fsync where fdatasync is not at hand.
func datasync(f *os.File) error { return f.Sync() }

// syncAll fsyncs every file and directory under dir, where syncfs(2) is
// not at hand.
func syncAll(dir string) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && !d.Type().IsRegular() {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		return f.Sync()
	})
}
