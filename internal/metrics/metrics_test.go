package metrics

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/fsm"
	"github.com/latchd/latch/internal/node"
	"github.com/latchd/latch/internal/znode"
)

func TestBucket(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want int
	}{
		{0, 0},
		{-time.Second, 0},
		{time.Microsecond, 0},
		{time.Microsecond + 1, 1},
		{2500 * time.Nanosecond, 1},
		{3 * time.Microsecond, 2},
		{time.Millisecond, 9},
		{time.Second, 18},
		{time.Hour, len(Bounds) - 1},
		{time.Hour + 1, len(Bounds)},
		{1000 * time.Hour, len(Bounds)},
	}
	for _, tt := range tests {
		if got := bucket(tt.d); got != tt.want {
			t.Errorf("bucket(%v) = %d, want %d", tt.d, got, tt.want)
		}
	}
	// Every bucket holds its own bound and what is just above the previous
	// one, and agrees with a plain search everywhere.
	for i, b := range Bounds {
		if got := bucket(b); got != i {
			t.Errorf("bucket(Bounds[%d] = %v) = %d", i, b, got)
		}
		if got := bucket(b + 1); got != i+1 {
			t.Errorf("bucket(Bounds[%d]+1) = %d, want %d", i, got, i+1)
		}
	}
	for d := time.Duration(1); d < 2*time.Hour; d = d*9/8 + 1 {
		want := len(Bounds)
		for i, b := range Bounds {
			if d <= b {
				want = i
				break
			}
		}
		if got := bucket(d); got != want {
			t.Errorf("bucket(%v) = %d, want %d", d, got, want)
		}
	}
}

func TestHistogram(t *testing.T) {
	var h hist
	for range 90 {
		h.observe(0)
	}
	for range 10 {
		h.observe(800 * time.Millisecond) // bucket (500ms, 1s]
	}
	s := h.snapshot()
	if s.Count != 100 || s.Sum != 8*time.Second {
		t.Fatalf("snapshot count %d sum %v, want 100 and 8s", s.Count, s.Sum)
	}
	if got := s.Mean(); got != 80*time.Millisecond {
		t.Errorf("Mean() = %v, want 80ms", got)
	}
	tests := []struct {
		q    float64
		want time.Duration
	}{
		{0.5, 555 * time.Nanosecond}, // inside the first bucket, (0, 1µs]
		{0.9, time.Microsecond},
		{0.95, 750 * time.Millisecond},
		{1, time.Second},
	}
	for _, tt := range tests {
		if got := s.Quantile(tt.q); got != tt.want {
			t.Errorf("Quantile(%v) = %v, want %v", tt.q, got, tt.want)
		}
	}
	h.observe(2 * time.Hour)
	d := h.snapshot().Sub(s)
	if d.Count != 1 || d.Sum != 2*time.Hour || d.Counts[len(Bounds)] != 1 {
		t.Errorf("Sub() = %+v, want the one 2h observation", d)
	}
	if got := d.Quantile(0.99); got != time.Hour {
		t.Errorf("Quantile in the +Inf bucket = %v, want the largest bound", got)
	}
	if got := (Histogram{}).Quantile(0.5); got != 0 {
		t.Errorf("empty Quantile = %v, want 0", got)
	}
}

// newNode returns a node observed by a new Metrics.
func newNode(t *testing.T) (*Metrics, *node.Node) {
	t.Helper()
	m := New()
	n, err := node.New(node.Config{Observer: m.Observer(), FirstToken: 100})
	if err != nil {
		t.Fatal(err)
	}
	m.Watch(n)
	t.Cleanup(func() { n.Shutdown(context.Background()) })
	return m, n
}

// value returns the value of the metric name with the given labels
// ("k=v" pairs) in m's registry: a counter's or gauge's value, a
// histogram's sample count. It fails the test if there is no such metric.
func value(t *testing.T, m *Metrics, name string, labels ...string) float64 {
	t.Helper()
	v, ok := lookup(t, m, name, labels...)
	if !ok {
		t.Fatalf("no metric %s{%s}", name, strings.Join(labels, ","))
	}
	return v
}

func lookup(t *testing.T, m *Metrics, name string, labels ...string) (float64, bool) {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, mt := range f.GetMetric() {
			for _, l := range labels {
				k, v, _ := strings.Cut(l, "=")
				if !hasLabel(mt.GetLabel(), k, v) {
					continue metrics
				}
			}
			switch {
			case mt.Counter != nil:
				return mt.GetCounter().GetValue(), true
			case mt.Gauge != nil:
				return mt.GetGauge().GetValue(), true
			case mt.Histogram != nil:
				return float64(mt.GetHistogram().GetSampleCount()), true
			}
		}
	}
	return 0, false
}

func hasLabel(ls []*dto.LabelPair, k, v string) bool {
	for _, l := range ls {
		if l.GetName() == k && l.GetValue() == v {
			return true
		}
	}
	return false
}

// TestMetricsMove drives a real node and checks that the metrics follow.
func TestMetricsMove(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, n := newNode(t)
		ctx := context.Background()
		a, err := n.OpenSession(latch.SessionOptions{Protocol: "memcache"})
		if err != nil {
			t.Fatal(err)
		}
		b, err := n.OpenSession(latch.SessionOptions{Protocol: "dlock", TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if got := value(t, m, "latch_sessions", "protocol=dlock"); got != 1 {
			t.Errorf("latch_sessions{dlock} = %v, want 1", got)
		}
		if _, err := a.Acquire(ctx, latch.LockRequest{Keys: []string{"k", "j"}}); err != nil {
			t.Fatal(err)
		}
		if got := value(t, m, "latch_held_locks"); got != 2 {
			t.Errorf("latch_held_locks = %v, want 2", got)
		}

		granted := make(chan error, 1)
		go func() {
			_, err := b.Acquire(ctx, latch.LockRequest{Keys: []string{"k"}, Wait: latch.WaitForever})
			granted <- err
		}()
		synctest.Wait()
		if got := value(t, m, "latch_waiters"); got != 1 {
			t.Errorf("latch_waiters = %v, want 1", got)
		}
		time.Sleep(2 * time.Second)
		if err := a.Release("k"); err != nil {
			t.Fatal(err)
		}
		if err := <-granted; err != nil {
			t.Fatal(err)
		}
		if _, err := a.Acquire(ctx, latch.LockRequest{Keys: []string{"k"}, Wait: time.Second}); !errors.Is(err, latch.ErrTimeout) {
			t.Fatalf("Acquire(k) = %v, want a timeout", err)
		}
		if _, err := n.ForceRelease("k"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Hour) // b's TTL lapses

		want := []struct {
			name   string
			labels []string
			value  float64
		}{
			{"latch_grants_total", []string{"protocol=memcache"}, 1},
			{"latch_grants_total", []string{"protocol=dlock"}, 1},
			{"latch_releases_total", []string{"protocol=memcache", "cause=release"}, 1},
			{"latch_releases_total", []string{"protocol=dlock", "cause=forced"}, 1},
			{"latch_releases_total", []string{"protocol=dlock", "cause=session_end"}, 0},
			{"latch_wait_timeouts_total", []string{"protocol=memcache"}, 1},
			{"latch_wait_cancels_total", []string{"protocol=memcache"}, 0},
			{"latch_sessions_opened_total", []string{"protocol=dlock"}, 1},
			{"latch_session_expiries_total", []string{"protocol=dlock"}, 1},
			{"latch_sessions", []string{"protocol=dlock"}, 0},
			{"latch_sessions", []string{"protocol=memcache"}, 1},
			{"latch_held_locks", nil, 1}, // a still holds j
			{"latch_locked_keys", nil, 1},
			{"latch_waiters", nil, 0},
			{"latch_wait_seconds", nil, 2},
			{"latch_hold_seconds", nil, 2},
			{"latch_handoff_seconds", nil, 1},
		}
		for _, w := range want {
			if got := value(t, m, w.name, w.labels...); got != w.value {
				t.Errorf("%s{%s} = %v, want %v", w.name, strings.Join(w.labels, ","), got, w.value)
			}
		}

		s := m.Snapshot()
		if s.Held != 1 || s.Keys != 1 || s.Sessions != 1 {
			t.Errorf("Snapshot table = held %d keys %d sessions %d, want 1 1 1", s.Held, s.Keys, s.Sessions)
		}
		if got := s.Wait.Sum; got != 2*time.Second {
			t.Errorf("wait sum = %v, want 2s", got)
		}
		tot := s.Total()
		if tot.Grants != 2 || tot.Releases != 1 || tot.ForcedReleases != 1 || tot.Timeouts != 1 || tot.SessionExpiries != 1 {
			t.Errorf("Total() = %+v", tot)
		}
	})
}

func TestLeaseOutlivingSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, n := newNode(t)
		s, err := n.OpenSession(latch.SessionOptions{Protocol: "dlock"})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := lookup(t, m, "latch_releases_total", "protocol=none"); ok {
			t.Error(`latch_releases_total{protocol="none"} reported before any such release`)
		}
		if _, err := s.Acquire(context.Background(), latch.LockRequest{Keys: []string{"k"}, Lease: time.Second}); err != nil {
			t.Fatal(err)
		}
		s.Close()
		time.Sleep(2 * time.Second)
		if got := value(t, m, "latch_releases_total", "protocol=none", "cause=lease_expiry"); got != 1 {
			t.Errorf(`latch_releases_total{protocol="none",cause="lease_expiry"} = %v, want 1`, got)
		}
		if _, ok := lookup(t, m, "latch_grants_total", "protocol=none"); ok {
			t.Error(`latch_grants_total{protocol="none"} reported`)
		}
	})
}

// TestOwnedLocks: the grants of owned locks (the Redis front end's) and
// the ends of their holds, which no session owns, count under the
// protocol "redis", never under "none".
func TestOwnedLocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, n := newNode(t)
		owned := func(kind fsm.OwnedKind, flags fsm.OwnedFlags, value string, lease time.Duration, keys ...string) fsm.Command {
			return fsm.Command{Op: fsm.OpOwned, Owned: kind, OwnedFlags: flags, Value: []byte(value),
				Req: latch.LockRequest{Keys: keys, Lease: lease}}
		}
		do := func(c fsm.Command) fsm.Result {
			t.Helper()
			r := n.Owned(&c)
			if r.Err != nil {
				t.Fatalf("%v %v: %v", c.Op, c.Owned, r.Err)
			}
			return r
		}
		do(owned(fsm.OwnedAcquire, 0, "a", time.Second, "k"))    // grant; its lease ends
		do(owned(fsm.OwnedAcquire, 0, "b", time.Second, "k"))    // busy: no grant
		do(owned(fsm.OwnedSet, 0, "a", 0, "j"))                  // grant
		do(owned(fsm.OwnedRelease, fsm.OwnedMatch, "a", 0, "j")) // release
		do(owned(fsm.OwnedGetSet, 0, "c", 0, "g"))               // grant
		do(owned(fsm.OwnedGetSet, 0, "d", 0, "g"))               // takeover: grant
		do(fsm.Command{Op: fsm.OpOwnedTx, Tx: []fsm.Command{
			owned(fsm.OwnedAcquire, 0, "e", 0, "x"), // grant
			owned(fsm.OwnedGet, 0, "", 0, "x"),
		}})
		if _, err := n.ForceRelease("x"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)

		want := []struct {
			name   string
			labels []string
			value  float64
		}{
			{"latch_grants_total", []string{"protocol=redis"}, 5},
			{"latch_releases_total", []string{"protocol=redis", "cause=release"}, 1},
			{"latch_releases_total", []string{"protocol=redis", "cause=lease_expiry"}, 1},
			{"latch_releases_total", []string{"protocol=redis", "cause=forced"}, 1},
			{"latch_sessions", []string{"protocol=redis"}, 0},
			{"latch_wait_seconds", nil, 5},
			{"latch_hold_seconds", nil, 3},
			{"latch_held_locks", nil, 1}, // g
		}
		for _, w := range want {
			if got := value(t, m, w.name, w.labels...); got != w.value {
				t.Errorf("%s{%s} = %v, want %v", w.name, strings.Join(w.labels, ","), got, w.value)
			}
		}
		if v, ok := lookup(t, m, "latch_releases_total", "protocol=none"); ok {
			t.Errorf(`latch_releases_total{protocol="none"} = %v: owned holds counted as leases without a session`, v)
		}
		snap := m.Snapshot()
		tot := snap.Total()
		if tot.Grants != 5 || tot.Releases != 1 || tot.LeaseExpiries != 1 || tot.ForcedReleases != 1 {
			t.Errorf("Total() = %+v", tot)
		}
	})
}

func TestProtocolNames(t *testing.T) {
	m, n := newNode(t)
	if _, err := n.OpenSession(latch.SessionOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range maxProtocols + 5 {
		if _, err := n.OpenSession(latch.SessionOptions{Protocol: fmt.Sprintf("p%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if got := value(t, m, "latch_sessions_opened_total", "protocol=unknown"); got != 1 {
		t.Errorf("sessions without a protocol = %v, want 1 under \"unknown\"", got)
	}
	other := value(t, m, "latch_sessions_opened_total", "protocol=other")
	if other < 5 {
		t.Errorf("sessions past the protocol limit = %v, want them under \"other\"", other)
	}
	fams, _ := m.Registry().Gather()
	for _, f := range fams {
		if f.GetName() == "latch_sessions_opened_total" && len(f.GetMetric()) > maxProtocols {
			t.Errorf("%d protocol series, want at most %d", len(f.GetMetric()), maxProtocols)
		}
	}
}

func TestFrontEndHandles(t *testing.T) {
	m := New()
	p := m.Protocol("memcache")
	if m.Protocol("memcache") != p {
		t.Error("Protocol returned a new handle for the same name")
	}
	get := p.Command("get")
	if m.Command("memcache", "get") != get {
		t.Error("Command returned a new handle for the same name")
	}
	p.ConnOpened()
	p.ConnOpened()
	p.ConnClosed()
	p.ConnRefused("max_conns")
	p.ConnRefused("allow")
	p.ConnRefused("allow")
	get.Request()
	get.Request()
	get.Error()
	for _, w := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"latch_connections_open", []string{"protocol=memcache"}, 1},
		{"latch_connections_accepted_total", []string{"protocol=memcache"}, 2},
		{"latch_connections_refused_total", []string{"protocol=memcache", "reason=max_conns"}, 1},
		{"latch_connections_refused_total", []string{"protocol=memcache", "reason=allow"}, 2},
		{"latch_requests_total", []string{"protocol=memcache", "command=get"}, 2},
		{"latch_request_errors_total", []string{"protocol=memcache", "command=get"}, 1},
	} {
		if got := value(t, m, w.name, w.labels...); got != w.want {
			t.Errorf("%s = %v, want %v", w.name, got, w.want)
		}
	}
	s := m.Snapshot()
	if len(s.Protocols) != 1 || s.Protocols[0].Connections != 1 || s.Protocols[0].Requests != 2 || s.Protocols[0].Errors != 1 {
		t.Errorf("Snapshot().Protocols = %+v", s.Protocols)
	}

	// Without metrics, the handles do nothing.
	var none *Metrics
	np := none.Protocol("memcache")
	np.ConnOpened()
	np.ConnClosed()
	nc := none.Command("memcache", "get")
	nc.Request()
	nc.Error()
}

func TestRuntimeMetrics(t *testing.T) {
	m := New()
	for _, name := range []string{"go_goroutines", "process_start_time_seconds"} {
		if _, ok := lookup(t, m, name); !ok {
			t.Errorf("no %s", name)
		}
	}
	// Before Watch, the lock-table metrics are absent, not zero.
	if _, ok := lookup(t, m, "latch_held_locks"); ok {
		t.Error("latch_held_locks reported before Watch")
	}
}

// TestLockPathAllocationFree: metrics add no allocation to a grant and a
// release.
func TestLockPathAllocationFree(t *testing.T) {
	_, n := newNode(t)
	s, err := n.OpenSession(latch.SessionOptions{Protocol: "test"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	req := latch.LockRequest{Keys: []string{"k"}}
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := s.Acquire(ctx, req); err != nil {
			t.Fatal(err)
		}
		if err := s.Release(req.Keys...); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Acquire+Release with metrics allocates %v times, want 0", allocs)
	}
}

// TestRedisTrackingGauges: the client-side caching gauges are read from
// the hook WatchRedisTracking sets, and absent before.
func TestRedisTrackingGauges(t *testing.T) {
	m, _ := newNode(t)
	if _, ok := lookup(t, m, "latch_redis_tracked_keys"); ok {
		t.Error("latch_redis_tracked_keys reported before WatchRedisTracking")
	}
	m.WatchRedisTracking(func() (int, int) { return 2, 7 })
	for name, want := range map[string]float64{"latch_redis_tracking_clients": 2, "latch_redis_tracked_keys": 7} {
		if got := value(t, m, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
}

// TestZooKeeperGauges checks the data tree's gauges, read from the node,
// and the watch count, read from the hook WatchZooKeeper sets.
func TestZooKeeperGauges(t *testing.T) {
	m, n := newNode(t)
	if _, ok := lookup(t, m, "latch_zookeeper_watches"); ok {
		t.Error("latch_zookeeper_watches reported before WatchZooKeeper")
	}
	watches := 3
	m.WatchZooKeeper(func() int { return watches })

	acl := []znode.ACL{{Perms: znode.PermAll, Scheme: znode.SchemeWorld, ID: znode.IDAnyone}}
	id, _, err := n.ZOpen(10*time.Second, [fsm.PasswordLen]byte{1})
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range []znode.Op{
		{Kind: znode.OpCreate, Path: "/app", ACL: acl},
		{Kind: znode.OpCreate, Path: "/app/lock", ACL: acl, Mode: znode.Ephemeral},
	} {
		if rs, _, err := n.ZWrite(id, 0, []znode.Op{op}, false); err != nil || rs[0].Code != znode.OK {
			t.Fatalf("create %s: %v %+v", op.Path, err, rs)
		}
	}
	zxid := n.Stats().Zxid
	for _, w := range []struct {
		name string
		want float64
	}{
		{"latch_zookeeper_sessions", 1},
		{"latch_zookeeper_znodes", 6},
		{"latch_zookeeper_ephemerals", 1},
		{"latch_zookeeper_watches", 3},
		{"latch_zookeeper_zxid_epoch", float64(zxid >> 32)},
		{"latch_zookeeper_zxid_counter", float64(zxid & 0xffffffff)},
	} {
		if got := value(t, m, w.name); got != w.want {
			t.Errorf("%s = %v, want %v", w.name, got, w.want)
		}
	}
	want := ZooKeeperStats{Sessions: 1, Znodes: 6, Ephemerals: 1, Watches: 3, Zxid: zxid}
	if got := m.Snapshot().ZooKeeper; got != want {
		t.Errorf("Snapshot().ZooKeeper = %+v, want %+v", got, want)
	}

	// The session's end takes its ephemeral; a write moves the counter.
	if err := n.EndSession(id); err != nil {
		t.Fatal(err)
	}
	watches = 0
	want = ZooKeeperStats{Znodes: 5, Zxid: zxid + 1}
	if got := m.Snapshot().ZooKeeper; got != want {
		t.Errorf("after the end, Snapshot().ZooKeeper = %+v, want %+v", got, want)
	}
	if got := value(t, m, "latch_zookeeper_zxid_counter"); got != float64((zxid+1)&0xffffffff) {
		t.Errorf("latch_zookeeper_zxid_counter = %v after one more change, want %v", got, (zxid+1)&0xffffffff)
	}
}
