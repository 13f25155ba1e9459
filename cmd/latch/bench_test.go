package main

import (
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/latchd/latch/internal/latchtest"
)

// TestBench is the CI smoke run of "latch bench": a short run against an
// in-process server, so that the tool cannot rot. It checks that the run
// works and every reply was valid, never how fast it was.
func TestBench(t *testing.T) {
	addr := latchtest.StartLatch(t)
	tests := []cliCase{
		{name: "help", args: []string{"-h"}, wantStderr: "Usage: latch bench"},
		{name: "bad target", args: []string{"--target", "redis"}, wantCode: 2, wantStderr: `invalid target "redis"`},
		{name: "bad ratio", args: []string{"--ratio", "9"}, wantCode: 2, wantStderr: "want gets:sets"},
		{name: "bad server-pid", args: []string{"--server-pid", "12,x"}, wantCode: 2, wantStderr: "want pid[,pid...]"},
		{name: "two addrs, two pids", args: []string{"--addr", addr + "," + addr, "--server-pid", strconv.Itoa(os.Getpid()) + "," + strconv.Itoa(os.Getpid()),
			"--conns", "2", "--duration", "300ms", "--warmup", "50ms", "--keys", "100"}, wantStdout: "cycles/s"},
		{name: "extra argument", args: []string{"now"}, wantCode: 2, wantStderr: "unexpected arguments"},
		{name: "unreachable", args: []string{"--addr", "127.0.0.1:1", "--timeout", "1s"}, wantCode: 1, wantStderr: "latch bench:"},
		{name: "cycle text", args: []string{"--addr", addr, "--conns", "4", "--duration", "300ms", "--warmup", "50ms", "--keys", "100"},
			wantStdout: "cycles/s"},
		{name: "getset binary", args: []string{"--addr", addr, "--target", "memcache-binary", "--workload", "getset", "--conns", "4", "--pipeline", "8",
			"--duration", "300ms", "--warmup", "50ms", "--keys", "1000", "--ratio", "3:1"}, wantStdout: "gets/sets"},
	}
	for _, tt := range tests {
		tt.args = append([]string{"bench"}, tt.args...)
		t.Run(tt.name, tt.check)
	}

	t.Run("json", func(t *testing.T) {
		var stdout, stderr strings.Builder
		code := run([]string{"bench", "--addr", addr, "--conns", "2", "--duration", "200ms", "--warmup", "0s", "--keys", "10", "--json"},
			&environment{stdout: &stdout, stderr: &stderr, getenv: func(string) string { return "" }})
		if code != 0 {
			t.Fatalf("exit code %d; stderr:\n%s", code, stderr.String())
		}
		var res struct {
			Workload string `json:"workload"`
			Ops      uint64 `json:"ops"`
			Errors   uint64 `json:"errors"`
			Latency  struct {
				P99 float64 `json:"p99_us"`
			} `json:"latency"`
		}
		if err := json.Unmarshal([]byte(stdout.String()), &res); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, stdout.String())
		}
		if res.Workload != "cycle" || res.Ops == 0 || res.Errors != 0 || res.Latency.P99 <= 0 {
			t.Errorf("result %+v", res)
		}
	})
}
