package memcache

import (
	"syscall"
	"time"
)

// haveProcessCPU reports whether processCPU can tell the CPU times here.
const haveProcessCPU = true

// processCPU returns the CPU time the process has spent in user mode and in
// the kernel, from GetProcessTimes. ok is false when GetProcessTimes fails.
func processCPU() (user, system time.Duration, ok bool) {
	var creation, exit, kernel, usr syscall.Filetime
	h, err := syscall.GetCurrentProcess()
	if err != nil {
		return 0, 0, false
	}
	if err := syscall.GetProcessTimes(h, &creation, &exit, &kernel, &usr); err != nil {
		return 0, 0, false
	}
	return filetimeDuration(usr), filetimeDuration(kernel), true
}

// filetimeDuration reads a FILETIME that holds a duration (a count of 100 ns
// intervals), not an instant.
func filetimeDuration(ft syscall.Filetime) time.Duration {
	return time.Duration(uint64(ft.HighDateTime)<<32|uint64(ft.LowDateTime)) * 100
}
