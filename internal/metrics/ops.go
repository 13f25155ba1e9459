package metrics

import (
	"runtime"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/latchd/latch/internal/cache"
)

// The metrics an operator's dashboards and alerts read besides the lock
// service's: what runs, the limits it was configured with, and the
// memcached items' memory, to compare with its limit.
var (
	descBuildInfo = prometheus.NewDesc("latch_build_info",
		"Always 1; its labels say what runs: latch's version, the VCS commit it was built from, and the Go version.",
		[]string{"version", "commit", "go_version"}, nil)
	descLimit = prometheus.NewDesc("latch_limit",
		"A configured limit, to compare with the gauge of what it bounds; absent when there is no limit.",
		[]string{"name", "protocol"}, nil)
	descItemBytes = prometheus.NewDesc("latch_memcache_bytes",
		"Bytes of the memcached items, as memcached's bytes stat counts them (latch_limit{name=\"memory_bytes\"} bounds them).", nil, nil)
	descItemLockedBytes = prometheus.NewDesc("latch_memcache_locked_bytes",
		"Bytes of the memcached items locked now, which are never evicted.", nil, nil)
	descItems = prometheus.NewDesc("latch_memcache_items",
		"Memcached items stored, dead ones not yet removed included.", nil, nil)
	descEvictions = prometheus.NewDesc("latch_memcache_evictions_total",
		"Live memcached items evicted to make room under the memory limit.", nil, nil)
)

// Limit is a configured limit, reported as latch_limit{name, protocol}.
type Limit struct {
	// Name is what it bounds, in snake_case: max_conns, max_waiters,
	// memory_bytes, max_znodes, ...
	Name string
	// Protocol is the front end it is a limit of, as in
	// latch_connections_open{protocol}; "" for the node's own.
	Protocol string
	Value    float64
}

// buildInfo is what latch_build_info reports.
type buildInfo struct{ version, commit, goVersion string }

// SetVersion sets the version latch_build_info reports (from the
// program: -ldflags, or the module's); until it is called, or when it is
// empty, "unknown".
func (m *Metrics) SetVersion(version string) {
	if version == "" {
		version = unknown
	}
	b := *m.build.Load()
	b.version = version
	m.build.Store(&b)
}

// SetCommit sets the commit latch_build_info reports, when the program
// was told it (a release's -ldflags, or the VCS stamp Go recorded: the
// program's own buildCommit); "" leaves it unknown.
func (m *Metrics) SetCommit(commit string) {
	if commit == "" {
		return
	}
	b := *m.build.Load()
	b.commit = commit
	m.build.Store(&b)
}

// SetLimits sets the limits latch_limit reports, replacing those set
// before. A Limit of 0 (no limit) is not reported: an alert's ratio of a
// gauge to it would be infinite.
func (m *Metrics) SetLimits(ls []Limit) {
	var keep []Limit
	for _, l := range ls {
		if l.Value > 0 {
			keep = append(keep, l)
		}
	}
	m.limits.Store(&keep)
}

// WatchItems makes the registry report the memcached items' gauges from
// stats (node.Node.ItemStats), called at scrape time without the node's
// mutex. Until it is called they are not reported.
func (m *Metrics) WatchItems(stats func() cache.Stats) { m.items.Store(&stats) }

// unknown labels what the build does not tell.
const unknown = "unknown"

// newBuildInfo returns the build's labels: the version and the commit
// unknown until SetVersion and SetCommit.
func newBuildInfo() *buildInfo {
	return &buildInfo{version: unknown, commit: unknown, goVersion: runtime.Version()}
}

// opsDescs are the descriptions collectOps reports.
var opsDescs = []*prometheus.Desc{descBuildInfo, descLimit, descItemBytes, descItemLockedBytes, descItems, descEvictions}

// collectOps reports build info, limits and the items' gauges.
func (m *Metrics) collectOps(ch chan<- prometheus.Metric) {
	b := m.build.Load()
	ch <- prometheus.MustNewConstMetric(descBuildInfo, prometheus.GaugeValue, 1, b.version, b.commit, b.goVersion)
	if ls := m.limits.Load(); ls != nil {
		for _, l := range *ls {
			ch <- prometheus.MustNewConstMetric(descLimit, prometheus.GaugeValue, l.Value, l.Name, l.Protocol)
		}
	}
	if f := m.items.Load(); f != nil {
		s := (*f)()
		ch <- prometheus.MustNewConstMetric(descItemBytes, prometheus.GaugeValue, float64(s.Bytes))
		ch <- prometheus.MustNewConstMetric(descItemLockedBytes, prometheus.GaugeValue, float64(s.LockedBytes))
		ch <- prometheus.MustNewConstMetric(descItems, prometheus.GaugeValue, float64(s.CurrItems))
		ch <- prometheus.MustNewConstMetric(descEvictions, prometheus.CounterValue, float64(s.Evictions))
	}
}

// The fields of Metrics that collectOps reads.
type opsState struct {
	build  atomic.Pointer[buildInfo]
	limits atomic.Pointer[[]Limit]
	items  atomic.Pointer[func() cache.Stats]
}
