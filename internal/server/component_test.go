package server

import "testing"

func TestLoops(t *testing.T) {
	tests := []struct{ setting, procs, want int }{
		{-1, 8, 0}, // a goroutine per connection
		{0, 1, 1},
		{0, 2, 1},
		{0, 3, 1},
		{0, 8, 4},
		{3, 8, 3},
		{16, 2, 16},
	}
	for _, tt := range tests {
		if got := loops(tt.setting, tt.procs); got != tt.want {
			t.Errorf("loops(%d, %d) = %d, want %d", tt.setting, tt.procs, got, tt.want)
		}
	}
}
