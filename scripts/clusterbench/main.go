// Command clusterbench measures what latch's "latch bench" cannot: etcd's
// concurrency.Mutex lock+unlock cycles, and the time from killing a
// cluster's leader to the next grant, on latch and on etcd. It is run by
// scripts/bench-cluster.sh; see docs/benchmarks.md.
//
//	clusterbench etcd-cycle --endpoints A,B,C --conns 16 --inflight 16 [--shared-key] [--server-pid P,P,P]
//	clusterbench failover --system latch --dlock A,B,C --admin A,B,C --pids P,P,P
//	clusterbench failover --system etcd --endpoints A,B,C --pids P,P,P
//
// Results are one JSON object on stdout: etcd-cycle prints latch bench's
// result shape (internal/bench.Result), so that one script reads both.
package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: clusterbench etcd-cycle|failover [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "etcd-cycle":
		err = etcdCycle(os.Args[2:])
	case "failover":
		err = failover(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "clusterbench:", err)
		os.Exit(1)
	}
}

// list splits a comma-separated flag value.
func list(s string) []string {
	if s == "" {
		return nil
	}
	f := strings.Split(s, ",")
	for i := range f {
		f[i] = strings.TrimSpace(f[i])
	}
	return f
}

// pids parses a comma-separated list of process ids.
func pids(s string) ([]int, error) {
	var out []int
	for _, f := range list(s) {
		p, err := strconv.Atoi(f)
		if err != nil || p <= 0 {
			return nil, fmt.Errorf("bad pid %q", f)
		}
		out = append(out, p)
	}
	return out, nil
}

// cpuTicks returns the user and system CPU time of the processes, summed,
// in clock ticks (USER_HZ, 100 a second), from /proc/<pid>/stat fields 14
// and 15; false when one cannot be read.
func cpuTicks(ps []int) (user, sys uint64, ok bool) {
	for _, p := range ps {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			return 0, 0, false
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			return 0, 0, false
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 13 {
			return 0, 0, false
		}
		u, err1 := strconv.ParseUint(f[11], 10, 64)
		st, err2 := strconv.ParseUint(f[12], 10, 64)
		if err1 != nil || err2 != nil {
			return 0, 0, false
		}
		user += u
		sys += st
	}
	return user, sys, len(ps) > 0
}
