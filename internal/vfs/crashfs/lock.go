package crashfs

import (
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/latchd/latch/internal/vfs"
)

// Lock takes the lock on the file name, creating it (an OpCreate, as
// OpenFile with O_CREATE), until the returned Closer is closed or a Kill
// or PowerLoss ends the process that holds it. A second Lock of a held
// name fails with an error that wraps vfs.ErrLocked.
func (fsys *FS) Lock(name string) (io.Closer, error) {
	f, err := fsys.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	f.Close()
	p := clean(name)
	fsys.mu.Lock()
	defer fsys.mu.Unlock()
	if fsys.locks == nil {
		fsys.locks = make(map[string]uint64)
	}
	if gen, ok := fsys.locks[p]; ok && gen == fsys.gen {
		return nil, fmt.Errorf("lock %s: %w", name, vfs.ErrLocked)
	}
	fsys.locks[p] = fsys.gen
	return &lock{fsys: fsys, name: p, gen: fsys.gen}, nil
}

type lock struct {
	fsys *FS
	name string
	gen  uint64
	once sync.Once
}

func (l *lock) Close() error {
	l.once.Do(func() {
		l.fsys.mu.Lock()
		defer l.fsys.mu.Unlock()
		if gen, ok := l.fsys.locks[l.name]; ok && gen == l.gen {
			delete(l.fsys.locks, l.name)
		}
	})
	return nil
}
