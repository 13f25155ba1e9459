package client

import (
	"errors"

	"github.com/latchd/latch"
	"github.com/latchd/latch/dlockpb"
)

// Errors of the client itself. Errors that come from the server wrap the
// latch errors instead (see StatusError), so that errors.Is(err,
// latch.ErrWouldBlock) and the like work the same in process and over the
// wire.
var (
	// ErrClosed: the Client was closed by Close.
	ErrClosed = errors.New("client: closed")
	// ErrUnlocked is Lock.Err after Unlock.
	ErrUnlocked = errors.New("client: unlocked")
	// ErrLeaseExpired is Lock.Err when a leased lock was not renewed in
	// time: the server may have ended its lease.
	ErrLeaseExpired = errors.New("client: lease may have ended")
	// ErrKeepalive: no keepalive was answered in time, so the server may
	// have ended the session. Lock.Err and the Client's calls wrap it with
	// latch.ErrSessionEnded.
	ErrKeepalive = errors.New("client: keepalive not answered in time")
	// ErrUnauthorized: the server refused the access token, or the token
	// does not allow the request: a read-only token, or a key outside the
	// token's prefixes.
	ErrUnauthorized = errors.New("client: access token refused")
	// ErrTooManyPending: the connection has as many waiting requests as
	// the server allows.
	ErrTooManyPending = errors.New("client: too many requests waiting on this connection")
	// ErrProtocol: the server's answer broke the protocol, or the server
	// does not speak version 3.
	ErrProtocol = errors.New("client: protocol error")
	// ErrConnectionLost: the connection broke, or was given up, before
	// the request was answered, and the Client is resuming its session
	// (it has a TTL) on a server; the session's locks are still held. A
	// connection is given up when its server falls silent, and when it
	// answers Unavailable (it cannot reach a majority of its cluster, so
	// it cannot vouch for the session): the request so answered fails with
	// an error wrapping both latch.ErrUnavailable and ErrConnectionLost.
	// Either way the request's outcome is unknown. It may be retried:
	// what it did, if anything, is undone once the session is back (the
	// keys of a Lock or Unlock are unlocked).
	ErrConnectionLost = errors.New("client: connection lost, resuming the session")
)

// StatusError is an error status the server answered. It wraps the latch
// error that corresponds to Status, if any.
type StatusError struct {
	Status dlockpb.ResponseStatus
	Text   string // the server's error_text
	Err    error  // the latch (or client) error Status stands for; may be nil
}

func (e *StatusError) Error() string {
	s := "server answered " + e.Status.String()
	if e.Text != "" {
		s += ": " + e.Text
	}
	return s
}

func (e *StatusError) Unwrap() error { return e.Err }

// statusErrors maps every error status to the error it stands for. It is
// the inverse of the server's table; AcquireTimeout is handled apart (a
// *latch.BusyError). Unavailable stands for latch.ErrUnavailable, and
// makes the Client give its connection up (see ErrConnectionLost).
var statusErrors = map[dlockpb.ResponseStatus]error{
	dlockpb.ResponseStatus_General:        nil,
	dlockpb.ResponseStatus_Version:        ErrProtocol,
	dlockpb.ResponseStatus_InvalidType:    ErrProtocol,
	dlockpb.ResponseStatus_Unauthorized:   ErrUnauthorized,
	dlockpb.ResponseStatus_ShuttingDown:   latch.ErrShutdown,
	dlockpb.ResponseStatus_SessionExpired: latch.ErrSessionEnded,
	dlockpb.ResponseStatus_TooManyPending: ErrTooManyPending,
	dlockpb.ResponseStatus_Unavailable:    latch.ErrUnavailable,
	dlockpb.ResponseStatus_TooManyKeys:    latch.ErrTooManyKeys,
	dlockpb.ResponseStatus_InvalidKey:     latch.ErrInvalidKey,
	dlockpb.ResponseStatus_InvalidRequest: latch.ErrInvalidRequest,
	dlockpb.ResponseStatus_NotHeld:        latch.ErrNotHeld,
	dlockpb.ResponseStatus_LimitMismatch:  latch.ErrLimitMismatch,
	dlockpb.ResponseStatus_ModeMismatch:   latch.ErrModeMismatch,
	dlockpb.ResponseStatus_Canceled:       latch.ErrCanceled,
	dlockpb.ResponseStatus_NotWaiting:     nil,
	dlockpb.ResponseStatus_TooManyWaiters: latch.ErrTooManyWaiters,
}

// statusError returns the error for a response, nil for Ok. tryOnce tells
// an AcquireTimeout of a try-once Lock (latch.ErrWouldBlock) from one that
// waited (latch.ErrTimeout).
func statusError(r *dlockpb.Response, tryOnce bool) error {
	st := r.GetStatus()
	switch st {
	case dlockpb.ResponseStatus_Ok:
		return nil
	case dlockpb.ResponseStatus_AcquireTimeout:
		be := &latch.BusyError{Err: latch.ErrTimeout, Keys: r.GetKeys()}
		if tryOnce {
			be.Err = latch.ErrWouldBlock
		}
		return be
	}
	err, known := statusErrors[st]
	if !known {
		err = ErrProtocol
	}
	return &StatusError{Status: st, Text: r.GetErrorText(), Err: err}
}

// SessionLostError is why a Client gave its session up: the session may
// have ended, releasing the Client's locks. It wraps latch.ErrSessionEnded
// and the cause: the connection's error, ErrKeepalive, or the server's
// answer (a *StatusError).
type SessionLostError struct {
	Cause error
}

func (e *SessionLostError) Error() string {
	return "client: session may have ended: " + e.Cause.Error()
}

func (e *SessionLostError) Unwrap() []error {
	return []error{latch.ErrSessionEnded, e.Cause}
}

func lostError(cause error) error {
	return &SessionLostError{Cause: cause}
}
