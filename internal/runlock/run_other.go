//go:build !unix

package runlock

import (
	"context"
	"fmt"
	"runtime"
)

// Run is not supported on this system: stopping the command's process
// group when the lock is lost needs Unix process groups and signals.
func Run(ctx context.Context, cfg Config) (int, error) {
	return ExitError, fmt.Errorf("latch run is not supported on %s", runtime.GOOS)
}
