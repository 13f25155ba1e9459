package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/latchd/latch/internal/node"
)

// The descriptions of latch's own metrics; see the package documentation.
var (
	descGrants = prometheus.NewDesc("latch_grants_total",
		"Lock requests granted, at once or after waiting.", []string{"protocol"}, nil)
	descReleases = prometheus.NewDesc("latch_releases_total",
		"Holds ended, by why: release (by the holder), session_end, lease_expiry or forced (by an operator). "+
			"Protocol \"none\" is a lease that outlived its session.", []string{"protocol", "cause"}, nil)
	descTimeouts = prometheus.NewDesc("latch_wait_timeouts_total",
		"Waiting lock requests that reached their deadline.", []string{"protocol"}, nil)
	descCancels = prometheus.NewDesc("latch_wait_cancels_total",
		"Waiting lock requests cancelled by their caller.", []string{"protocol"}, nil)
	descSessionsOpened = prometheus.NewDesc("latch_sessions_opened_total",
		"Sessions opened.", []string{"protocol"}, nil)
	descSessionExpiries = prometheus.NewDesc("latch_session_expiries_total",
		"Sessions ended because their TTL lapsed.", []string{"protocol"}, nil)
	descSessions = prometheus.NewDesc("latch_sessions",
		"Live sessions.", []string{"protocol"}, nil)

	descHeld = prometheus.NewDesc("latch_held_locks",
		"Holds in the lock table: (key, holder) pairs.", nil, nil)
	descKeys = prometheus.NewDesc("latch_locked_keys",
		"Keys in the lock table: held, waited for, or under lock-delay.", nil, nil)
	descWaiters = prometheus.NewDesc("latch_waiters",
		"Lock requests waiting in a queue.", nil, nil)

	descZSessions = prometheus.NewDesc("latch_zookeeper_sessions",
		"ZooKeeper sessions the data tree knows, whichever node their connection is on.", nil, nil)
	descZnodes = prometheus.NewDesc("latch_zookeeper_znodes",
		"Znodes in the data tree, the root and the built-in /zookeeper ones included.", nil, nil)
	descEphemerals = prometheus.NewDesc("latch_zookeeper_ephemerals",
		"Ephemeral znodes in the data tree.", nil, nil)
	descZxidEpoch = prometheus.NewDesc("latch_zookeeper_zxid_epoch",
		"The high 32 bits of the data tree's zxid (its epoch).", nil, nil)
	descZxidCounter = prometheus.NewDesc("latch_zookeeper_zxid_counter",
		"The low 32 bits of the data tree's zxid (its counter): one more per change.", nil, nil)
	descZWatches = prometheus.NewDesc("latch_zookeeper_watches",
		"Watches set on this node's ZooKeeper front end.", nil, nil)
	descTrackingClients = prometheus.NewDesc("latch_redis_tracking_clients",
		"Connections of this node's Redis front end with client-side caching on (CLIENT TRACKING).", nil, nil)
	descTrackedKeys = prometheus.NewDesc("latch_redis_tracked_keys",
		"Keys in the tracking table of this node's Redis front end (read by tracking connections, not yet invalidated).", nil, nil)

	descWait = prometheus.NewDesc("latch_wait_seconds",
		"Time from a lock request to its grant (0 for a request granted at once).", nil, nil)
	descHold = prometheus.NewDesc("latch_hold_seconds",
		"Time from a grant to the end of the hold, whatever ended it.", nil, nil)
	descHandOff = prometheus.NewDesc("latch_handoff_seconds",
		"Time from the release that let a waiting request be granted to its caller resuming with the grant.", nil, nil)

	descConns = prometheus.NewDesc("latch_connections_open",
		"Open client connections.", []string{"protocol"}, nil)
	descConnsTotal = prometheus.NewDesc("latch_connections_accepted_total",
		"Client connections accepted and served.", []string{"protocol"}, nil)
	descConnsRefused = prometheus.NewDesc("latch_connections_refused_total",
		"Client connections turned away, by reason: max_conns (over the front end's limit) or allow (from outside its allow-list).", []string{"protocol", "reason"}, nil)
	descRequests = prometheus.NewDesc("latch_requests_total",
		"Requests served by a front end, by command.", []string{"protocol", "command"}, nil)
	descErrors = prometheus.NewDesc("latch_request_errors_total",
		"Requests answered with an error, by command.", []string{"protocol", "command"}, nil)
)

// collector reports latch's own metrics from the Observer, the lock table
// and the front ends' handles.
type collector Metrics

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		descGrants, descReleases, descTimeouts, descCancels, descSessionsOpened,
		descSessionExpiries, descSessions, descHeld, descKeys, descWaiters,
		descZSessions, descZnodes, descEphemerals, descZxidEpoch, descZxidCounter, descZWatches,
		descTrackingClients, descTrackedKeys,
		descWait, descHold, descHandOff, descConns, descConnsTotal, descConnsRefused, descRequests, descErrors,
	} {
		ch <- d
	}
	for _, d := range opsDescs {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	m := (*Metrics)(c)
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
	histogram := func(d *prometheus.Desc, h Histogram) {
		ch <- prometheus.MustNewConstHistogram(d, h.Count, h.Sum.Seconds(), h.cumulative())
	}

	if ts, ok := m.table(); ok {
		gauge(descHeld, int64(ts.stats.Holds))
		gauge(descKeys, int64(ts.stats.Keys))
		gauge(descWaiters, int64(ts.stats.Waiters))
		for i, name := range ts.names {
			p := &ts.protos[i]
			for why := 1; why < node.NumReleaseCauses; why++ {
				if name != protoNone || p.released[why] > 0 {
					counter(descReleases, p.released[why], name, causeLabels[why])
				}
			}
			if name == protoNone {
				continue // no session: only releases
			}
			counter(descGrants, p.grants, name)
			counter(descTimeouts, p.timeouts, name)
			counter(descCancels, p.cancels, name)
			counter(descSessionsOpened, p.opened, name)
			counter(descSessionExpiries, p.expired, name)
			gauge(descSessions, int64(p.opened-p.ended), name)
		}
		histogram(descWait, ts.wait)
		histogram(descHold, ts.hold)
		gauge(descZSessions, int64(ts.stats.ZSessions))
		gauge(descZnodes, int64(ts.stats.Znodes))
		gauge(descEphemerals, int64(ts.stats.Ephemerals))
		gauge(descZxidEpoch, ts.stats.Zxid>>32)
		gauge(descZxidCounter, ts.stats.Zxid&0xffffffff)
	}
	if n, ok := m.zooKeeperWatches(); ok {
		gauge(descZWatches, int64(n))
	}
	if f := m.tracking.Load(); f != nil {
		clients, keys := (*f)()
		gauge(descTrackingClients, int64(clients))
		gauge(descTrackedKeys, int64(keys))
	}
	histogram(descHandOff, m.obs.handoff.snapshot())
	m.collectOps(ch)

	for _, p := range m.protocols() {
		gauge(descConns, p.conns.Load(), p.name)
		counter(descConnsTotal, p.accepted.Load(), p.name)
		counter(descConnsRefused, p.refusedMax.Load(), p.name, "max_conns")
		counter(descConnsRefused, p.refusedAllow.Load(), p.name, "allow")
		for _, cmd := range p.commands() {
			counter(descRequests, cmd.requests.Load(), p.name, cmd.name)
			counter(descErrors, cmd.errors.Load(), p.name, cmd.name)
		}
	}
}
