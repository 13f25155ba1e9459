package config

import (
	"slices"
	"testing"
	"time"
)

// TestChanged: Changed names the settings that differ, those a reload
// applies apart from those that wait for a restart.
func TestChanged(t *testing.T) {
	tests := []struct {
		name                 string
		change               func(c *Config)
		wantReload, wantRest []string
	}{
		{name: "nothing", change: func(*Config) {}},
		{name: "log level", change: func(c *Config) { c.Log.Level = "debug" }, wantReload: []string{"log-level"}},
		{name: "log format", change: func(c *Config) { c.Log.Format = "json" }, wantRest: []string{"log-format"}},
		{name: "certificate and allow-list", change: func(c *Config) {
			c.TLS.Cert, c.TLS.Key = "new.pem", "new-key.pem"
			c.DLock.Allow = "10.0.0.0/8"
		}, wantReload: []string{"dlock-allow", "tls-cert", "tls-key"}},
		{name: "tokens, admin token, and an address", change: func(c *Config) {
			c.Redis.TokensFile = "toks"
			c.Admin.TokenFile = "admin-token"
			c.Memcache.Addr = ":1"
			c.Cluster.NodeTTL = time.Minute
		}, wantReload: []string{"redis-tokens-file", "admin-token-file"}, wantRest: []string{"memcache-addr", "node-ttl"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := DefaultConfig()
			cfg := DefaultConfig()
			tt.change(&cfg)
			reload, restart := Changed(old, cfg)
			if !slices.Equal(reload, tt.wantReload) || !slices.Equal(restart, tt.wantRest) {
				t.Errorf("Changed() = %q, %q; want %q, %q", reload, restart, tt.wantReload, tt.wantRest)
			}
		})
	}
}
