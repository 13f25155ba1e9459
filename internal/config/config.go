package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/latchd/latch/internal/admin"
	"github.com/latchd/latch/internal/cache"
	"github.com/latchd/latch/internal/dlock"
	"github.com/latchd/latch/internal/engine"
	"github.com/latchd/latch/internal/memcache"
	"github.com/latchd/latch/internal/node"
)

// Config is the configuration of one latch server. The zero value is not
// valid: start from DefaultConfig.
type Config struct {
	Log      LogConfig      `toml:"log"`
	Lock     LockConfig     `toml:"lock"`
	Server   ServerConfig   `toml:"server"`
	Memcache MemcacheConfig `toml:"memcache"`
	Redis    RedisConfig    `toml:"redis"`
	DLock    DLockConfig    `toml:"dlock"`
	Admin    AdminConfig    `toml:"admin"`
	TLS      TLSConfig      `toml:"tls"`
	Cluster  ClusterConfig  `toml:"cluster"`
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
	// SnapshotInterval; a snapshot leaves the log's last entries for
	// followers that lag.
	SnapshotEntries  int           `toml:"snapshot-entries"`
	SnapshotInterval time.Duration `toml:"snapshot-interval"`
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

// TLSConfig configures TLS. With a certificate set, every listener
// (memcached, dlock, admin) serves TLS only; none serves plaintext.
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
// Its settings are dlock.Config's (Addr, MaxFrame, the timeouts,
// MaxConns), plus TokensFile; its MaxKeys is the lock table's.
type DLockConfig struct {
	dlock.Config
	// TokensFile, when set, names a file of access tokens, one per line
	// with its rights and key prefixes (dlock.ReadTokens): every request
	// must carry one of them in access_token, and do only what it allows.
	TokensFile string `toml:"tokens-file"`
}

// MemcacheConfig configures the memcached front end (text and binary
// protocols with the yrmcds lock extension). Its settings are
// memcache.Config's (Addr, MaxConns, the timeouts), plus the limits of the
// item cache behind it and Allow, which the server parses into
// memcache.Config.Allow.
type MemcacheConfig struct {
	memcache.Config
	// MemoryMB bounds the memory of all items, in MiB (memcached's -m,
	// yrmcds's memory_limit); least recently used unlocked items are
	// evicted to stay under it.
	MemoryMB int `toml:"memory-mb"`
	// MaxItemSize is the largest value accepted, in bytes (yrmcds's
	// max_data_size).
	MaxItemSize int `toml:"max-item-size"`
	// Allow, when set, is a comma-separated list of the client networks
	// (CIDRs like 10.0.0.0/8, or single addresses) the front end serves: a
	// connection from elsewhere is closed at once. Empty: every client.
	// It hides memcache.Config.Allow, the parsed list.
	Allow string `toml:"allow"`
	// Loops is the number of event loops serving plain TCP connections
	// (on Linux, in memory): 0 picks half the CPUs, at least one; -1
	// serves each connection from a goroutine of its own. TLS
	// connections, and every connection of a replicated node (whose
	// requests wait for their commit), get a goroutine each. It hides
	// memcache.Config.Loops, the number the server starts.
	Loops int `toml:"loops"`
}

// RedisConfig configures the Redis protocol front end (RESP2 and RESP3,
// for the Redis lock clients).
type RedisConfig struct {
	// Addr is the TCP address to listen on; empty disables the front end.
	Addr string `toml:"addr"`
	// MaxConns limits the open connections; one more is answered
	// "-ERR max number of clients reached" and closed. Zero: no limit.
	MaxConns int `toml:"max-conns"`
	// IdleTimeout closes a connection silent for this long between
	// requests (Redis's timeout); its locks stay, since they belong to
	// their owner values. Zero: never.
	IdleTimeout time.Duration `toml:"idle-timeout"`
	// ReadTimeout bounds the time a request may take to arrive once its
	// first byte has. Zero: no bound.
	ReadTimeout time.Duration `toml:"read-timeout"`
	// WriteTimeout bounds each write of replies. Zero: never.
	WriteTimeout time.Duration `toml:"write-timeout"`
	// MaxValue is the longest lock value (its owner's identity) accepted,
	// in bytes.
	MaxValue int `toml:"max-value"`
	// TokensFile, when set, names a file of tokens that AUTH accepts, in
	// the dlock tokens file's format (TOKEN [lock|read [PREFIX...]]):
	// until it authenticates, a connection may only AUTH, HELLO or QUIT.
	TokensFile string `toml:"tokens-file"`
	// Allow, when set, is a comma-separated list of the client networks
	// the front end serves; others are closed at once. Empty: every
	// client.
	Allow string `toml:"allow"`
	// Loops is the number of event loops serving plain TCP connections
	// (on Linux, in memory): 0 picks half the CPUs, at least one; -1
	// serves each connection from a goroutine of its own. TLS
	// connections, and every connection of a replicated node (whose
	// requests wait for their commit), get a goroutine each.
	Loops int `toml:"loops"`
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
		Redis: RedisConfig{
			Addr:         "127.0.0.1:6379",
			MaxConns:     4096,
			ReadTimeout:  30 * time.Second,
			WriteTimeout: 10 * time.Second,
			MaxValue:     4096,
		},
		DLock:   DLockConfig{Config: dlock.DefaultConfig()},
		Admin:   AdminConfig{Config: admin.DefaultConfig()},
		Cluster: ClusterConfig{InitialClusterState: "new", NodeTTL: 10 * time.Second, ElectionTimeout: 500 * time.Millisecond, SnapshotEntries: 16384, SnapshotInterval: 2 * time.Minute},
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
	if c.Memcache.Loops < -1 {
		errs = append(errs, fmt.Errorf("config: invalid memcache-loops %d: want -1 (none), 0 (automatic) or more", c.Memcache.Loops))
	}
	if c.Redis.Loops < -1 {
		errs = append(errs, fmt.Errorf("config: invalid redis-loops %d: want -1 (none), 0 (automatic) or more", c.Redis.Loops))
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
		{"memcache-max-conns", c.Memcache.MaxConns},
		{"dlock-max-conns", c.DLock.MaxConns},
		{"redis-max-conns", c.Redis.MaxConns},
		{"admin-max-conns", c.Admin.MaxConns},
	} {
		if v.n < 0 {
			errs = append(errs, fmt.Errorf("config: invalid %s %d: must not be negative (0 means no limit)", v.name, v.n))
		}
	}
	for _, v := range []struct {
		name string
		d    time.Duration
	}{
		{"memcache-idle-timeout", c.Memcache.IdleTimeout},
		{"memcache-read-timeout", c.Memcache.ReadTimeout},
		{"memcache-write-timeout", c.Memcache.WriteTimeout},
		{"dlock-read-timeout", c.DLock.ReadTimeout},
		{"dlock-write-timeout", c.DLock.WriteTimeout},
		{"redis-idle-timeout", c.Redis.IdleTimeout},
		{"redis-read-timeout", c.Redis.ReadTimeout},
		{"redis-write-timeout", c.Redis.WriteTimeout},
	} {
		if v.d < 0 {
			errs = append(errs, fmt.Errorf("config: invalid %s %v: must not be negative (0 means none)", v.name, v.d))
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
	if c.Redis.MaxValue <= 0 {
		errs = append(errs, fmt.Errorf("config: invalid redis-max-value %d: must be positive", c.Redis.MaxValue))
	}
	if _, err := ParseNetworks(c.Redis.Allow); err != nil {
		errs = append(errs, fmt.Errorf("config: invalid redis-allow %q: %w", c.Redis.Allow, err))
	}
	if _, err := ParseNetworks(c.Memcache.Allow); err != nil {
		errs = append(errs, fmt.Errorf("config: invalid memcache-allow %q: %w", c.Memcache.Allow, err))
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
	if c.DLock.IdleTimeout < 0 {
		errs = append(errs, fmt.Errorf("config: invalid dlock-idle-timeout %v: must not be negative (0 means never)", c.DLock.IdleTimeout))
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

// ParseNetworks parses a comma-separated list of networks: CIDRs like
// 10.0.0.0/8 or fd00::/8, or single IP addresses (a network of one).
// White space around each is ignored. An empty list gives nil.
func ParseNetworks(s string) ([]netip.Prefix, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var nets []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		p, err := netip.ParsePrefix(f)
		if err != nil {
			a, aerr := netip.ParseAddr(f)
			if aerr != nil || a.Zone() != "" {
				return nil, fmt.Errorf("%q is neither a CIDR (10.0.0.0/8) nor an IP address", f)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		// Peers' addresses are compared unmapped: ::ffff:10.0.0.0/104
		// means 10.0.0.0/8.
		if a := p.Addr(); a.Is4In6() {
			if p.Bits() < 96 {
				return nil, fmt.Errorf("%q: an IPv4-mapped network needs at least 96 bits", f)
			}
			p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
		}
		nets = append(nets, p.Masked())
	}
	return nets, nil
}

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
