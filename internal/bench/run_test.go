package bench_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchd/latch/internal/bench"
	"github.com/latchd/latch/internal/latchtest"
)

// smoke is a short run: it checks that the tool works and that every reply
// was valid, never how fast the server is.
func smoke(target, addr, workload string) bench.Config {
	cfg := bench.DefaultConfig()
	cfg.Target, cfg.Addr, cfg.Workload = target, addr, workload
	cfg.Conns = 4
	cfg.Duration = 300 * time.Millisecond
	cfg.Warmup = 50 * time.Millisecond
	cfg.Keys = 1000
	cfg.Locks = 2000
	cfg.PollInterval = 200 * time.Microsecond
	return cfg
}

func check(t *testing.T, cfg bench.Config) *bench.Result {
	t.Helper()
	res, err := bench.Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.Errors != 0 {
		t.Errorf("%d errors: %q", res.Errors, res.ErrorSamples)
	}
	if res.Ops == 0 {
		t.Errorf("no operations")
	}
	var text, js bytes.Buffer
	if err := res.WriteText(&text); err != nil || text.Len() == 0 {
		t.Errorf("WriteText: %v, %d bytes", err, text.Len())
	}
	if err := res.WriteJSON(&js); err != nil || js.Len() == 0 {
		t.Errorf("WriteJSON: %v, %d bytes", err, js.Len())
	}
	if t.Failed() {
		t.Logf("result:\n%s", text.String())
	}
	return res
}

func TestLatch(t *testing.T) {
	s := latchtest.Start(t)
	mc, dl, admin := s.Memcache, s.DLock, s.Admin
	tests := []struct {
		target, workload string
		pipeline         int
		dlockVersion     int
	}{
		{bench.TargetText, bench.WorkloadCycle, 1, 0},
		{bench.TargetText, bench.WorkloadCycle, 8, 0},
		{bench.TargetBinary, bench.WorkloadCycle, 1, 0},
		{bench.TargetBinary, bench.WorkloadCycle, 7, 0},
		{bench.TargetDLock, bench.WorkloadCycle, 1, 3},
		{bench.TargetDLock, bench.WorkloadCycle, 8, 3},
		{bench.TargetDLock, bench.WorkloadCycle, 8, 2},
		{bench.TargetText, bench.WorkloadGetSet, 1, 0},
		{bench.TargetBinary, bench.WorkloadGetSet, 8, 0},
		{bench.TargetText, bench.WorkloadHandoff, 1, 0},
		{bench.TargetBinary, bench.WorkloadHandoff, 1, 0},
		{bench.TargetDLock, bench.WorkloadHandoff, 1, 3},
		{bench.TargetText, bench.WorkloadHold, 16, 0},
		{bench.TargetBinary, bench.WorkloadHold, 16, 0},
		{bench.TargetDLock, bench.WorkloadHold, 16, 3},
		{bench.TargetDLock, bench.WorkloadIdle, 1, 3},
		{bench.TargetText, bench.WorkloadIdle, 1, 0},
	}
	for _, tt := range tests {
		name := tt.target + "/" + tt.workload
		if tt.dlockVersion == 2 {
			name += "/v2"
		}
		t.Run(name, func(t *testing.T) {
			addr := mc
			if tt.target == bench.TargetDLock {
				addr = dl
			}
			cfg := smoke(tt.target, addr, tt.workload)
			cfg.Pipeline = tt.pipeline
			if tt.dlockVersion != 0 {
				cfg.DLockVersion = tt.dlockVersion
			}
			cfg.Admin = admin
			cfg.ServerPID = os.Getpid() // the server runs in this process
			res := check(t, cfg)
			switch tt.workload {
			case bench.WorkloadCycle, bench.WorkloadHandoff, bench.WorkloadHold:
				if tt.target != bench.TargetDLock && res.Recipe != bench.RecipeLock {
					t.Errorf("recipe %q for latch, want lock", res.Recipe)
				}
			}
			switch tt.workload {
			case bench.WorkloadCycle, bench.WorkloadGetSet, bench.WorkloadHandoff:
				// The server's CPU is this process's, the load
				// generator's included: only there and positive.
				c := res.ServerCPU
				if runtime.GOOS != "linux" {
					if c != nil {
						t.Errorf("server CPU on %s: %+v", runtime.GOOS, c)
					}
					break
				}
				if c == nil || c.TotalPerOp <= 0 || c.TotalPerRequest <= 0 || c.UserPerOp < 0 || c.SysPerOp < 0 {
					t.Errorf("server CPU: %+v", c)
				}
			default:
				if res.ServerCPU != nil {
					t.Errorf("server CPU for %s: %+v", tt.workload, res.ServerCPU)
				}
			}
			switch tt.workload {
			case bench.WorkloadHandoff:
				h := res.Handoff
				if h.Grants == 0 || h.MinGrants > h.MaxGrants {
					t.Errorf("handoff: %+v", h)
				}
				if tt.target == bench.TargetDLock && h.WastedPolls != 0 {
					t.Errorf("dlock waits in the server, yet %d polls were refused", h.WastedPolls)
				}
			case bench.WorkloadHold, bench.WorkloadIdle:
				m := res.Memory
				if m.Before.RSS <= 0 || m.After.RSS <= 0 || m.Before.Heap <= 0 || m.After.Heap <= 0 {
					t.Errorf("memory not sampled: %+v", m)
				}
				if want := cfg.Locks; tt.workload == bench.WorkloadHold && res.Ops != uint64(want) {
					t.Errorf("%d locks taken, want %d", res.Ops, want)
				}
			case bench.WorkloadGetSet:
				if g := res.GetSet; g.Gets == 0 || g.Misses != 0 {
					t.Errorf("getset over a populated key space: %+v", g)
				}
			}
		})
	}
}

// TestPeers runs the memcached workloads against Debian's memcached (the
// add recipe, chosen by its version) and yrmcds (the lock recipe).
func TestPeers(t *testing.T) {
	peers := []struct {
		name   string
		start  func(testing.TB) string
		recipe string
	}{
		{"memcached", latchtest.StartMemcached, bench.RecipeAdd},
		{"yrmcds", latchtest.StartYrmcds, bench.RecipeLock},
	}
	for _, p := range peers {
		t.Run(p.name, func(t *testing.T) {
			addr := p.start(t)
			for _, target := range []string{bench.TargetText, bench.TargetBinary} {
				for _, wl := range []string{bench.WorkloadCycle, bench.WorkloadHandoff, bench.WorkloadGetSet} {
					t.Run(target+"/"+wl, func(t *testing.T) {
						cfg := smoke(target, addr, wl)
						cfg.Pipeline = 4
						res := check(t, cfg)
						if wl != bench.WorkloadGetSet && res.Recipe != p.recipe {
							t.Errorf("recipe %q, want %q", res.Recipe, p.recipe)
						}
					})
				}
			}
		})
	}
}

// TestUnreachable checks that a server that is not there fails the run.
func TestUnreachable(t *testing.T) {
	cfg := smoke(bench.TargetText, "127.0.0.1:1", bench.WorkloadCycle)
	cfg.Timeout = time.Second
	if _, err := bench.Run(context.Background(), cfg); err == nil {
		t.Error("Run against a closed port succeeded")
	}
}

// TestSeveralAddrs: with a comma-separated Addr (a cluster's nodes), the
// connections are spread round-robin over the addresses, each address is
// probed, and ServerPIDs add up to the CPU time. Two counting proxies in
// front of one server stand for two nodes.
func TestSeveralAddrs(t *testing.T) {
	s := latchtest.Start(t)
	a, na := countingProxy(t, s.DLock)
	b, nb := countingProxy(t, s.DLock)
	cfg := smoke(bench.TargetDLock, a+", "+b, bench.WorkloadCycle)
	cfg.Conns = 5
	cfg.ServerPID = os.Getpid()
	cfg.ServerPIDs = []int{os.Getpid()}
	res := check(t, cfg)
	// One probe each, then connections 0, 2, 4 to a and 1, 3 to b.
	if got, want := [2]int64{na.Load(), nb.Load()}, [2]int64{4, 3}; got != want {
		t.Errorf("connections per address = %v, want %v", got, want)
	}
	if runtime.GOOS == "linux" {
		if c := res.ServerCPU; c == nil || !strings.Contains(c.Source, "{") {
			t.Errorf("server CPU of two pids: %+v", c)
		}
	}
	bad := cfg
	bad.Addr = a + ",,"
	if err := bad.Validate(); err == nil {
		t.Errorf("Validate accepted addr %q", bad.Addr)
	}
}

// countingProxy listens on a loopback port, forwards every connection to
// target and counts the connections it accepted.
func countingProxy(t *testing.T, target string) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var n atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			go func() {
				defer c.Close()
				u, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer u.Close()
				go func() { io.Copy(u, c); u.Close() }()
				io.Copy(c, u)
			}()
		}
	}()
	return ln.Addr().String(), &n
}
