package config

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzDecodeTOML checks that no file makes decoding panic, that a failed
// decode leaves the Config as it was, and that a successful one sets only
// what the file names: decoding the same file twice gives the same Config.
func FuzzDecodeTOML(f *testing.F) {
	for _, seed := range []string{
		"",
		"[log]\nlevel = \"debug\"\nformat = \"json\"\n",
		"[lock]\nmax-keys = 0\nlock-delay = \"1m30s\"\n",
		"[server]\nshutdown-timeout = \"10s\"\n",
		"[lock]\nlock-delay = 5\n",
		"[listen]\nmemcache = \":11211\"\n",
		"log = 1\n",
		"[log\n",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		c := DefaultConfig()
		err := decodeTOML(&c, doc)
		if err != nil {
			if diff := cmp.Diff(DefaultConfig(), c); diff != "" {
				t.Fatalf("failed decode changed the config (-want +got):\n%s", diff)
			}
			return
		}
		_ = c.Validate()
		again := c
		if err := decodeTOML(&again, doc); err != nil {
			t.Fatalf("second decode failed: %v", err)
		}
		if diff := cmp.Diff(c, again); diff != "" {
			t.Fatalf("decoding twice differs (-once +twice):\n%s", diff)
		}
	})
}

// FuzzParseNetworks checks that no list makes ParseNetworks panic, and
// that every network it accepts is valid, masked, unmapped and contains
// its own address.
func FuzzParseNetworks(f *testing.F) {
	for _, seed := range []string{
		"", " ", "10.0.0.0/8", "127.0.0.1, ::1", "fd00::/8,192.168.1.7",
		"::ffff:10.0.0.0/104", "::ffff:1.2.3.4", "fe80::1%eth0", "10.0.0.0/33",
		"10.1.2.3/8", ",", "1.2.3.4,,", "not-an-ip",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		nets, err := ParseNetworks(s)
		if err != nil {
			if nets != nil {
				t.Fatalf("ParseNetworks(%q) = %v, %v: networks with an error", s, nets, err)
			}
			return
		}
		for _, p := range nets {
			if !p.IsValid() || p != p.Masked() || p.Addr().Is4In6() || !p.Contains(p.Addr()) {
				t.Fatalf("ParseNetworks(%q) gave %v: not a valid, masked, unmapped network", s, p)
			}
		}
	})
}
