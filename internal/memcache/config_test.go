package memcache

import (
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		set  func(*Config)
		want string // a part of the error; "" for none
	}{
		{"default", func(*Config) {}, ""},
		{"zero", func(c *Config) { *c = Config{} }, ""},
		{"negative MaxLine", func(c *Config) { c.MaxLine = -1 }, "MaxLine -1"},
		{"negative SweepInterval", func(c *Config) { c.SweepInterval = -time.Second }, "SweepInterval -1s"},
		{"negative MaxConns", func(c *Config) { c.MaxConns = -2 }, "max-conns -2"},
		{"negative IdleTimeout", func(c *Config) { c.IdleTimeout = -time.Second }, "idle-timeout -1s"},
		{"negative ReadTimeout", func(c *Config) { c.ReadTimeout = -time.Second }, "read-timeout -1s"},
		{"negative WriteTimeout", func(c *Config) { c.WriteTimeout = -time.Second }, "write-timeout -1s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.set(&c)
			err := c.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "memcache: invalid "+tt.want) {
				t.Fatalf("Validate() = %v, want an error containing %q", err, tt.want)
			}
			ts := newTestServer(t)
			if _, nerr := New(ts.svc, c); nerr == nil {
				t.Errorf("New() accepted a config Validate refuses")
			}
		})
	}
}
