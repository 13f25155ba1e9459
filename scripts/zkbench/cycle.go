package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/latchd/latch/internal/bench"
)

// cycleResult is latch bench's result with where the sessions landed.
type cycleResult struct {
	*bench.Result
	// Landed counts the connections on each server; OnLeader those on
	// Leader, the server the script named as the ensemble's leader.
	Landed   map[string]int `json:"landed"`
	Leader   string         `json:"leader,omitempty"`
	OnLeader *int           `json:"on_leader,omitempty"`
	// ClientCPU is this process's own user+sys time per op over the
	// measured time: the load generator shares the servers' cores.
	ClientCPU float64 `json:"client_cpu_us_per_op,omitempty"`
}

// cycle runs lock+unlock cycles of the recipe: conns sessions with
// inflight lockers each, every locker on a lock of its own, or with
// --shared every locker on one lock. go-zookeeper pipelines the requests
// of a session's lockers on its one connection.
func cycle(args []string) error {
	fs := flag.NewFlagSet("cycle", flag.ContinueOnError)
	servers := fs.String("servers", "127.0.0.1:2181", "the ensemble's client `addresses`, comma-separated: every session is given them all")
	conns := fs.Int("conns", 16, "sessions (connections)")
	inflight := fs.Int("inflight", 1, "lockers (goroutines, requests in flight) per session")
	duration := fs.Duration("duration", 5*time.Second, "measured time")
	warmup := fs.Duration("warmup", time.Second, "unmeasured time before it")
	shared := fs.Bool("shared", false, "every locker takes one lock (hand-offs) instead of a lock of its own")
	serverPID := fs.String("server-pid", "", "`pids` of the servers, comma-separated, for their CPU time")
	leader := fs.String("leader", "", "the leader's client `address`, to count the connections on it")
	name := fs.String("name", "zookeeper", "the server's name in the result")
	text := fs.Bool("text", false, "print a table for people instead of JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	srvs := list(*servers)
	ps, err := pids(*serverPID)
	if err != nil {
		return err
	}
	if *conns < 1 || *inflight < 1 || len(srvs) == 0 {
		return fmt.Errorf("want conns, inflight and servers")
	}

	cs := make([]*zk.Conn, *conns)
	var dialErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range cs {
		wg.Go(func() {
			c, err := dial(srvs)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				dialErr = err
				return
			}
			cs[i] = c
		})
	}
	wg.Wait()
	defer func() {
		for _, c := range cs {
			if c != nil {
				c.Close()
			}
		}
	}()
	if dialErr != nil {
		return dialErr
	}
	res := &cycleResult{Landed: map[string]int{}, Leader: *leader}
	for _, c := range cs {
		res.Landed[c.Server()]++
	}
	if *leader != "" {
		n := res.Landed[*leader]
		res.OnLeader = &n
	}

	run := fmt.Sprintf("/zkbench/%d", time.Now().UnixNano())
	if err := ensure(cs[0], run); err != nil {
		return err
	}
	type worker struct {
		l                *locker
		lat, hl, wl      bench.Histogram
		ops, req, grants uint64
		handoffs         uint64
	}
	ws := make([]*worker, 0, *conns**inflight)
	for i, c := range cs {
		for j := range *inflight {
			dir := fmt.Sprintf("%s/c%d-%d", run, i, j)
			if *shared {
				dir = run + "/shared"
			}
			ws = append(ws, &worker{l: newLocker(c, dir)})
		}
	}
	// Every lock's directory, made by its session's goroutine.
	var setupErr atomic.Value
	for i, c := range cs {
		wg.Go(func() {
			for j := range *inflight {
				if *shared && (i > 0 || j > 0) {
					return
				}
				if _, err := c.Create(ws[i**inflight+j].l.dir, nil, 0, acl); err != nil {
					setupErr.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, ok := setupErr.Load().(error); ok {
		return fmt.Errorf("setup: %w", err)
	}

	// phase: 0 warm-up, 1 measured, 2 stop.
	var phase atomic.Int32
	var errs atomic.Uint64
	var samples sync.Map
	// The shared lock's holder, and its last release, on one clock.
	epoch := time.Now()
	var holder, lastHolder atomic.Int64
	var lastRelease atomic.Int64
	holder.Store(-1)
	lastHolder.Store(-1)
	for i, w := range ws {
		wg.Go(func() {
			for phase.Load() != 2 {
				p := phase.Load()
				t0 := time.Now()
				r0 := w.l.reqs
				_, err := w.l.lock()
				tg := time.Now()
				if err == nil && *shared {
					if prev := holder.Swap(int64(i)); prev != -1 {
						err = fmt.Errorf("mutual exclusion violated: granted while locker %d holds the lock", prev)
					}
					if p == 1 {
						w.grants++
						w.wl.Record(tg.Sub(t0))
						if last, from := lastRelease.Load(), lastHolder.Load(); from != int64(i) && last != 0 {
							w.handoffs++
							w.hl.Record(time.Duration(int64(tg.Sub(epoch)) - last))
						}
					}
					holder.Store(-1)
					lastHolder.Store(int64(i))
					lastRelease.Store(int64(time.Since(epoch)))
				}
				if err == nil {
					err = w.l.unlock()
				}
				t1 := time.Now()
				if err != nil {
					errs.Add(1)
					samples.LoadOrStore(i, err.Error())
					w.l.abandon()
					time.Sleep(10 * time.Millisecond)
					continue
				}
				if p == 1 && phase.Load() == 1 {
					w.lat.Record(t1.Sub(t0))
					w.ops++
					w.req += w.l.reqs - r0
				}
			}
		})
	}
	time.Sleep(*warmup)
	u0, s0, cpuOK := cpuTicks(ps)
	self0 := selfCPU()
	phase.Store(1)
	start := time.Now()
	time.Sleep(*duration)
	phase.Store(2)
	elapsed := time.Since(start)
	u1, s1, cpuOK1 := cpuTicks(ps)
	self1 := selfCPU()
	wg.Wait()

	b := &bench.Result{
		Target:   "zookeeper-recipe",
		Addr:     strings.Join(srvs, ","),
		Server:   *name,
		Workload: bench.WorkloadCycle,
		Conns:    *conns,
		Pipeline: *inflight,
		Errors:   errs.Load(),
	}
	if *shared {
		b.Workload = bench.WorkloadHandoff
		b.Recipe = "one lock"
	}
	res.Result = b
	samples.Range(func(_, v any) bool {
		if len(b.ErrorSamples) < 5 {
			b.ErrorSamples = append(b.ErrorSamples, v.(string))
		}
		return true
	})
	var lat, hl, wl bench.Histogram
	h := &bench.HandoffResult{MinGrants: math.MaxUint64}
	for _, w := range ws {
		b.Ops += w.ops
		b.Requests += w.req
		lat.Merge(&w.lat)
		hl.Merge(&w.hl)
		wl.Merge(&w.wl)
		h.Grants += w.grants
		h.Handoffs += w.handoffs
		h.MinGrants, h.MaxGrants = min(h.MinGrants, w.grants), max(h.MaxGrants, w.grants)
	}
	secs := elapsed.Seconds()
	b.Seconds = math.Round(secs*1000) / 1000
	b.OpsPerSec = math.Round(float64(b.Ops) / secs)
	b.RequestsPerSec = math.Round(float64(b.Requests) / secs)
	b.Latency = latency(&lat)
	if *shared {
		h.Regrants = h.Grants - h.Handoffs
		h.HandoffsPerSec = math.Round(float64(h.Handoffs) / secs)
		h.HandoffLatency = latency(&hl)
		h.Wait = latency(&wl)
		h.Fairness = -1
		if h.MinGrants > 0 {
			h.Fairness = math.Round(float64(h.MaxGrants)/float64(h.MinGrants)*1000) / 1000
		}
		b.Handoff = h
	}
	if b.Ops > 0 {
		ops := b.Ops
		if *shared && h.Handoffs > 0 {
			ops = h.Handoffs
		}
		res.ClientCPU = math.Round(float64(self1-self0)/float64(time.Microsecond)/float64(ops)*1000) / 1000
	}
	if cpuOK && cpuOK1 && b.Ops > 0 {
		tick := float64(time.Second/100) / float64(time.Microsecond) // µs per tick
		user, sys := float64(u1-u0)*tick, float64(s1-s0)*tick
		per := func(v float64, n uint64) float64 { return math.Round(v/float64(n)*1000) / 1000 }
		ops := b.Ops
		if *shared && h.Handoffs > 0 {
			ops = h.Handoffs
		}
		b.ServerCPU = &bench.CPUResult{
			Source:      fmt.Sprintf("/proc/{%s}/stat utime, stime", *serverPID),
			UserSeconds: user / 1e6, SysSeconds: sys / 1e6,
			UserPerOp: per(user, ops), SysPerOp: per(sys, ops), TotalPerOp: per(user+sys, ops),
			UserPerRequest: per(user, b.Requests), SysPerRequest: per(sys, b.Requests), TotalPerRequest: per(user+sys, b.Requests),
		}
	}
	if *text {
		if err := b.WriteText(os.Stdout); err != nil {
			return err
		}
		_, err := fmt.Fprintf(os.Stdout, "landed %v (leader %q)\n", res.Landed, res.Leader)
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

// latency summarizes h in microseconds, as latch bench does.
func latency(h *bench.Histogram) *bench.Latency {
	us := func(d time.Duration) float64 { return math.Round(float64(d)/10) / 100 }
	return &bench.Latency{Count: h.Count(), Mean: us(h.Mean()), P50: us(h.Quantile(0.5)),
		P99: us(h.Quantile(0.99)), P999: us(h.Quantile(0.999)), Max: us(h.Max())}
}
