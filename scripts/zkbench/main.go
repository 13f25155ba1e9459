// Command zkbench drives a ZooKeeper ensemble, Apache ZooKeeper's or
// latch's ZooKeeper front end (--zookeeper-addr), through the
// github.com/go-zookeeper/zk client with the lock recipe of ZooKeeper's
// documentation. It is run by scripts/bench-zookeeper.sh; see
// docs/benchmarks.md.
//
//	zkbench cycle --servers A,B,C --conns 16 --inflight 16 [--shared] [--server-pid P,P,P] [--leader A]
//	zkbench failover --servers A,B,C --kill PID [--clients 8]
//
// A lock+unlock cycle of the recipe: create an EPHEMERAL_SEQUENTIAL child
// "_c_<guid>-lock-" under the lock's directory (the guid is the locker's
// own, so that a create whose reply was lost with its connection is found
// again, as go-zookeeper's CreateProtectedEphemeralSequential and
// Curator do), getChildren of the directory, and while the child is not
// the lowest, exists with a watch on its predecessor and wait for the
// watch; then delete the child. On a lock of its own a locker never
// waits: a cycle is three requests.
//
// Every session is its own zk.Conn, given every server's address: the
// client picks one at random, as ZooKeeper clients do, and moves to
// another when its connection fails. cycle reports which server each
// connection landed on. Its result is one JSON object on stdout, the shape
// of latch bench's (internal/bench.Result) with "landed" added, so that
// one script reads both.
package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: zkbench cycle|failover [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "cycle":
		err = cycle(os.Args[2:])
	case "failover":
		err = failover(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "zkbench:", err)
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
