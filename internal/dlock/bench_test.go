package dlock

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/latchd/latch/dlockpb"
	"github.com/latchd/latch/internal/frame"
)

// The benchmarks run a client and an in-process server over loopback TCP.
// One op is one Lock + Unlock cycle (two requests, two answers), or one
// hand-off.

func encodeV3(b *testing.B, r *pb.Request) []byte {
	m, err := proto.Marshal(r)
	if err != nil {
		b.Fatal(err)
	}
	return frame.Append(nil, m)
}

// BenchmarkLockUnlock: one round trip per request, on one connection.
func BenchmarkLockUnlock(b *testing.B) {
	for _, version := range []int{2, 3} {
		b.Run(fmt.Sprintf("v%d", version), func(b *testing.B) {
			e := newEnv(b, nil)
			c := e.dial(b)
			var lock, unlock []byte
			if version == 2 {
				lock, unlock = frame.Append(nil, v2Lock(1, 0, 0, "q")), frame.Append(nil, v2Unlock(2, "q"))
			} else {
				lock, unlock = encodeV3(b, v3Lock(1, []string{"q"})), encodeV3(b, v3Keys(pb.RequestType_Unlock, 2, "q"))
			}
			b.ReportAllocs()
			for b.Loop() {
				c.send(lock)
				if _, err := c.fr.Read(); err != nil {
					b.Fatal(err)
				}
				c.send(unlock)
				if _, err := c.fr.Read(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cycles/s")
		})
	}
}

// BenchmarkLockUnlockPipelined keeps a window of requests in flight on one
// connection: version 3 Locks of distinct keys, then their Unlocks; and
// version 2 Lock/Unlock pairs of one key, which its in-order answers allow.
func BenchmarkLockUnlockPipelined(b *testing.B) {
	const window = 64
	b.Run("v3", func(b *testing.B) {
		e := newEnv(b, nil)
		c := e.dial(b)
		var locks, unlocks []byte
		for i := range window {
			k := fmt.Sprintf("k%d", i)
			locks = append(locks, encodeV3(b, v3Lock(uint64(2*i+1), []string{k}))...)
			unlocks = append(unlocks, encodeV3(b, v3Keys(pb.RequestType_Unlock, uint64(2*i+2), k))...)
		}
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			if n%window == 0 {
				c.send(locks)
				readN(b, c, window)
				c.send(unlocks)
				readN(b, c, window)
			}
			n++
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cycles/s")
	})
	b.Run("v2", func(b *testing.B) {
		e := newEnv(b, nil)
		c := e.dial(b)
		var batch []byte
		for range window {
			batch = append(batch, frame.Append(nil, v2Lock(1, 0, 0, "q"))...)
			batch = append(batch, frame.Append(nil, v2Unlock(2, "q"))...)
		}
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			if n%window == 0 {
				c.send(batch)
				readN(b, c, 2*window)
			}
			n++
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cycles/s")
	})
}

func readN(b *testing.B, c *client, n int) {
	for range n {
		if _, err := c.fr.Read(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHandoff measures the latency from a holder's Unlock to the
// grant reaching the next waiter: the time between writing the Unlock and
// reading the waiter's Ok. Two connections take turns holding one key;
// before each Unlock the other one is queued (checked in the lock table,
// outside the measurement).
func BenchmarkHandoff(b *testing.B) {
	e := newEnv(b, nil)
	conns := [2]*client{e.dial(b), e.dial(b)}
	lock := frame.Append(nil, v2Lock(1, 0, 0, "h"))
	unlock := frame.Append(nil, v2Unlock(2, "h"))
	conns[0].send(lock)
	conns[0].fr.Read()
	lat := make([]time.Duration, 0, 1024)
	holder := 0
	for b.Loop() {
		waiter := conns[1-holder]
		waiter.send(lock)
		for {
			if info, _ := e.svc.Lock("h"); len(info.Waiters) == 1 {
				break
			}
			runtime.Gosched()
		}
		start := time.Now()
		conns[holder].send(unlock)
		if _, err := waiter.fr.Read(); err != nil { // the grant
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
		if _, err := conns[holder].fr.Read(); err != nil { // the Unlock's Ok
			b.Fatal(err)
		}
		holder = 1 - holder
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
}
