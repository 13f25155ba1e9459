package dlock

import (
	"errors"
	"strings"

	"github.com/latchd/latch"
	pb "github.com/latchd/latch/dlockpb"
)

// Errors of the front end itself, beside latch's.
var (
	// errVersion: Request.version is not 0, 2 or 3.
	errVersion = errors.New("unsupported protocol version")
	// errInvalidType: Request.type is unknown for the request's version.
	errInvalidType = errors.New("invalid request type")
	// errUnauthorized: access_token is missing or wrong.
	errUnauthorized = errors.New("missing or wrong access_token")
	// errForbidden: the access_token does not allow the request: a
	// read-only token, or a key outside the token's prefixes.
	errForbidden = errors.New("access_token does not allow this request")
	// errTooManyPending: the connection has MaxPending requests waiting.
	errTooManyPending = errors.New("too many requests pending on this connection")
	// errMalformed: a frame that is not a Request.
	errMalformed = errors.New("malformed request")
	// errFrameTooLarge: a frame over the limit; the connection closes.
	errFrameTooLarge = errors.New("frame too large")
	// errTooManyConns: the server has Config.MaxConns connections; the
	// new one is answered and closed.
	errTooManyConns = errors.New("too many connections; try again later")
	// errNotWaiting: Cancel names no waiting Lock.
	errNotWaiting = errors.New("no waiting Lock with this id")
)

// statuses maps errors to wire statuses: the first entry whose err matches
// (errors.Is) decides. v3 is the status of a version 3 answer, v2 of a
// version 2 answer; where version 2 has no status of its own, it answers
// General with an error_text that starts with v2text (the v3 status's name,
// or the reference server's "LockWaitAbort" for a wait that ended with its
// session). Errors that match no entry answer General.
var statuses = []struct {
	err    error
	v3, v2 pb.ResponseStatus
	v2text string
}{
	// First: a shutdown also ends sessions, and its errors wrap
	// ErrNoSession too. Not those of a session with a TTL on a
	// replicated node, which its shutdown leaves to the cluster: they
	// wrap ErrUnavailable alone (below), for its client to resume it on
	// another server.
	{latch.ErrShutdown, pb.ResponseStatus_ShuttingDown, pb.ResponseStatus_General, "ShuttingDown"},
	{errVersion, pb.ResponseStatus_Version, pb.ResponseStatus_Version, ""},
	{errInvalidType, pb.ResponseStatus_InvalidType, pb.ResponseStatus_InvalidType, ""},
	{errUnauthorized, pb.ResponseStatus_Unauthorized, pb.ResponseStatus_General, "Unauthorized"},
	{errForbidden, pb.ResponseStatus_Unauthorized, pb.ResponseStatus_General, "Unauthorized"},
	{errTooManyPending, pb.ResponseStatus_TooManyPending, pb.ResponseStatus_General, "TooManyPending"},
	{errMalformed, pb.ResponseStatus_General, pb.ResponseStatus_General, ""},
	{errFrameTooLarge, pb.ResponseStatus_General, pb.ResponseStatus_General, ""},
	{errTooManyConns, pb.ResponseStatus_General, pb.ResponseStatus_General, "TooManyConnections"},

	{latch.ErrTooManyKeys, pb.ResponseStatus_TooManyKeys, pb.ResponseStatus_TooManyKeys, ""},
	{latch.ErrInvalidKey, pb.ResponseStatus_InvalidKey, pb.ResponseStatus_General, "InvalidKey"},
	{latch.ErrNoKeys, pb.ResponseStatus_InvalidRequest, pb.ResponseStatus_General, "InvalidRequest"},
	{latch.ErrInvalidRequest, pb.ResponseStatus_InvalidRequest, pb.ResponseStatus_General, "InvalidRequest"},

	{latch.ErrWouldBlock, pb.ResponseStatus_AcquireTimeout, pb.ResponseStatus_AcquireTimeout, ""},
	{latch.ErrTimeout, pb.ResponseStatus_AcquireTimeout, pb.ResponseStatus_AcquireTimeout, ""},
	{latch.ErrNotHeld, pb.ResponseStatus_NotHeld, pb.ResponseStatus_General, "NotHeld"},
	{latch.ErrLimitMismatch, pb.ResponseStatus_LimitMismatch, pb.ResponseStatus_General, "LimitMismatch"},
	{latch.ErrModeMismatch, pb.ResponseStatus_ModeMismatch, pb.ResponseStatus_General, "ModeMismatch"},
	{latch.ErrCanceled, pb.ResponseStatus_Canceled, pb.ResponseStatus_General, "Canceled"},
	{latch.ErrTooManyWaiters, pb.ResponseStatus_TooManyWaiters, pb.ResponseStatus_General, "TooManyWaiters"},
	{errNotWaiting, pb.ResponseStatus_NotWaiting, pb.ResponseStatus_General, "NotWaiting"},
	// Not produced by dlock requests, which re-lock with latch.RelockReuse.
	{latch.ErrAlreadyHeld, pb.ResponseStatus_General, pb.ResponseStatus_General, ""},

	{latch.ErrSessionEnded, pb.ResponseStatus_SessionExpired, pb.ResponseStatus_General, "LockWaitAbort"},
	{latch.ErrNoSession, pb.ResponseStatus_SessionExpired, pb.ResponseStatus_General, "SessionExpired"},
	// After the session's entries: a cluster node that lets go of a
	// session bound to its connection proposes its end, and fails its
	// waiting requests with an error wrapping ErrSessionEnded and
	// ErrUnavailable; SessionExpired tells its client the truth (the
	// connection closes too). A session with a TTL is left to the
	// cluster: its errors wrap ErrUnavailable alone, and its client may
	// resume it on another server.
	{latch.ErrUnavailable, pb.ResponseStatus_Unavailable, pb.ResponseStatus_General, "Unavailable"},
}

// statusOf returns the status and error_text of err for a version 2 (v3
// false) or version 3 answer.
func statusOf(err error, v3 bool) (pb.ResponseStatus, string) {
	// Keys hold no space, so this drops only the package prefixes of
	// latch's errors.
	text := strings.ReplaceAll(err.Error(), "latch: ", "")
	for _, s := range statuses {
		if !errors.Is(err, s.err) {
			continue
		}
		if v3 {
			return s.v3, text
		}
		if s.v2 == pb.ResponseStatus_General && s.v2text != "" {
			text = s.v2text + ": " + text
		}
		return s.v2, text
	}
	return pb.ResponseStatus_General, text
}
