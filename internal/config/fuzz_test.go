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
