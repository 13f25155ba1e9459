package engine

import "errors"

// ErrNoWaiter is returned by Cancel when the waiter is no longer queued: it
// was granted, timed out or aborted, and an Event reported it.
var ErrNoWaiter = errors.New("engine: no such waiter")

// ErrBadSnapshot is wrapped by the errors of Restore: the snapshot is
// malformed, of an unknown version, or describes a state the engine cannot
// be in.
var ErrBadSnapshot = errors.New("engine: bad snapshot")
