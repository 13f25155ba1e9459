package server

import (
	"bytes"
	"context"
	"fmt"

	"github.com/latchd/latch/internal/backup"
)

// snapshot takes a backup of the node's committed state for
// GET /v1/snapshot: the file and a name for it.
func (s *Server) snapshot(ctx context.Context) ([]byte, string, error) {
	snap, err := s.node.Snapshot(ctx)
	if err != nil {
		return nil, "", err
	}
	id := s.cfg.Cluster.NodeID
	if id == "" {
		id = defaultNodeID
	}
	sum := snap.Summary
	meta := backup.Meta{
		StateFormat:   int(snap.State[0]),
		LatchVersion:  s.cfg.Server.Version,
		Node:          id,
		Term:          snap.Term,
		Index:         snap.Index,
		Time:          snap.Time.UTC(),
		Clock:         sum.Now,
		Locks:         sum.Locks,
		Holds:         sum.Holds,
		Leases:        sum.Leases,
		Waiters:       sum.Waiters,
		Sessions:      sum.Sessions,
		OwnedSessions: sum.Owned,
		Items:         sum.Items,
		Znodes:        sum.Znodes,
		Token:         uint64(sum.Token),
		Zxid:          sum.Zxid,
	}
	var buf bytes.Buffer
	if err := backup.Write(&buf, meta, snap.State); err != nil {
		return nil, "", err
	}
	name := fmt.Sprintf("latch-%s-%s.snap", id, meta.Time.Format("20060102T150405Z"))
	return buf.Bytes(), name, nil
}
