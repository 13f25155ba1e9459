//go:build !linux

package vfs

import "os"

// datasync is fsync where fdatasync is not at hand.
func datasync(f *os.File) error { return f.Sync() }

// syncAll fsyncs every file and directory under dir, where syncfs(2) is
// not at hand.
func syncAll(dir string) error { return syncTree(dir) }
