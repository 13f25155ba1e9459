//go:build !unix && !windows

package memcache

import "time"

// haveProcessCPU reports whether processCPU can tell the CPU times here.
const haveProcessCPU = false

// processCPU reports that the process's CPU time is unknown: this system
// has neither getrusage nor GetProcessTimes. The stats then leave out
// rusage_user and rusage_system rather than report zeros.
func processCPU() (user, system time.Duration, ok bool) {
	return 0, 0, false
}
