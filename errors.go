package latch

import (
	"errors"
	"strings"
)

// Errors a lock operation can end with. Front ends map them to wire codes
// with errors.Is; every error returned by this module wraps one of them.
var (
	// ErrInvalidKey: a key is empty, longer than MaxKeyLen, or holds a
	// space, CR or LF.
	ErrInvalidKey = errors.New("latch: invalid key")
	// ErrNoKeys: a request names no key.
	ErrNoKeys = errors.New("latch: no keys in request")
	// ErrTooManyKeys: a request names more keys than the server allows.
	ErrTooManyKeys = errors.New("latch: too many keys in request")
	// ErrInvalidRequest: a request is malformed in another way (unknown
	// mode, a limit on an exclusive lock, a negative lease).
	ErrInvalidRequest = errors.New("latch: invalid request")

	// ErrWouldBlock: a try-once request found a key it cannot take now.
	ErrWouldBlock = errors.New("latch: lock is busy")
	// ErrTimeout: a waiting request reached its deadline.
	ErrTimeout = errors.New("latch: wait timed out")
	// ErrCanceled: the caller cancelled a waiting request.
	ErrCanceled = errors.New("latch: wait cancelled")
	// ErrTooManyWaiters: a request that would have to wait was refused
	// because one of its keys, or the whole server, already has as many
	// waiting requests as allowed. Nothing was taken or queued; the
	// client may retry later.
	ErrTooManyWaiters = errors.New("latch: too many waiting requests")

	// ErrAlreadyHeld: the session already holds a key it asks for again
	// under RelockReject (memcached's "not re-entrant").
	ErrAlreadyHeld = errors.New("latch: lock already held by this session")
	// ErrModeMismatch: the session holds the key in the other mode.
	ErrModeMismatch = errors.New("latch: lock held by this session in another mode")
	// ErrLimitMismatch: a shared request's limit differs from the limit the
	// key's holders and waiters agreed on.
	ErrLimitMismatch = errors.New("latch: shared limit differs from the key's limit")
	// ErrNotHeld: a release or renewal names a key the session does not hold.
	ErrNotHeld = errors.New("latch: lock not held by this session")

	// ErrNoSession: the session does not exist (never opened, or ended).
	ErrNoSession = errors.New("latch: no such session")
	// ErrSessionEnded: the session ended (closed, expired or ended by an
	// operator) while the request was waiting.
	ErrSessionEnded = errors.New("latch: session ended")
	// ErrShutdown: the server is shutting down.
	ErrShutdown = errors.New("latch: server shutting down")
	// ErrUnavailable: the server cannot reach a majority of its cluster,
	// so it cannot change the lock table now, or it is shutting down and
	// leaves a session with a TTL to the replicated state. The request
	// was not applied, or its outcome is unknown: the server let go of the
	// session, ending it when it is bound to its connection (the error
	// then wraps ErrSessionEnded too) or leaving it to the cluster when
	// it has a TTL (its client may resume it on another server). A
	// client retries, on another server if it has one.
	ErrUnavailable = errors.New("latch: cluster unavailable")
)

// BusyError is returned when a request could not be granted in time
// (ErrWouldBlock or ErrTimeout). Keys lists the requested keys that were
// not available at that moment, in the order of the request.
type BusyError struct {
	Err  error // ErrWouldBlock or ErrTimeout
	Keys []string
}

func (e *BusyError) Error() string {
	if len(e.Keys) == 0 {
		return e.Err.Error()
	}
	return e.Err.Error() + ": " + strings.Join(e.Keys, " ")
}

func (e *BusyError) Unwrap() error { return e.Err }
