//go:build linux

package raftrep_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/replica/raftrep"
)

// TestSnapshotPause measures how long snapshots of a large lock table stop
// the request path: a durable single node and a durable 3-node cluster
// (in process, over the in-memory transport, each node's data dir on
// disk) hold LATCH_SNAPPAUSE_LOCKS locks (1,000,000), then a few sessions
// on the leader lock and unlock keys of their own, first with no snapshot,
// then while every node takes snapshots back to back. It reports the
// cycles' percentiles, the longest cycle and the longest gap between two
// completed cycles, the snapshots' count and length, and the longest
// time a snapshot held a node's lock. LATCH_SNAPPAUSE_WHO=leader has the
// leader alone take snapshots. A manual
// benchmark (it needs a few GB and a minute):
//
//	LATCH_SNAPPAUSE=1 go test ./internal/replica/raftrep -run TestSnapshotPause -v -timeout 30m
func TestSnapshotPause(t *testing.T) {
	if os.Getenv("LATCH_SNAPPAUSE") == "" {
		t.Skip("a manual benchmark: set LATCH_SNAPPAUSE=1")
	}
	defer raftrep.ObserveSnapshotSteps(observeHold)()
	locks := envInt("LATCH_SNAPPAUSE_LOCKS", 1_000_000)
	phase := time.Duration(envInt("LATCH_SNAPPAUSE_SECS", 10)) * time.Second
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("nodes=%d", n), func(t *testing.T) {
			c := newCluster(t, n, true)
			lead := c.leader()
			fill(t, c, lead, locks)
			t.Logf("%d nodes, %d locks held", n, locks)
			for _, snap := range []bool{false, true} {
				r := cycleLoad(t, c, lead, 4, phase, snap)
				t.Logf("snapshots=%-5v %s", snap, r)
			}
		})
	}
}

// holds gathers how long snapshots hold the nodes' locks: the longest
// hold, and the most CPU time its thread spent in one (which a machine
// busy with other work does not inflate).
var holds struct {
	sync.Mutex
	n            int
	longest, cpu time.Duration
}

// observeHold times one hold of a node's lock by a snapshot.
func observeHold() (held func()) {
	runtime.LockOSThread()
	start, cpu := time.Now(), threadCPU()
	return func() {
		wall, cpu := time.Since(start), threadCPU()-cpu
		runtime.UnlockOSThread()
		holds.Lock()
		holds.n++
		holds.longest = max(holds.longest, wall)
		holds.cpu = max(holds.cpu, cpu)
		holds.Unlock()
	}
}

// threadCPU returns the CPU time of the calling thread.
func threadCPU() time.Duration {
	var ts syscall.Timespec
	const clockThreadCPUTime = 3 // CLOCK_THREAD_CPUTIME_ID
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		panic(errno)
	}
	return time.Duration(ts.Nano())
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// fill has sessions on node id take locks locks, 1000 keys a request.
func fill(t *testing.T, c *cluster, id string, locks int) {
	const perReq, workers = 1000, 4
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		s := c.open(id, latch.SessionOptions{Protocol: "test"})
		wg.Go(func() {
			keys := make([]string, perReq)
			for r := w; r*perReq < locks; r += workers {
				for i := range keys {
					keys[i] = fmt.Sprintf("held/%07d", r*perReq+i)
				}
				if _, err := s.Acquire(context.Background(), latch.LockRequest{Keys: keys}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("fill: %v", err)
	}
}

// pauseResult is what cycleLoad measured.
type pauseResult struct {
	cycles           int
	p50, p99, p999   time.Duration
	longest, gap     time.Duration
	snaps            int
	snapMin, snapMax time.Duration
	snapErr          error
	lockHolds        int           // by snapshots (steps, or whole ones)
	lockHeld         time.Duration // the longest of them
	lockCPU          time.Duration // the most CPU time in one
}

func (r pauseResult) String() string {
	s := fmt.Sprintf("cycles %d  p50 %v  p99 %v  p99.9 %v  longest cycle %v  longest gap %v",
		r.cycles, r.p50.Round(time.Microsecond), r.p99.Round(time.Microsecond), r.p999.Round(time.Microsecond),
		r.longest.Round(time.Microsecond), r.gap.Round(time.Microsecond))
	if r.snaps > 0 || r.snapErr != nil {
		s += fmt.Sprintf("  snapshots %d (%v to %v each, error %v), holding the lock %d times, at most %v (%v CPU)",
			r.snaps, r.snapMin.Round(time.Millisecond), r.snapMax.Round(time.Millisecond), r.snapErr, r.lockHolds, r.lockHeld.Round(time.Microsecond), r.lockCPU.Round(time.Microsecond))
	}
	return s
}

// cycleLoad runs lock+unlock cycles from conns sessions on node id for d,
// each on a key of its own, while every node takes snapshots back to back
// if snap is set.
func cycleLoad(t *testing.T, c *cluster, id string, conns int, d time.Duration, snap bool) pauseResult {
	var res pauseResult
	holds.Lock()
	holds.n, holds.longest, holds.cpu = 0, 0, 0
	holds.Unlock()
	sessions := make([]latch.Session, conns)
	for g := range sessions {
		sessions[g] = c.open(id, latch.SessionOptions{Protocol: "test"})
	}
	stop := make(chan struct{})
	var snapWG sync.WaitGroup
	var snapMu sync.Mutex
	if snap {
		for rid, r := range c.reps {
			if os.Getenv("LATCH_SNAPPAUSE_WHO") == "leader" && rid != id {
				continue
			}
			snapWG.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					start := time.Now()
					err := raftrep.TakeSnapshot(r)
					took := time.Since(start)
					snapMu.Lock()
					if err != nil {
						res.snapErr = err
					} else {
						res.snaps++
						if res.snapMin == 0 || took < res.snapMin {
							res.snapMin = took
						}
						res.snapMax = max(res.snapMax, took)
					}
					snapMu.Unlock()
					if err != nil {
						time.Sleep(10 * time.Millisecond)
					}
				}
			})
		}
	}
	lat := make([][]time.Duration, conns)
	ends := make([][]time.Time, conns)
	var wg sync.WaitGroup
	deadline := time.Now().Add(d)
	for g, s := range sessions {
		key := fmt.Sprintf("cycle/%d", g)
		wg.Go(func() {
			defer s.Close()
			for time.Now().Before(deadline) {
				start := time.Now()
				if _, err := s.Acquire(context.Background(), latch.LockRequest{Keys: []string{key}}); err != nil {
					t.Errorf("acquire: %v", err)
					return
				}
				if err := s.Release(key); err != nil {
					t.Errorf("release: %v", err)
					return
				}
				end := time.Now()
				lat[g] = append(lat[g], end.Sub(start))
				ends[g] = append(ends[g], end)
			}
		})
	}
	wg.Wait()
	close(stop)
	snapWG.Wait()
	holds.Lock()
	res.lockHolds, res.lockHeld, res.lockCPU = holds.n, holds.longest, holds.cpu
	holds.Unlock()
	all := slices.Concat(lat...)
	slices.Sort(all)
	at := slices.Concat(ends...)
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	if len(all) == 0 {
		t.Errorf("no cycle completed")
		return res
	}
	q := func(p float64) time.Duration { return all[min(len(all)-1, int(p*float64(len(all))))] }
	res.cycles, res.p50, res.p99, res.p999, res.longest = len(all), q(0.5), q(0.99), q(0.999), all[len(all)-1]
	for i := 1; i < len(at); i++ {
		res.gap = max(res.gap, at[i].Sub(at[i-1]))
	}
	return res
}
