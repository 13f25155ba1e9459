//go:build unix

package main

import (
	"os"
	"syscall"
)

// sigUSR1 is SIGUSR1, which latch serve catches and ignores; nil where the
// system has none.
var sigUSR1 os.Signal = syscall.SIGUSR1
