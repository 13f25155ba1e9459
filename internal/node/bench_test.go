package node

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/latchd/latch"
)

func benchSession(b *testing.B, n *Node) latch.Session {
	b.Helper()
	s, err := n.OpenSession(latch.SessionOptions{})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkAcquireRelease: an uncontended Acquire granted at once and its
// Release, on one session and one key.
func BenchmarkAcquireRelease(b *testing.B) {
	n := newBenchNode(b, Config{})
	defer n.Shutdown(context.Background())
	s := benchSession(b, n)
	ctx := context.Background()
	req := latch.LockRequest{Keys: []string{"bench"}, Mode: latch.Exclusive}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Acquire(ctx, req); err != nil {
			b.Fatal(err)
		}
		if err := s.Release(req.Keys...); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAcquireReleaseMulti: an uncontended 8-key Acquire and its Release.
func BenchmarkAcquireReleaseMulti(b *testing.B) {
	n := newBenchNode(b, Config{})
	defer n.Shutdown(context.Background())
	s := benchSession(b, n)
	ctx := context.Background()
	req := latch.LockRequest{Mode: latch.Exclusive}
	for i := range 8 {
		req.Keys = append(req.Keys, fmt.Sprintf("bench-%d", i))
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Acquire(ctx, req); err != nil {
			b.Fatal(err)
		}
		if err := s.Release(req.Keys...); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAcquireReleaseParallel: uncontended Acquire+Release on distinct
// keys from GOMAXPROCS goroutines: the cost of sharing the mutex.
func BenchmarkAcquireReleaseParallel(b *testing.B) {
	n := newBenchNode(b, Config{})
	defer n.Shutdown(context.Background())
	var mu sync.Mutex
	next := 0
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		mu.Lock()
		next++
		key := fmt.Sprintf("bench-%d", next)
		mu.Unlock()
		s := benchSession(b, n)
		ctx := context.Background()
		req := latch.LockRequest{Keys: []string{key}, Mode: latch.Exclusive}
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
}

// BenchmarkHandOff: two goroutines, one session each, take turns on one
// key: each Acquire waits forever, so most of them park and are woken by
// the other's Release. One op is one Acquire+Release.
func BenchmarkHandOff(b *testing.B) {
	for _, name := range []string{"background", "cancelable"} {
		b.Run(name, func(b *testing.B) {
			obs := &parkCounter{}
			n := newBenchNode(b, Config{Observer: obs})
			defer n.Shutdown(context.Background())
			ctx := context.Background()
			if name == "cancelable" {
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(ctx)
				defer cancel()
			}
			req := latch.LockRequest{Keys: []string{"bench"}, Mode: latch.Exclusive, Wait: latch.WaitForever}
			b.ReportAllocs()
			b.ResetTimer()
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
			b.ReportMetric(float64(obs.parked)/float64(b.N), "parked/op")
		})
	}
}

// parkCounter counts the grants that had to wait.
type parkCounter struct {
	NopObserver
	parked int // guarded by the node's mutex
}

func (p *parkCounter) Granted(proto, keys int, waited time.Duration) {
	if waited > 0 {
		p.parked++
	}
}

func newBenchNode(b *testing.B, cfg Config) *Node {
	b.Helper()
	n, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return n
}
