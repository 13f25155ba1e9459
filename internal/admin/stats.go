package admin

import (
	"net/http"
	"sync"
	"time"

	"github.com/latchd/latch/internal/metrics"
)

// Stats is the answer of GET /v1/stats.
type Stats struct {
	Time          Time    `json:"time"`
	StartedAt     Time    `json:"started_at"`
	UptimeSeconds float64 `json:"uptime_seconds"`
	Version       string  `json:"version,omitempty"`

	Keys     int `json:"keys"`     // held, waited for or delayed
	Held     int `json:"held"`     // (key, holder) pairs
	Waiters  int `json:"waiters"`  // queued requests
	Sessions int `json:"sessions"` // live sessions

	// ZooKeeper are the data tree's and the ZooKeeper front end's
	// gauges.
	ZooKeeper ZooKeeper `json:"zookeeper"`

	Totals    Counters   `json:"totals"`
	Protocols []Counters `json:"protocols"`

	Wait    Latency `json:"wait"`
	Hold    Latency `json:"hold"`
	HandOff Latency `json:"handoff"`
}

// Counters are the counters of one protocol, or of all ("all").
type Counters struct {
	Protocol           string `json:"protocol"`
	Sessions           int64  `json:"sessions"`
	SessionsOpened     uint64 `json:"sessions_opened"`
	SessionExpiries    uint64 `json:"session_expiries"`
	Grants             uint64 `json:"grants"`
	Timeouts           uint64 `json:"timeouts"`
	Cancels            uint64 `json:"cancels"`
	Releases           uint64 `json:"releases"`
	SessionEndReleases uint64 `json:"session_end_releases"`
	LeaseExpiries      uint64 `json:"lease_expiries"`
	ForcedReleases     uint64 `json:"forced_releases"`
	Connections        int64  `json:"connections"`
	ConnectionsTotal   uint64 `json:"connections_total"`
	ConnectionsRefused uint64 `json:"connections_refused"`
	Requests           uint64 `json:"requests"`
	Errors             uint64 `json:"errors"`
}

// ZooKeeper are the gauges of the ZooKeeper data tree, which every node
// of a cluster holds, and of this node's ZooKeeper front end.
type ZooKeeper struct {
	Sessions   int `json:"sessions"`   // sessions the tree knows, wherever their connection is
	Znodes     int `json:"znodes"`     // the root and the built-in /zookeeper ones included
	Ephemerals int `json:"ephemerals"` // ephemeral znodes
	Watches    int `json:"watches"`    // watches set on this node's front end
	// Zxid is the tree's last zxid, a string as fencing tokens are.
	Zxid int64 `json:"zxid,string"`
}

// Latency summarises a histogram.
type Latency struct {
	Count       uint64  `json:"count"`
	MeanSeconds float64 `json:"mean_seconds"`
	P50Seconds  float64 `json:"p50_seconds"`
	P99Seconds  float64 `json:"p99_seconds"`
}

func toCounters(p metrics.ProtocolStats) Counters {
	return Counters{
		Protocol:           p.Protocol,
		Sessions:           p.Sessions,
		SessionsOpened:     p.SessionsOpened,
		SessionExpiries:    p.SessionExpiries,
		Grants:             p.Grants,
		Timeouts:           p.Timeouts,
		Cancels:            p.Cancels,
		Releases:           p.Releases,
		SessionEndReleases: p.SessionEndReleases,
		LeaseExpiries:      p.LeaseExpiries,
		ForcedReleases:     p.ForcedReleases,
		Connections:        p.Connections,
		ConnectionsTotal:   p.ConnectionsTotal,
		ConnectionsRefused: p.ConnectionsRefused,
		Requests:           p.Requests,
		Errors:             p.Errors,
	}
}

func toLatency(h metrics.Histogram) Latency {
	return Latency{
		Count:       h.Count,
		MeanSeconds: h.Mean().Seconds(),
		P50Seconds:  h.Quantile(0.5).Seconds(),
		P99Seconds:  h.Quantile(0.99).Seconds(),
	}
}

// GET /v1/stats
func (s *Server) getStats(w http.ResponseWriter, r *http.Request) {
	snap := s.cfg.Metrics.Snapshot()
	st := Stats{
		Time:          Time{snap.Time},
		StartedAt:     Time{s.started},
		UptimeSeconds: snap.Time.Sub(s.started).Seconds(),
		Version:       s.cfg.Version,
		Keys:          snap.Keys,
		Held:          snap.Held,
		Waiters:       snap.Waiters,
		Sessions:      snap.Sessions,
		Totals:        toCounters(snap.Total()),
		Protocols:     make([]Counters, len(snap.Protocols)),
		Wait:          toLatency(snap.Wait),
		Hold:          toLatency(snap.Hold),
		HandOff:       toLatency(snap.HandOff),
		ZooKeeper: ZooKeeper{
			Sessions:   snap.ZooKeeper.Sessions,
			Znodes:     snap.ZooKeeper.Znodes,
			Ephemerals: snap.ZooKeeper.Ephemerals,
			Watches:    snap.ZooKeeper.Watches,
			Zxid:       snap.ZooKeeper.Zxid,
		},
	}
	for i, p := range snap.Protocols {
		st.Protocols[i] = toCounters(p)
	}
	s.writeJSON(w, http.StatusOK, st)
}

// History is the answer of GET /v1/stats/history.
type History struct {
	IntervalSeconds float64  `json:"interval_seconds"`
	Samples         []Sample `json:"samples"` // oldest first
}

// Sample describes one interval of the history: rates over the interval
// that ended at Time, and the gauges at Time.
type Sample struct {
	Time              Time    `json:"time"`
	GrantsPerSecond   float64 `json:"grants_per_second"`
	ReleasesPerSecond float64 `json:"releases_per_second"`
	TimeoutsPerSecond float64 `json:"timeouts_per_second"`
	// WaitMeanSeconds and WaitP99Seconds describe the waits of the
	// requests granted in the interval (0 when none was).
	WaitMeanSeconds float64 `json:"wait_mean_seconds"`
	WaitP99Seconds  float64 `json:"wait_p99_seconds"`
	Held            int     `json:"held"`
	Waiters         int     `json:"waiters"`
	Sessions        int     `json:"sessions"`
}

// history is a ring of the last samples.
type history struct {
	mu      sync.Mutex
	prev    metrics.Snapshot // the last snapshot recorded
	hasPrev bool
	ring    []Sample
	next    int // where the next sample goes once the ring is full
}

func newHistory(size int) *history {
	return &history{ring: make([]Sample, 0, size)}
}

// record turns a snapshot into a sample of the interval since the
// previous one.
func (h *history) record(snap metrics.Snapshot) {
	h.mu.Lock()
	defer h.mu.Unlock()
	prev, ok := h.prev, h.hasPrev
	h.prev, h.hasPrev = snap, true
	if !ok {
		return
	}
	secs := snap.Time.Sub(prev.Time).Seconds()
	if secs <= 0 {
		return
	}
	cur, old := snap.Total(), prev.Total()
	wait := snap.Wait.Sub(prev.Wait)
	allReleases := func(c metrics.ProtocolStats) uint64 {
		return c.Releases + c.SessionEndReleases + c.LeaseExpiries + c.ForcedReleases
	}
	smp := Sample{
		Time:              Time{snap.Time},
		GrantsPerSecond:   float64(cur.Grants-old.Grants) / secs,
		ReleasesPerSecond: float64(allReleases(cur)-allReleases(old)) / secs,
		TimeoutsPerSecond: float64(cur.Timeouts-old.Timeouts) / secs,
		WaitMeanSeconds:   wait.Mean().Seconds(),
		WaitP99Seconds:    wait.Quantile(0.99).Seconds(),
		Held:              snap.Held,
		Waiters:           snap.Waiters,
		Sessions:          snap.Sessions,
	}
	if len(h.ring) < cap(h.ring) {
		h.ring = append(h.ring, smp)
		return
	}
	h.ring[h.next] = smp
	h.next = (h.next + 1) % len(h.ring)
}

// samples returns the samples later than since, oldest first.
func (h *history) samples(since time.Time) []Sample {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]Sample, 0, len(h.ring))
	for i := range h.ring {
		smp := h.ring[(h.next+i)%len(h.ring)]
		if smp.Time.After(since) {
			out = append(out, smp)
		}
	}
	return out
}

// GET /v1/stats/history?since=RFC3339
func (s *Server) getHistory(w http.ResponseWriter, r *http.Request) {
	var since time.Time
	if v := r.URL.Query().Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			s.writeError(w, http.StatusBadRequest, "invalid since: want an RFC 3339 time")
			return
		}
		since = t
	}
	s.writeJSON(w, http.StatusOK, History{
		IntervalSeconds: s.cfg.HistoryInterval.Seconds(),
		Samples:         s.history.samples(since),
	})
}
