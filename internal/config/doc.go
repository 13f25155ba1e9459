// Package config owns latch's configuration: the Config struct and its
// sections, the defaults (DefaultConfig), validation (Config.Validate), and
// loading a Config from command-line flags, LATCH_* environment variables
// and an optional TOML file.
//
// The sections Lock, Memcache, DLock, ZooKeeper and Admin hold the
// components' own configurations (node.Config, memcache.Config,
// dlock.Config, zookeeper.Config, admin.Config), so that a default lives once, in its component's
// DefaultConfig, and the server builds each component from its section
// without copying settings. Log, Server, Redis, TLS and Cluster are this
// package's own. Cluster says what the node is: with none of it set, an
// in-memory single node; with DataDir alone, a durable single node; with
// NodeID, RaftAddr and InitialCluster too, a cluster member. The toml tags
// name the settings; the fields tagged "-" (loggers, metrics, TLS) are the
// program's to set and no setting reaches them.
//
// # Precedence
//
// Load builds a Config from, highest precedence first:
//
//  1. flags given on the command line (--log-level=debug);
//  2. environment variables, named mechanically from the flag:
//     --log-level is LATCH_LOG_LEVEL (an empty variable counts as unset);
//  3. the TOML file named by --config or LATCH_CONFIG, if any;
//  4. DefaultConfig.
//
// # TOML file
//
// The file mirrors the Config sections. Durations are strings accepted by
// time.ParseDuration. A key latch does not know is an error naming the key,
// so that a typo never goes unnoticed. Reference returns
// docs/configuration.md, which lists every setting, and DefaultTOML a file
// of every key at its default. A few:
//
//	[log]
//	level = "info"            # debug, info, warn or error
//
//	[memcache]
//	addr = "127.0.0.1:11211"  # memcached text and binary; "" = off
//
//	[redis]
//	addr = "127.0.0.1:6379"   # RESP2/RESP3 for the Redis lock clients; "" = off
//
//	[zookeeper]
//	addr = "127.0.0.1:2181"   # ZooKeeper's protocol for its lock recipes; "" = off
//
//	[dlock]
//	addr = "127.0.0.1:11212"  # dlock protocol v2/v3; "" = off
//
//	[admin]
//	addr = "127.0.0.1:11280"  # HTTP: /metrics, status page, /v1 API; "" = off
//
//	[tls]                     # with cert and key, every client listener serves TLS only
//	cert = ""
//	key = ""
//
//	[cluster]
//	data-dir = ""             # "" = in memory; set alone: a durable single node
package config
