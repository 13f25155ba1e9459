//go:build !linux

package sdnotify

import "time"

// monotonicNow is 0 where systemd does not run.
func monotonicNow() time.Duration { return 0 }
