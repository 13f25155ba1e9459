package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/latchd/latch"
)

// mixinDir holds the alert rules and the dashboard (contrib/mixin).
const mixinDir = "../../contrib/mixin"

var (
	// metricName matches a latch metric named in a PromQL expression.
	metricName = regexp.MustCompile(`\blatch_[a-z0-9_]+`)
	// limitName matches the name a latch_limit selector picks.
	limitName = regexp.MustCompile(`latch_limit\{[^}]*\bname="([a-z_]+)"`)
)

// TestMixinNamesExist: every metric that the alert rules and the
// dashboard of contrib/mixin name, and every limit they pick from
// latch_limit, is in the registry of a durable node with every front end
// on, every limit set and a snapshot taken.
func TestMixinNamesExist(t *testing.T) {
	var text strings.Builder
	for _, f := range []string{"alerts.yaml", "dashboard.json"} {
		b, err := os.ReadFile(filepath.Join(mixinDir, f))
		if err != nil {
			t.Fatal(err)
		}
		text.Write(b)
	}

	cfg := testConfig()
	cfg.Cluster.DataDir = t.TempDir()
	cfg.Cluster.SnapshotEntries, cfg.Cluster.SnapshotInterval = 16, 100*time.Millisecond
	cfg.Memcache.MaxConns, cfg.DLock.MaxConns, cfg.Redis.MaxConns, cfg.ZooKeeper.MaxConns = 10, 10, 10, 10
	cfg.Lock.MaxWaiters = 10
	s := newServer(t, cfg)
	sess := openSession(t, s.Service())
	for i := range 20 {
		if _, err := sess.Acquire(context.Background(), latch.LockRequest{Keys: []string{fmt.Sprint("k", i)}, Lease: time.Minute}); err != nil {
			t.Fatalf("Acquire(k%d): %v", i, err)
		}
	}
	// The snapshot's gauges appear once it is taken.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, ok := gaugeOf(t, s, "latch_raft_last_snapshot_index"); ok {
			break
		}
	}

	fams, err := s.metrics.Registry().Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	types := make(map[string]dto.MetricType)
	for _, f := range fams {
		types[f.GetName()] = f.GetType()
	}
	exists := func(name string) bool {
		if _, ok := types[name]; ok {
			return true
		}
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok && types[base] == dto.MetricType_HISTOGRAM {
				return true
			}
		}
		return false
	}
	names := slices.Compact(slices.Sorted(slices.Values(metricName.FindAllString(text.String(), -1))))
	if len(names) < 20 {
		t.Fatalf("the mixin names %d latch metrics, want many: %v", len(names), names)
	}
	for _, name := range names {
		if !exists(name) {
			t.Errorf("contrib/mixin names %s, which latch does not report", name)
		}
	}

	limits := make(map[string]bool)
	for _, m := range series(t, s, "latch_limit") {
		for _, lp := range m.GetLabel() {
			if lp.GetName() == "name" {
				limits[lp.GetValue()] = true
			}
		}
	}
	for _, m := range limitName.FindAllStringSubmatch(text.String(), -1) {
		if !limits[m[1]] {
			t.Errorf("contrib/mixin picks latch_limit{name=%q}, which latch does not report", m[1])
		}
	}
}

// TestMixinAlertsComplete: every alert rule of contrib/mixin has a
// severity, a summary and a description, and tests.yaml tests it.
func TestMixinAlertsComplete(t *testing.T) {
	read := func(f string) string {
		b, err := os.ReadFile(filepath.Join(mixinDir, f))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	alerts, tests := read("alerts.yaml"), read("tests.yaml")
	rules := strings.Split(alerts, "- alert: ")[1:]
	if len(rules) < 10 {
		t.Fatalf("alerts.yaml has %d rules, want more", len(rules))
	}
	severity := regexp.MustCompile(`\n\s+severity: (critical|warning|info)\n`)
	for _, r := range rules {
		name, _, _ := strings.Cut(r, "\n")
		if !severity.MatchString(r) {
			t.Errorf("alert %s has no severity of critical, warning or info", name)
		}
		for _, a := range []string{"summary: ", "description: "} {
			if !strings.Contains(r, "\n          "+a) {
				t.Errorf("alert %s has no %s annotation", name, strings.TrimSuffix(a, ": "))
			}
		}
		if !strings.Contains(tests, "alertname: "+name+"\n") {
			t.Errorf("tests.yaml does not test alert %s", name)
		}
	}
}
