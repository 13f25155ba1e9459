package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRun runs the commands that return at once in process.
func TestRun(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		env        map[string]string
		wantCode   int
		wantStdout string // substring; "" checks that stdout is empty
		wantStderr string // substring; "" checks that stderr is empty
	}{
		{name: "no command", args: nil, wantCode: 2, wantStderr: "Usage:"},
		{name: "unknown command", args: []string{"lock"}, wantCode: 2, wantStderr: `unknown command "lock"`},
		{name: "unknown command shows usage", args: []string{"srve"}, wantCode: 2, wantStderr: "serve      run a lock server"},
		{name: "-h", args: []string{"-h"}, wantCode: 0, wantStdout: "The commands are:"},
		{name: "--help", args: []string{"--help"}, wantCode: 0, wantStdout: "The commands are:"},
		{name: "help", args: []string{"help"}, wantCode: 0, wantStdout: "version    print latch's version"},
		{name: "help serve", args: []string{"help", "serve"}, wantCode: 0, wantStderr: "LATCH_SHUTDOWN_TIMEOUT"},
		{name: "help version", args: []string{"help", "version"}, wantCode: 0, wantStderr: "Usage: latch version"},
		{name: "help unknown", args: []string{"help", "nope"}, wantCode: 2, wantStderr: `unknown command "nope"`},
		{name: "help too many", args: []string{"help", "serve", "version"}, wantCode: 2, wantStderr: "usage: latch help [command]"},
		{name: "version", args: []string{"version"}, wantCode: 0, wantStdout: "latch "},
		{name: "version extra argument", args: []string{"version", "x"}, wantCode: 2, wantStderr: "unexpected arguments"},
		{name: "version bad flag", args: []string{"version", "--short"}, wantCode: 2, wantStderr: "flag provided but not defined: -short"},
		{name: "serve -h", args: []string{"serve", "-h"}, wantCode: 0, wantStderr: "-max-keys n"},
		{name: "serve bad flag", args: []string{"serve", "--listen=:1"}, wantCode: 2, wantStderr: "flag provided but not defined: -listen"},
		{name: "serve bad flag value", args: []string{"serve", "--max-keys=x"}, wantCode: 2, wantStderr: `invalid value "x" for flag -max-keys`},
		{name: "serve invalid setting", args: []string{"serve", "--log-level=loud"}, wantCode: 2, wantStderr: `latch serve: config: invalid log-level "loud"`},
		{name: "serve invalid env", args: []string{"serve"}, env: map[string]string{"LATCH_LOG_FORMAT": "xml"}, wantCode: 2, wantStderr: `invalid log-format "xml"`},
		{name: "serve missing config file", args: []string{"serve", "--config=/nonexistent.toml"}, wantCode: 2, wantStderr: "/nonexistent.toml"},
		{name: "datadir without dir", args: []string{"datadir", "clear-halt"}, wantCode: 2, wantStderr: "Usage: latch datadir"},
		{name: "snapshot without file", args: []string{"snapshot", "save"}, wantCode: 2, wantStderr: "Usage: latch snapshot save FILE"},
		{name: "snapshot unknown op", args: []string{"snapshot", "copy", "f"}, wantCode: 2, wantStderr: "Usage: latch snapshot"},
		{name: "snapshot restore without dir", args: []string{"snapshot", "restore", "f"}, wantCode: 2, wantStderr: "--data-dir is required"},
		{name: "snapshot restore of a cluster without id", args: []string{"snapshot", "restore", "f", "--data-dir", "/nonexistent", "--initial-cluster", "a=127.0.0.1:1"}, wantCode: 2, wantStderr: "--node-id is required"},
		{name: "snapshot inspect of no file", args: []string{"snapshot", "inspect", "/nonexistent/b.snap"}, wantCode: 1, wantStderr: "latch snapshot inspect: "},
		{name: "datadir unknown op", args: []string{"datadir", "--data-dir=/tmp", "wipe"}, wantCode: 2, wantStderr: "Usage: latch datadir"},
		{name: "recover -h", args: []string{"recover", "-h"}, wantCode: 0, wantStderr: "Usage: latch recover"},
		{name: "recover force and dry run", args: []string{"recover", "--data-dir=/tmp", "--force", "--dry-run"}, wantCode: 2, wantStderr: "exclude each other"},
		{name: "recover without dir", args: []string{"recover"}, wantCode: 2, wantStderr: "--data-dir is required"},
		{name: "recover extra argument", args: []string{"recover", "--data-dir=/tmp", "now"}, wantCode: 2, wantStderr: `unexpected arguments ["now"]`},
		{name: "recover not a data dir", args: []string{"recover", "--data-dir=/"}, wantCode: 1, wantStderr: "/ is not the data dir of a node"},
		{name: "recover missing data dir", args: []string{"recover", "--data-dir=/nonexistent/latch"}, wantCode: 1, wantStderr: "no such file or directory"},
		{name: "serve extra argument", args: []string{"serve", "now"}, wantCode: 2, wantStderr: `unexpected arguments ["now"]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			code := run(tt.args, &environment{
				stdout: &stdout,
				stderr: &stderr,
				getenv: func(k string) string { return tt.env[k] },
			})
			if code != tt.wantCode {
				t.Errorf("exit code = %d, want %d", code, tt.wantCode)
			}
			check := func(name, got, want string) {
				if want == "" && got != "" || !strings.Contains(got, want) {
					t.Errorf("%s = %q, want it to contain %q", name, got, want)
				}
			}
			check("stdout", stdout.String(), tt.wantStdout)
			check("stderr", stderr.String(), tt.wantStderr)
		})
	}
}

func TestBuildVersion(t *testing.T) {
	old := version
	t.Cleanup(func() { version = old })

	version = "v9.9.9"
	if got := buildVersion(); got != "v9.9.9" {
		t.Errorf("buildVersion() = %q, want the -ldflags version v9.9.9", got)
	}
	version = ""
	if got := buildVersion(); got == "" {
		t.Error("buildVersion() = \"\", want a fallback")
	}
}

// TestBuildCommit: the commit and date set by -ldflags are printed on
// latch version's second line; without them, "unknown" (a test binary
// records no VCS revision).
func TestBuildCommit(t *testing.T) {
	oldCommit, oldDate := commit, date
	t.Cleanup(func() { commit, date = oldCommit, oldDate })
	for _, tt := range []struct{ commit, date, want string }{
		{"0123456789abcdef0123456789abcdef01234567", "2026-11-28T05:12:16Z", "\ncommit 0123456789abcdef0123456789abcdef01234567 2026-11-28T05:12:16Z\n"},
		{"", "", "\ncommit unknown unknown\n"},
	} {
		commit, date = tt.commit, tt.date
		var stdout, stderr strings.Builder
		code := run([]string{"version"}, &environment{stdout: &stdout, stderr: &stderr, getenv: func(string) string { return "" }})
		if code != 0 || !strings.HasSuffix(stdout.String(), tt.want) {
			t.Errorf("commit %q, date %q: latch version = %d, %q; want it to end in %q", tt.commit, tt.date, code, stdout.String(), tt.want)
		}
	}
}

// TestDatadirClearHalt: clear-halt removes the mark a node halted by a
// disk error left, and says when there was none.
func TestDatadirClearHalt(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "halted"), []byte("sync failed\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"halt cleared", "was not halted"} {
		var stdout, stderr strings.Builder
		code := run([]string{"datadir", "--data-dir", dir, "clear-halt"}, &environment{stdout: &stdout, stderr: &stderr, getenv: func(string) string { return "" }})
		if code != 0 || !strings.Contains(stdout.String(), want) {
			t.Fatalf("clear-halt = %d, stdout %q, stderr %q; want 0 and %q", code, stdout.String(), stderr.String(), want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "halted")); !os.IsNotExist(err) {
		t.Fatalf("the mark is still there: %v", err)
	}
}
