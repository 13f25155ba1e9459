package server

import (
	"context"

	"github.com/latchd/latch/internal/admin"
	"github.com/latchd/latch/internal/config"
	"github.com/latchd/latch/internal/node"
	"github.com/latchd/latch/internal/replica"
	"github.com/latchd/latch/internal/replica/raftrep"
)

// defaultNodeID names a durable single node.
const defaultNodeID = "latch"

// replicated sets nc up for the durable or clustered lock service that cfg
// asks for, and reports whether it does; without --data-dir, latch stays
// one node in memory. The Replicator is kept in s.rep when the node
// makes it.
func (s *Server) replicated(cfg config.ClusterConfig, nc *node.Config) (bool, error) {
	if cfg.DataDir == "" && !cfg.Clustered() {
		return false, nil
	}
	id := cfg.NodeID
	if id == "" {
		id = defaultNodeID
	}
	var peers []raftrep.Peer
	ps, err := cfg.Peers()
	if err != nil {
		return false, err
	}
	for _, p := range ps {
		peers = append(peers, raftrep.Peer{ID: p.ID, Addr: p.Addr})
	}
	rc := raftrep.Config{
		ID:               id,
		Dir:              cfg.DataDir,
		Peers:            peers,
		HeartbeatTimeout: cfg.ElectionTimeout,
		ElectionTimeout:  cfg.ElectionTimeout,
		Logger:           s.logger,
	}
	if cfg.Clustered() {
		mux, err := raftrep.Listen(cfg.RaftAddr, cfg.RaftAdvertise)
		if err != nil {
			return false, err
		}
		rc.Addr = mux.Addr().String()
		rc.Transport = mux.Transport(s.logger)
		rc.Network = mux
	}
	nc.NodeID, nc.NodeTTL = id, cfg.NodeTTL
	nc.Replicator = func(sm replica.StateMachine) (replica.Replicator, error) {
		r, err := raftrep.New(rc, sm)
		if err != nil {
			if rc.Network != nil {
				rc.Network.(*raftrep.Mux).Close()
			}
			return nil, err
		}
		s.rep = r
		return r, nil
	}
	s.logger.Info("lock table replicated", "node", id, "data_dir", cfg.DataDir, "raft_addr", rc.Addr, "members", len(peers))
	return true, nil
}

// clusterView is the node's cluster as the admin server shows it.
type clusterView struct {
	s    *Server
	mode string
}

var _ admin.Cluster = clusterView{}

func (v clusterView) Status(ctx context.Context) (admin.ClusterStatus, error) {
	st, err := v.s.rep.Status()
	if err != nil {
		return admin.ClusterStatus{}, err
	}
	out := admin.ClusterStatus{
		Mode:         v.mode,
		Node:         st.ID,
		Leader:       st.Leader,
		Term:         st.Term,
		CommitIndex:  st.CommitIndex,
		AppliedIndex: st.AppliedIndex,
		Members:      make([]admin.ClusterMember, 0, len(st.Members)),
	}
	for _, m := range st.Members {
		state := "unreachable"
		switch {
		case m.Leader:
			state = "leader"
		case m.ID == st.ID && st.State != "shutdown":
			state = st.State
		default:
			if at, now, ok := v.s.node.NodeAlive(m.ID); ok && now-at < int64(v.s.node.TTL()) {
				state = "follower"
			}
		}
		out.Members = append(out.Members, admin.ClusterMember{ID: m.ID, RaftAddr: m.Addr, State: state})
	}
	return out, nil
}

func (v clusterView) Add(ctx context.Context, id, addr string) error {
	return v.s.rep.AddVoter(ctx, id, addr)
}

func (v clusterView) Remove(ctx context.Context, id string) error {
	return v.s.rep.RemoveServer(ctx, id)
}

func (v clusterView) Transfer(ctx context.Context, id string) error {
	return v.s.rep.Transfer(ctx, id)
}
