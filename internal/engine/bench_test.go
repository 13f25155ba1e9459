package engine

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/latchd/latch"
)

// BenchmarkUncontended measures one acquire+release pair of a free key.
func BenchmarkUncontended(b *testing.B) {
	e := New(Config{})
	s, _ := e.OpenSession(0, SessionOptions{})
	r := latch.LockRequest{Keys: []string{"deploy/prod"}}
	keys := r.Keys
	b.ReportAllocs()
	now := int64(0)
	for b.Loop() {
		now++
		if res, _, err := e.Acquire(now, s, r); err != nil || !res.Granted {
			b.Fatal(res, err)
		}
		if _, err := e.Release(now, s, keys); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHandoff measures a release that grants the key to a queued
// waiter of another session, which then queues again: one hand-off per op.
func BenchmarkHandoff(b *testing.B) {
	e := New(Config{})
	s1, _ := e.OpenSession(0, SessionOptions{})
	s2, _ := e.OpenSession(0, SessionOptions{})
	r := latch.LockRequest{Keys: []string{"leader"}, Wait: latch.WaitForever}
	if _, _, err := e.Acquire(0, s1, r); err != nil {
		b.Fatal(err)
	}
	holder, other := s1, s2
	b.ReportAllocs()
	for b.Loop() {
		if res, _, err := e.Acquire(0, other, r); err != nil || res.Granted {
			b.Fatal(res, err)
		}
		evs, err := e.Release(0, holder, r.Keys)
		if err != nil || len(evs) != 1 || evs[0].Kind != EventGranted {
			b.Fatal(evs, err)
		}
		holder, other = other, holder
	}
}

// BenchmarkMultiKey8 measures one acquire+release of eight free keys.
func BenchmarkMultiKey8(b *testing.B) {
	e := New(Config{})
	s, _ := e.OpenSession(0, SessionOptions{})
	r := latch.LockRequest{}
	for i := range 8 {
		r.Keys = append(r.Keys, fmt.Sprintf("shard/%d", i))
	}
	b.ReportAllocs()
	for b.Loop() {
		if res, _, err := e.Acquire(0, s, r); err != nil || !res.Granted {
			b.Fatal(res, err)
		}
		if _, err := e.Release(0, s, r.Keys); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHeldLockMemory reports the heap bytes per held lock with one
// million locks held by 1000 sessions, key strings included.
func BenchmarkHeldLockMemory(b *testing.B) {
	const n = 1_000_000
	for b.Loop() {
		b.StopTimer()
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		e := New(Config{})
		var sessions []latch.SessionID
		for range 1000 {
			s, _ := e.OpenSession(0, SessionOptions{})
			sessions = append(sessions, s)
		}
		b.StartTimer()
		r := latch.LockRequest{Keys: make([]string, 1)}
		for i := range n {
			r.Keys[0] = fmt.Sprintf("lock/%08d", i)
			if _, _, err := e.Acquire(0, sessions[i%len(sessions)], r); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "bytes/lock")
		runtime.KeepAlive(e)
		b.StartTimer()
	}
}

// largeTable returns an engine holding locks leased locks, taken by 10
// sessions 1000 keys a request.
func largeTable(b testing.TB, locks int) *Engine {
	e := New(Config{})
	keys := make([]string, 1000)
	var sessions []latch.SessionID
	for range 10 {
		s, _ := e.OpenSession(0, SessionOptions{})
		sessions = append(sessions, s)
	}
	for r := 0; r*len(keys) < locks; r++ {
		for i := range keys {
			keys[i] = fmt.Sprintf("held/%07d", r*len(keys)+i)
		}
		if _, _, err := e.Acquire(0, sessions[r%len(sessions)], latch.LockRequest{Keys: keys, Lease: time.Hour}); err != nil {
			b.Fatal(err)
		}
	}
	return e
}

// BenchmarkSnapshotLarge measures what a snapshot of a million leased locks
// costs its driver's lock: AppendSnapshot holds it throughout (ns/lock);
// a Capture for its capture (capture-µs) and then for the longest of its
// steps of 1024 entries (max-step-µs), with a lock cycle on another key
// between steps; writing the capture (write-ms) needs no lock.
//
//	go test ./internal/engine -run '^$' -bench SnapshotLarge -benchtime 3x
func BenchmarkSnapshotLarge(b *testing.B) {
	const locks = 1_000_000
	e := largeTable(b, locks)
	b.Run("AppendSnapshot", func(b *testing.B) {
		for b.Loop() {
			e.AppendSnapshot(nil)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/locks, "ns/lock")
	})
	b.Run("Capture", func(b *testing.B) {
		s, _ := e.OpenSession(0, SessionOptions{})
		cycle := latch.LockRequest{Keys: []string{"cycle"}}
		var capture, maxStep, write time.Duration
		steps := 0
		for b.Loop() {
			start := time.Now()
			c := e.Capture()
			capture = max(capture, time.Since(start))
			for done := false; !done; {
				start := time.Now()
				done = c.Step(1024)
				maxStep = max(maxStep, time.Since(start))
				steps++
				if _, _, err := e.Acquire(0, s, cycle); err != nil {
					b.Fatal(err)
				}
				if _, err := e.Release(0, s, cycle.Keys); err != nil {
					b.Fatal(err)
				}
			}
			start = time.Now()
			c.AppendTo(nil)
			write = max(write, time.Since(start))
		}
		b.ReportMetric(float64(capture.Microseconds()), "capture-µs")
		b.ReportMetric(float64(maxStep.Microseconds()), "max-step-µs")
		b.ReportMetric(float64(steps/b.N), "steps")
		b.ReportMetric(float64(write.Milliseconds()), "write-ms")
	})
}

// BenchmarkOwnedChurn measures what a Redis lock server does under
// redis-benchmark -r 100000: over a table of 100,000 owned keys with
// leases, taken in random order, one op reads a random key's holder (a
// script's GET), releases it and takes it again with a new lease. The
// table is far larger than the cache, so this measures the misses of a
// release and an acquire.
func BenchmarkOwnedChurn(b *testing.B) {
	const keys = 100_000
	e := New(Config{})
	owner := []byte("owner-value-0123456789")
	lease := 10 * time.Second
	rng := rand.New(rand.NewPCG(1, 2))
	names := make([]string, keys)
	for i, k := range rng.Perm(keys) {
		names[i] = fmt.Sprintf("lock:%012d", k)
	}
	one := make([]string, 1)
	now := int64(0)
	for _, name := range names {
		one[0] = name
		if res, _, err := e.AcquireOwned(now, one, owner, lease); err != nil || !res.Granted {
			b.Fatal(res, err)
		}
	}
	order := rng.Perm(keys)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		now++
		one[0] = names[order[i%keys]]
		i++
		if st := e.Owned(now, one[0]); !st.Owned || st.Owner != string(owner) {
			b.Fatal(st)
		}
		if _, err := e.ReleaseOwned(now, one[0]); err != nil {
			b.Fatal(err)
		}
		if res, _, err := e.AcquireOwned(now, one, owner, lease); err != nil || !res.Granted {
			b.Fatal(res, err)
		}
	}
}
