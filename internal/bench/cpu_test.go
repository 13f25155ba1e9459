package bench

import (
	"os"
	"runtime"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	tests := []struct {
		line         string
		utime, stime uint64
		bad          bool
	}{
		{line: "4321 (latch) S 1 4321 4321 0 -1 4194560 1234 0 0 0 250 75 0 0 20 0 7 0 1000 1234567 890 18446744073709551615\n", utime: 250, stime: 75},
		// A comm with spaces and parentheses, even a ") " of its own.
		{line: "77 (a (b) ) c) R 1 77 77 0 -1 0 0 0 0 0 12 3 0 0 20 0 1 0 5 6 7", utime: 12, stime: 3},
		{line: "77 (x) R 1 77 77 0 -1 0 0 0 0 0 12", bad: true},   // cut before stime
		{line: "77 x R 1 77 77 0 -1 0 0 0 0 0 12 3", bad: true},   // no comm
		{line: "77 (x) R 1 77 77 0 -1 0 0 0 0 0 -5 3", bad: true}, // not a count
	}
	for _, tt := range tests {
		u, s, err := parseStat([]byte(tt.line))
		if tt.bad {
			if err == nil {
				t.Errorf("parseStat(%q) = %d, %d, want an error", tt.line, u, s)
			}
			continue
		}
		if err != nil || u != tt.utime || s != tt.stime {
			t.Errorf("parseStat(%q) = %d, %d, %v, want %d, %d", tt.line, u, s, err, tt.utime, tt.stime)
		}
	}
}

func TestServerCPU(t *testing.T) {
	if _, ok := serverCPU(0); ok {
		t.Error("serverCPU(0) read something")
	}
	c, ok := serverCPU(os.Getpid())
	if runtime.GOOS != "linux" {
		if ok {
			t.Errorf("serverCPU on %s: %+v", runtime.GOOS, c)
		}
		return
	}
	if !ok {
		t.Fatal("serverCPU(own pid) read nothing")
	}
	if c.user < 0 || c.sys < 0 {
		t.Errorf("serverCPU(own pid) = %+v", c)
	}
}

func TestCPUResult(t *testing.T) {
	before := cpuTime{user: time.Second, sys: 2 * time.Second}
	after := cpuTime{user: 3 * time.Second, sys: 3 * time.Second}
	c := cpuResult([]int{1}, before, after, 1e6, 2e6)
	if c == nil || c.UserPerOp != 2 || c.SysPerOp != 1 || c.TotalPerOp != 3 ||
		c.UserPerRequest != 1 || c.SysPerRequest != 0.5 || c.TotalPerRequest != 1.5 ||
		c.UserSeconds != 2 || c.SysSeconds != 1 {
		t.Errorf("cpuResult = %+v", c)
	}
	if c := cpuResult([]int{1}, before, after, 0, 0); c != nil {
		t.Errorf("cpuResult with no ops = %+v, want nil", c)
	}
}
