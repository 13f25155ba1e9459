package metrics

import (
	"cmp"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/latchd/latch/internal/node"
)

// Metrics is the registry of one latch server and the metrics in it. Create
// it with New, build the node with Observer() as its node.Config.Observer,
// then call Watch with the node. Its methods are safe for concurrent use; a
// nil *Metrics hands out nil handles, whose methods do nothing, so that a
// front end can run without metrics.
type Metrics struct {
	reg *prometheus.Registry
	obs *Observer

	src atomic.Pointer[Source] // set by Watch
	// zwatches counts the ZooKeeper front end's watches; set by
	// WatchZooKeeper.
	zwatches atomic.Pointer[func() int]
	// tracking reads the Redis front end's client-side caching: tracking
	// connections and tracked keys; set by WatchRedisTracking.
	tracking atomic.Pointer[func() (clients, keys int)]
	// The build, the limits and the items (ops.go).
	opsState

	mu     sync.Mutex
	fronts map[string]*Protocol // by name; guarded by mu
}

// Source is what Watch reads the lock table's gauges from: node.Node.
type Source interface {
	// WithStats calls f with the lock table's counts, under the mutex the
	// Observer's methods are called with.
	WithStats(f func(node.Stats))
}

// New returns a registry with latch's metrics and the Go runtime and
// process collectors in it.
func New() *Metrics {
	m := &Metrics{
		reg:    prometheus.NewRegistry(),
		obs:    newObserver(),
		fronts: make(map[string]*Protocol),
	}
	m.build.Store(newBuildInfo())
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		(*collector)(m),
	)
	return m
}

// Observer returns the node.Observer that counts what the lock service
// does. Give it to exactly one node, as its node.Config.Observer.
func (m *Metrics) Observer() *Observer { return m.obs }

// Watch makes the registry read the lock-table metrics from src, the node
// built with Observer(). Until it is called they are not reported.
func (m *Metrics) Watch(src Source) { m.src.Store(&src) }

// WatchZooKeeper makes the registry report the watches of the ZooKeeper
// front end, which watches counts when called (at scrape time, without
// the node's mutex). Until it is called they are not reported.
func (m *Metrics) WatchZooKeeper(watches func() int) { m.zwatches.Store(&watches) }

// WatchRedisTracking makes the registry report the Redis front end's
// client-side caching, which tracking counts when called (at scrape time):
// the connections with tracking on, and the keys of its tracking table.
// Until it is called they are not reported.
func (m *Metrics) WatchRedisTracking(tracking func() (clients, keys int)) {
	m.tracking.Store(&tracking)
}

// zooKeeperWatches returns the ZooKeeper front end's watches; ok is false
// before WatchZooKeeper.
func (m *Metrics) zooKeeperWatches() (n int, ok bool) {
	f := m.zwatches.Load()
	if f == nil {
		return 0, false
	}
	return (*f)(), true
}

// Registry returns the Prometheus registry, for registering more
// collectors or gathering in tests.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler returns the /metrics HTTP handler.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// table copies the lock-table metrics; ok is false before Watch.
func (m *Metrics) table() (ts tableSnapshot, ok bool) {
	p := m.src.Load()
	if p == nil {
		return tableSnapshot{}, false
	}
	(*p).WithStats(func(st node.Stats) { ts = m.obs.snapshot(st) })
	return ts, true
}

// Protocol is the front-end metrics of one protocol: its connections and
// its commands. A nil *Protocol does nothing.
type Protocol struct {
	name     string
	conns    atomic.Int64
	accepted atomic.Uint64
	// refused connections, by reason (ConnRefused)
	refusedMax, refusedAllow atomic.Uint64

	mu   sync.Mutex
	cmds map[string]*Command // guarded by mu
}

// Protocol returns the front-end metrics of the named protocol, the same
// for the same name. Name it as the protocol's sessions are named
// (latch.SessionOptions.Protocol), so that both sets of metrics line up.
func (m *Metrics) Protocol(name string) *Protocol {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.fronts[name]
	if p == nil {
		p = &Protocol{name: name, cmds: make(map[string]*Command)}
		m.fronts[name] = p
	}
	return p
}

// ConnOpened counts a connection the front end accepted.
func (p *Protocol) ConnOpened() {
	if p != nil {
		p.conns.Add(1)
		p.accepted.Add(1)
	}
}

// ConnRefused counts a connection the front end turned away, for reason:
// "max_conns" (over its connection limit) or "allow" (from outside its
// allow-list).
func (p *Protocol) ConnRefused(reason string) {
	if p == nil {
		return
	}
	switch reason {
	case "max_conns":
		p.refusedMax.Add(1)
	case "allow":
		p.refusedAllow.Add(1)
	default:
		panic("metrics: unknown refusal reason " + reason)
	}
}

// ConnClosed counts the end of a connection ConnOpened counted.
func (p *Protocol) ConnClosed() {
	if p != nil {
		p.conns.Add(-1)
	}
}

// Command returns the handle of one command of the protocol, the same for
// the same name. Look handles up once, when the front end starts, and keep
// them: moving one is a single atomic add.
func (p *Protocol) Command(name string) *Command {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.cmds[name]
	if c == nil {
		c = &Command{name: name}
		p.cmds[name] = c
	}
	return c
}

// Command returns m.Protocol(proto).Command(cmd).
func (m *Metrics) Command(proto, cmd string) *Command {
	return m.Protocol(proto).Command(cmd)
}

// Command counts the requests of one command of one protocol. A nil
// *Command does nothing.
type Command struct {
	name     string
	requests atomic.Uint64
	errors   atomic.Uint64
}

// Request counts a request of the command.
func (c *Command) Request() {
	if c != nil {
		c.requests.Add(1)
	}
}

// Error counts a request answered with an error (count it with Request
// too).
func (c *Command) Error() {
	if c != nil {
		c.errors.Add(1)
	}
}

// fronts returns the front-end protocols, sorted by name.
func (m *Metrics) protocols() []*Protocol {
	m.mu.Lock()
	ps := make([]*Protocol, 0, len(m.fronts))
	for _, p := range m.fronts {
		ps = append(ps, p)
	}
	m.mu.Unlock()
	slices.SortFunc(ps, func(a, b *Protocol) int { return cmp.Compare(a.name, b.name) })
	return ps
}

// commands returns p's commands, sorted by name.
func (p *Protocol) commands() []*Command {
	p.mu.Lock()
	cs := make([]*Command, 0, len(p.cmds))
	for _, c := range p.cmds {
		cs = append(cs, c)
	}
	p.mu.Unlock()
	slices.SortFunc(cs, func(a, b *Command) int { return cmp.Compare(a.name, b.name) })
	return cs
}

// Snapshot is the state of the metrics at one instant, as plain values.
type Snapshot struct {
	Time time.Time
	// The lock table's counts (zero before Watch).
	Keys, Held, Waiters, Sessions int
	// Per protocol, sorted by name: every protocol that opened a session
	// or has a front end, and "none" when a lease outlived its session.
	Protocols []ProtocolStats
	// ZooKeeper are the data tree's counts (zero before Watch) and the
	// ZooKeeper front end's watches (zero before WatchZooKeeper).
	ZooKeeper ZooKeeperStats
	// Wait, Hold and HandOff are the histograms.
	Wait, Hold, HandOff Histogram
}

// ZooKeeperStats are the gauges of the ZooKeeper data tree and front end.
type ZooKeeperStats struct {
	Sessions   int // sessions the tree knows, on any node
	Znodes     int // the root and the built-in /zookeeper ones included
	Ephemerals int // ephemeral znodes
	Watches    int // watches set on this node's front end
	Zxid       int64
}

// ProtocolStats are the counters of one protocol.
type ProtocolStats struct {
	Protocol string

	Sessions        int64 // live
	SessionsOpened  uint64
	SessionExpiries uint64

	Grants   uint64
	Timeouts uint64
	Cancels  uint64

	// Holds ended, by cause.
	Releases           uint64 // released by their holder
	SessionEndReleases uint64 // released because their session ended
	LeaseExpiries      uint64
	ForcedReleases     uint64

	Connections      int64 // open
	ConnectionsTotal uint64
	// ConnectionsRefused counts the connections turned away, for any
	// reason.
	ConnectionsRefused uint64
	Requests           uint64
	Errors             uint64
}

// Total returns the sum of every protocol's counters, named "all".
func (s *Snapshot) Total() ProtocolStats {
	t := ProtocolStats{Protocol: "all"}
	for _, p := range s.Protocols {
		t.Sessions += p.Sessions
		t.SessionsOpened += p.SessionsOpened
		t.SessionExpiries += p.SessionExpiries
		t.Grants += p.Grants
		t.Timeouts += p.Timeouts
		t.Cancels += p.Cancels
		t.Releases += p.Releases
		t.SessionEndReleases += p.SessionEndReleases
		t.LeaseExpiries += p.LeaseExpiries
		t.ForcedReleases += p.ForcedReleases
		t.Connections += p.Connections
		t.ConnectionsTotal += p.ConnectionsTotal
		t.ConnectionsRefused += p.ConnectionsRefused
		t.Requests += p.Requests
		t.Errors += p.Errors
	}
	return t
}

// Snapshot returns the current values.
func (m *Metrics) Snapshot() Snapshot {
	s := Snapshot{Time: time.Now(), HandOff: m.obs.handoff.snapshot()}
	byName := make(map[string]*ProtocolStats)
	get := func(name string) *ProtocolStats {
		p := byName[name]
		if p == nil {
			p = &ProtocolStats{Protocol: name}
			byName[name] = p
		}
		return p
	}
	if ts, ok := m.table(); ok {
		s.Keys, s.Held, s.Waiters, s.Sessions = ts.stats.Keys, ts.stats.Holds, ts.stats.Waiters, ts.stats.Sessions
		s.Wait, s.Hold = ts.wait, ts.hold
		z := &s.ZooKeeper
		z.Sessions, z.Znodes, z.Ephemerals, z.Zxid = ts.stats.ZSessions, ts.stats.Znodes, ts.stats.Ephemerals, ts.stats.Zxid
		for i, name := range ts.names {
			c := &ts.protos[i]
			if name == protoNone && *c == (protoCounts{}) {
				continue
			}
			p := get(name)
			p.Sessions = int64(c.opened - c.ended)
			p.SessionsOpened = c.opened
			p.SessionExpiries = c.expired
			p.Grants, p.Timeouts, p.Cancels = c.grants, c.timeouts, c.cancels
			p.Releases = c.released[node.ReleasedByClient]
			p.SessionEndReleases = c.released[node.ReleasedSessionEnded]
			p.LeaseExpiries = c.released[node.ReleasedLeaseExpired]
			p.ForcedReleases = c.released[node.ReleasedForced]
		}
	}
	s.ZooKeeper.Watches, _ = m.zooKeeperWatches()
	for _, fp := range m.protocols() {
		p := get(fp.name)
		p.Connections = fp.conns.Load()
		p.ConnectionsTotal = fp.accepted.Load()
		p.ConnectionsRefused = fp.refusedMax.Load() + fp.refusedAllow.Load()
		for _, c := range fp.commands() {
			p.Requests += c.requests.Load()
			p.Errors += c.errors.Load()
		}
	}
	for _, p := range byName {
		s.Protocols = append(s.Protocols, *p)
	}
	slices.SortFunc(s.Protocols, func(a, b ProtocolStats) int { return cmp.Compare(a.Protocol, b.Protocol) })
	return s
}
