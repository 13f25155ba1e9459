package client

import (
	"errors"
	"slices"
	"testing"

	"github.com/latchd/latch"
	"github.com/latchd/latch/dlockpb"
)

func TestStatusError(t *testing.T) {
	tests := []struct {
		status  dlockpb.ResponseStatus
		tryOnce bool
		want    error // nil: no error
	}{
		{dlockpb.ResponseStatus_Ok, false, nil},
		{dlockpb.ResponseStatus_AcquireTimeout, true, latch.ErrWouldBlock},
		{dlockpb.ResponseStatus_AcquireTimeout, false, latch.ErrTimeout},
		{dlockpb.ResponseStatus_Version, false, ErrProtocol},
		{dlockpb.ResponseStatus_InvalidType, false, ErrProtocol},
		{dlockpb.ResponseStatus_Unauthorized, false, ErrUnauthorized},
		{dlockpb.ResponseStatus_ShuttingDown, false, latch.ErrShutdown},
		{dlockpb.ResponseStatus_SessionExpired, false, latch.ErrSessionEnded},
		{dlockpb.ResponseStatus_TooManyPending, false, ErrTooManyPending},
		{dlockpb.ResponseStatus_Unavailable, false, latch.ErrUnavailable},
		{dlockpb.ResponseStatus_TooManyKeys, false, latch.ErrTooManyKeys},
		{dlockpb.ResponseStatus_InvalidKey, false, latch.ErrInvalidKey},
		{dlockpb.ResponseStatus_InvalidRequest, false, latch.ErrInvalidRequest},
		{dlockpb.ResponseStatus_NotHeld, false, latch.ErrNotHeld},
		{dlockpb.ResponseStatus_LimitMismatch, false, latch.ErrLimitMismatch},
		{dlockpb.ResponseStatus_ModeMismatch, false, latch.ErrModeMismatch},
		{dlockpb.ResponseStatus_Canceled, false, latch.ErrCanceled},
		{dlockpb.ResponseStatus_TooManyWaiters, false, latch.ErrTooManyWaiters},
		{dlockpb.ResponseStatus(99), false, ErrProtocol}, // unknown
	}
	for _, tt := range tests {
		t.Run(tt.status.String(), func(t *testing.T) {
			resp := &dlockpb.Response{Status: tt.status, ErrorText: "why", Keys: []string{"k"}}
			err := statusError(resp, tt.tryOnce)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("statusError() = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("statusError() = %v, want it to wrap %v", err, tt.want)
			}
			var busy *latch.BusyError
			var se *StatusError
			switch {
			case errors.As(err, &busy):
				if !slices.Equal(busy.Keys, []string{"k"}) {
					t.Errorf("busy keys = %q, want [k]", busy.Keys)
				}
			case errors.As(err, &se):
				if se.Status != tt.status || se.Text != "why" {
					t.Errorf("StatusError = %+v", se)
				}
			default:
				t.Errorf("statusError() = %T, want a *StatusError or *latch.BusyError", err)
			}
		})
	}
}

// Every status of the protocol has its entry: a status added to the
// .proto must be mapped here too.
func TestStatusErrorsCoverTheProtocol(t *testing.T) {
	for n := range dlockpb.ResponseStatus_name {
		st := dlockpb.ResponseStatus(n)
		if st == dlockpb.ResponseStatus_Ok || st == dlockpb.ResponseStatus_AcquireTimeout {
			continue
		}
		if _, ok := statusErrors[st]; !ok {
			t.Errorf("status %v has no entry in statusErrors", st)
		}
	}
}

func TestSessionLostError(t *testing.T) {
	cause := errors.New("EOF")
	err := lostError(cause)
	if !errors.Is(err, latch.ErrSessionEnded) || !errors.Is(err, cause) {
		t.Errorf("lostError() = %v, want it to wrap ErrSessionEnded and the cause", err)
	}
	if got, want := err.Error(), "client: session may have ended: EOF"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}
