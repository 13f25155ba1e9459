package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/latchd/latch/internal/bench"
)

// etcdCycle runs lock+unlock cycles of etcd's concurrency.Mutex: conns
// clients (one gRPC connection each, to the members in turn, as latch
// bench spreads its connections) with inflight goroutines each, every
// goroutine with its own session and, unless --shared-key, its own key.
// etcd's client has no pipelining of a Mutex: inflight goroutines on one
// connection are its way of having that many requests in flight.
func etcdCycle(args []string) error {
	fs := flag.NewFlagSet("etcd-cycle", flag.ContinueOnError)
	endpoints := fs.String("endpoints", "127.0.0.1:2379", "etcd client `addresses`, comma-separated")
	conns := fs.Int("conns", 16, "clients (gRPC connections)")
	inflight := fs.Int("inflight", 1, "goroutines (sessions, requests in flight) per client")
	duration := fs.Duration("duration", 5*time.Second, "measured time")
	warmup := fs.Duration("warmup", time.Second, "unmeasured time before it")
	shared := fs.Bool("shared-key", false, "every goroutine locks one key (contention) instead of its own")
	serverPID := fs.String("server-pid", "", "`pids` of the members, comma-separated, for their CPU time")
	text := fs.Bool("text", false, "print a table for people instead of JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	eps := list(*endpoints)
	ps, err := pids(*serverPID)
	if err != nil {
		return err
	}
	if *conns < 1 || *inflight < 1 || len(eps) == 0 {
		return fmt.Errorf("want conns, inflight and endpoints")
	}

	clients := make([]*clientv3.Client, *conns)
	for i := range clients {
		c, err := clientv3.New(clientv3.Config{Endpoints: []string{eps[i%len(eps)]}, DialTimeout: 5 * time.Second})
		if err != nil {
			return err
		}
		defer c.Close()
		clients[i] = c
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	st, err := clients[0].Status(ctx, eps[0])
	cancel()
	if err != nil {
		return fmt.Errorf("%s: %w", eps[0], err)
	}

	type worker struct {
		m        *concurrency.Mutex
		s        *concurrency.Session
		lat      bench.Histogram
		ops, req uint64
		err      error
	}
	run := fmt.Sprintf("/bench/%d/", time.Now().UnixNano())
	var ws []*worker
	for i, c := range clients {
		for j := range *inflight {
			s, err := concurrency.NewSession(c, concurrency.WithTTL(60))
			if err != nil {
				return err
			}
			defer s.Close()
			key := fmt.Sprintf("%sc%d-%d", run, i, j)
			if *shared {
				key = run + "shared"
			}
			ws = append(ws, &worker{m: concurrency.NewMutex(s, key), s: s})
		}
	}

	// phase: 0 warm-up, 1 measured, 2 stop.
	var phase atomic.Int32
	var errs atomic.Uint64
	var samples sync.Map
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Go(func() {
			for {
				p := phase.Load()
				if p == 2 {
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				t0 := time.Now()
				err := w.m.Lock(ctx)
				t1 := time.Now()
				if err == nil {
					err = w.m.Unlock(ctx)
				}
				t2 := time.Now()
				cancel()
				if err != nil {
					errs.Add(1)
					samples.LoadOrStore(i, err.Error())
					time.Sleep(10 * time.Millisecond)
					continue
				}
				if p == 1 && phase.Load() == 1 {
					w.lat.Record(t1.Sub(t0))
					w.lat.Record(t2.Sub(t1))
					w.ops++
					w.req += 2
				}
			}
		})
	}
	time.Sleep(*warmup)
	u0, s0, cpuOK := cpuTicks(ps)
	phase.Store(1)
	start := time.Now()
	time.Sleep(*duration)
	phase.Store(2)
	elapsed := time.Since(start)
	u1, s1, cpuOK1 := cpuTicks(ps)
	wg.Wait()

	res := &bench.Result{
		Target:   "etcd-mutex",
		Addr:     strings.Join(eps, ","),
		Server:   "etcd " + st.Version,
		Workload: bench.WorkloadCycle,
		Conns:    *conns,
		Pipeline: *inflight,
		Errors:   errs.Load(),
	}
	if *shared {
		res.Recipe = "shared key"
	}
	samples.Range(func(_, v any) bool {
		if len(res.ErrorSamples) < 5 {
			res.ErrorSamples = append(res.ErrorSamples, v.(string))
		}
		return true
	})
	var lat bench.Histogram
	for _, w := range ws {
		res.Ops += w.ops
		res.Requests += w.req
		lat.Merge(&w.lat)
	}
	secs := elapsed.Seconds()
	res.Seconds = math.Round(secs*1000) / 1000
	res.OpsPerSec = math.Round(float64(res.Ops) / secs)
	res.RequestsPerSec = math.Round(float64(res.Requests) / secs)
	us := func(d time.Duration) float64 { return math.Round(float64(d)/10) / 100 }
	res.Latency = &bench.Latency{Count: lat.Count(), Mean: us(lat.Mean()), P50: us(lat.Quantile(0.5)),
		P99: us(lat.Quantile(0.99)), P999: us(lat.Quantile(0.999)), Max: us(lat.Max())}
	if cpuOK && cpuOK1 && res.Ops > 0 {
		tick := float64(time.Second/100) / float64(time.Microsecond) // µs per tick
		user, sys := float64(u1-u0)*tick, float64(s1-s0)*tick
		per := func(v float64, n uint64) float64 { return math.Round(v/float64(n)*1000) / 1000 }
		res.ServerCPU = &bench.CPUResult{
			Source:      fmt.Sprintf("/proc/{%s}/stat utime, stime", *serverPID),
			UserSeconds: user / 1e6, SysSeconds: sys / 1e6,
			UserPerOp: per(user, res.Ops), SysPerOp: per(sys, res.Ops), TotalPerOp: per(user+sys, res.Ops),
			UserPerRequest: per(user, res.Requests), SysPerRequest: per(sys, res.Requests), TotalPerRequest: per(user+sys, res.Requests),
		}
	}
	if *text {
		return res.WriteText(os.Stdout)
	}
	return res.WriteJSON(os.Stdout)
}
