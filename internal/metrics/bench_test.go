package metrics

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/node"
)

// The cost of metrics on the lock path: the same node benchmarks with
// node.Config.Observer nil ("off") and set to a Metrics' Observer ("on"),
// with the registry watching the node as in a server. Compare with
//
//	go test -run '^$' -bench LockPath -count 10 ./internal/metrics | benchstat -col /metrics -
var metricsModes = []string{"off", "on"}

// benchNode returns a node with metrics on or off. It collects the garbage
// of the setup (New allocates the runtime collectors' descriptions), so that
// no GC cycle it started runs on into the measurement.
func benchNode(b *testing.B, mode string) *node.Node {
	b.Helper()
	var cfg node.Config
	var m *Metrics
	if mode == "on" {
		m = New()
		cfg.Observer = m.Observer()
	}
	n, err := node.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	if m != nil {
		m.Watch(n)
	}
	b.Cleanup(func() { n.Shutdown(context.Background()) })
	runtime.GC()
	b.ResetTimer()
	return n
}

// cpuPerOp starts measuring the process's CPU time; the func it returns,
// called when the benchmark's loop is done, reports the time per op as
// cpu-ns/op. On a busy machine it is steadier than ns/op, which counts the
// time other processes had the CPU too.
func cpuPerOp(b *testing.B) func() {
	start, ok := cpuTime()
	return func() {
		if end, ok2 := cpuTime(); ok && ok2 && b.N > 0 {
			b.ReportMetric(float64(end-start)/float64(b.N), "cpu-ns/op")
		}
	}
}

func benchSession(b *testing.B, n *node.Node) latch.Session {
	b.Helper()
	s, err := n.OpenSession(latch.SessionOptions{Protocol: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkLockPath/metrics=*/uncontended: an Acquire granted at once and
// its Release, on one session and one key.
//
// BenchmarkLockPath/metrics=*/parallel: the same on distinct keys from
// GOMAXPROCS goroutines, sharing the node's mutex.
//
// BenchmarkLockPath/metrics=*/handoff: two sessions take turns on one key;
// most Acquires park and are woken by the other's Release.
func BenchmarkLockPath(b *testing.B) {
	for _, mode := range metricsModes {
		b.Run("metrics="+mode+"/uncontended", func(b *testing.B) {
			n := benchNode(b, mode)
			s := benchSession(b, n)
			ctx := context.Background()
			req := latch.LockRequest{Keys: []string{"bench"}}
			b.ReportAllocs()
			done := cpuPerOp(b)
			for b.Loop() {
				if _, err := s.Acquire(ctx, req); err != nil {
					b.Fatal(err)
				}
				if err := s.Release(req.Keys...); err != nil {
					b.Fatal(err)
				}
			}
			done()
		})
		b.Run("metrics="+mode+"/parallel", func(b *testing.B) {
			n := benchNode(b, mode)
			var mu sync.Mutex
			next := 0
			b.ReportAllocs()
			done := cpuPerOp(b)
			b.RunParallel(func(pb *testing.PB) {
				mu.Lock()
				next++
				key := fmt.Sprintf("bench-%d", next)
				mu.Unlock()
				s := benchSession(b, n)
				ctx := context.Background()
				req := latch.LockRequest{Keys: []string{key}}
				for pb.Next() {
					if _, err := s.Acquire(ctx, req); err != nil {
						b.Error(err)
						return
					}
					if err := s.Release(req.Keys...); err != nil {
						b.Error(err)
						return
					}
				}
			})
			done()
		})
		b.Run("metrics="+mode+"/handoff", func(b *testing.B) {
			n := benchNode(b, mode)
			ctx := context.Background()
			req := latch.LockRequest{Keys: []string{"bench"}, Wait: latch.WaitForever}
			b.ReportAllocs()
			b.ResetTimer()
			done := cpuPerOp(b)
			var wg sync.WaitGroup
			for g := range 2 {
				iters := b.N / 2
				if g == 0 {
					iters = b.N - b.N/2
				}
				s := benchSession(b, n)
				wg.Go(func() {
					for range iters {
						if _, err := s.Acquire(ctx, req); err != nil {
							b.Error(err)
							return
						}
						if err := s.Release(req.Keys...); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			done()
		})
	}
}

// BenchmarkObserver: what the Observer adds to one uncontended Acquire and
// Release: a grant granted at once and the end of its hold, as the node
// reports them (without the node).
func BenchmarkObserver(b *testing.B) {
	o := New().Observer()
	proto := o.SessionOpened("bench")
	var obs node.Observer = o // called through the interface, as the node does
	drops := []node.Drop{{Session: 1, Tag: uint32(proto), Acquired: 1000, At: 1180, Cause: node.ReleasedByClient}}
	for b.Loop() {
		obs.Granted(proto, 1, 0)
		obs.Released(drops)
	}
}
