package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/latchd/latch/internal/admin"
	"github.com/latchd/latch/internal/cache"
	"github.com/latchd/latch/internal/dlock"
	"github.com/latchd/latch/internal/engine"
	"github.com/latchd/latch/internal/memcache"
	"github.com/latchd/latch/internal/netserve"
	"github.com/latchd/latch/internal/node"
	"github.com/latchd/latch/internal/resp"
	"github.com/latchd/latch/internal/znode"
	"github.com/latchd/latch/internal/zookeeper"
	"github.com/latchd/latch/internal/zset"
)

// Config is the configuration of one latch server. The zero value is not
// valid: start from DefaultConfig.
type Config struct {
	Log       LogConfig       `toml:"log"`
	Lock      LockConfig      `toml:"lock"`
	Server    ServerConfig    `toml:"server"`
	Memcache  MemcacheConfig  `toml:"memcache"`
	Redis     RedisConfig     `toml:"redis"`
	DLock     DLockConfig     `toml:"dlock"`
	ZooKeeper ZooKeeperConfig `toml:"zookeeper"`
	Admin     AdminConfig     `toml:"admin"`
	TLS       TLSConfig       `toml:"tls"`
	Cluster   ClusterConfig   `toml:"cluster"`
}

// ClusterConfig makes the lock service durable and replicated. With none
// of it set, latch is one in-memory node. DataDir alone is a one-node
// cluster on disk: a restart keeps leased locks, items and the token
// counter. NodeID, RaftAddr and InitialCluster (with DataDir) make a node
// of a Raft cluster.
type ClusterConfig struct {
	// DataDir holds the Raft log and snapshots.
	DataDir string `toml:"data-dir"`
	// NodeID names this node in its cluster (default "latch" alone).
	NodeID string `toml:"node-id"`
	// RaftAddr is where this node serves Raft and the other nodes'
	// forwarded requests; RaftAdvertise, when set, is the address the
	// others reach it at.
	RaftAddr      string `toml:"raft-addr"`
	RaftAdvertise string `toml:"raft-advertise"`
	// InitialCluster lists the members as ID=HOST:PORT,... (this node
	// included): nodes started with the same list bootstrap the cluster;
	// a node with data rejoins its own.
	InitialCluster string `toml:"initial-cluster"`
	// InitialClusterState is "new" (the nodes of InitialCluster without
	// data bootstrap the cluster together) or "existing" (this node, when
	// it has no data, joins a running cluster: it waits to be added with
	// "latch cluster add"). A node with data rejoins its own either way.
	InitialClusterState string `toml:"initial-cluster-state"`
	// PeerTLSCert, PeerTLSKey and PeerTLSCA, all three or none, make the
	// connections between nodes (Raft and forwarding, on RaftAddr) mutual
	// TLS: each node presents its certificate, which must chain to
	// PeerTLSCA and name the host the others dial (a DNS or IP SAN), and
	// accepts only peers whose certificate chains to it.
	PeerTLSCert string `toml:"peer-tls-cert"`
	PeerTLSKey  string `toml:"peer-tls-key"`
	PeerTLSCA   string `toml:"peer-tls-ca"`
	// NodeTTL is how long the connection-bound sessions of a node outlive
	// its last heartbeat.
	NodeTTL time.Duration `toml:"node-ttl"`
	// ElectionTimeout is Raft's heartbeat and election timeout.
	ElectionTimeout time.Duration `toml:"election-timeout"`
	// SnapshotEntries is how many log entries since the last snapshot make
	// a node take one (etcd's snapshot-count), checked every
	// SnapshotInterval; a snapshot leaves the log's last
	// SnapshotTrailingEntries entries for followers that lag (etcd's
	// snapshot-catchup-entries): one further behind is sent the snapshot.
	SnapshotEntries         int           `toml:"snapshot-entries"`
	SnapshotInterval        time.Duration `toml:"snapshot-interval"`
	SnapshotTrailingEntries int           `toml:"snapshot-trailing-entries"`
}

// Peer is a member of the initial cluster.
type Peer struct{ ID, Addr string }

// Peers parses InitialCluster.
func (c ClusterConfig) Peers() ([]Peer, error) {
	if strings.TrimSpace(c.InitialCluster) == "" {
		return nil, nil
	}
	var peers []Peer
	seen := make(map[string]bool)
	for _, part := range strings.Split(c.InitialCluster, ",") {
		id, addr, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || id == "" || addr == "" {
			return nil, fmt.Errorf("config: initial-cluster: %q is not ID=HOST:PORT", part)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("config: initial-cluster: %s: %w", id, err)
		}
		if seen[id] {
			return nil, fmt.Errorf("config: initial-cluster: %s listed twice", id)
		}
		if seen["="+addr] {
			return nil, fmt.Errorf("config: initial-cluster: %s listed twice", addr)
		}
		seen[id], seen["="+addr] = true, true
		peers = append(peers, Peer{ID: id, Addr: addr})
	}
	return peers, nil
}

// Clustered reports whether c makes a node of a multi-node cluster.
func (c ClusterConfig) Clustered() bool { return c.RaftAddr != "" || c.InitialCluster != "" }

// validate checks the cluster settings together.
func (c ClusterConfig) validate() []error {
	var errs []error
	if c.NodeTTL < time.Second {
		errs = append(errs, fmt.Errorf("config: invalid node-ttl %v: at least 1s", c.NodeTTL))
	}
	if c.ElectionTimeout < 10*time.Millisecond || c.ElectionTimeout*3 > c.NodeTTL {
		errs = append(errs, fmt.Errorf("config: invalid election-timeout %v: from 10ms to a third of node-ttl", c.ElectionTimeout))
	}
	if c.SnapshotEntries < 16 {
		errs = append(errs, fmt.Errorf("config: invalid snapshot-entries %d: at least 16", c.SnapshotEntries))
	}
	if c.SnapshotInterval < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("config: invalid snapshot-interval %v: at least 100ms", c.SnapshotInterval))
	}
	if c.SnapshotTrailingEntries < 1 {
		errs = append(errs, fmt.Errorf("config: invalid snapshot-trailing-entries %d: at least 1", c.SnapshotTrailingEntries))
	}
	if c.InitialClusterState != "new" && c.InitialClusterState != "existing" {
		errs = append(errs, fmt.Errorf("config: invalid initial-cluster-state %q: new or existing", c.InitialClusterState))
	}
	if set := btoi(c.PeerTLSCert != "") + btoi(c.PeerTLSKey != "") + btoi(c.PeerTLSCA != ""); set != 0 && set != 3 {
		errs = append(errs, errors.New("config: peer TLS needs peer-tls-cert, peer-tls-key and peer-tls-ca together"))
	} else if set == 3 && !c.Clustered() {
		errs = append(errs, errors.New("config: peer TLS is for a cluster node (raft-addr, initial-cluster)"))
	}
	if !c.Clustered() {
		return errs
	}
	if c.DataDir == "" || c.NodeID == "" || c.RaftAddr == "" || c.InitialCluster == "" {
		errs = append(errs, errors.New("config: a cluster node needs data-dir, node-id, raft-addr and initial-cluster"))
	}
	peers, err := c.Peers()
	if err != nil {
		return append(errs, err)
	}
	var own *Peer
	for i, p := range peers {
		if p.ID == c.NodeID {
			own = &peers[i]
		}
	}
	switch {
	case c.InitialCluster != "" && own == nil:
		errs = append(errs, fmt.Errorf("config: initial-cluster does not list node-id %q", c.NodeID))
	case own != nil && c.RaftAddr != "":
		if err := c.checkOwnAddr(own.Addr); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// checkOwnAddr checks the node's address in initial-cluster, listed, against
// the one it advertises (raft-advertise, or raft-addr): the other nodes
// dial the listed one, so a typo there cuts the node off from the
// cluster it starts. The ports must be the same, and the hosts too when
// both are IP addresses (a name is not resolved here).
func (c ClusterConfig) checkOwnAddr(listed string) error {
	adv, name := c.RaftAdvertise, "raft-advertise"
	if adv == "" {
		adv, name = c.RaftAddr, "raft-addr"
	}
	lh, lp, err1 := net.SplitHostPort(listed)
	ah, ap, err2 := net.SplitHostPort(adv)
	if err1 != nil || err2 != nil {
		return nil // reported where each is parsed
	}
	lip, aip := net.ParseIP(lh), net.ParseIP(ah)
	if lp != ap || lip != nil && aip != nil && !aip.IsUnspecified() && !lip.Equal(aip) {
		return fmt.Errorf("config: initial-cluster lists node-id %q at %s, but %s is %s", c.NodeID, listed, name, adv)
	}
	return nil
}

// TLSConfig configures TLS. With a certificate set, every client listener
// (memcached, dlock, Redis, admin) serves TLS only; none serves plaintext.
// The connections between cluster nodes have their own (ClusterConfig).
type TLSConfig struct {
	// Cert names a PEM file with the server's certificate (then any
	// intermediates), presented by every listener.
	Cert string `toml:"cert"`
	// Key names a PEM file with the certificate's private key.
	Key string `toml:"key"`
	// ClientCA, when set, names a PEM file of CA certificates: every
	// client must present a certificate signed by one of them.
	ClientCA string `toml:"client-ca"`
}

// AdminConfig configures the admin HTTP server: metrics, the status page,
// the JSON API and its admin actions. Its settings are admin.Config's
// (Addr, Token, MaxConns), plus TokenFile.
type AdminConfig struct {
	admin.Config
	// TokenFile names a file holding the token instead (surrounding white
	// space ignored), so that it appears in no command line or
	// environment. At most one of Token and TokenFile may be set.
	TokenFile string `toml:"token-file"`
}

// LoadToken returns the admin token: Token, or the content of TokenFile
// without surrounding white space; "" when neither is set.
func (c AdminConfig) LoadToken() (string, error) {
	if c.TokenFile == "" {
		return c.Token, nil
	}
	data, err := os.ReadFile(c.TokenFile)
	if err != nil {
		return "", fmt.Errorf("config: admin-token-file: %w", err)
	}
	tok := strings.TrimSpace(string(data))
	if tok == "" {
		return "", fmt.Errorf("config: admin-token-file %s is empty", c.TokenFile)
	}
	return tok, nil
}

// DLockConfig configures the dlock front end (protocol versions 2 and 3).
// Its settings are dlock.Config's (netserve.Config's Addr, Allow,
// MaxConns, timeouts and Loops, and MaxFrame), plus TokensFile; its
// MaxKeys is the lock table's.
type DLockConfig struct {
	dlock.Config
	// TokensFile, when set, names a file of access tokens, one per line
	// with its rights and key prefixes (netserve.ReadTokens): every
	// request must carry one of them in access_token, and do only what it
	// allows.
	TokensFile string `toml:"tokens-file"`
}

// MemcacheConfig configures the memcached front end (text and binary
// protocols with the yrmcds lock extension). Its settings are
// memcache.Config's (netserve.Config's Addr, Allow, MaxConns, timeouts and
// Loops), plus the limits of the item cache behind it.
type MemcacheConfig struct {
	memcache.Config
	// MemoryMB bounds the memory of all items, in MiB (memcached's -m,
	// yrmcds's memory_limit); least recently used unlocked items are
	// evicted to stay under it.
	MemoryMB int `toml:"memory-mb"`
	// MaxItemSize is the largest value accepted, in bytes (yrmcds's
	// max_data_size).
	MaxItemSize int `toml:"max-item-size"`
}

// RedisConfig configures the Redis protocol front end (RESP2 and RESP3,
// for the Redis lock clients). Its settings are resp.Config's
// (netserve.Config's Addr, Allow, MaxConns, timeouts and Loops, and
// MaxValue), plus TokensFile.
type RedisConfig struct {
	resp.Config
	// TokensFile, when set, names a file of tokens that AUTH accepts, in
	// the dlock tokens file's format (TOKEN [lock|read [PREFIX...]]):
	// until it authenticates, a connection may only AUTH, HELLO or QUIT.
	TokensFile string `toml:"tokens-file"`
	// ZSetMaxMembers and ZSetMaxTotal limit the members of one sorted set
	// and of all of them (the semaphores of redis-semaphore); 0 means no
	// limit. A ZADD past them fails and changes nothing.
	ZSetMaxMembers int `toml:"zset-max-members"`
	ZSetMaxTotal   int `toml:"zset-max-total"`
}

// ZSet returns the sorted sets' limits.
func (c RedisConfig) ZSet() zset.Limits {
	return zset.Limits{MaxMembers: c.ZSetMaxMembers, MaxTotal: c.ZSetMaxTotal}
}

// ZooKeeperConfig configures the ZooKeeper front end (the lock recipes of
// kazoo, Curator, go-zookeeper and zkCli on latch's data tree). Its
// settings are zookeeper.Config's (netserve.Config's Addr, Allow,
// MaxConns and timeouts, TickTime, the session timeout bounds,
// MaxWatches, MaxQueued), plus the limits of the data tree.
type ZooKeeperConfig struct {
	zookeeper.Config
	// MaxZnodes, MaxChildren and MaxEphemerals limit the znodes in all,
	// the children of one znode and the ephemerals of one session; 0
	// means no limit. MaxData limits one znode's data, in bytes.
	MaxZnodes     int `toml:"max-znodes"`
	MaxChildren   int `toml:"max-children"`
	MaxEphemerals int `toml:"max-ephemerals"`
	MaxData       int `toml:"max-data"`
}

// ZNode returns the data tree's limits.
func (c ZooKeeperConfig) ZNode() znode.Config {
	return znode.Config{MaxNodes: c.MaxZnodes, MaxChildren: c.MaxChildren, MaxEphemerals: c.MaxEphemerals, MaxData: c.MaxData}
}

// LogConfig configures the server's log, written to standard error.
type LogConfig struct {
	// Level is the lowest level logged: "debug", "info", "warn" or "error".
	Level string `toml:"level"`
	// Format is "text" (logfmt-like key=value pairs) or "json".
	Format string `toml:"format"`
}

// LockConfig configures the lock table: its settings are node.Config's
// (MaxKeys, MaxWaitersPerKey, MaxWaiters, LockDelay).
type LockConfig struct {
	node.Config
}

// ServerConfig configures the server process.
type ServerConfig struct {
	// ShutdownTimeout bounds a graceful shutdown: how long the server waits
	// for waiters to be answered and connections to close.
	ShutdownTimeout time.Duration `toml:"shutdown-timeout"`
	// Version is the running binary's version, reported by the protocols
	// that tell it (memcached's version command). Set by the program, not
	// a setting.
	Version string `toml:"-"`
	// Load, when set, reads the configuration again as the program read
	// it at start (flags, environment, file), for a reload (SIGHUP,
	// POST /v1/reload); nil: a reload keeps the configuration and reads
	// again only the files it names. Set by the program, not a setting.
	Load func() (Config, error) `toml:"-"`
	// LogLevel, when set, is the level of the server's logger, which a
	// reload sets to the new log-level; nil: the level waits for a
	// restart. Set by the program, not a setting.
	LogLevel *slog.LevelVar `toml:"-"`
}

// DefaultConfig returns the configuration used when nothing is set: the
// defaults of each component (node, memcache, dlock, admin and the item
// cache), and those of the log and the process.
func DefaultConfig() Config {
	items := cache.DefaultConfig()
	return Config{
		Log: LogConfig{
			Level:  "info",
			Format: "text",
		},
		Lock: LockConfig{Config: node.DefaultConfig()},
		Server: ServerConfig{
			ShutdownTimeout: 10 * time.Second,
		},
		Memcache: MemcacheConfig{
			Config:      memcache.DefaultConfig(),
			MemoryMB:    int(items.MemoryLimit >> 20),
			MaxItemSize: items.MaxItemSize,
		},
		Redis: RedisConfig{Config: resp.DefaultConfig(), ZSetMaxMembers: 10_000, ZSetMaxTotal: 1_000_000},
		DLock: DLockConfig{Config: dlock.DefaultConfig()},
		ZooKeeper: ZooKeeperConfig{
			Config:        zookeeper.DefaultConfig(),
			MaxZnodes:     1_000_000,
			MaxChildren:   100_000,
			MaxEphemerals: 10_000,
			MaxData:       znode.DefaultMaxData,
		},
		Admin: AdminConfig{Config: admin.DefaultConfig()},
		Cluster: ClusterConfig{
			InitialClusterState: "new", NodeTTL: 10 * time.Second, ElectionTimeout: 500 * time.Millisecond,
			SnapshotEntries: 16384, SnapshotInterval: 2 * time.Minute, SnapshotTrailingEntries: 10240,
		},
	}
}

// Validate reports every invalid setting of c, joined into one error. Each
// names the setting by its flag name.
func (c Config) Validate() error {
	errs := c.Cluster.validate()
	if _, err := ParseLogLevel(c.Log.Level); err != nil {
		errs = append(errs, err)
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		errs = append(errs, fmt.Errorf("config: invalid log-format %q: want text or json", c.Log.Format))
	}
	for _, fe := range []struct {
		name string
		cfg  netserve.Config
	}{
		{"memcache", c.Memcache.Config.Config},
		{"dlock", c.DLock.Config.Config},
		{"redis", c.Redis.Config.Config},
	} {
		if err := fe.cfg.ValidateAs(fe.name + "-"); err != nil {
			errs = append(errs, fmt.Errorf("config: %w", err))
		}
	}
	if c.Lock.MaxKeys < 0 {
		errs = append(errs, fmt.Errorf("config: invalid max-keys %d: must not be negative (0 means no limit)", c.Lock.MaxKeys))
	}
	if n := c.Lock.MaxWaitersPerKey; n < 0 || n > maxQueue {
		errs = append(errs, fmt.Errorf("config: invalid max-waiters-per-key %d: want 0 to %d (0 means %[2]d)", n, maxQueue))
	}
	for _, v := range []struct {
		name string
		n    int
	}{
		{"max-waiters", c.Lock.MaxWaiters},
		{"admin-max-conns", c.Admin.MaxConns},
	} {
		if v.n < 0 {
			errs = append(errs, fmt.Errorf("config: invalid %s %d: must not be negative (0 means no limit)", v.name, v.n))
		}
	}
	if c.Lock.LockDelay < 0 {
		errs = append(errs, fmt.Errorf("config: invalid lock-delay %v: must not be negative", c.Lock.LockDelay))
	}
	if c.Memcache.MemoryMB <= 0 {
		errs = append(errs, fmt.Errorf("config: invalid memcache-memory-mb %d: must be positive", c.Memcache.MemoryMB))
	}
	if c.Memcache.MaxItemSize <= 0 || int64(c.Memcache.MaxItemSize) > int64(c.Memcache.MemoryMB)<<20 {
		errs = append(errs, fmt.Errorf("config: invalid memcache-max-item-size %d: must be positive and fit in memcache-memory-mb", c.Memcache.MaxItemSize))
	}
	if err := c.ZooKeeper.Config.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("config: %w", err))
	}
	for _, v := range []struct {
		name string
		n    int
	}{
		{"zookeeper-max-znodes", c.ZooKeeper.MaxZnodes},
		{"zookeeper-max-children", c.ZooKeeper.MaxChildren},
		{"zookeeper-max-ephemerals", c.ZooKeeper.MaxEphemerals},
		{"redis-zset-max-members", c.Redis.ZSetMaxMembers},
		{"redis-zset-max-total", c.Redis.ZSetMaxTotal},
	} {
		if v.n < 0 {
			errs = append(errs, fmt.Errorf("config: invalid %s %d: must not be negative (0 means no limit)", v.name, v.n))
		}
	}
	if c.ZooKeeper.MaxData <= 0 || c.ZooKeeper.MaxData > 1<<20 {
		errs = append(errs, fmt.Errorf("config: invalid zookeeper-max-data %d: must be from 1 to %d bytes", c.ZooKeeper.MaxData, 1<<20))
	}
	if c.Redis.MaxValue <= 0 {
		errs = append(errs, fmt.Errorf("config: invalid redis-max-value %d: must be positive", c.Redis.MaxValue))
	}
	if (c.TLS.Cert == "") != (c.TLS.Key == "") {
		errs = append(errs, errors.New("config: tls-cert and tls-key go together: set both or neither"))
	}
	if c.TLS.ClientCA != "" && c.TLS.Cert == "" {
		errs = append(errs, errors.New("config: tls-client-ca needs tls-cert and tls-key"))
	}
	if c.DLock.MaxFrame < 512 || c.DLock.MaxFrame > 64<<20 {
		errs = append(errs, fmt.Errorf("config: invalid dlock-max-frame %d: must be from 512 to %d bytes", c.DLock.MaxFrame, 64<<20))
	}
	if c.Admin.Addr != "" {
		if _, _, err := net.SplitHostPort(c.Admin.Addr); err != nil {
			errs = append(errs, fmt.Errorf("config: invalid admin-addr %q: want host:port (empty: off)", c.Admin.Addr))
		}
	}
	if c.Admin.Token != "" && c.Admin.TokenFile != "" {
		errs = append(errs, errors.New("config: admin-token and admin-token-file are both set: set one"))
	}
	if c.Server.ShutdownTimeout <= 0 {
		errs = append(errs, fmt.Errorf("config: invalid shutdown-timeout %v: must be positive", c.Server.ShutdownTimeout))
	}
	return errors.Join(errs...)
}

// maxQueue is the most waiters a key can have.
const maxQueue = engine.MaxQueue

// logLevels are the values of LogConfig.Level, lowest first.
var logLevels = []struct {
	name  string
	level slog.Level
}{
	{"debug", slog.LevelDebug},
	{"info", slog.LevelInfo},
	{"warn", slog.LevelWarn},
	{"error", slog.LevelError},
}

// ParseLogLevel returns the slog level named s, one of the values of
// LogConfig.Level.
func ParseLogLevel(s string) (slog.Level, error) {
	names := make([]string, 0, len(logLevels))
	for _, l := range logLevels {
		if s == l.name {
			return l.level, nil
		}
		names = append(names, l.name)
	}
	return 0, fmt.Errorf("config: invalid log-level %q: want one of %s", s, strings.Join(names, ", "))
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
