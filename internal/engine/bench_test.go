package engine

import (
	"fmt"
	"runtime"
	"testing"

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
