package latch

import "testing"

func TestExecutionString(t *testing.T) {
	tests := []struct {
		e    Execution
		want string
	}{
		{Inline, "inline"},
		{Replicated, "replicated"},
		{Execution(7), "Execution(7)"},
	}
	for _, tt := range tests {
		if got := tt.e.String(); got != tt.want {
			t.Errorf("Execution(%d).String() = %q, want %q", int(tt.e), got, tt.want)
		}
	}
}
