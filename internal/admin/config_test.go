package admin_test

import (
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/internal/admin"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		set  func(*admin.Config)
		want string // a part of the error; "" for none
	}{
		{"default", func(*admin.Config) {}, ""},
		{"zero", func(c *admin.Config) { *c = admin.Config{} }, ""},
		{"Addr without a port", func(c *admin.Config) { c.Addr = "localhost" }, `Addr "localhost"`},
		{"negative MaxConns", func(c *admin.Config) { c.MaxConns = -1 }, "MaxConns -1"},
		{"negative HistorySize", func(c *admin.Config) { c.HistorySize = -1 }, "HistorySize -1"},
		{"negative ReadTimeout", func(c *admin.Config) { c.ReadTimeout = -time.Second }, "ReadTimeout -1s"},
		{"negative WriteTimeout", func(c *admin.Config) { c.WriteTimeout = -time.Second }, "WriteTimeout -1s"},
		{"negative HistoryInterval", func(c *admin.Config) { c.HistoryInterval = -time.Second }, "HistoryInterval -1s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := admin.DefaultConfig()
			tt.set(&c)
			err := c.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "admin: invalid "+tt.want) {
				t.Fatalf("Validate() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
