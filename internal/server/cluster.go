package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/admin"
	"github.com/latchd/latch/internal/config"
	"github.com/latchd/latch/internal/node"
	"github.com/latchd/latch/internal/replica"
	"github.com/latchd/latch/internal/replica/raftrep"
	"github.com/latchd/latch/internal/tlsconf"
)

// defaultNodeID names a durable single node.
const defaultNodeID = "latch"

// replicated sets nc up for the durable or clustered lock service that cfg
// asks for; without --data-dir, latch stays one node in memory and nc is
// left alone. The Replicator is kept in s.rep when the node makes it.
func (s *Server) replicated(cfg config.ClusterConfig, nc *node.Config) error {
	if cfg.DataDir == "" && !cfg.Clustered() {
		return nil
	}
	id := cfg.NodeID
	if id == "" {
		id = defaultNodeID
	}
	var peers []raftrep.Peer
	ps, err := cfg.Peers()
	if err != nil {
		return err
	}
	for _, p := range ps {
		peers = append(peers, raftrep.Peer{ID: p.ID, Addr: p.Addr})
	}
	rc := raftConfig(cfg, id, peers, s.logger)
	if cfg.Clustered() {
		sec, err := s.peerTLS(cfg)
		if err != nil {
			return err
		}
		mux, err := raftrep.ListenTLS(cfg.RaftAddr, cfg.RaftAdvertise, sec)
		if err != nil {
			return err
		}
		rc.Addr = mux.Addr().String()
		rc.Transport = mux.Transport(s.logger)
		rc.Network = mux
	}
	nc.NodeID, nc.NodeTTL = id, cfg.NodeTTL
	// A node restored from a backup (latch snapshot restore) seeds the
	// token counter ahead of its clock, past what the old cluster may
	// have issued (docs/operations.md, "Restore").
	var off int64
	if cfg.DataDir != "" {
		if off, err = raftrep.TokenOffset(cfg.DataDir); err != nil {
			return err
		}
	}
	if off > 0 {
		nc.FirstToken = latch.Token(time.Now().UnixNano() + off)
		s.logger.Info("restored node: the token counter is seeded ahead of the clock", "offset", time.Duration(off))
	}
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
	return nil
}

// raftConfig returns the configuration of node id's replicator, its
// transport and network aside.
func raftConfig(cfg config.ClusterConfig, id string, peers []raftrep.Peer, logger *slog.Logger) raftrep.Config {
	return raftrep.Config{
		ID:                id,
		Dir:               cfg.DataDir,
		Peers:             peers,
		Join:              cfg.InitialClusterState == "existing",
		HeartbeatTimeout:  cfg.ElectionTimeout,
		ElectionTimeout:   cfg.ElectionTimeout,
		SnapshotThreshold: uint64(cfg.SnapshotEntries),
		SnapshotInterval:  cfg.SnapshotInterval,
		TrailingLogs:      uint64(cfg.SnapshotTrailingEntries),
		Logger:            logger,
	}
}

// peerTLS returns the mutual TLS of the connections between nodes, or nil
// when the configuration sets none. Its certificates follow their files
// (s.peerTLS).
func (s *Server) peerTLS(cfg config.ClusterConfig) (*raftrep.PeerTLS, error) {
	if cfg.PeerTLSCert == "" {
		return nil, nil
	}
	f, err := tlsconf.NewFiles("peer-tls", cfg.PeerTLSCert, cfg.PeerTLSKey, cfg.PeerTLSCA, s.logger)
	if err != nil {
		return nil, fmt.Errorf("server: peer TLS: %w", err)
	}
	s.peerFiles = f
	return &raftrep.PeerTLS{Server: f.Server(), ClientConfig: f.Client}, nil
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
			if at, now, ok := v.s.node.NodeAlive(m.ID); ok && now-at < int64(v.s.node.NodeTTL()) {
				state = "follower"
			}
		}
		out.Members = append(out.Members, admin.ClusterMember{ID: m.ID, RaftAddr: m.Addr, State: state})
	}
	return out, nil
}

func (v clusterView) Add(ctx context.Context, id, addr string) error {
	return memberErr(v.s.rep.AddVoter(ctx, id, addr))
}

func (v clusterView) Remove(ctx context.Context, id string) error {
	return memberErr(v.s.rep.RemoveServer(ctx, id))
}

func (v clusterView) Transfer(ctx context.Context, id string) error {
	return memberErr(v.s.rep.Transfer(ctx, id))
}

// memberErr marks a membership error with the admin API's sentinel for it,
// keeping its text.
func memberErr(err error) error {
	switch {
	case errors.Is(err, raftrep.ErrNoMember):
		return marked{err, admin.ErrNoMember}
	case errors.Is(err, raftrep.ErrInvalidMember):
		return marked{err, admin.ErrInvalidMember}
	}
	return err
}

// marked is an error that also is (errors.Is) mark.
type marked struct {
	error
	mark error
}

func (m marked) Unwrap() error        { return m.error }
func (m marked) Is(target error) bool { return target == m.mark }

// raftCollector exports the replicator's counters as Prometheus metrics.
type raftCollector struct{ rep *raftrep.Replicator }

var raftDescs = map[string]*prometheus.Desc{
	"entries":   prometheus.NewDesc("latch_raft_entries_total", "Raft log entries this node proposed as leader.", nil, nil),
	"batches":   prometheus.NewDesc("latch_raft_batches_total", "Batches of commands those entries carried (batches per entry: the batching).", nil, nil),
	"bytes":     prometheus.NewDesc("latch_raft_entry_bytes_total", "Bytes of those entries.", nil, nil),
	"forwarded": prometheus.NewDesc("latch_raft_forwarded_batches_total", "Batches this node forwarded to the leader.", nil, nil),
	"commits":   prometheus.NewDesc("latch_raft_commits_total", "Entries committed that this node proposed as leader.", nil, nil),
	"commitSec": prometheus.NewDesc("latch_raft_commit_seconds_total", "Time from proposing those entries to their commit.", nil, nil),
	// Not latch_raft_commit_seconds: in OpenMetrics a counter's family is
	// its name less _total, and latch_raft_commit_seconds_total's would
	// be the same as the histogram's.
	"commitHist": prometheus.NewDesc("latch_raft_commit_duration_seconds", "Time from proposing an entry as leader to its commit and apply here (a quorum's append, this node's fsync included), by bucket.", nil, nil),
	"members":    prometheus.NewDesc("latch_raft_members", "Members of the cluster in the latest configuration this node knows.", nil, nil),
	"snapTime":   prometheus.NewDesc("latch_raft_last_snapshot_timestamp_seconds", "When this node began its newest snapshot, or was sent it, in seconds since the Unix epoch; absent before the first.", nil, nil),
	"snapBytes":  prometheus.NewDesc("latch_raft_last_snapshot_bytes", "Size of the newest snapshot's file in this node's data dir.", nil, nil),
	"snapIndex":  prometheus.NewDesc("latch_raft_last_snapshot_index", "Index of the last entry the newest snapshot covers (commit_index - last_snapshot_index: the log a restart replays).", nil, nil),
	"leaders":    prometheus.NewDesc("latch_raft_leader_changes_total", "Leaders this node saw take over.", nil, nil),
	"applied":    prometheus.NewDesc("latch_raft_applied_index", "Index of the last entry applied here (commit_index - applied_index: the apply lag).", nil, nil),
	"commit":     prometheus.NewDesc("latch_raft_commit_index", "Index of the last entry this node knows committed.", nil, nil),
	"leader":     prometheus.NewDesc("latch_raft_leader", "1 while this node leads the cluster.", nil, nil),
}

func (c raftCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range raftDescs {
		ch <- d
	}
}

func (c raftCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.rep.Counters()
	counter := func(name string, v float64) {
		ch <- prometheus.MustNewConstMetric(raftDescs[name], prometheus.CounterValue, v)
	}
	gauge := func(name string, v float64) {
		ch <- prometheus.MustNewConstMetric(raftDescs[name], prometheus.GaugeValue, v)
	}
	counter("entries", float64(s.Entries))
	counter("batches", float64(s.Batches))
	counter("bytes", float64(s.Bytes))
	counter("forwarded", float64(s.Forwarded))
	counter("commits", float64(s.Commits))
	counter("commitSec", s.CommitSeconds)
	buckets := make(map[float64]uint64, len(raftrep.CommitBounds))
	var acc uint64
	for i, b := range raftrep.CommitBounds {
		if i < len(s.CommitBuckets) {
			acc += s.CommitBuckets[i]
		}
		buckets[b.Seconds()] = acc
	}
	ch <- prometheus.MustNewConstHistogram(raftDescs["commitHist"], s.Commits, s.CommitSeconds, buckets)
	counter("leaders", float64(s.LeaderChanges))
	gauge("applied", float64(s.AppliedIndex))
	gauge("commit", float64(s.CommitIndex))
	leader := 0.0
	if _, self, _ := c.rep.Leader(); self {
		leader = 1
	}
	gauge("leader", leader)
	if n, err := c.rep.Members(); err == nil {
		gauge("members", float64(n))
	}
	if snap, ok := c.rep.LastSnapshot(); ok {
		gauge("snapTime", float64(snap.Taken.UnixMilli())/1e3)
		gauge("snapBytes", float64(snap.Size))
		gauge("snapIndex", float64(snap.Index))
	}
}
