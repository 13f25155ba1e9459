package main

import (
	"strings"
	"testing"
)

// cliCase is one in-process run of the CLI and what it must give.
type cliCase struct {
	name       string
	args       []string
	env        map[string]string // the environment; nil: empty
	wantCode   int
	wantStdout string // substring of stdout
	wantStderr string // substring of stderr
}

// check runs c's command line in process and fails t where the result
// differs.
func (c cliCase) check(t *testing.T) {
	t.Helper()
	var stdout, stderr strings.Builder
	code := run(c.args, &environment{
		stdout: &stdout,
		stderr: &stderr,
		getenv: func(k string) string { return c.env[k] },
	})
	if code != c.wantCode {
		t.Errorf("exit code = %d, want %d; stderr %q", code, c.wantCode, stderr.String())
	}
	if !strings.Contains(stdout.String(), c.wantStdout) {
		t.Errorf("stdout = %q, want it to contain %q", stdout.String(), c.wantStdout)
	}
	if !strings.Contains(stderr.String(), c.wantStderr) {
		t.Errorf("stderr = %q, want it to contain %q", stderr.String(), c.wantStderr)
	}
}
