//go:build unix

package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestBinary builds the latch binary and runs it as a user would.
func TestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	gocmd, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to build latch with: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "latch")
	build := exec.Command(gocmd, "build", "-o", bin, "-ldflags=-X main.version=v0.0.0-e2e", ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	t.Run("version", func(t *testing.T) {
		out, err := exec.Command(bin, "version").Output()
		if err != nil {
			t.Fatalf("latch version: %v", err)
		}
		if !strings.HasPrefix(string(out), "latch v0.0.0-e2e go") {
			t.Errorf("latch version printed %q, want \"latch v0.0.0-e2e go...\"", out)
		}
	})

	t.Run("unknown command", func(t *testing.T) {
		cmd := exec.Command(bin, "frobnicate")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 {
			t.Fatalf("latch frobnicate: %v, want exit status 2", err)
		}
		if !strings.Contains(stderr.String(), "Usage:") {
			t.Errorf("stderr = %q, want the usage", stderr.String())
		}
	})

	t.Run("serve", func(t *testing.T) {
		testServe(t, bin, syscall.SIGTERM)
	})
	t.Run("serve SIGINT", func(t *testing.T) {
		testServe(t, bin, syscall.SIGINT)
	})
}

// testServe runs "latch serve", waits until it logs that it is serving,
// sends it sig and checks that it shuts down cleanly.
func testServe(t *testing.T, bin string, sig syscall.Signal) {
	cmd := exec.Command(bin, "serve", "--shutdown-timeout=20s", "--memcache-addr=127.0.0.1:0", "--dlock-addr=127.0.0.1:0", "--redis-addr=", "--zookeeper-addr=", "--admin-addr=127.0.0.1:0")
	cmd.Env = append(cleanEnv(), "LATCH_LOG_FORMAT=json", "LATCH_LOG_LEVEL=debug")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	lines := make(chan logLine, 100)
	go func() {
		readLog(t, stderr, lines)
		// Wait only after stderr is read to its end, as StderrPipe asks.
		exited <- cmd.Wait()
	}()
	waited := false
	t.Cleanup(func() {
		// On failure, kill the server; either way, let the reader finish
		// before the test ends.
		if !waited {
			cmd.Process.Kill()
		}
		for range lines {
		}
		if !waited {
			<-exited
		}
	})

	const timeout = 30 * time.Second
	deadline := time.After(timeout)
	waitFor := func(msg string) logLine {
		t.Helper()
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("latch serve ended its log before %q", msg)
				}
				if l.Level == "ERROR" {
					t.Errorf("error logged: %s", l.raw)
				}
				if l.Msg == msg {
					return l
				}
			case <-deadline:
				t.Fatalf("latch serve did not log %q within %v", msg, timeout)
			}
		}
	}

	admin := waitFor("admin: listening")
	waitFor("serving")
	// latch status reads the server over its admin API.
	if out, err := exec.Command(bin, "status", "--admin-addr", admin.Addr).CombinedOutput(); err != nil || !strings.Contains(string(out), "SESSIONS: 0") {
		t.Errorf("latch status --admin-addr %s: %v\n%s", admin.Addr, err, out)
	}
	// SIGHUP, whose default action ends a process, reloads: with the
	// same flags and environment, nothing changes, and the server goes
	// on.
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor("reload: nothing changed")
	if out, err := exec.Command(bin, "status", "--admin-addr", admin.Addr).CombinedOutput(); err != nil {
		t.Errorf("latch status after SIGHUP: %v\n%s", err, out)
	}
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	l := waitFor("shutting down")
	if l.Signal != sig.String() {
		t.Errorf("shutting down on signal %q, want %q", l.Signal, sig.String())
	}
	waitFor("shut down cleanly")

	select {
	case err := <-exited:
		waited = true
		if err != nil {
			t.Fatalf("latch serve exited with %v, want exit status 0", err)
		}
	case <-time.After(timeout):
		t.Fatalf("latch serve did not exit within %v of its last log line", timeout)
	}
}

// logLine is one line of latch's JSON log.
type logLine struct {
	Level  string `json:"level"`
	Msg    string `json:"msg"`
	Signal string `json:"signal"`
	Addr   string `json:"addr"`
	raw    string
}

// readLog sends every line of r to lines, parsed, and closes lines at EOF.
func readLog(t *testing.T, r io.Reader, lines chan<- logLine) {
	defer close(lines)
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		var l logLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Errorf("log line is not JSON: %q", sc.Text())
			continue
		}
		l.raw = sc.Text()
		lines <- l
	}
}

// cleanEnv returns the test's environment without LATCH_* variables, so
// that the user's settings do not leak into the server under test, and
// without NOTIFY_SOCKET, so that a test run by systemd does not speak for
// the servers it starts.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LATCH_") && !strings.HasPrefix(kv, "NOTIFY_SOCKET=") {
			env = append(env, kv)
		}
	}
	return env
}
