package main

import (
	"strings"
	"testing"
)

// TestRunUsage checks the command lines "latch run" refuses, in process.
func TestRunUsage(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStderr string
	}{
		{"help", []string{"help", "run"}, 0, "Usage: latch run [flags] KEY... -- COMMAND"},
		{"-h", []string{"run", "-h"}, 0, "-kill-after duration"},
		{"no --", []string{"run", "k", "true"}, 2, "missing -- between the keys and the command"},
		{"no key", []string{"run", "--", "true"}, 2, "no key to lock"},
		{"no command", []string{"run", "k", "--"}, 2, "no command after --"},
		{"-s and -x", []string{"run", "-s", "-x", "k", "--", "true"}, 2, "-s and -x exclude each other"},
		{"limit with -x", []string{"run", "-x", "--limit", "2", "k", "--", "true"}, 2, "--limit needs a shared lock"},
		{"bad -w", []string{"run", "-w", "soon", "k", "--", "true"}, 2, `invalid value "soon" for flag -w`},
		{"negative -w", []string{"run", "-w", "-1s", "k", "--", "true"}, 2, "negative wait"},
		{"invalid key", []string{"run", "a\rb", "--", "true"}, 2, "invalid key"},
		{"bad flag", []string{"run", "--wait", "1s", "k", "--", "true"}, 2, "flag provided but not defined: -wait"},
		{"lease too short", []string{"run", "--ttl", "1s", "k", "--", "true"}, 2, "lease 1s: must be at least 12s"},
		{"kill-after too long", []string{"run", "--session-ttl", "4s", "--kill-after", "2s", "k", "--", "true"}, 2, "kill-after 2s"},
		{"no server", []string{"run", "--addr", "127.0.0.1:1", "k", "--", "true"}, 125, "connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			code := run(tt.args, &environment{
				stdout: &stdout,
				stderr: &stderr,
				getenv: func(string) string { return "" },
			})
			if code != tt.wantCode {
				t.Errorf("exit code = %d, want %d (stderr %q)", code, tt.wantCode, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr = %q, want it to contain %q", stderr.String(), tt.wantStderr)
			}
		})
	}
}

func TestWaitFlag(t *testing.T) {
	tests := []struct {
		in   string
		want string // "" for an error
	}{
		{"10s", "10s"},
		{"1m30s", "1m30s"},
		{"0", "0s"},
		{"2.5", "2.5s"},
		{"0.1", "100ms"},
		{"-1", ""},
		{"soon", ""},
	}
	for _, tt := range tests {
		var w waitFlag
		err := w.Set(tt.in)
		switch {
		case tt.want == "" && err == nil:
			t.Errorf("Set(%q) = %v, want an error", tt.in, w.d)
		case tt.want != "" && (err != nil || w.String() != tt.want):
			t.Errorf("Set(%q) = %v, %v; want %s", tt.in, w.String(), err, tt.want)
		}
	}
}
