package sdnotify

import (
	"syscall"
	"time"
	"unsafe"
)

// monotonicNow returns CLOCK_MONOTONIC, the clock systemd compares
// MONOTONIC_USEC with.
func monotonicNow() time.Duration {
	const clockMonotonic = 1
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return 0
	}
	return time.Duration(ts.Nano())
}
