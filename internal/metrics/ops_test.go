package metrics

import (
	"runtime"
	"testing"

	"github.com/latchd/latch/internal/cache"
)

func TestBuildInfo(t *testing.T) {
	m := New()
	if got := value(t, m, "latch_build_info", "version=unknown", "go_version="+runtime.Version()); got != 1 {
		t.Errorf("latch_build_info before SetVersion = %v, want 1", got)
	}
	m.SetVersion("v1.2.3")
	if got := value(t, m, "latch_build_info", "version=v1.2.3", "commit=unknown", "go_version="+runtime.Version()); got != 1 {
		t.Errorf("latch_build_info = %v, want 1", got)
	}
	if _, ok := lookup(t, m, "latch_build_info", "version=unknown"); ok {
		t.Error("latch_build_info still reports version unknown after SetVersion")
	}
	m.SetCommit("")
	if got := value(t, m, "latch_build_info", "commit=unknown"); got != 1 {
		t.Errorf("latch_build_info after SetCommit(\"\") = %v, want commit unknown", got)
	}
	m.SetCommit("0123456789abcdef0123456789abcdef01234567")
	if got := value(t, m, "latch_build_info", "version=v1.2.3", "commit=0123456789abcdef0123456789abcdef01234567"); got != 1 {
		t.Errorf("latch_build_info after SetCommit = %v, want 1", got)
	}
}

func TestLimits(t *testing.T) {
	m := New()
	if _, ok := lookup(t, m, "latch_limit"); ok {
		t.Error("latch_limit reported before SetLimits")
	}
	m.SetLimits([]Limit{
		{Name: "max_waiters", Value: 100},
		{Name: "max_conns", Protocol: "memcache", Value: 4096},
		{Name: "max_conns", Protocol: "redis", Value: 0}, // no limit
		{Name: "memory_bytes", Protocol: "memcache", Value: 64 << 20},
	})
	for _, w := range []struct {
		labels []string
		want   float64
	}{
		{[]string{"name=max_waiters", "protocol="}, 100},
		{[]string{"name=max_conns", "protocol=memcache"}, 4096},
		{[]string{"name=memory_bytes", "protocol=memcache"}, 64 << 20},
	} {
		if got := value(t, m, "latch_limit", w.labels...); got != w.want {
			t.Errorf("latch_limit%v = %v, want %v", w.labels, got, w.want)
		}
	}
	if _, ok := lookup(t, m, "latch_limit", "name=max_conns", "protocol=redis"); ok {
		t.Error("a limit of 0 (none) is reported")
	}
	m.SetLimits(nil)
	if _, ok := lookup(t, m, "latch_limit"); ok {
		t.Error("latch_limit reported after SetLimits(nil)")
	}
}

func TestItemGauges(t *testing.T) {
	m := New()
	if _, ok := lookup(t, m, "latch_memcache_bytes"); ok {
		t.Error("latch_memcache_bytes reported before WatchItems")
	}
	m.WatchItems(func() cache.Stats {
		return cache.Stats{Bytes: 1000, LockedBytes: 300, CurrItems: 7, Evictions: 2}
	})
	for _, w := range []struct {
		name string
		want float64
	}{
		{"latch_memcache_bytes", 1000},
		{"latch_memcache_locked_bytes", 300},
		{"latch_memcache_items", 7},
		{"latch_memcache_evictions_total", 2},
	} {
		if got := value(t, m, w.name); got != w.want {
			t.Errorf("%s = %v, want %v", w.name, got, w.want)
		}
	}
}
