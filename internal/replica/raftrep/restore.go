package raftrep

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"

	"github.com/hashicorp/raft"

	"github.com/latchd/latch/internal/vfs"
)

// Seed is the start of a new node's data dir made from a backup (latch
// snapshot restore): the dir of one member of a new cluster, whose first
// state is State.
type Seed struct {
	// Dir is the data dir to make; it must not hold a node's state. FS is
	// the file system it is on (nil: vfs.OS).
	Dir string
	FS  vfs.FS
	// ID names the node; Peers are the members of the new cluster, this
	// node included (empty: a durable single node, ID alone).
	ID    string
	Peers []Peer
	// Index is the Raft index the new cluster's log continues from (at
	// least 1); Stamp the replicated clock of State, from which the new
	// cluster's first leader resumes it; State the node's snapshot
	// encoding (internal/fsm).
	Index uint64
	Stamp int64
	State []byte
	// TokenOffset, when positive, is how far ahead of its clock the node
	// seeds the fencing-token counter at each start (TokenOffset), for a
	// state whose counter may be ahead of the clock: the old cluster's.
	TokenOffset int64
}

// restoredFile, in a data dir that SeedDir made, holds the node's token
// offset: "token-offset N\n".
const restoredFile = "restored"

// SeedDir makes the data dir s.Dir of node s.ID hold s.State as a Raft
// snapshot at s.Index, term 1, with the members s.Peers: started on it,
// with the same members, the node restores that snapshot and the nodes
// of s.Peers elect a leader among themselves, as the nodes of a new
// cluster do (the term starts again at 1; the index goes on). Every
// member's dir must be seeded from the same state at the same index, so
// that they hold the same log. It refuses a dir that holds a node's state,
// or that a running node holds. Everything it writes goes through s.FS
// and is synced before it returns.
func SeedDir(s Seed) error {
	if s.ID == "" {
		return errors.New("raftrep: seed a data dir: no node id")
	}
	if s.Index == 0 {
		s.Index = 1
	}
	fsys := s.FS
	if fsys == nil {
		fsys = vfs.OS
	}
	peers := s.Peers
	if len(peers) == 0 {
		// A cluster of one, as New bootstraps it: its own transport's
		// address is its id.
		peers = []Peer{{ID: s.ID, Addr: s.ID}}
	}
	var conf raft.Configuration
	member := false
	for _, p := range peers {
		conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Addr)})
		member = member || p.ID == s.ID
	}
	if !member {
		return fmt.Errorf("raftrep: seed data dir %s: node %s is not one of the members", s.Dir, s.ID)
	}
	d, err := openDisk(fsys, s.Dir, s.ID, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	defer d.close()
	has, err := raft.HasExistingState(d.log, d.stable, d.snaps)
	if err != nil {
		return fmt.Errorf("raftrep: seed data dir %s: %w", s.Dir, err)
	}
	if has {
		return fmt.Errorf("raftrep: seed data dir %s: it holds a node's state already: restore into a new, empty data dir", s.Dir)
	}
	// The offset first: the snapshot makes the dir a node's, and a node
	// must never start on it without its offset.
	if s.TokenOffset > 0 {
		line := fmt.Sprintf("token-offset %d\n", s.TokenOffset)
		if err := vfs.WriteFile(fsys, filepath.Join(s.Dir, restoredFile), []byte(line)); err != nil {
			return fmt.Errorf("raftrep: seed data dir %s: %w", s.Dir, err)
		}
	}
	sink, err := d.snaps.Create(1, s.Index, 1, conf, s.Index, nil)
	if err != nil {
		return fmt.Errorf("raftrep: seed data dir %s: %w", s.Dir, err)
	}
	b := append(binary.AppendVarint(nil, s.Stamp), s.State...)
	if _, err := sink.Write(b); err != nil {
		sink.Cancel()
		return fmt.Errorf("raftrep: seed data dir %s: %w", s.Dir, err)
	}
	if err := sink.Close(); err != nil {
		return fmt.Errorf("raftrep: seed data dir %s: %w", s.Dir, err)
	}
	return nil
}

// TokenOffset returns the token offset that SeedDir left in data dir dir
// (Seed.TokenOffset), 0 for a dir it did not make: the node seeds the
// fencing-token counter with its clock plus the offset at each start.
func TokenOffset(dir string) (int64, error) { return tokenOffset(vfs.OS, dir) }

func tokenOffset(fsys vfs.FS, dir string) (int64, error) {
	b, err := vfs.ReadFile(fsys, filepath.Join(dir, restoredFile))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("raftrep: data dir %s: %w", dir, err)
	}
	var off int64
	if _, err := fmt.Sscanf(string(b), "token-offset %d\n", &off); err != nil || off < 0 {
		return 0, fmt.Errorf("raftrep: data dir %s: %s is damaged (%q): it holds the offset of the fencing-token counter of a restored node; restore the node again", dir, restoredFile, b)
	}
	return off, nil
}
