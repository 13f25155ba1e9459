package config

import (
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/latchd/latch/internal/admin"
	"github.com/latchd/latch/internal/dlock"
	"github.com/latchd/latch/internal/memcache"
	"github.com/latchd/latch/internal/netserve"
	"github.com/latchd/latch/internal/node"
	"github.com/latchd/latch/internal/resp"
	"github.com/latchd/latch/internal/zookeeper"
)

// env returns a getenv function over m.
func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// writeFile writes a TOML file into a temporary directory and returns its path.
func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "latch.toml")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// newFlagSet returns a FlagSet that reports nothing, as the tests read errors.
func newFlagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

func TestLoadPrecedence(t *testing.T) {
	file := writeFile(t, `
[log]
level = "warn"
format = "json"

[lock]
max-keys = 10
lock-delay = "3s"

[server]
shutdown-timeout = "1m"
`)
	partial := writeFile(t, "[lock]\nmax-keys = 20\n")
	cadence := writeFile(t, `
[cluster]
snapshot-entries = 1000
snapshot-interval = "30s"
snapshot-trailing-entries = 500
`)
	def := DefaultConfig()

	tests := []struct {
		name   string
		args   []string
		env    map[string]string
		modify func(*Config) // applied to DefaultConfig for the expected result
	}{
		{
			name:   "defaults",
			modify: func(*Config) {},
		},
		{
			name: "file",
			args: []string{"--config", file},
			modify: func(c *Config) {
				c.Log = LogConfig{Level: "warn", Format: "json"}
				c.Lock.MaxKeys, c.Lock.LockDelay = 10, 3*time.Second
				c.Server = ServerConfig{ShutdownTimeout: time.Minute}
			},
		},
		{
			name:   "file keeps defaults of keys it lacks",
			args:   []string{"--config", partial},
			modify: func(c *Config) { c.Lock.MaxKeys = 20 },
		},
		{
			name:   "file named by environment",
			env:    map[string]string{"LATCH_CONFIG": partial},
			modify: func(c *Config) { c.Lock.MaxKeys = 20 },
		},
		{
			name:   "config flag beats config environment",
			args:   []string{"-config=" + partial},
			env:    map[string]string{"LATCH_CONFIG": file},
			modify: func(c *Config) { c.Lock.MaxKeys = 20 },
		},
		{
			name: "environment",
			env: map[string]string{
				"LATCH_LOG_LEVEL":        "debug",
				"LATCH_LOG_FORMAT":       "json",
				"LATCH_MAX_KEYS":         "0",
				"LATCH_LOCK_DELAY":       "250ms",
				"LATCH_SHUTDOWN_TIMEOUT": "2s",
			},
			modify: func(c *Config) {
				c.Log = LogConfig{Level: "debug", Format: "json"}
				c.Lock.MaxKeys, c.Lock.LockDelay = 0, 250*time.Millisecond
				c.Server = ServerConfig{ShutdownTimeout: 2 * time.Second}
			},
		},
		{
			name:   "empty environment variable counts as unset",
			env:    map[string]string{"LATCH_LOG_LEVEL": ""},
			modify: func(*Config) {},
		},
		{
			name: "environment beats file",
			args: []string{"--config", file},
			env:  map[string]string{"LATCH_LOG_LEVEL": "error", "LATCH_LOCK_DELAY": "0s"},
			modify: func(c *Config) {
				c.Log = LogConfig{Level: "error", Format: "json"}
				c.Lock.MaxKeys, c.Lock.LockDelay = 10, 0
				c.Server = ServerConfig{ShutdownTimeout: time.Minute}
			},
		},
		{
			name: "flags beat environment and file",
			args: []string{"--config", file, "--log-level=info", "-max-keys", "7", "--shutdown-timeout=5s"},
			env:  map[string]string{"LATCH_LOG_LEVEL": "error", "LATCH_MAX_KEYS": "8"},
			modify: func(c *Config) {
				c.Log = LogConfig{Level: "info", Format: "json"}
				c.Lock.MaxKeys, c.Lock.LockDelay = 7, 3*time.Second
				c.Server = ServerConfig{ShutdownTimeout: 5 * time.Second}
			},
		},
		{
			name:   "flag set to the default still beats environment",
			args:   []string{"--max-keys=1000"},
			env:    map[string]string{"LATCH_MAX_KEYS": "8"},
			modify: func(*Config) {},
		},
		{
			name: "snapshot cadence from file, environment and flags",
			args: []string{"--config", cadence, "--snapshot-trailing-entries=200"},
			env:  map[string]string{"LATCH_SNAPSHOT_INTERVAL": "10s", "LATCH_SNAPSHOT_TRAILING_ENTRIES": "300"},
			modify: func(c *Config) {
				c.Cluster.SnapshotEntries, c.Cluster.SnapshotInterval, c.Cluster.SnapshotTrailingEntries = 1000, 10*time.Second, 200
			},
		},
		{
			name:   "last flag wins",
			args:   []string{"--log-format=json", "--log-format=text"},
			modify: func(*Config) {},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := def
			tt.modify(&want)
			got, err := Load(newFlagSet(), tt.args, env(tt.env))
			if err != nil {
				t.Fatalf("Load() error = %v", err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Load() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	good := writeFile(t, "[log]\nlevel = \"debug\"\n")
	tests := []struct {
		name      string
		args      []string
		env       map[string]string
		file      string // TOML content; when set, passed with --config
		want      string // substring of the error
		wantFlags bool   // the error wraps ErrFlags
	}{
		{name: "unknown flag", args: []string{"--listen=:1"}, want: "flag provided but not defined: -listen", wantFlags: true},
		{name: "bad integer flag", args: []string{"--max-keys=lots"}, want: `invalid value "lots" for flag -max-keys: not an integer`, wantFlags: true},
		{name: "bad duration flag", args: []string{"--lock-delay=5"}, want: `invalid value "5" for flag -lock-delay: not a duration`, wantFlags: true},
		{name: "invalid level flag", args: []string{"--log-level=loud"}, want: `invalid log-level "loud"`},
		{name: "negative max-keys flag", args: []string{"--max-keys=-3"}, want: "invalid max-keys -3"},
		{name: "bad integer env", env: map[string]string{"LATCH_MAX_KEYS": "1e3"}, want: `environment variable LATCH_MAX_KEYS="1e3": not an integer`},
		{name: "bad duration env", env: map[string]string{"LATCH_SHUTDOWN_TIMEOUT": "ten"}, want: `environment variable LATCH_SHUTDOWN_TIMEOUT="ten": not a duration`},
		{name: "invalid format env", env: map[string]string{"LATCH_LOG_FORMAT": "xml"}, want: `invalid log-format "xml"`},
		{name: "zero shutdown-timeout env", env: map[string]string{"LATCH_SHUTDOWN_TIMEOUT": "0s"}, want: "invalid shutdown-timeout 0s"},
		{name: "missing file", args: []string{"--config", filepath.Join(t.TempDir(), "nope.toml")}, want: "nope.toml: no such file"},
		{name: "missing file from env", env: map[string]string{"LATCH_CONFIG": "/nonexistent/latch.toml"}, want: "/nonexistent/latch.toml"},
		{name: "unknown key", file: "[log]\nlevle = \"debug\"\n", want: `unknown key "log.levle"`},
		{name: "unknown top-level key", file: "max-keys = 3\n", want: `unknown key "max-keys"`},
		{name: "unknown table named once", file: "[listen]\nmemcache = \":11211\"\ndlock = \":11212\"\n", want: `unknown key "listen"`},
		{name: "several unknown keys", file: "[lock]\nmax-key = 3\nlockdelay = \"1s\"\n", want: `unknown keys "lock.max-key", "lock.lockdelay"`},
		{name: "syntax error", file: "[log\nlevel = \"info\"\n", want: "to end table name"},
		{name: "wrong type", file: "[lock]\nmax-keys = \"ten\"\n", want: `"lock.max-keys"`},
		{name: "integer duration", file: "[lock]\nlock-delay = 5\n", want: `key "lock.lock-delay": a duration must be a string like "10s", not integer`},
		{name: "bad duration string", file: "[server]\nshutdown-timeout = \"soon\"\n", want: "soon"},
		{name: "section is not a table", file: "log = \"debug\"\n", want: "log"},
		{name: "invalid value in file", file: "[log]\nformat = \"yaml\"\n", want: `invalid log-format "yaml"`},
		{name: "flag does not hide an invalid file", args: []string{"--log-level=info"}, file: "[log]\nlevel = \"nope\"\nbogus = 1\n", want: `unknown key "log.bogus"`},
		{name: "invalid env over good file", args: []string{"--config", good}, env: map[string]string{"LATCH_LOG_LEVEL": "trace"}, want: `invalid log-level "trace"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args
			if tt.file != "" {
				args = append([]string{"--config", writeFile(t, tt.file)}, args...)
			}
			_, err := Load(newFlagSet(), args, env(tt.env))
			if err == nil {
				t.Fatalf("Load() error = nil, want %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Load() error = %q, want it to contain %q", err, tt.want)
			}
			if got := errors.Is(err, ErrFlags); got != tt.wantFlags {
				t.Errorf("errors.Is(err, ErrFlags) = %v, want %v", got, tt.wantFlags)
			}
		})
	}
}

func TestLoadFileErrorNamesFile(t *testing.T) {
	path := writeFile(t, "[lock]\nmax_keys = 3\n")
	_, err := Load(newFlagSet(), []string{"--config", path}, nil)
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("Load() error = %v, want it to name %s", err, path)
	}
}

func TestLoadHelp(t *testing.T) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var out strings.Builder
	fs.SetOutput(&out)
	_, err := Load(fs, []string{"-h"}, nil)
	if !errors.Is(err, flag.ErrHelp) || !errors.Is(err, ErrFlags) {
		t.Fatalf("Load(-h) error = %v, want flag.ErrHelp and ErrFlags", err)
	}
	for _, st := range settings {
		if !strings.Contains(out.String(), "-"+st.flag) {
			t.Errorf("usage lacks -%s:\n%s", st.flag, out.String())
		}
		if !strings.Contains(out.String(), envName(st.flag)) {
			t.Errorf("usage lacks %s:\n%s", envName(st.flag), out.String())
		}
	}
}

func TestLoadLeavesArgs(t *testing.T) {
	fs := newFlagSet()
	if _, err := Load(fs, []string{"--max-keys=3", "extra", "--log-level=debug"}, nil); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"extra", "--log-level=debug"}, fs.Args()); diff != "" {
		t.Errorf("fs.Args() mismatch (-want +got):\n%s", diff)
	}
}

func TestRegisterFlagsKeepsCallerFlags(t *testing.T) {
	fs := newFlagSet()
	verbose := fs.Bool("verbose", false, "")
	RegisterFlags(fs)
	cfg, err := Load(fs, []string{"--verbose", "--max-keys=2"}, nil) // registers nothing twice
	if err != nil {
		t.Fatal(err)
	}
	if !*verbose || cfg.Lock.MaxKeys != 2 {
		t.Errorf("verbose = %v, MaxKeys = %d; want true, 2", *verbose, cfg.Lock.MaxKeys)
	}
}

func TestLoadRejectsForeignFlag(t *testing.T) {
	fs := newFlagSet()
	fs.Int("max-keys", 0, "someone else's")
	if _, err := Load(fs, []string{"--max-keys=2"}, nil); err == nil {
		t.Fatal("Load() error = nil, want an error about -max-keys")
	}
}

func TestEnvName(t *testing.T) {
	tests := map[string]string{
		"config":           "LATCH_CONFIG",
		"log-level":        "LATCH_LOG_LEVEL",
		"max-keys":         "LATCH_MAX_KEYS",
		"shutdown-timeout": "LATCH_SHUTDOWN_TIMEOUT",
	}
	for in, want := range tests {
		if got := envName(in); got != want {
			t.Errorf("envName(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestSettingsCoverConfig checks that the settings table and the struct
// tags agree: every setting's TOML key decodes into the field its flag sets,
// and every leaf of a TOML file written from a Config is a setting.
func TestSettingsCoverConfig(t *testing.T) {
	for _, st := range settings {
		t.Run(st.flag, func(t *testing.T) {
			// A value that differs from the default, in flag syntax.
			var raw, lit string
			switch st.field(&Config{}).(type) {
			case *string:
				raw, lit = "probe", `"probe"`
			case *int:
				raw, lit = "4242", "4242"
			case *time.Duration:
				raw, lit = "42s", `"42s"`
			}
			section, key, ok := strings.Cut(st.toml, ".")
			if !ok {
				t.Fatalf("TOML key %q has no section", st.toml)
			}
			var fromFile, fromFlag Config
			if err := decodeTOML(&fromFile, "["+section+"]\n"+key+" = "+lit+"\n"); err != nil {
				t.Fatalf("decoding %s: %v", st.toml, err)
			}
			if err := st.set(&fromFlag, raw); err != nil {
				t.Fatal(err)
			}
			if cmp.Equal(fromFile, Config{}) {
				t.Fatalf("TOML key %s set nothing", st.toml)
			}
			if diff := cmp.Diff(fromFlag, fromFile); diff != "" {
				t.Errorf("flag -%s and TOML key %s set different fields (-flag +file):\n%s", st.flag, st.toml, diff)
			}
		})
	}

	// Every field has a setting: decoding a file with every key gives a
	// Config with no zero field left.
	var doc strings.Builder
	last := ""
	for _, k := range tomlKeys() { // sorted, so each section comes once
		section, key, _ := strings.Cut(k, ".")
		if section != last {
			doc.WriteString("[" + section + "]\n")
			last = section
		}
		doc.WriteString(key + " = ")
		switch st := settingByTOML(k); st.field(&Config{}).(type) {
		case *string:
			doc.WriteString(`"x"` + "\n")
		case *int:
			doc.WriteString("1\n")
		case *time.Duration:
			doc.WriteString(`"1s"` + "\n")
		}
	}
	var c Config
	if err := decodeTOML(&c, doc.String()); err != nil {
		t.Fatal(err)
	}
	// Every front end has every setting of netserve.Config.
	all := netserve.Config{Addr: "x", Allow: "x", MaxConns: 1, IdleTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second, Loops: 1}
	want := Config{
		Log:      LogConfig{Level: "x", Format: "x"},
		Lock:     LockConfig{node.Config{MaxKeys: 1, MaxWaitersPerKey: 1, MaxWaiters: 1, LockDelay: time.Second}},
		Server:   ServerConfig{ShutdownTimeout: time.Second},
		Memcache: MemcacheConfig{Config: memcache.Config{Config: all}, MemoryMB: 1, MaxItemSize: 1},
		DLock:    DLockConfig{Config: dlock.Config{Config: all, MaxFrame: 1}, TokensFile: "x"},
		Admin:    AdminConfig{Config: admin.Config{Addr: "x", Token: "x", MaxConns: 1}, TokenFile: "x"},
		Redis:    RedisConfig{Config: resp.Config{Config: all, MaxValue: 1}, TokensFile: "x", ZSetMaxMembers: 1, ZSetMaxTotal: 1},
		// The ZooKeeper front end runs no event loops.
		ZooKeeper: ZooKeeperConfig{
			Config:    zookeeper.Config{Config: netserve.Config{Addr: "x", Allow: "x", MaxConns: 1, IdleTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second}, TickTime: time.Second, MinSessionTimeout: time.Second, MaxSessionTimeout: time.Second, MaxWatches: 1, MaxQueued: 1},
			MaxZnodes: 1, MaxChildren: 1, MaxEphemerals: 1, MaxData: 1,
		},
		TLS:     TLSConfig{Cert: "x", Key: "x", ClientCA: "x"},
		Cluster: ClusterConfig{DataDir: "x", NodeID: "x", RaftAddr: "x", RaftAdvertise: "x", InitialCluster: "x", InitialClusterState: "x", PeerTLSCert: "x", PeerTLSKey: "x", PeerTLSCA: "x", NodeTTL: time.Second, ElectionTimeout: time.Second, SnapshotEntries: 1, SnapshotInterval: time.Second, SnapshotTrailingEntries: 1},
	}
	if diff := cmp.Diff(want, c); diff != "" {
		t.Errorf("a Config field has no setting (-want +got):\n%s", diff)
	}
}

// TestProgramFieldsAreNotSettings checks that the fields of the components'
// configurations that the program sets (toml:"-") are unknown keys of the
// file, as any key latch does not know.
func TestProgramFieldsAreNotSettings(t *testing.T) {
	for _, key := range []string{
		"lock.cache", "lock.firsttoken", "lock.logger", "lock.config",
		"memcache.version", "memcache.maxline", "memcache.config",
		"dlock.maxkeys", "dlock.maxpending", "dlock.tokens",
		"admin.service", "admin.historysize", "admin.readtimeout",
	} {
		section, k, _ := strings.Cut(key, ".")
		c := DefaultConfig()
		err := decodeTOML(&c, "["+section+"]\n"+k+" = 1\n")
		if err == nil || !strings.Contains(err.Error(), `unknown key "`+key+`"`) {
			t.Errorf("key %s: error = %v, want unknown key", key, err)
		}
	}
}

func settingByTOML(key string) *setting {
	for i := range settings {
		if settings[i].toml == key {
			return &settings[i]
		}
	}
	return nil
}

func TestDecodeTOMLLeavesConfigOnError(t *testing.T) {
	c := DefaultConfig()
	if err := decodeTOML(&c, "[log]\nlevel = \"debug\"\nnope = 1\n"); err == nil {
		t.Fatal("decodeTOML() error = nil, want unknown key")
	}
	if diff := cmp.Diff(DefaultConfig(), c); diff != "" {
		t.Errorf("decodeTOML changed the config on error (-want +got):\n%s", diff)
	}
}
