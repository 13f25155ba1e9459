package zookeeper

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/latchd/latch/internal/jute"
	"github.com/latchd/latch/internal/metrics"
	"github.com/latchd/latch/internal/netserve"
	"github.com/latchd/latch/internal/znode"
)

// The four-letter words: a connection whose first four bytes are one is
// answered in text and closed, as ZooKeeper does. latch answers ruok,
// srvr, stat, mntr, envi, isro and conf; the others get ZooKeeper's
// answer to a word off its whitelist.

// fourLetter returns the answer to word.
func (s *Server) fourLetter(word string) string {
	switch word {
	case "ruok":
		return "imok"
	case "isro":
		return "rw"
	case "srvr":
		return s.srvr(false)
	case "stat":
		return s.srvr(true)
	case "mntr":
		return s.mntr()
	case "envi":
		return s.envi()
	case "conf":
		return s.conf()
	}
	return word + " is not executed because it is not in the whitelist.\n"
}

// mode is ZooKeeper's name for how this server runs.
func (s *Server) mode() string { return s.svc.ZMode() }

// treeCounts returns the znodes, ephemerals and zxid of the tree.
func (s *Server) treeCounts() (znodes, ephemerals int, zxid int64) {
	s.svc.ZRead(func(t *znode.Tree) {
		znodes, ephemerals = t.Count()
		zxid = t.Zxid()
	})
	return znodes, ephemerals, zxid
}

func (s *Server) srvr(clients bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Zookeeper version: %s, built on latch\n", s.version())
	if clients {
		b.WriteString("Clients:\n")
		s.ns.Range(func(nc *netserve.Conn) bool {
			if c, ok := nc.State().(*conn); ok {
				fmt.Fprintf(&b, " %s[1](queued=0,recved=0,sent=0,sid=%#x)\n", nc.RemoteAddr(), uint64(c.sess))
			}
			return true
		})
		b.WriteString("\n")
	}
	znodes, _, zxid := s.treeCounts()
	minL, avgL, maxL := s.stats.latency()
	fmt.Fprintf(&b, "Latency min/avg/max: %d/%.4f/%d\n", minL, avgL, maxL)
	fmt.Fprintf(&b, "Received: %d\nSent: %d\n", s.stats.received.Load(), s.stats.sent.Load())
	fmt.Fprintf(&b, "Connections: %d\nOutstanding: 0\n", s.ns.Stats().Open)
	fmt.Fprintf(&b, "Zxid: %#x\nMode: %s\nNode count: %d\n", zxid, s.mode(), znodes)
	return b.String()
}

func (s *Server) mntr() string {
	znodes, ephemerals, _ := s.treeCounts()
	minL, avgL, maxL := s.stats.latency()
	var b strings.Builder
	for _, kv := range []struct {
		k string
		v any
	}{
		{"zk_version", s.version()},
		{"zk_server_state", s.mode()},
		{"zk_avg_latency", fmt.Sprintf("%.4f", avgL)},
		{"zk_max_latency", maxL},
		{"zk_min_latency", minL},
		{"zk_packets_received", s.stats.received.Load()},
		{"zk_packets_sent", s.stats.sent.Load()},
		{"zk_num_alive_connections", s.ns.Stats().Open},
		{"zk_outstanding_requests", 0},
		{"zk_znode_count", znodes},
		{"zk_watch_count", s.w.count()},
		{"zk_ephemerals_count", ephemerals},
		{"zk_global_sessions", s.sessionCount()},
	} {
		fmt.Fprintf(&b, "%s\t%v\n", kv.k, kv.v)
	}
	return b.String()
}

func (s *Server) envi() string {
	host, _ := os.Hostname()
	var b strings.Builder
	b.WriteString("Environment:\n")
	fmt.Fprintf(&b, "zookeeper.version=%s, built on latch\n", s.version())
	fmt.Fprintf(&b, "host.name=%s\n", host)
	fmt.Fprintf(&b, "go.version=%s\n", runtime.Version())
	fmt.Fprintf(&b, "os.name=%s\nos.arch=%s\n", runtime.GOOS, runtime.GOARCH)
	return b.String()
}

func (s *Server) conf() string {
	lo, hi := s.cfg.sessionTimeouts()
	var b strings.Builder
	fmt.Fprintf(&b, "clientPort=%s\n", s.portOf())
	fmt.Fprintf(&b, "tickTime=%d\n", s.cfg.TickTime.Milliseconds())
	fmt.Fprintf(&b, "maxClientCnxns=%d\n", s.cfg.MaxConns)
	fmt.Fprintf(&b, "minSessionTimeout=%d\nmaxSessionTimeout=%d\n", lo.Milliseconds(), hi.Milliseconds())
	fmt.Fprintf(&b, "serverId=0\n")
	return b.String()
}

func (s *Server) portOf() string {
	if a := s.Addr(); a != nil {
		if i := strings.LastIndexByte(a.String(), ':'); i >= 0 {
			return a.String()[i+1:]
		}
	}
	return ""
}

// sessionCount returns the sessions that have a connection here.
func (s *Server) sessionCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions)
}

// observe records one request's latency.
func (st *stats) observe(d time.Duration) {
	st.latencyNs.Add(uint64(d))
	for {
		old := st.latencyMax.Load()
		if int64(d) <= old || st.latencyMax.CompareAndSwap(old, int64(d)) {
			return
		}
	}
}

// latency returns the min, mean and max request latencies in
// milliseconds, as the four-letter words give them.
func (st *stats) latency() (minMs int64, avgMs float64, maxMs int64) {
	n := st.received.Load()
	if n == 0 {
		return 0, 0, 0
	}
	return 0, float64(st.latencyNs.Load()) / float64(n) / 1e6, st.latencyMax.Load() / 1e6
}

// command returns the metrics of op, or nil without metrics.
func (s *Server) command(op jute.Op) *metrics.Command {
	if s.m == nil {
		return nil
	}
	if m, ok := s.cmds[op]; ok {
		return m
	}
	return s.cmds[jute.OpNotification] // "unknown"
}

// metricOps are the ops counted by name; the others count as "unknown".
var metricOps = []jute.Op{
	jute.OpCreate, jute.OpCreate2, jute.OpCreateContainer, jute.OpCreateTTL, jute.OpDelete,
	jute.OpExists, jute.OpGetData, jute.OpSetData, jute.OpGetACL, jute.OpSetACL,
	jute.OpGetChildren, jute.OpGetChildren2, jute.OpSync, jute.OpPing, jute.OpCheck,
	jute.OpMulti, jute.OpReconfig, jute.OpCheckWatches, jute.OpRemoveWatches, jute.OpAuth,
	jute.OpSetWatches, jute.OpCloseSession,
}

// commandMetrics returns the metrics of each op of metricOps, and of the
// others under jute.OpNotification.
func commandMetrics(p *metrics.Protocol) map[jute.Op]*metrics.Command {
	m := make(map[jute.Op]*metrics.Command, len(metricOps)+1)
	for _, op := range metricOps {
		m[op] = p.Command(op.String())
	}
	m[jute.OpNotification] = p.Command("unknown")
	return m
}
