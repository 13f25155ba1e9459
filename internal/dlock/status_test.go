package dlock

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/latchd/latch"
	pb "github.com/latchd/latch/dlockpb"
	"github.com/latchd/latch/internal/replica"
)

// TestStatusOf checks the error table for every error latch defines and
// every error of the front end, wrapped as the service wraps them.
func TestStatusOf(t *testing.T) {
	G := pb.ResponseStatus_General
	tests := []struct {
		err    error
		v3, v2 pb.ResponseStatus
		v2text string // prefix of the version 2 error_text
	}{
		{latch.ErrInvalidKey, pb.ResponseStatus_InvalidKey, G, "InvalidKey: "},
		{latch.ErrNoKeys, pb.ResponseStatus_InvalidRequest, G, "InvalidRequest: "},
		{latch.ErrTooManyKeys, pb.ResponseStatus_TooManyKeys, pb.ResponseStatus_TooManyKeys, "acquire"},
		{latch.ErrInvalidRequest, pb.ResponseStatus_InvalidRequest, G, "InvalidRequest: "},
		{&latch.BusyError{Err: latch.ErrWouldBlock}, pb.ResponseStatus_AcquireTimeout, pb.ResponseStatus_AcquireTimeout, ""},
		{&latch.BusyError{Err: latch.ErrTimeout}, pb.ResponseStatus_AcquireTimeout, pb.ResponseStatus_AcquireTimeout, ""},
		{latch.ErrCanceled, pb.ResponseStatus_Canceled, G, "Canceled: "},
		{latch.ErrTooManyWaiters, pb.ResponseStatus_TooManyWaiters, G, "TooManyWaiters: "},
		{latch.ErrAlreadyHeld, G, G, "acquire"},
		{latch.ErrModeMismatch, pb.ResponseStatus_ModeMismatch, G, "ModeMismatch: "},
		{latch.ErrLimitMismatch, pb.ResponseStatus_LimitMismatch, G, "LimitMismatch: "},
		{latch.ErrNotHeld, pb.ResponseStatus_NotHeld, G, "NotHeld: "},
		{latch.ErrNoSession, pb.ResponseStatus_SessionExpired, G, "SessionExpired: "},
		{latch.ErrSessionEnded, pb.ResponseStatus_SessionExpired, G, "LockWaitAbort: "},
		{latch.ErrShutdown, pb.ResponseStatus_ShuttingDown, G, "ShuttingDown: "},
		{fmt.Errorf("%w (%w)", latch.ErrNoSession, latch.ErrShutdown), pb.ResponseStatus_ShuttingDown, G, "ShuttingDown: "},
		{latch.ErrUnavailable, pb.ResponseStatus_Unavailable, G, "Unavailable: "},
		// A proposal the replicator refused, one whose node let go of its
		// clients, and the requests of a session with a TTL that it let
		// go (internal/node letGo).
		{replica.ErrUnavailable, pb.ResponseStatus_Unavailable, G, "Unavailable: "},
		{fmt.Errorf("no heartbeat committed: %w", latch.ErrUnavailable), pb.ResponseStatus_Unavailable, G, "Unavailable: "},
		// A waiting request of a session bound to its connection that a
		// node let go: its end was proposed.
		{fmt.Errorf("no heartbeat committed: %w (%w)", latch.ErrSessionEnded, latch.ErrUnavailable), pb.ResponseStatus_SessionExpired, G, "LockWaitAbort: "},
		{errVersion, pb.ResponseStatus_Version, pb.ResponseStatus_Version, "acquire"},
		{errInvalidType, pb.ResponseStatus_InvalidType, pb.ResponseStatus_InvalidType, "acquire"},
		{errUnauthorized, pb.ResponseStatus_Unauthorized, G, "Unauthorized: "},
		{errForbidden, pb.ResponseStatus_Unauthorized, G, "Unauthorized: "},
		{errTooManyPending, pb.ResponseStatus_TooManyPending, G, "TooManyPending: "},
		{errMalformed, G, G, "acquire"},
		{errFrameTooLarge, G, G, "acquire"},
		{errNotWaiting, pb.ResponseStatus_NotWaiting, G, "NotWaiting: "},
		{errors.New("something else"), G, G, "acquire"},
	}
	for _, tt := range tests {
		err := fmt.Errorf("acquire: %w", tt.err)
		if st, _ := statusOf(err, true); st != tt.v3 {
			t.Errorf("v3 status of %v = %v, want %v", err, st, tt.v3)
		}
		st, text := statusOf(err, false)
		if st != tt.v2 {
			t.Errorf("v2 status of %v = %v, want %v", err, st, tt.v2)
		}
		if !strings.HasPrefix(text, tt.v2text) {
			t.Errorf("v2 error_text of %v = %q, want it to start with %q", err, text, tt.v2text)
		}
		if strings.Contains(text, "latch: ") {
			t.Errorf("error_text %q", text)
		}
	}
}
