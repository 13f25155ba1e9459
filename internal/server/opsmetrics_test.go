package server

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/config"
	"github.com/latchd/latch/internal/metrics"
)

// series returns the metrics named name in s's registry whose labels
// include labels ("k=v" pairs).
func series(t *testing.T, s *Server, name string, labels ...string) []*dto.Metric {
	t.Helper()
	fams, err := s.metrics.Registry().Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	var out []*dto.Metric
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			for _, l := range labels {
				k, v, _ := strings.Cut(l, "=")
				found := false
				for _, lp := range m.GetLabel() {
					found = found || lp.GetName() == k && lp.GetValue() == v
				}
				if !found {
					continue metrics
				}
			}
			out = append(out, m)
		}
	}
	return out
}

// gaugeOf returns the value of the one gauge name{labels}; ok is false
// when there is none.
func gaugeOf(t *testing.T, s *Server, name string, labels ...string) (v float64, ok bool) {
	t.Helper()
	ms := series(t, s, name, labels...)
	if len(ms) > 1 {
		t.Fatalf("%d series %s%v, want one", len(ms), name, labels)
	}
	if len(ms) == 0 {
		return 0, false
	}
	return ms[0].GetGauge().GetValue(), true
}

// TestOpsMetrics: a server reports what runs, its configured limits and
// the memcached items' memory.
func TestOpsMetrics(t *testing.T) {
	cfg := testConfig()
	cfg.Server.Version = "v9.8.7"
	cfg.Lock.MaxWaiters = 5000
	cfg.Memcache.MaxConns = 100
	cfg.Redis.MaxConns = 0 // no limit
	cfg.DLock.Addr = ""    // off
	cfg.Memcache.MemoryMB = 8
	cfg.ZooKeeper.MaxZnodes = 1234
	s := newServer(t, cfg)

	if v, ok := gaugeOf(t, s, "latch_build_info", "version=v9.8.7", "go_version="+runtime.Version()); !ok || v != 1 {
		t.Errorf("latch_build_info{version=v9.8.7} = %v, %v; want 1", v, ok)
	}
	if ms := series(t, s, "latch_build_info"); len(ms) == 1 {
		for _, lp := range ms[0].GetLabel() {
			if lp.GetName() == "commit" && lp.GetValue() == "" {
				t.Error("latch_build_info has an empty commit")
			}
		}
	}
	for _, tt := range []struct {
		name, protocol string
		want           float64 // 0: absent
	}{
		{"max_conns", "memcache", 100},
		{"max_conns", "zookeeper", float64(cfg.ZooKeeper.MaxConns)},
		{"max_conns", "redis", 0}, // no limit
		{"max_conns", "dlock", 0}, // front end off
		{"max_conns", "admin", 0}, // no gauge to compare with
		{"max_waiters", "", 5000},
		{"memory_bytes", "memcache", 8 << 20},
		{"max_znodes", "zookeeper", 1234},
		{"max_ephemerals", "zookeeper", float64(cfg.ZooKeeper.MaxEphemerals)},
		{"snapshot_entries", "", 0}, // in memory
	} {
		v, ok := gaugeOf(t, s, "latch_limit", "name="+tt.name, "protocol="+tt.protocol)
		if tt.want == 0 && ok {
			t.Errorf("latch_limit{name=%q,protocol=%q} = %v, want none", tt.name, tt.protocol, v)
		}
		if tt.want != 0 && (!ok || v != tt.want) {
			t.Errorf("latch_limit{name=%q,protocol=%q} = %v, %v; want %v", tt.name, tt.protocol, v, ok, tt.want)
		}
	}
	if _, ok := gaugeOf(t, s, "latch_memcache_bytes"); !ok {
		t.Error("no latch_memcache_bytes")
	}
	if _, ok := gaugeOf(t, s, "latch_raft_members"); ok {
		t.Error("latch_raft_members on a node in memory")
	}
}

func TestLimitsOfConfig(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*config.Config)
		want   []metrics.Limit
	}{
		{"every front end off, no waiters limit", func(c *config.Config) { c.Lock.MaxWaiters = 0 }, []metrics.Limit{
			{Name: "max_waiters"}, // for SetLimits to drop
			{Name: "memory_bytes", Protocol: "memcache", Value: 64 << 20},
			{Name: "max_znodes", Protocol: "zookeeper", Value: 1_000_000},
			{Name: "max_ephemerals", Protocol: "zookeeper", Value: 10_000},
		}},
		{"front ends on, a durable node", func(c *config.Config) {
			c.Memcache.Addr, c.Memcache.MaxConns = ":1", 10
			c.DLock.Addr, c.DLock.MaxConns = ":2", 20
			c.Redis.Addr, c.Redis.MaxConns = ":3", 30
			c.ZooKeeper.Addr, c.ZooKeeper.MaxConns = ":4", 40
			c.Lock.MaxWaiters = 7
			c.Cluster.DataDir, c.Cluster.SnapshotEntries = "/d", 99
		}, []metrics.Limit{
			{Name: "max_conns", Protocol: "memcache", Value: 10},
			{Name: "max_conns", Protocol: "dlock", Value: 20},
			{Name: "max_conns", Protocol: "redis", Value: 30},
			{Name: "max_conns", Protocol: "zookeeper", Value: 40},
			{Name: "max_waiters", Value: 7},
			{Name: "memory_bytes", Protocol: "memcache", Value: 64 << 20},
			{Name: "max_znodes", Protocol: "zookeeper", Value: 1_000_000},
			{Name: "max_ephemerals", Protocol: "zookeeper", Value: 10_000},
			{Name: "snapshot_entries", Value: 99},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config.DefaultConfig()
			cfg.Memcache.Addr, cfg.DLock.Addr, cfg.Redis.Addr, cfg.ZooKeeper.Addr = "", "", "", ""
			cfg.Memcache.MemoryMB = 64
			tt.modify(&cfg)
			got := limits(cfg)
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("limits() =\n%v\nwant\n%v", got, tt.want)
			}
		})
	}
}

func TestRaftConfigOfCluster(t *testing.T) {
	cfg := config.DefaultConfig().Cluster
	cfg.DataDir = "/d"
	cfg.SnapshotEntries, cfg.SnapshotInterval, cfg.SnapshotTrailingEntries = 100, 3*time.Second, 42
	rc := raftConfig(cfg, "n1", nil, nil)
	if rc.SnapshotThreshold != 100 || rc.SnapshotInterval != 3*time.Second || rc.TrailingLogs != 42 {
		t.Errorf("raftConfig() snapshots every %d entries, checked every %v, keeping %d; want 100, 3s, 42",
			rc.SnapshotThreshold, rc.SnapshotInterval, rc.TrailingLogs)
	}
	if rc.ID != "n1" || rc.Dir != "/d" || rc.ElectionTimeout != cfg.ElectionTimeout {
		t.Errorf("raftConfig() = %+v, want node n1 in /d with election timeout %v", rc, cfg.ElectionTimeout)
	}
}

// TestRaftMetricsDurable: a durable single node counts its commits in
// the commit-time histogram, reports its one member, and its snapshot's
// time, size and index once it took one.
func TestRaftMetricsDurable(t *testing.T) {
	cfg := testConfig()
	cfg.Cluster.DataDir = t.TempDir()
	cfg.Cluster.SnapshotEntries, cfg.Cluster.SnapshotInterval = 16, 100*time.Millisecond
	start := time.Now()
	s := newServer(t, cfg)
	sess := openSession(t, s.Service())
	const locks = 40
	for i := range locks {
		if _, err := sess.Acquire(context.Background(), latch.LockRequest{Keys: []string{fmt.Sprint("k", i)}, Lease: time.Minute}); err != nil {
			t.Fatalf("Acquire(k%d): %v", i, err)
		}
	}
	// The commit is counted just after the grant; the snapshot is taken
	// within two snapshot-intervals of the sixteenth entry.
	var commits uint64
	var snapAt float64
	var snapped bool
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if ms := series(t, s, "latch_raft_commit_duration_seconds"); len(ms) == 1 {
			commits = ms[0].GetHistogram().GetSampleCount()
		}
		snapAt, snapped = gaugeOf(t, s, "latch_raft_last_snapshot_timestamp_seconds")
		if commits >= locks && snapped {
			break
		}
	}
	if commits < locks {
		t.Errorf("latch_raft_commit_duration_seconds counts %d commits after %d grants, want at least %[2]d", commits, locks)
	}
	ms := series(t, s, "latch_raft_commit_duration_seconds")
	if len(ms) == 1 {
		h := ms[0].GetHistogram()
		bs := h.GetBucket()
		if len(bs) != 16 || bs[0].GetUpperBound() != 0.0001 || bs[len(bs)-1].GetUpperBound() != 10 {
			t.Errorf("commit histogram buckets %v, want 16 from 100µs to 10s", bs)
		}
		if h.GetSampleSum() <= 0 {
			t.Errorf("commit histogram sums %v s, want some time", h.GetSampleSum())
		}
	}
	if v, ok := gaugeOf(t, s, "latch_raft_members"); !ok || v != 1 {
		t.Errorf("latch_raft_members = %v, %v; want 1", v, ok)
	}
	if !snapped {
		t.Fatal("no latch_raft_last_snapshot_timestamp_seconds after 10 s")
	}
	if now := float64(time.Now().UnixMilli()) / 1e3; snapAt < float64(start.Unix()) || snapAt > now {
		t.Errorf("latch_raft_last_snapshot_timestamp_seconds = %v, want between the start %v and now %v", snapAt, start.Unix(), now)
	}
	if v, ok := gaugeOf(t, s, "latch_raft_last_snapshot_bytes"); !ok || v <= 0 {
		t.Errorf("latch_raft_last_snapshot_bytes = %v, %v; want a size", v, ok)
	}
	if v, ok := gaugeOf(t, s, "latch_raft_last_snapshot_index"); !ok || v < 16 {
		t.Errorf("latch_raft_last_snapshot_index = %v, %v; want at least 16", v, ok)
	}
	if v, ok := gaugeOf(t, s, "latch_limit", "name=snapshot_entries"); !ok || v != 16 {
		t.Errorf("latch_limit{name=snapshot_entries} = %v, %v; want 16", v, ok)
	}
}
