package raftrep

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// nodeFile, in a data dir, names the node the dir belongs to.
const nodeFile = "node-id"

// claimDir records id as the node of data dir dir at its first start, and
// refuses dir if it belongs to another node. Started with an ID that its
// log's configuration does not name, Raft would neither lead nor vote, and
// the node would serve nothing without an error. A dir written before this
// record existed is claimed by the first ID it is started with.
func claimDir(dir, id string) error {
	path := filepath.Join(dir, nodeFile)
	b, err := os.ReadFile(path)
	if err == nil {
		if owner := strings.TrimSpace(string(b)); owner != id {
			return fmt.Errorf("raftrep: data dir %s belongs to node %s, not %s: give each node its own data dir", dir, owner, id)
		}
		return nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("raftrep: data dir %s: %w", dir, err)
	}
	if err := writeDurably(path, []byte(id+"\n")); err != nil {
		return fmt.Errorf("raftrep: data dir %s: record the node: %w", dir, err)
	}
	return nil
}

// writeDurably writes a new file at path with data, whole or not at all:
// it writes a temporary file, syncs it, renames it to path and syncs the
// directory.
func writeDurably(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
