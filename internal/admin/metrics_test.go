package admin_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/latchd/latch"
)

// scrape GETs /metrics and parses the text format.
func (e *env) scrape() map[string]*dto.MetricFamily {
	e.t.Helper()
	status, body := e.do(http.MethodGet, "/metrics", "", nil)
	if status != http.StatusOK {
		e.t.Fatalf("GET /metrics: %d", status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		e.t.Fatalf("parsing /metrics: %v", err)
	}
	return fams
}

// metric returns the value of name{labels} ("k=v"): a counter's or gauge's
// value, a histogram's count; 0 when absent.
func metric(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	f := fams[name]
	if f == nil {
		return 0
	}
next:
	for _, m := range f.GetMetric() {
		for _, l := range labels {
			k, v, _ := strings.Cut(l, "=")
			found := false
			for _, lp := range m.GetLabel() {
				if lp.GetName() == k && lp.GetValue() == v {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue()
		case m.Gauge != nil:
			return m.GetGauge().GetValue()
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	return 0
}

// TestMetricsMove scrapes /metrics over HTTP as locks are taken, waited
// for and released.
func TestMetricsMove(t *testing.T) {
	e := start(t, "")
	fams := e.scrape()
	for _, name := range []string{"go_goroutines", "process_start_time_seconds", "latch_held_locks", "latch_wait_seconds", "latch_handoff_seconds"} {
		if fams[name] == nil {
			t.Errorf("/metrics has no %s", name)
		}
	}
	if got := metric(fams, "latch_held_locks"); got != 0 {
		t.Errorf("latch_held_locks = %v at start", got)
	}

	a := e.open("memcache", "", 0)
	b := e.open("dlock", "", 0)
	e.hold(a, latch.LockRequest{Keys: []string{"k"}})
	fams = e.scrape()
	check := func(fams map[string]*dto.MetricFamily, name string, want float64, labels ...string) {
		t.Helper()
		if got := metric(fams, name, labels...); got != want {
			t.Errorf("%s%v = %v, want %v", name, labels, got, want)
		}
	}
	check(fams, "latch_held_locks", 1)
	check(fams, "latch_grants_total", 1, "protocol=memcache")
	check(fams, "latch_sessions", 1, "protocol=dlock")
	check(fams, "latch_wait_seconds", 1)

	waited := e.park(b, "k")
	fams = e.scrape()
	check(fams, "latch_waiters", 1)
	check(fams, "latch_grants_total", 0, "protocol=dlock")

	time.Sleep(10 * time.Millisecond) // so that the wait is measurably long
	if err := a.Release("k"); err != nil {
		t.Fatal(err)
	}
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	fams = e.scrape()
	check(fams, "latch_waiters", 0)
	check(fams, "latch_held_locks", 1)
	check(fams, "latch_grants_total", 1, "protocol=dlock")
	check(fams, "latch_releases_total", 1, "protocol=memcache", "cause=release")
	check(fams, "latch_wait_seconds", 2)
	check(fams, "latch_hold_seconds", 1)
	check(fams, "latch_handoff_seconds", 1)
	if sum := fams["latch_wait_seconds"].GetMetric()[0].GetHistogram().GetSampleSum(); sum < 0.01 {
		t.Errorf("latch_wait_seconds sum = %v, want at least the 10ms the waiter waited", sum)
	}

	// A timeout, a forced release and a session end.
	if _, err := a.Acquire(context.Background(), latch.LockRequest{Keys: []string{"k"}, Wait: time.Millisecond}); err == nil {
		t.Fatal("Acquire(k) succeeded while b holds it")
	}
	if _, err := e.svc.ForceRelease("k"); err != nil {
		t.Fatal(err)
	}
	e.hold(b, latch.LockRequest{Keys: []string{"j"}})
	b.Close()
	fams = e.scrape()
	check(fams, "latch_wait_timeouts_total", 1, "protocol=memcache")
	check(fams, "latch_releases_total", 1, "protocol=dlock", "cause=forced")
	check(fams, "latch_releases_total", 1, "protocol=dlock", "cause=session_end")
	check(fams, "latch_sessions", 0, "protocol=dlock")
	check(fams, "latch_held_locks", 0)
}
