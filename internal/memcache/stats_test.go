package memcache

import (
	"runtime"
	"testing"
	"time"
)

// TestTextCommandIndex keeps textCommandIndex in step with textCommands:
// every counted command maps to its index, anything else to -1.
func TestTextCommandIndex(t *testing.T) {
	for i, name := range textCommands {
		if got := textCommandIndex([]byte(name)); got != i {
			t.Errorf("textCommandIndex(%q) = %d, want %d", name, got, i)
		}
	}
	for _, name := range []string{"", "GET", "lock ", "unlock_al", "unlock_all_", "bogus", "gat"} {
		if got := textCommandIndex([]byte(name)); got != -1 {
			t.Errorf("textCommandIndex(%q) = %d, want -1", name, got)
		}
	}
}

func TestSeconds(t *testing.T) {
	for _, tc := range []struct {
		in   time.Duration
		want string
	}{
		{0, "0.000000"},
		{time.Microsecond, "0.000001"},
		{999 * time.Nanosecond, "0.000000"},
		{1500 * time.Millisecond, "1.500000"},
		{3*time.Hour + 7*time.Microsecond, "10800.000007"},
	} {
		if got := seconds(tc.in); got != tc.want {
			t.Errorf("seconds(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestProcessCPU: where the system tells the CPU times (unix and Windows),
// they are there and grow as the process works.
func TestProcessCPU(t *testing.T) {
	if !haveProcessCPU {
		t.Skipf("no CPU times on %s", runtime.GOOS)
	}
	user0, system0, ok := processCPU()
	if !ok {
		t.Fatal("processCPU failed")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		user, system, ok := processCPU()
		if !ok {
			t.Fatal("processCPU failed after it had worked")
		}
		if user < user0 || system < system0 {
			t.Fatalf("CPU times went back: user %v then %v, system %v then %v", user0, user, system0, system)
		}
		if user+system > user0+system0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("CPU times stayed at user %v, system %v after 5s of work", user, system)
		}
		for i := range 1_000_000 {
			sink += i
		}
	}
}

var sink int
