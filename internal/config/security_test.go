package config

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/latchd/latch/internal/netserve"
)

func TestValidateSecurity(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*Config)
		want   string // substring of the error; "": valid
	}{
		{"tls", func(c *Config) { c.TLS.Cert, c.TLS.Key = "c.pem", "k.pem" }, ""},
		{"tls with client CA", func(c *Config) { c.TLS = TLSConfig{Cert: "c.pem", Key: "k.pem", ClientCA: "ca.pem"} }, ""},
		{"cert without key", func(c *Config) { c.TLS.Cert = "c.pem" }, "tls-cert and tls-key go together"},
		{"key without cert", func(c *Config) { c.TLS.Key = "k.pem" }, "tls-cert and tls-key go together"},
		{"client CA without cert", func(c *Config) { c.TLS.ClientCA = "ca.pem" }, "tls-client-ca needs tls-cert"},
		{"allow", func(c *Config) { c.Memcache.Allow = "127.0.0.0/8, 10.1.2.3,::1" }, ""},
		{"bad allow", func(c *Config) { c.Memcache.Allow = "10.0.0.0/33" }, `invalid memcache-allow "10.0.0.0/33"`},
		{"allow with an empty entry", func(c *Config) { c.Memcache.Allow = "10.0.0.0/8,," }, "invalid memcache-allow"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.modify(&c)
			err := c.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Validate() = %v, want an error with %q", err, tt.want)
			}
		})
	}
}

func TestParseNetworks(t *testing.T) {
	tests := []struct {
		in   string
		want []string // the networks, when not err
		err  bool
	}{
		{in: "", want: nil},
		{in: "  ", want: nil},
		{in: "10.0.0.0/8", want: []string{"10.0.0.0/8"}},
		{in: "10.1.2.3/8", want: []string{"10.0.0.0/8"}}, // masked
		{in: " 127.0.0.1 , fd00::/8", want: []string{"127.0.0.1/32", "fd00::/8"}},
		{in: "::1", want: []string{"::1/128"}},
		{in: "localhost", err: true},
		{in: "10.0.0.0/8,", err: true},
		{in: "300.0.0.0/8", err: true},
		{in: "::ffff:10.0.0.0/104", want: []string{"10.0.0.0/8"}}, // peers are compared unmapped
		{in: "::ffff:1.2.3.4", want: []string{"1.2.3.4/32"}},
		{in: "::ffff:0.0.0.0/95", err: true},
		{in: "fe80::1%eth0", err: true},
		{in: "10.0.0.0/33", err: true},
	}
	for _, tt := range tests {
		got, err := netserve.ParseNetworks(tt.in)
		if (err != nil) != tt.err {
			t.Errorf("netserve.ParseNetworks(%q) error = %v, want error %v", tt.in, err, tt.err)
			continue
		}
		strs := make([]string, len(got))
		for i, p := range got {
			strs[i] = p.String()
		}
		if !tt.err && !slices.Equal(strs, tt.want) && (len(strs) != 0 || len(tt.want) != 0) {
			t.Errorf("netserve.ParseNetworks(%q) = %v, want %v", tt.in, strs, tt.want)
		}
	}
	if got, _ := netserve.ParseNetworks("127.0.0.0/8"); !got[0].Contains(netip.MustParseAddr("127.0.0.1")) {
		t.Errorf("127.0.0.0/8 does not contain 127.0.0.1")
	}
}

func TestLoadSecuritySettings(t *testing.T) {
	cfg, err := Load(newFlagSet(), []string{"-tls-cert", "c.pem", "-memcache-allow", "10.0.0.0/8"},
		env(map[string]string{"LATCH_TLS_KEY": "k.pem", "LATCH_TLS_CLIENT_CA": "ca.pem"}))
	if err != nil {
		t.Fatal(err)
	}
	want := TLSConfig{Cert: "c.pem", Key: "k.pem", ClientCA: "ca.pem"}
	if cfg.TLS != want || cfg.Memcache.Allow != "10.0.0.0/8" {
		t.Errorf("Load() = TLS %+v, memcache-allow %q; want %+v, 10.0.0.0/8", cfg.TLS, cfg.Memcache.Allow, want)
	}
}
