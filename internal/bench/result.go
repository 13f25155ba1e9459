package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"
)

// Result is the outcome of a run. Rates are per second of measured time;
// latencies are in microseconds.
type Result struct {
	Target   string `json:"target"`
	Addr     string `json:"addr"`
	Server   string `json:"server,omitempty"` // the version the server reports
	Workload string `json:"workload"`
	Recipe   string `json:"recipe,omitempty"`
	Conns    int    `json:"conns"`
	Pipeline int    `json:"pipeline"`

	Seconds float64 `json:"seconds"` // measured time
	// Ops are the workload's units: lock+unlock cycles, get/set requests,
	// grants, locks taken or connections opened.
	Ops            uint64  `json:"ops"`
	OpsPerSec      float64 `json:"ops_per_sec"`
	Requests       uint64  `json:"requests"` // valid replies
	RequestsPerSec float64 `json:"requests_per_sec"`
	// Errors are unexpected replies and failed connections, over the whole
	// run (setup and warm-up included); ErrorSamples the first few.
	Errors       uint64   `json:"errors"`
	ErrorSamples []string `json:"error_samples,omitempty"`
	// Latency is per request, from the write of its batch to its reply.
	Latency *Latency `json:"latency,omitempty"`

	GetSet  *GetSetResult  `json:"getset,omitempty"`
	Handoff *HandoffResult `json:"handoff,omitempty"`
	Memory  *MemoryResult  `json:"memory,omitempty"`
	// ServerCPU is the server's CPU over the measured time (cycle, getset,
	// handoff with Config.ServerPID, on Linux).
	ServerCPU *CPUResult `json:"server_cpu,omitempty"`
}

// CPUResult is a server's CPU time over the measured time, in all and in
// microseconds per op (lock+unlock cycle, get/set request, or hand-off:
// the unit of the workload's headline rate) and per request (Requests).
type CPUResult struct {
	Source          string  `json:"source"`
	UserSeconds     float64 `json:"user_seconds"`
	SysSeconds      float64 `json:"sys_seconds"`
	UserPerOp       float64 `json:"user_us_per_op"`
	SysPerOp        float64 `json:"sys_us_per_op"`
	TotalPerOp      float64 `json:"total_us_per_op"`
	UserPerRequest  float64 `json:"user_us_per_request"`
	SysPerRequest   float64 `json:"sys_us_per_request"`
	TotalPerRequest float64 `json:"total_us_per_request"`
}

// Latency summarizes a Histogram, in microseconds.
type Latency struct {
	Count uint64  `json:"count"`
	Mean  float64 `json:"mean_us"`
	P50   float64 `json:"p50_us"`
	P99   float64 `json:"p99_us"`
	P999  float64 `json:"p999_us"`
	Max   float64 `json:"max_us"`
}

func latencyOf(h *Histogram) *Latency {
	us := func(d time.Duration) float64 { return math.Round(float64(d)/10) / 100 }
	return &Latency{
		Count: h.Count(),
		Mean:  us(h.Mean()),
		P50:   us(h.Quantile(0.50)),
		P99:   us(h.Quantile(0.99)),
		P999:  us(h.Quantile(0.999)),
		Max:   us(h.Max()),
	}
}

// GetSetResult details a getset run.
type GetSetResult struct {
	Gets   uint64 `json:"gets"`
	Sets   uint64 `json:"sets"`
	Misses uint64 `json:"misses"`
}

// HandoffResult details a handoff run.
type HandoffResult struct {
	Grants uint64 `json:"grants"`
	// Handoffs are grants to another connection than the last holder;
	// Regrants the others.
	Handoffs       uint64  `json:"handoffs"`
	HandoffsPerSec float64 `json:"handoffs_per_sec"`
	Regrants       uint64  `json:"regrants"`
	// HandoffLatency runs from the previous holder's unlock being sent to
	// the grant being received; Wait from the first lock attempt to the
	// grant.
	HandoffLatency *Latency `json:"handoff_latency"`
	Wait           *Latency `json:"wait"`
	// Polls are lock attempts refused because the key was taken.
	WastedPolls       uint64  `json:"wasted_polls"`
	WastedPollsPerSec float64 `json:"wasted_polls_per_sec"`
	// Grants per connection; Fairness is max/min (+Inf when a connection
	// got none, reported as -1 in JSON).
	MinGrants uint64  `json:"min_grants"`
	MaxGrants uint64  `json:"max_grants"`
	Fairness  float64 `json:"fairness"`
}

// MemoryResult details a hold or idle run. Byte counts are -1 where the
// source is not available.
type MemoryResult struct {
	Locks  int    `json:"locks,omitempty"`
	Conns  int    `json:"conns"`
	Source string `json:"source"`
	Before Memory `json:"before"`
	// Items is sampled after the items a lock recipe needs were set,
	// before the locks were taken (recipe lock only).
	Items *Memory `json:"items,omitempty"`
	After Memory  `json:"after"`
	// Per lock (hold) or per connection (idle): the difference after -
	// before, divided; per lock alone: after - items.
	PerUnitRSS     float64 `json:"per_unit_rss_bytes"`
	PerUnitHeap    float64 `json:"per_unit_heap_bytes"`
	PerLockOnlyRSS float64 `json:"per_lock_only_rss_bytes,omitempty"`
	PerLockHeap    float64 `json:"per_lock_only_heap_bytes,omitempty"`
	Seconds        float64 `json:"seconds"` // to take the locks or open the connections
}

// Memory is one sample of a server's memory.
type Memory struct {
	RSS  int64 `json:"rss_bytes"`     // resident set size
	Heap int64 `json:"go_heap_bytes"` // Go heap in use after a GC (latch)
}

// WriteJSON writes r as indented JSON.
func (r *Result) WriteJSON(w io.Writer) error {
	rr := *r
	if rr.Handoff != nil && math.IsInf(rr.Handoff.Fairness, 1) {
		h := *rr.Handoff
		h.Fairness = -1
		rr.Handoff = &h
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(&rr)
}

// WriteText writes r as a table for people.
func (r *Result) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, format string, args ...any) { fmt.Fprintf(tw, "%s\t"+format+"\n", append([]any{k}, args...)...) }
	server := r.Server
	if server == "" {
		server = "-"
	}
	row("target", "%s %s (%s)", r.Target, r.Addr, server)
	wl := r.Workload
	if r.Recipe != "" {
		wl += ", recipe " + r.Recipe
	}
	row("workload", "%s, %d conns, pipeline %d", wl, r.Conns, r.Pipeline)
	if r.Memory == nil {
		row("time", "%.2fs measured", r.Seconds)
		row(unitName(r.Workload)+"/s", "%s (%d)", si(r.OpsPerSec), r.Ops)
		row("requests/s", "%s (%d)", si(r.RequestsPerSec), r.Requests)
	}
	if l := r.Latency; l != nil && l.Count > 0 {
		row("latency", "%s", fmtLatency(l))
	}
	if g := r.GetSet; g != nil {
		row("gets/sets", "%d/%d, %d misses", g.Gets, g.Sets, g.Misses)
	}
	if h := r.Handoff; h != nil {
		row("hand-offs/s", "%s (%d hand-offs, %d regrants)", si(h.HandoffsPerSec), h.Handoffs, h.Regrants)
		row("hand-off latency", "%s", fmtLatency(h.HandoffLatency))
		row("wait", "%s", fmtLatency(h.Wait))
		row("fairness", "max/min %.3f (grants per conn %d..%d)", h.Fairness, h.MinGrants, h.MaxGrants)
		row("wasted polls/s", "%s (%d)", si(h.WastedPollsPerSec), h.WastedPolls)
	}
	if c := r.ServerCPU; c != nil {
		row("server CPU", "%.2fs user + %.2fs sys (%s)", c.UserSeconds, c.SysSeconds, c.Source)
		row("server CPU/"+opName(r.Workload), "%.3fµs (user %.3f, sys %.3f)", c.TotalPerOp, c.UserPerOp, c.SysPerOp)
		row("server CPU/request", "%.3fµs (user %.3f, sys %.3f)", c.TotalPerRequest, c.UserPerRequest, c.SysPerRequest)
	}
	if m := r.Memory; m != nil {
		unit := "lock"
		n := m.Locks
		if r.Workload == WorkloadIdle {
			unit, n = "conn", m.Conns
		}
		row(unit+"s", "%d in %.2fs (%s)", n, m.Seconds, m.Source)
		row("memory before", "%s", fmtMem(m.Before))
		if m.Items != nil {
			row("after items", "%s", fmtMem(*m.Items))
		}
		row("memory after", "%s", fmtMem(m.After))
		row("per "+unit, "RSS %s, Go heap %s", fmtPerUnit(m.PerUnitRSS), fmtPerUnit(m.PerUnitHeap))
		if m.Items != nil {
			row("per lock, item excluded", "RSS %s, Go heap %s", fmtPerUnit(m.PerLockOnlyRSS), fmtPerUnit(m.PerLockHeap))
		}
	}
	row("errors", "%d", r.Errors)
	for _, s := range r.ErrorSamples {
		row("", "%s", s)
	}
	return tw.Flush()
}

func unitName(workload string) string {
	switch workload {
	case WorkloadCycle:
		return "cycles"
	case WorkloadHandoff:
		return "grants"
	default:
		return "ops"
	}
}

// opName names one op of the workload, as CPUResult counts them.
func opName(workload string) string {
	switch workload {
	case WorkloadCycle:
		return "cycle"
	case WorkloadHandoff:
		return "hand-off"
	default:
		return "op"
	}
}

func fmtLatency(l *Latency) string {
	if l == nil || l.Count == 0 {
		return "-"
	}
	return fmt.Sprintf("p50 %s  p99 %s  p99.9 %s  max %s  mean %s", us(l.P50), us(l.P99), us(l.P999), us(l.Max), us(l.Mean))
}

func us(v float64) string {
	if v >= 10000 {
		return fmt.Sprintf("%.1fms", v/1000)
	}
	return fmt.Sprintf("%.0fµs", v)
}

func si(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

func fmtMem(m Memory) string {
	var parts []string
	if m.RSS >= 0 {
		parts = append(parts, fmt.Sprintf("RSS %.1f MiB", float64(m.RSS)/(1<<20)))
	}
	if m.Heap >= 0 {
		parts = append(parts, fmt.Sprintf("Go heap %.1f MiB", float64(m.Heap)/(1<<20)))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

func fmtPerUnit(v float64) string {
	if v < 0 || math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.0f B", v)
}
