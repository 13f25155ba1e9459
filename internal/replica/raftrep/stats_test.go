package raftrep

import (
	"testing"
	"time"
)

func TestCommitBucket(t *testing.T) {
	last := len(CommitBounds)
	tests := []struct {
		d    time.Duration
		want int
	}{
		{0, 0},
		{time.Microsecond, 0},
		{100 * time.Microsecond, 0}, // a bound is in its own bucket
		{100*time.Microsecond + 1, 1},
		{time.Millisecond, 3},
		{3 * time.Millisecond, 5},
		{time.Second, 12},
		{10 * time.Second, last - 1},
		{10*time.Second + 1, last}, // beyond every bound
		{time.Hour, last},
	}
	for _, tt := range tests {
		if got := commitBucket(tt.d); got != tt.want {
			t.Errorf("commitBucket(%v) = %d, want %d", tt.d, got, tt.want)
		}
	}
}
