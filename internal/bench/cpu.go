package bench

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat:
// what sysconf(_SC_CLK_TCK) returns, which the kernel's ABI fixes at 100
// on amd64 and arm64 whatever the kernel's own HZ.
const clockTicks = 100

// cpuTime is a process's CPU time so far, every thread's, living or gone.
type cpuTime struct {
	user, sys time.Duration
}

// serverCPU reads the CPU time of process pid from /proc/<pid>/stat; false
// when there is no such process to read, or not on Linux.
//
// /proc/<pid>/stat counts in clock ticks (10 ms), which over a measured
// time of a second or more at a busy server is within about 1%.
// /proc/<pid>/schedstat counts in nanoseconds, but only the main thread's,
// which in a Go server or a threaded C one is not the one that works.
func serverCPU(pid int) (cpuTime, bool) {
	if pid <= 0 || runtime.GOOS != "linux" {
		return cpuTime{}, false
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return cpuTime{}, false
	}
	utime, stime, err := parseStat(data)
	if err != nil {
		return cpuTime{}, false
	}
	tick := time.Second / clockTicks
	return cpuTime{user: time.Duration(utime) * tick, sys: time.Duration(stime) * tick}, true
}

// pids returns the servers whose CPU time a timed run reads: ServerPID and
// ServerPIDs.
func (r *runner) pids() []int {
	return append([]int{r.cfg.ServerPID}, r.cfg.ServerPIDs...)
}

// serversCPU sums the CPU time of every server of the run (a cluster's
// nodes); false when any cannot be read.
func (r *runner) serversCPU() (cpuTime, bool) {
	var sum cpuTime
	for _, pid := range r.pids() {
		t, ok := serverCPU(pid)
		if !ok {
			return cpuTime{}, false
		}
		sum.user += t.user
		sum.sys += t.sys
	}
	return sum, true
}

// parseStat returns the utime and stime fields (14 and 15, in clock
// ticks) of a /proc/<pid>/stat line: "pid (comm) state ppid ...". The
// comm may hold spaces and parentheses; it ends at the line's last ')'.
func parseStat(line []byte) (utime, stime uint64, err error) {
	i := bytes.LastIndexByte(line, ')')
	if i < 0 {
		return 0, 0, errors.New("bench: /proc stat: no comm")
	}
	// After the comm: state (field 3), ppid, ... utime (14), stime (15).
	f := bytes.Fields(line[i+1:])
	if len(f) < 13 {
		return 0, 0, fmt.Errorf("bench: /proc stat: %d fields after the comm, want at least 13", len(f))
	}
	if utime, err = strconv.ParseUint(string(f[11]), 10, 64); err != nil {
		return 0, 0, fmt.Errorf("bench: /proc stat: utime: %w", err)
	}
	if stime, err = strconv.ParseUint(string(f[12]), 10, 64); err != nil {
		return 0, 0, fmt.Errorf("bench: /proc stat: stime: %w", err)
	}
	return utime, stime, nil
}

// cpuResult is the server's CPU over the measured time, per op (the
// workload's unit: cycle, request or hand-off) and per request; nil when
// either sample is missing or there is nothing to divide by.
func cpuResult(pids []int, before, after cpuTime, ops, requests uint64) *CPUResult {
	if ops == 0 || requests == 0 {
		return nil
	}
	user, sys := after.user-before.user, after.sys-before.sys
	per := func(d time.Duration, n uint64) float64 {
		return math.Round(float64(d)/float64(time.Microsecond)/float64(n)*1000) / 1000
	}
	return &CPUResult{
		Source:          procSource(pids),
		UserSeconds:     user.Seconds(),
		SysSeconds:      sys.Seconds(),
		UserPerOp:       per(user, ops),
		SysPerOp:        per(sys, ops),
		TotalPerOp:      per(user+sys, ops),
		UserPerRequest:  per(user, requests),
		SysPerRequest:   per(sys, requests),
		TotalPerRequest: per(user+sys, requests),
	}
}

// procSource names where the CPU time was read: "/proc/<pid>/stat utime,
// stime", or "/proc/{<pid>,<pid>,...}/stat utime, stime" (summed) for
// several servers.
func procSource(pids []int) string {
	s := make([]string, len(pids))
	for i, pid := range pids {
		s[i] = strconv.Itoa(pid)
	}
	p := s[0]
	if len(s) > 1 {
		p = "{" + strings.Join(s, ",") + "}"
	}
	return "/proc/" + p + "/stat utime, stime"
}
