package engine

import "errors"

// ErrNoWaiter is returned by Cancel when the waiter is no longer queued: it
// was granted, timed out or aborted, and an Event reported it.
var ErrNoWaiter = errors.New("engine: no such waiter")
