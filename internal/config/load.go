package config

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// ErrFlags wraps the error of parsing command-line flags in Load. The
// FlagSet has already reported it on its output (flag.ContinueOnError), so a
// caller need not print it again. errors.Is(err, flag.ErrHelp) still tells a
// request for help.
var ErrFlags = errors.New("config: bad command-line flags")

// configFlag names the TOML file to read. It is a flag and an environment
// variable (LATCH_CONFIG) but not a TOML key.
const configFlag = "config"

// envPrefix starts the name of every environment variable latch reads.
const envPrefix = "LATCH_"

// A setting is one configurable value: a flag, the environment variable
// derived from it, and a key of the TOML file.
type setting struct {
	flag  string // flag name, without dashes
	toml  string // dotted TOML key
	usage string
	// field points into c at the setting's field: *string, *int or
	// *time.Duration.
	field func(c *Config) any
	// reload is true for a setting that a running server applies again
	// when it reloads (SIGHUP, POST /v1/reload), with the files it names;
	// every other one applies at the next start (Changed).
	reload bool
}

// settings lists every setting, in the order of the usage message.
var settings = []setting{
	{
		flag:   "log-level",
		toml:   "log.level",
		usage:  "log messages at this `level` and above: debug, info, warn or error",
		field:  func(c *Config) any { return &c.Log.Level },
		reload: true,
	},
	{
		flag:  "log-format",
		toml:  "log.format",
		usage: "log `format`: text or json",
		field: func(c *Config) any { return &c.Log.Format },
	},
	{
		flag:  "max-keys",
		toml:  "lock.max-keys",
		usage: "allow at most `n` keys in one lock request (0: no limit)",
		field: func(c *Config) any { return &c.Lock.MaxKeys },
	},
	{
		flag:  "max-waiters-per-key",
		toml:  "lock.max-waiters-per-key",
		usage: "refuse a lock request that would wait behind `n` others on one of its keys (at most and 0: 65535)",
		field: func(c *Config) any { return &c.Lock.MaxWaitersPerKey },
	},
	{
		flag:  "max-waiters",
		toml:  "lock.max-waiters",
		usage: "refuse a lock request that would wait when `n` requests wait in all (0: no limit)",
		field: func(c *Config) any { return &c.Lock.MaxWaiters },
	},
	{
		flag:  "lock-delay",
		toml:  "lock.lock-delay",
		usage: "keep the keys of a session that dies holding them unavailable for this `duration`",
		field: func(c *Config) any { return &c.Lock.LockDelay },
	},
	{
		flag:  "memcache-addr",
		toml:  "memcache.addr",
		usage: "serve the memcached protocols (with yrmcds locks) on this `host:port`; empty: off",
		field: func(c *Config) any { return &c.Memcache.Addr },
	},
	{
		flag:  "memcache-memory-mb",
		toml:  "memcache.memory-mb",
		usage: "keep memcached items within this many `MiB`, evicting the least recently used",
		field: func(c *Config) any { return &c.Memcache.MemoryMB },
	},
	{
		flag:  "memcache-max-item-size",
		toml:  "memcache.max-item-size",
		usage: "refuse memcached values larger than this many `bytes`",
		field: func(c *Config) any { return &c.Memcache.MaxItemSize },
	},
	{
		flag:  "memcache-max-conns",
		toml:  "memcache.max-conns",
		usage: "answer memcached connections beyond `n` open ones with SERVER_ERROR and close them (0: no limit)",
		field: func(c *Config) any { return &c.Memcache.MaxConns },
	},
	{
		flag:  "memcache-idle-timeout",
		toml:  "memcache.idle-timeout",
		usage: "close memcached connections silent for this `duration` between requests and holding no lock (0: never)",
		field: func(c *Config) any { return &c.Memcache.IdleTimeout },
	},
	{
		flag:  "memcache-read-timeout",
		toml:  "memcache.read-timeout",
		usage: "close memcached connections whose request takes longer than this `duration` to arrive once started (0: never)",
		field: func(c *Config) any { return &c.Memcache.ReadTimeout },
	},
	{
		flag:  "memcache-write-timeout",
		toml:  "memcache.write-timeout",
		usage: "close memcached connections that do not take a reply within this `duration` (0: never)",
		field: func(c *Config) any { return &c.Memcache.WriteTimeout },
	},
	{
		flag:   "memcache-allow",
		toml:   "memcache.allow",
		usage:  "serve memcached clients only from these comma-separated `networks` (CIDRs or addresses); empty: all",
		field:  func(c *Config) any { return &c.Memcache.Allow },
		reload: true,
	},
	{
		flag:  "memcache-loops",
		toml:  "memcache.loops",
		usage: "serve plain memcached connections from `n` event loops (in memory, on Linux): 0: half the CPUs, at least one; -1: a goroutine per connection",
		field: func(c *Config) any { return &c.Memcache.Loops },
	},
	{
		flag:  "redis-addr",
		toml:  "redis.addr",
		usage: "serve the Redis protocol (RESP2 and RESP3, for Redis lock clients) on this `host:port`; empty: off",
		field: func(c *Config) any { return &c.Redis.Addr },
	},
	{
		flag:  "redis-max-conns",
		toml:  "redis.max-conns",
		usage: "answer Redis connections beyond `n` open ones with an error and close them (0: no limit)",
		field: func(c *Config) any { return &c.Redis.MaxConns },
	},
	{
		flag:  "redis-idle-timeout",
		toml:  "redis.idle-timeout",
		usage: "close Redis connections silent for this `duration` between requests; their locks stay (0: never)",
		field: func(c *Config) any { return &c.Redis.IdleTimeout },
	},
	{
		flag:  "redis-read-timeout",
		toml:  "redis.read-timeout",
		usage: "close Redis connections whose request takes longer than this `duration` to arrive once started (0: never)",
		field: func(c *Config) any { return &c.Redis.ReadTimeout },
	},
	{
		flag:  "redis-write-timeout",
		toml:  "redis.write-timeout",
		usage: "close Redis connections that do not take a reply within this `duration` (0: never)",
		field: func(c *Config) any { return &c.Redis.WriteTimeout },
	},
	{
		flag:  "redis-max-value",
		toml:  "redis.max-value",
		usage: "refuse Redis lock values (owner identities) longer than this many `bytes`",
		field: func(c *Config) any { return &c.Redis.MaxValue },
	},
	{
		flag:  "redis-zset-max-members",
		toml:  "redis.zset-max-members",
		usage: "refuse a ZADD that would give one Redis sorted set more than `n` members (0: no limit)",
		field: func(c *Config) any { return &c.Redis.ZSetMaxMembers },
	},
	{
		flag:  "redis-zset-max-total",
		toml:  "redis.zset-max-total",
		usage: "refuse a ZADD that would give all Redis sorted sets together more than `n` members (0: no limit)",
		field: func(c *Config) any { return &c.Redis.ZSetMaxTotal },
	},
	{
		flag:   "redis-tokens-file",
		toml:   "redis.tokens-file",
		usage:  "require Redis connections to AUTH with one of the tokens in this `file`: TOKEN [lock|read [PREFIX...]] per line",
		field:  func(c *Config) any { return &c.Redis.TokensFile },
		reload: true,
	},
	{
		flag:   "redis-allow",
		toml:   "redis.allow",
		usage:  "serve Redis clients only from these comma-separated `networks` (CIDRs or addresses); empty: all",
		field:  func(c *Config) any { return &c.Redis.Allow },
		reload: true,
	},
	{
		flag:  "redis-loops",
		toml:  "redis.loops",
		usage: "serve plain Redis connections from `n` event loops (in memory, on Linux): 0: half the CPUs, at least one; -1: a goroutine per connection",
		field: func(c *Config) any { return &c.Redis.Loops },
	},
	{
		flag:  "dlock-addr",
		toml:  "dlock.addr",
		usage: "serve the dlock protocol (versions 2 and 3) on this `host:port`; empty: off",
		field: func(c *Config) any { return &c.DLock.Addr },
	},
	{
		flag:  "dlock-max-frame",
		toml:  "dlock.max-frame",
		usage: "accept dlock request frames of at most this many `bytes`",
		field: func(c *Config) any { return &c.DLock.MaxFrame },
	},
	{
		flag:  "dlock-idle-timeout",
		toml:  "dlock.idle-timeout",
		usage: "close dlock connections silent for this `duration` with no request waiting (0: never)",
		field: func(c *Config) any { return &c.DLock.IdleTimeout },
	},
	{
		flag:  "dlock-read-timeout",
		toml:  "dlock.read-timeout",
		usage: "close dlock connections whose request frame takes longer than this `duration` to arrive once started (0: never)",
		field: func(c *Config) any { return &c.DLock.ReadTimeout },
	},
	{
		flag:  "dlock-write-timeout",
		toml:  "dlock.write-timeout",
		usage: "close dlock connections that do not take an answer within this `duration` (0: never)",
		field: func(c *Config) any { return &c.DLock.WriteTimeout },
	},
	{
		flag:  "dlock-max-conns",
		toml:  "dlock.max-conns",
		usage: "answer dlock connections beyond `n` open ones with an error and close them (0: no limit)",
		field: func(c *Config) any { return &c.DLock.MaxConns },
	},
	{
		flag:  "dlock-loops",
		toml:  "dlock.loops",
		usage: "serve plain dlock connections from `n` event loops (in memory, on Linux): 0: half the CPUs, at least one; -1: a goroutine per connection",
		field: func(c *Config) any { return &c.DLock.Loops },
	},
	{
		flag:   "dlock-tokens-file",
		toml:   "dlock.tokens-file",
		usage:  "require dlock requests to carry one of the access tokens in this `file`: TOKEN [lock|read [PREFIX...]] per line",
		field:  func(c *Config) any { return &c.DLock.TokensFile },
		reload: true,
	},
	{
		flag:   "dlock-allow",
		toml:   "dlock.allow",
		usage:  "serve dlock clients only from these comma-separated `networks` (CIDRs or addresses); empty: all",
		field:  func(c *Config) any { return &c.DLock.Allow },
		reload: true,
	},
	{
		flag:  "zookeeper-addr",
		toml:  "zookeeper.addr",
		usage: "serve the ZooKeeper protocol (kazoo, Curator, go-zookeeper, zkCli) on this `host:port`; empty: off",
		field: func(c *Config) any { return &c.ZooKeeper.Addr },
	},
	{
		flag:  "zookeeper-max-conns",
		toml:  "zookeeper.max-conns",
		usage: "close ZooKeeper connections beyond `n` open ones at once (0: no limit)",
		field: func(c *Config) any { return &c.ZooKeeper.MaxConns },
	},
	{
		flag:   "zookeeper-allow",
		toml:   "zookeeper.allow",
		usage:  "serve ZooKeeper clients only from these comma-separated `networks` (CIDRs or addresses); empty: all",
		field:  func(c *Config) any { return &c.ZooKeeper.Allow },
		reload: true,
	},
	{
		flag:  "zookeeper-idle-timeout",
		toml:  "zookeeper.idle-timeout",
		usage: "close ZooKeeper connections silent for this `duration` (0: never; a client pings every third of its session timeout)",
		field: func(c *Config) any { return &c.ZooKeeper.IdleTimeout },
	},
	{
		flag:  "zookeeper-read-timeout",
		toml:  "zookeeper.read-timeout",
		usage: "close ZooKeeper connections whose request takes longer than this `duration` to arrive once started (0: never)",
		field: func(c *Config) any { return &c.ZooKeeper.ReadTimeout },
	},
	{
		flag:  "zookeeper-write-timeout",
		toml:  "zookeeper.write-timeout",
		usage: "close ZooKeeper connections that do not take their replies within this `duration` (0: never)",
		field: func(c *Config) any { return &c.ZooKeeper.WriteTimeout },
	},
	{
		flag:  "zookeeper-tick-time",
		toml:  "zookeeper.tick-time",
		usage: "ZooKeeper's tickTime: session timeouts are clamped to 2 to 20 ticks unless the bounds are set",
		field: func(c *Config) any { return &c.ZooKeeper.TickTime },
	},
	{
		flag:  "zookeeper-min-session-timeout",
		toml:  "zookeeper.min-session-timeout",
		usage: "the shortest ZooKeeper session timeout granted (0: 2 ticks)",
		field: func(c *Config) any { return &c.ZooKeeper.MinSessionTimeout },
	},
	{
		flag:  "zookeeper-max-session-timeout",
		toml:  "zookeeper.max-session-timeout",
		usage: "the longest ZooKeeper session timeout granted (0: 20 ticks)",
		field: func(c *Config) any { return &c.ZooKeeper.MaxSessionTimeout },
	},
	{
		flag:  "zookeeper-max-watches",
		toml:  "zookeeper.max-watches",
		usage: "refuse a read that would set more than `n` watches on one ZooKeeper connection",
		field: func(c *Config) any { return &c.ZooKeeper.MaxWatches },
	},
	{
		flag:  "zookeeper-max-queued",
		toml:  "zookeeper.max-queued",
		usage: "close a ZooKeeper connection whose unread replies and events pass this many `bytes`",
		field: func(c *Config) any { return &c.ZooKeeper.MaxQueued },
	},
	{
		flag:  "zookeeper-max-znodes",
		toml:  "zookeeper.max-znodes",
		usage: "refuse creates past `n` znodes in all (0: no limit)",
		field: func(c *Config) any { return &c.ZooKeeper.MaxZnodes },
	},
	{
		flag:  "zookeeper-max-children",
		toml:  "zookeeper.max-children",
		usage: "refuse creates past `n` children of one znode (0: no limit)",
		field: func(c *Config) any { return &c.ZooKeeper.MaxChildren },
	},
	{
		flag:  "zookeeper-max-ephemerals",
		toml:  "zookeeper.max-ephemerals",
		usage: "refuse creates past `n` ephemeral znodes of one session (0: no limit)",
		field: func(c *Config) any { return &c.ZooKeeper.MaxEphemerals },
	},
	{
		flag:  "zookeeper-max-data",
		toml:  "zookeeper.max-data",
		usage: "refuse znode data longer than this many `bytes` (at most 1 MiB)",
		field: func(c *Config) any { return &c.ZooKeeper.MaxData },
	},
	{
		flag:  "admin-addr",
		toml:  "admin.addr",
		usage: "serve metrics, the status page and the admin API over HTTP on this `host:port`; empty: off",
		field: func(c *Config) any { return &c.Admin.Addr },
	},
	{
		flag:   "admin-token",
		toml:   "admin.token",
		usage:  "require this bearer `token` for admin actions (force-release, end session, cluster changes) and for backups (GET /v1/snapshot)",
		field:  func(c *Config) any { return &c.Admin.Token },
		reload: true,
	},
	{
		flag:   "admin-token-file",
		toml:   "admin.token-file",
		usage:  "read the admin token from this `file` instead",
		field:  func(c *Config) any { return &c.Admin.TokenFile },
		reload: true,
	},
	{
		flag:  "admin-max-conns",
		toml:  "admin.max-conns",
		usage: "answer admin HTTP connections beyond `n` open ones with 503 and close them (0: no limit)",
		field: func(c *Config) any { return &c.Admin.MaxConns },
	},
	{
		flag:   "tls-cert",
		toml:   "tls.cert",
		usage:  "serve TLS on every listener with the certificate in this PEM `file` (needs tls-key)",
		field:  func(c *Config) any { return &c.TLS.Cert },
		reload: true,
	},
	{
		flag:   "tls-key",
		toml:   "tls.key",
		usage:  "the private key of tls-cert, in this PEM `file`",
		field:  func(c *Config) any { return &c.TLS.Key },
		reload: true,
	},
	{
		flag:   "tls-client-ca",
		toml:   "tls.client-ca",
		usage:  "require client certificates signed by a CA in this PEM `file` (needs tls-cert)",
		field:  func(c *Config) any { return &c.TLS.ClientCA },
		reload: true,
	},
	{
		flag:  "data-dir",
		toml:  "cluster.data-dir",
		usage: "keep the lock table in a Raft log and snapshots in this `directory`: a restart keeps leased locks, items and tokens; empty: in memory",
		field: func(c *Config) any { return &c.Cluster.DataDir },
	},
	{
		flag:  "node-id",
		toml:  "cluster.node-id",
		usage: "this node's `id` in its cluster",
		field: func(c *Config) any { return &c.Cluster.NodeID },
	},
	{
		flag:  "raft-addr",
		toml:  "cluster.raft-addr",
		usage: "serve Raft and the other nodes' forwarded requests on this `host:port`",
		field: func(c *Config) any { return &c.Cluster.RaftAddr },
	},
	{
		flag:  "raft-advertise",
		toml:  "cluster.raft-advertise",
		usage: "the `host:port` the other nodes reach raft-addr at; empty: raft-addr",
		field: func(c *Config) any { return &c.Cluster.RaftAdvertise },
	},
	{
		flag:  "initial-cluster",
		toml:  "cluster.initial-cluster",
		usage: "the cluster's members as `ID=HOST:PORT,...`, this node included at the address it advertises: the same list on every node bootstraps it",
		field: func(c *Config) any { return &c.Cluster.InitialCluster },
	},
	{
		flag:  "initial-cluster-state",
		toml:  "cluster.initial-cluster-state",
		usage: "`new`: bootstrap the cluster of initial-cluster; existing: join a running cluster (once added with latch cluster add)",
		field: func(c *Config) any { return &c.Cluster.InitialClusterState },
	},
	{
		flag:   "peer-tls-cert",
		toml:   "cluster.peer-tls-cert",
		usage:  "this node's certificate `file` (PEM) for mutual TLS with the other nodes (with peer-tls-key and peer-tls-ca)",
		field:  func(c *Config) any { return &c.Cluster.PeerTLSCert },
		reload: true,
	},
	{
		flag:   "peer-tls-key",
		toml:   "cluster.peer-tls-key",
		usage:  "the private key `file` (PEM) of peer-tls-cert",
		field:  func(c *Config) any { return &c.Cluster.PeerTLSKey },
		reload: true,
	},
	{
		flag:   "peer-tls-ca",
		toml:   "cluster.peer-tls-ca",
		usage:  "the CA certificates `file` (PEM) every node's peer certificate must chain to",
		field:  func(c *Config) any { return &c.Cluster.PeerTLSCA },
		reload: true,
	},
	{
		flag:  "node-ttl",
		toml:  "cluster.node-ttl",
		usage: "end the connection-bound sessions of a cluster node this `duration` after its last heartbeat",
		field: func(c *Config) any { return &c.Cluster.NodeTTL },
	},
	{
		flag:  "election-timeout",
		toml:  "cluster.election-timeout",
		usage: "Raft's heartbeat and election timeout (`duration`)",
		field: func(c *Config) any { return &c.Cluster.ElectionTimeout },
	},
	{
		flag:  "snapshot-entries",
		toml:  "cluster.snapshot-entries",
		usage: "take a snapshot once the log has this many `entries` since the last one",
		field: func(c *Config) any { return &c.Cluster.SnapshotEntries },
	},
	{
		flag:  "snapshot-interval",
		toml:  "cluster.snapshot-interval",
		usage: "check whether a snapshot is due every `duration` to twice that (at random, so that the nodes of a cluster do not all take one at once)",
		field: func(c *Config) any { return &c.Cluster.SnapshotInterval },
	},
	{
		flag:  "snapshot-trailing-entries",
		toml:  "cluster.snapshot-trailing-entries",
		usage: "keep this many `entries` in the log after a snapshot, for followers that lag (one further behind is sent the whole snapshot)",
		field: func(c *Config) any { return &c.Cluster.SnapshotTrailingEntries },
	},
	{
		flag:  "shutdown-timeout",
		toml:  "server.shutdown-timeout",
		usage: "give a graceful shutdown at most this `duration`",
		field: func(c *Config) any { return &c.Server.ShutdownTimeout },
	},
}

// Changed returns the flag names of the settings whose values differ
// between old and new, those a reload applies (reload) apart from those
// that wait for a restart (restart), each in the settings' order.
func Changed(old, new Config) (reload, restart []string) {
	for i := range settings {
		st := &settings[i]
		if st.format(&old) == st.format(&new) {
			continue
		}
		if st.reload {
			reload = append(reload, st.flag)
		} else {
			restart = append(restart, st.flag)
		}
	}
	return reload, restart
}

// envName returns the environment variable read for a flag:
// "log-level" is LATCH_LOG_LEVEL.
func envName(flagName string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// set parses s into the setting's field of c.
func (st *setting) set(c *Config, s string) error {
	switch p := st.field(c).(type) {
	case *string:
		*p = s
	case *int:
		n, err := strconv.Atoi(s)
		if err != nil {
			return errors.New("not an integer")
		}
		*p = n
	case *time.Duration:
		d, err := time.ParseDuration(s)
		if err != nil {
			return errors.New("not a duration (like 10s or 1m30s)")
		}
		*p = d
	default:
		panic(fmt.Sprintf("config: setting %s has field of type %T", st.flag, p))
	}
	return nil
}

// format returns the setting's value in c as its flag would spell it.
func (st *setting) format(c *Config) string {
	switch p := st.field(c).(type) {
	case *string:
		return *p
	case *int:
		return strconv.Itoa(*p)
	case *time.Duration:
		return p.String()
	default:
		panic(fmt.Sprintf("config: setting %s has field of type %T", st.flag, p))
	}
}

// flagValue is the flag.Value of a setting. It checks the syntax of the
// value when the flag is parsed and keeps the raw text, which Load applies
// last, above the environment and the file.
type flagValue struct {
	st  *setting
	raw string
}

func (v *flagValue) String() string {
	if v == nil {
		return ""
	}
	return v.raw
}

func (v *flagValue) Set(s string) error {
	var scratch Config
	if err := v.st.set(&scratch, s); err != nil {
		return err
	}
	v.raw = s
	return nil
}

// RegisterFlags defines the configuration's flags on fs: one per setting,
// plus --config naming a TOML file. Each flag's usage names its
// environment variable. Load calls RegisterFlags for the flags fs does not
// have yet, so a caller needs it only to show usage before Load, or to
// register the flags among its own in a chosen order.
func RegisterFlags(fs *flag.FlagSet) {
	def := DefaultConfig()
	if fs.Lookup(configFlag) == nil {
		fs.String(configFlag, "", "read settings from this TOML `file` (env "+envName(configFlag)+")")
	}
	for i := range settings {
		st := &settings[i]
		if fs.Lookup(st.flag) != nil {
			continue
		}
		fs.Var(&flagValue{st: st, raw: st.format(&def)}, st.flag,
			st.usage+" (env "+envName(st.flag)+")")
	}
}

// Load parses args with fs and returns the configuration they, the
// environment and the TOML file give, validated. Precedence, highest
// first: flags set in args, environment variables (read with getenv; nil
// means an empty environment), the file named by --config or LATCH_CONFIG,
// DefaultConfig. Load registers the flags of RegisterFlags that fs lacks.
// Arguments left after the flags are in fs.Args().
//
// An error from parsing args wraps ErrFlags (and flag.ErrHelp for -h).
// Other errors name the flag, variable or file key at fault.
func Load(fs *flag.FlagSet, args []string, getenv func(string) string) (Config, error) {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return Config{}, fmt.Errorf("%w: %w", ErrFlags, err)
	}
	given := make(map[string]bool)
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })

	cfg := DefaultConfig()

	path := getenv(envName(configFlag))
	if given[configFlag] {
		path = fs.Lookup(configFlag).Value.String()
	}
	if path != "" {
		if err := loadFile(&cfg, path); err != nil {
			return Config{}, err
		}
	}

	for i := range settings {
		st := &settings[i]
		name := envName(st.flag)
		if s := getenv(name); s != "" {
			if err := st.set(&cfg, s); err != nil {
				return Config{}, fmt.Errorf("config: environment variable %s=%q: %w", name, s, err)
			}
		}
	}

	for i := range settings {
		st := &settings[i]
		if !given[st.flag] {
			continue
		}
		v, ok := fs.Lookup(st.flag).Value.(*flagValue)
		if !ok {
			return Config{}, fmt.Errorf("config: flag -%s is defined by someone else on FlagSet %q", st.flag, fs.Name())
		}
		if err := st.set(&cfg, v.raw); err != nil {
			return Config{}, fmt.Errorf("config: flag -%s=%q: %w", st.flag, v.raw, err)
		}
	}

	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// loadFile reads the TOML file at path into cfg, over what cfg holds.
func loadFile(cfg *Config, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if err := decodeTOML(cfg, string(data)); err != nil {
		return fmt.Errorf("config: %s: %w", path, err)
	}
	return nil
}

// decodeTOML decodes a TOML document into cfg, over what cfg holds. Keys
// that are not settings are an error naming them, and so are durations
// written as anything but a string.
func decodeTOML(cfg *Config, doc string) error {
	// Decode into a copy so that cfg is untouched on error.
	c := *cfg
	md, err := toml.Decode(doc, &c)
	if err != nil {
		return err
	}
	if undecoded := md.Undecoded(); len(undecoded) > 0 {
		// Name an unknown table, not every key in it.
		unknown := make(map[string]bool)
		var keys []string
		for _, k := range undecoded {
			unknown[k.String()] = true
			if len(k) > 1 && unknown[k[:len(k)-1].String()] {
				continue
			}
			keys = append(keys, strconv.Quote(k.String()))
		}
		noun := "key"
		if len(keys) > 1 {
			noun = "keys"
		}
		return fmt.Errorf("unknown %s %s", noun, strings.Join(keys, ", "))
	}
	for i := range settings {
		st := &settings[i]
		key := strings.Split(st.toml, ".")
		if _, isDur := st.field(&c).(*time.Duration); !isDur || !md.IsDefined(key...) {
			continue
		}
		if typ := md.Type(key...); typ != "String" {
			return fmt.Errorf("key %q: a duration must be a string like \"10s\", not %s", st.toml, strings.ToLower(typ))
		}
	}
	*cfg = c
	return nil
}

// tomlKeys returns the TOML key of every setting, sorted; for tests.
func tomlKeys() []string {
	keys := make([]string, len(settings))
	for i, st := range settings {
		keys[i] = st.toml
	}
	slices.Sort(keys)
	return keys
}
