package memcache_test

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/internal/latchtest"
)

// memcslap's report lines that count keys: "Time to set 8000 keys by 4
// threads: ..." for a run, "Time to set 2000 keys: ..." for the initial
// load of a get or mget run.
var memcslapCountRE = regexp.MustCompile(`(?m)^Time to (set|get|mget)\s+(\d+) keys(?: by\s+(\d+) threads)?:`)

// memcslapErrorRE matches what memcslap prints when an operation fails
// ("Fatal error for key ...", "Failure on ...") or the run dies.
var memcslapErrorRE = regexp.MustCompile(`(?i)error|fail|died|invalid|could not`)

// checkMemcslap checks memcslap's output for a run of test ("set", "get"
// or "mget") with the given concurrency and execute number. memcslap exits
// 0 even when operations fail, so the output is all there is: no error
// line, and every count complete (a failed operation is not counted).
func checkMemcslap(out []byte, test string, concurrency, number int) error {
	for line := range strings.Lines(string(out)) {
		if memcslapErrorRE.MatchString(line) {
			return fmt.Errorf("memcslap reports an error: %q", strings.TrimSpace(line))
		}
	}
	want := map[string]string{
		test + " run": fmt.Sprintf("%d keys by %d threads", concurrency*number, concurrency),
	}
	if test != "set" {
		want["set load"] = fmt.Sprintf("%d keys", number)
	}
	got := make(map[string]string)
	for _, m := range memcslapCountRE.FindAllStringSubmatch(string(out), -1) {
		if m[3] == "" {
			got[m[1]+" load"] = m[2] + " keys"
		} else {
			got[m[1]+" run"] = m[2] + " keys by " + m[3] + " threads"
		}
	}
	for what, w := range want {
		if got[what] != w {
			return fmt.Errorf("memcslap's %s counted %q, want %q", what, got[what], w)
		}
	}
	if len(got) != len(want) {
		return fmt.Errorf("memcslap counted %v, want %v", got, want)
	}
	return nil
}

func TestCheckMemcslap(t *testing.T) {
	tests := []struct {
		name    string
		out     string
		test    string
		wantErr bool
	}{
		{
			name: "set ok",
			out:  "Time to generate       2000 test keys:                0.007 seconds.\nTime to start             4 threads:                  0.003 seconds.\n-----\nTime to set            8000 keys by    4 threads:     0.216 seconds.\n-----\nTime total:                                           0.226 seconds.\n",
			test: "set",
		},
		{
			name: "get ok",
			out:  "Time to generate       2000 test keys:                0.005 seconds.\nTime to set            2000 keys:                     0.217 seconds.\nTime to start             4 threads:                  0.000 seconds.\nTime to get            8000 keys by    4 threads:     1.077 seconds.\n",
			test: "get",
		},
		{
			name:    "fatal error",
			out:     "Fatal error for key 'wZ1e': SUCCESS\nTime to set            8000 keys by    4 threads:     0.216 seconds.\n",
			test:    "set",
			wantErr: true,
		},
		{
			name:    "short count",
			out:     "Time to set               0 keys by    4 threads:     0.002 seconds.\n",
			test:    "set",
			wantErr: true,
		},
		{
			name:    "load short",
			out:     "Time to set            1999 keys:                     0.217 seconds.\nTime to get            8000 keys by    4 threads:     1.077 seconds.\n",
			test:    "get",
			wantErr: true,
		},
		{
			name:    "no report",
			out:     "",
			test:    "set",
			wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkMemcslap([]byte(tt.out), tt.test, 4, 2000)
			if (err != nil) != tt.wantErr {
				t.Errorf("checkMemcslap() error = %v, wantErr %v", err, tt.wantErr)
			}
		})
	}
}

// TestMemcslap runs short memcslap loads against latch, in both protocols,
// and wants every operation to succeed.
func TestMemcslap(t *testing.T) {
	requireTool(t, memcslapPath, "libmemcached-tools")
	const concurrency, number = 4, 2000
	tests := []struct {
		name   string
		test   string
		binary bool
	}{
		{"binary set", "set", true},
		{"text set", "set", false},
		{"binary get", "get", true},
		{"text get", "get", false},
		{"text mget", "mget", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			addr := latchtest.StartLatch(t)
			args := []string{
				"--servers=" + addr,
				"--concurrency=" + strconv.Itoa(concurrency),
				"--execute-number=" + strconv.Itoa(number),
				"--test=" + tt.test,
			}
			if tt.binary {
				args = append(args, "--binary")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, memcslapPath, args...)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Run(); err != nil {
				t.Fatalf("memcslap %s: %v\n%s", strings.Join(args, " "), err, out.Bytes())
			}
			if err := checkMemcslap(out.Bytes(), tt.test, concurrency, number); err != nil {
				t.Errorf("memcslap %s: %v\n%s", strings.Join(args, " "), err, out.Bytes())
			}
		})
	}
}
