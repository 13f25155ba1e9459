package memcache

import (
	"regexp"
	"testing"
)

// parseable is what clients read of a version: libmemcached's numbers at
// the start, npm memcached's /(\d+)\.(\d+)\.(\d+)$/ on the first word.
var parseable = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+ latch-[0-9A-Za-z.-]+$`)

func TestWireVersion(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "1.6.0 latch-unknown"},
		{"test", "1.6.0 latch-test"},
		{"v0.4.0", "1.6.0 latch-v0.4.0"},
		{"devel 0123abcd4567+dirty", "1.6.0 latch-devel-0123abcd4567-dirty"},
	} {
		got := wireVersion(tc.in)
		if got != tc.want {
			t.Errorf("wireVersion(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if !parseable.MatchString(got) {
			t.Errorf("wireVersion(%q) = %q: not what clients parse", tc.in, got)
		}
	}
}
