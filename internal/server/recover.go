package server

import (
	"fmt"
	"log/slog"

	"github.com/latchd/latch/internal/cache"
	"github.com/latchd/latch/internal/config"
	"github.com/latchd/latch/internal/node"
	"github.com/latchd/latch/internal/replica/raftrep"
)

// Recover makes the stopped node that cfg configures a cluster of one
// (raftrep.Recover), replaying its log into the state its settings give
// (the memory limit, the lock table's limits), as New would build it.
// force recovers even while other members answer; dryRun changes nothing
// and reports what Recover would do.
func Recover(cfg config.Config, force, dryRun bool, logger *slog.Logger) (raftrep.Recovery, error) {
	if cfg.Cluster.DataDir == "" {
		return raftrep.Recovery{}, fmt.Errorf("server: recover: no data dir")
	}
	return raftrep.Recover(raftrep.RecoverConfig{
		Dir:    cfg.Cluster.DataDir,
		ID:     cfg.Cluster.NodeID,
		State:  node.StateConfig(nodeConfig(cfg)),
		Force:  force,
		DryRun: dryRun,
		Logger: logger,
	})
}

// nodeConfig is the node's configuration that cfg gives, but for its
// replicator, logger and observer.
func nodeConfig(cfg config.Config) node.Config {
	nc := cfg.Lock.Config
	nc.Cache = cache.Config{
		MemoryLimit: int64(cfg.Memcache.MemoryMB) << 20,
		MaxItemSize: cfg.Memcache.MaxItemSize,
	}
	nc.ZNode = cfg.ZooKeeper.ZNode()
	nc.ZSet = cfg.Redis.ZSet()
	return nc
}
