//go:build !unix

package main

import "os"

// sigUSR1 is nil: this system has no SIGUSR1.
var sigUSR1 os.Signal
