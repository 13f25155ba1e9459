package node

import (
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/internal/cache"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		set  func(*Config)
		want string // a part of the error; "" for none
	}{
		{"default", func(*Config) {}, ""},
		{"zero", func(c *Config) { *c = Config{} }, ""},
		{"negative MaxKeys", func(c *Config) { c.MaxKeys = -1 }, "MaxKeys -1"},
		{"MaxWaitersPerKey over the queue", func(c *Config) { c.MaxWaitersPerKey = 1 << 16 }, "MaxWaitersPerKey 65536"},
		{"negative MaxWaiters", func(c *Config) { c.MaxWaiters = -1 }, "MaxWaiters -1"},
		{"negative LockDelay", func(c *Config) { c.LockDelay = -time.Second }, "LockDelay -1s"},
		{"invalid Cache", func(c *Config) { c.Cache = cache.Config{MemoryLimit: -1} }, "Cache: cache: invalid memory limit"},
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
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v, want an error containing %q", err, tt.want)
			}
			if _, nerr := New(c); nerr == nil {
				t.Errorf("New() accepted a config Validate refuses")
			}
		})
	}
}
