package raftrep

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestFollowerClock: off the leader, the clock is the last stamp applied
// plus the time since, never more than a heartbeat timeout past it, and
// never less than it read before, when a stamp arrives behind it.
func TestFollowerClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &Replicator{cfg: Config{HeartbeatTimeout: time.Second}}
		const ms = int64(time.Millisecond)
		r.stamped(1000*ms, 1)
		steps := []struct {
			wait  time.Duration
			stamp int64 // applied after the wait; 0: none
			want  int64
		}{
			{100 * time.Millisecond, 0, 1100 * ms},
			// The leader's next stamp is behind what was read: the clock
			// waits for the stamps to catch up.
			{0, 1050 * ms, 1100 * ms},
			{20 * time.Millisecond, 0, 1100 * ms},
			{40 * time.Millisecond, 0, 1110 * ms},
			// Nothing applied for longer than a heartbeat timeout: the
			// clock stops a heartbeat timeout past the last stamp.
			{3 * time.Second, 0, 2050 * ms},
			{0, 2060 * ms, 2060 * ms},
			{10 * time.Millisecond, 0, 2070 * ms},
		}
		for i, s := range steps {
			time.Sleep(s.wait)
			if s.stamp != 0 {
				r.stamped(s.stamp, uint64(i+2))
			}
			if got := r.Now(); got != s.want {
				t.Fatalf("step %d: Now() = %d ms, want %d ms", i, got/ms, s.want/ms)
			}
		}
	})
}
