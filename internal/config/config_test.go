package config

import (
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestDefaultConfigIsValid(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig().Validate() = %v", err)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*Config)
		want   []string // substrings of the error; none: valid
	}{
		{"default", func(*Config) {}, nil},
		{"debug level", func(c *Config) { c.Log.Level = "debug" }, nil},
		{"json format", func(c *Config) { c.Log.Format = "json" }, nil},
		{"no key limit", func(c *Config) { c.Lock.MaxKeys = 0 }, nil},
		{"lock-delay", func(c *Config) { c.Lock.LockDelay = 5 * time.Second }, nil},
		{"empty level", func(c *Config) { c.Log.Level = "" }, []string{`invalid log-level ""`}},
		{"upper-case level", func(c *Config) { c.Log.Level = "INFO" }, []string{`invalid log-level "INFO"`}},
		{"bad format", func(c *Config) { c.Log.Format = "xml" }, []string{`invalid log-format "xml"`}},
		{"negative max-keys", func(c *Config) { c.Lock.MaxKeys = -1 }, []string{"invalid max-keys -1"}},
		{"no sorted-set limits", func(c *Config) { c.Redis.ZSetMaxMembers, c.Redis.ZSetMaxTotal = 0, 0 }, nil},
		{"negative redis-zset-max-members", func(c *Config) { c.Redis.ZSetMaxMembers = -1 }, []string{"invalid redis-zset-max-members -1"}},
		{"negative redis-zset-max-total", func(c *Config) { c.Redis.ZSetMaxTotal = -2 }, []string{"invalid redis-zset-max-total -2"}},
		{"negative lock-delay", func(c *Config) { c.Lock.LockDelay = -time.Second }, []string{"invalid lock-delay -1s"}},
		{"zero shutdown-timeout", func(c *Config) { c.Server.ShutdownTimeout = 0 }, []string{"invalid shutdown-timeout 0s"}},
		{"dlock off", func(c *Config) { c.DLock.Addr = "" }, nil},
		{"admin off", func(c *Config) { c.Admin.Addr = "" }, nil},
		{"admin any port", func(c *Config) { c.Admin.Addr = ":0" }, nil},
		{"admin addr without port", func(c *Config) { c.Admin.Addr = "localhost" }, []string{`invalid admin-addr "localhost"`}},
		{"two admin tokens", func(c *Config) { c.Admin.Token = "a"; c.Admin.TokenFile = "f" }, []string{"admin-token and admin-token-file are both set"}},
		{"dlock idle timeout off", func(c *Config) { c.DLock.IdleTimeout = 0 }, nil},
		{"tiny dlock-max-frame", func(c *Config) { c.DLock.MaxFrame = 100 }, []string{"invalid dlock-max-frame 100"}},
		{"huge dlock-max-frame", func(c *Config) { c.DLock.MaxFrame = 1 << 30 }, []string{"invalid dlock-max-frame 1073741824"}},
		{"negative dlock-idle-timeout", func(c *Config) { c.DLock.IdleTimeout = -time.Second }, []string{"invalid dlock-idle-timeout -1s"}},
		{"negative max-waiters-per-key", func(c *Config) { c.Lock.MaxWaitersPerKey = -1 }, []string{"invalid max-waiters-per-key -1"}},
		{"max-waiters-per-key over the table's bound", func(c *Config) { c.Lock.MaxWaitersPerKey = 65536 }, []string{"invalid max-waiters-per-key 65536: want 0 to 65535"}},
		{"negative max-waiters", func(c *Config) { c.Lock.MaxWaiters = -1 }, []string{"invalid max-waiters -1"}},
		{"negative max-conns", func(c *Config) { c.Memcache.MaxConns, c.DLock.MaxConns = -1, -2 }, []string{"invalid memcache-max-conns -1", "invalid dlock-max-conns -2"}},
		{"negative timeouts", func(c *Config) {
			c.Memcache.IdleTimeout, c.Memcache.ReadTimeout, c.Memcache.WriteTimeout = -1, -2, -3
			c.DLock.ReadTimeout, c.DLock.WriteTimeout = -4, -5
		}, []string{"invalid memcache-idle-timeout -1ns", "invalid memcache-read-timeout -2ns", "invalid memcache-write-timeout -3ns", "invalid dlock-read-timeout -4ns", "invalid dlock-write-timeout -5ns"}},
		{"snapshot cadence", func(c *Config) {
			c.Cluster.SnapshotEntries, c.Cluster.SnapshotInterval, c.Cluster.SnapshotTrailingEntries = 16, 100*time.Millisecond, 1
		}, nil},
		{"few snapshot-entries", func(c *Config) { c.Cluster.SnapshotEntries = 15 }, []string{"invalid snapshot-entries 15: at least 16"}},
		{"short snapshot-interval", func(c *Config) { c.Cluster.SnapshotInterval = 99 * time.Millisecond }, []string{"invalid snapshot-interval 99ms: at least 100ms"}},
		{"no snapshot-trailing-entries", func(c *Config) { c.Cluster.SnapshotTrailingEntries = 0 }, []string{"invalid snapshot-trailing-entries 0: at least 1"}},
		{"negative snapshot-trailing-entries", func(c *Config) { c.Cluster.SnapshotTrailingEntries = -5 }, []string{"invalid snapshot-trailing-entries -5: at least 1"}},
		{"a cluster node", cluster("n1", "10.0.0.1:11290", "", "n1=10.0.0.1:11290,n2=10.0.0.2:11290"), nil},
		{"a cluster node on every interface", cluster("n1", "0.0.0.0:11290", "", "n1=10.0.0.1:11290,n2=10.0.0.2:11290"), nil},
		{"a cluster node advertised", cluster("n1", "0.0.0.0:11290", "10.0.0.1:11290", "n1=10.0.0.1:11290,n2=10.0.0.2:11290"), nil},
		{"a cluster node listed by name", cluster("n1", "10.0.0.1:11290", "", "n1=latch-1:11290,n2=latch-2:11290"), nil},
		{"a cluster node without data-dir", func(c *Config) {
			cluster("n1", "10.0.0.1:11290", "", "n1=10.0.0.1:11290")(c)
			c.Cluster.DataDir = ""
		}, []string{"a cluster node needs data-dir"}},
		{"node-id not listed", cluster("n3", "10.0.0.1:11290", "", "n1=10.0.0.1:11290,n2=10.0.0.2:11290"), []string{`initial-cluster does not list node-id "n3"`}},
		{"an ID listed twice", cluster("n1", "10.0.0.1:11290", "", "n1=10.0.0.1:11290,n1=10.0.0.2:11290"), []string{"n1 listed twice"}},
		{"an address listed twice", cluster("n1", "10.0.0.1:11290", "", "n1=10.0.0.1:11290,n2=10.0.0.1:11290"), []string{"10.0.0.1:11290 listed twice"}},
		{"own port mistyped", cluster("n1", "10.0.0.1:11290", "", "n1=10.0.0.1:11920,n2=10.0.0.2:11290"),
			[]string{`initial-cluster lists node-id "n1" at 10.0.0.1:11920, but raft-addr is 10.0.0.1:11290`}},
		{"own host mistyped", cluster("n1", "0.0.0.0:11290", "10.0.0.1:11290", "n1=10.0.0.2:11290,n2=10.0.0.3:11290"),
			[]string{`initial-cluster lists node-id "n1" at 10.0.0.2:11290, but raft-advertise is 10.0.0.1:11290`}},
		{
			"every error at once",
			func(c *Config) { c.Log.Level = "x"; c.Log.Format = "y"; c.Lock.MaxKeys = -2 },
			[]string{"log-level", "log-format", "max-keys"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.modify(&c)
			err := c.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want an error with %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestParseLogLevel(t *testing.T) {
	tests := []struct {
		in      string
		want    slog.Level
		wantErr bool
	}{
		{"debug", slog.LevelDebug, false},
		{"info", slog.LevelInfo, false},
		{"warn", slog.LevelWarn, false},
		{"error", slog.LevelError, false},
		{"warning", 0, true},
		{"Debug", 0, true},
		{"", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseLogLevel(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseLogLevel(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

// cluster sets c up as node id of a cluster (initial-cluster list).
func cluster(id, raftAddr, advertise, list string) func(*Config) {
	return func(c *Config) {
		c.Cluster.DataDir, c.Cluster.NodeID, c.Cluster.InitialCluster = "/var/lib/latch", id, list
		c.Cluster.RaftAddr, c.Cluster.RaftAdvertise = raftAddr, advertise
	}
}
