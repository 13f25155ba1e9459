package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// installShell runs a block of docs/install.md with sh -e in dir, with env
// added to a clean environment, and returns its output.
func installShell(t *testing.T, dir, block string, env ...string) string {
	t.Helper()
	cmd := exec.Command("sh", "-ec", block)
	cmd.Dir = dir
	cmd.Env = append(cleanEnv(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("running\n%s\nfailed: %v\n%s", block, err, out)
	}
	return string(out)
}

// TestInstallFromSource runs the "From source" commands of docs/install.md
// in this checkout: go install, then latch version from $GOBIN.
func TestInstallFromSource(t *testing.T) {
	if testing.Short() {
		t.Skip("builds latch")
	}
	gobin := t.TempDir()
	out := installShell(t, "../..", installBlock(t, "source-install"),
		"GOBIN="+gobin, "PATH="+gobin+string(os.PathListSeparator)+os.Getenv("PATH"))
	if !strings.HasPrefix(out, "latch ") {
		t.Errorf("latch version printed %q", out)
	}
	if _, err := os.Stat(filepath.Join(gobin, "latch")); err != nil {
		t.Errorf("go install left no latch in GOBIN: %v", err)
	}
}

// TestInstallRunFromSource runs "go run ./cmd/latch serve" as docs/install.md
// says, with its listeners moved to free ports by the environment (so that
// it does not meet other tests on the default ports): it becomes ready and
// stops on SIGINT, as Ctrl-C stops it.
func TestInstallRunFromSource(t *testing.T) {
	if testing.Short() {
		t.Skip("builds latch")
	}
	ports := freePorts(t, 5)
	runUntilReady(t, "../..", installBlock(t, "source-run"), ports[4],
		"LATCH_MEMCACHE_ADDR="+ports[0], "LATCH_REDIS_ADDR="+ports[1], "LATCH_DLOCK_ADDR="+ports[2],
		"LATCH_ZOOKEEPER_ADDR="+ports[3], "LATCH_ADMIN_ADDR="+ports[4])
}
