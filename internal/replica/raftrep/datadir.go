package raftrep

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/latchd/latch/internal/vfs"
)

// The files of a data dir that are raftrep's own, beside the log (logDir).
const (
	// nodeFile names the node the dir belongs to.
	nodeFile = "node-id"
	// lockFile is the dir's lock, held by the process that owns it.
	lockFile = "lock"
	// haltedFile is left by a node that stopped on a disk error (halt);
	// while it exists the node refuses to start.
	haltedFile = "halted"
)

// lockDir takes dir's lock, so that a second process given the same data
// directory fails at once, naming the first, rather than write the same
// log. Closing the returned Closer releases it.
func lockDir(fsys vfs.FS, dir string) (io.Closer, error) {
	l, err := fsys.Lock(filepath.Join(dir, lockFile))
	if errors.Is(err, vfs.ErrLocked) {
		return nil, fmt.Errorf("raftrep: data dir %s is in use by another process%s", dir, strings.TrimPrefix(err.Error(), vfs.ErrLocked.Error()))
	}
	if err != nil {
		return nil, fmt.Errorf("raftrep: lock data dir: %w", err)
	}
	return l, nil
}

// claimDir records id as the node of data dir dir at its first start, and
// refuses dir if it belongs to another node. Started with an ID that its
// log's configuration does not name, Raft would neither lead nor vote, and
// the node would serve nothing without an error.
func claimDir(fsys vfs.FS, dir, id string) error {
	path := filepath.Join(dir, nodeFile)
	b, err := vfs.ReadFile(fsys, path)
	if err == nil {
		if owner := strings.TrimSpace(string(b)); owner != id {
			return fmt.Errorf("raftrep: data dir %s belongs to node %s, not %s: give each node its own data dir", dir, owner, id)
		}
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("raftrep: data dir %s: %w", dir, err)
	}
	if err := vfs.WriteFile(fsys, path, []byte(id+"\n")); err != nil {
		return fmt.Errorf("raftrep: data dir %s: record the node: %w", dir, err)
	}
	return nil
}
