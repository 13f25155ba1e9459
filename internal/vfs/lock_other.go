//go:build !unix

package vfs

import (
	"io"
	"os"
)

// lock opens name without locking it: these systems have no flock(2), so
// two processes on one file are not caught here.
func lock(name string) (io.Closer, error) {
	return os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
}
