//go:build unix

package memcache

import (
	"syscall"
	"time"
)

// haveProcessCPU reports whether processCPU can tell the CPU times here.
const haveProcessCPU = true

// processCPU returns the CPU time the process has spent in user mode and in
// the kernel, from getrusage(RUSAGE_SELF). ok is false when getrusage fails.
func processCPU() (user, system time.Duration, ok bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0, false
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano()), true
}
