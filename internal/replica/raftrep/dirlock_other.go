//go:build !unix

package raftrep

import (
	"fmt"
	"os"
	"path/filepath"
)

const lockFile = "lock"

// lockDir opens dir's lock file without locking it: these systems have no
// flock(2), so two processes on one data directory are not caught here.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("raftrep: lock data dir: %w", err)
	}
	return f, nil
}
