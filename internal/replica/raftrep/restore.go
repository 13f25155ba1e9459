package raftrep

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"

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
}

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
