package server

import (
	"github.com/latchd/latch/internal/config"
	"github.com/latchd/latch/internal/metrics"
)

// limits returns the configured limits that an alert compares a gauge
// with, for latch_limit, each named for what it bounds:
//
//	max_conns{protocol}           latch_connections_open{protocol}, for each
//	                              client front end that is on
//	max_waiters                   latch_waiters
//	memory_bytes{memcache}        latch_memcache_bytes, latch_memcache_locked_bytes
//	max_znodes{zookeeper}         latch_zookeeper_znodes
//	max_ephemerals{zookeeper}     latch_zookeeper_ephemerals
//	snapshot_entries              latch_raft_commit_index - latch_raft_last_snapshot_index,
//	                              on a durable or cluster node
//
// Limits that no gauge of the same scope counts against (keys or waiters
// per request or key, watches per connection, sizes of one value, the
// admin listener's connections) are left out. A limit of 0, none, is
// left for SetLimits to drop.
func limits(cfg config.Config) []metrics.Limit {
	var ls []metrics.Limit
	add := func(name, protocol string, v int64) {
		ls = append(ls, metrics.Limit{Name: name, Protocol: protocol, Value: float64(v)})
	}
	for _, fe := range []struct {
		protocol string
		addr     string
		maxConns int
	}{
		{"memcache", cfg.Memcache.Addr, cfg.Memcache.MaxConns},
		{"dlock", cfg.DLock.Addr, cfg.DLock.MaxConns},
		{"redis", cfg.Redis.Addr, cfg.Redis.MaxConns},
		{"zookeeper", cfg.ZooKeeper.Addr, cfg.ZooKeeper.MaxConns},
	} {
		if fe.addr != "" {
			add("max_conns", fe.protocol, int64(fe.maxConns))
		}
	}
	add("max_waiters", "", int64(cfg.Lock.MaxWaiters))
	add("memory_bytes", "memcache", int64(cfg.Memcache.MemoryMB)<<20)
	add("max_znodes", "zookeeper", int64(cfg.ZooKeeper.MaxZnodes))
	add("max_ephemerals", "zookeeper", int64(cfg.ZooKeeper.MaxEphemerals))
	if cfg.Cluster.DataDir != "" || cfg.Cluster.Clustered() {
		add("snapshot_entries", "", int64(cfg.Cluster.SnapshotEntries))
	}
	return ls
}
