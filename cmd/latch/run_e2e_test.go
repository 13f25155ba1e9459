//go:build unix

package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestRunBinary runs "latch run" as users do: real latch processes, a real
// server, real commands.
func TestRunBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildLatch(t)
	addr := startServe(t, bin).addr

	t.Run("exit status and environment", func(t *testing.T) {
		dir := t.TempDir()
		r := latchRun(t, bin, dir, "--addr", addr, "k1", "k2", "--", "sh", "-c", `echo "$LATCH_TOKEN $LATCH_KEYS" > out; exit 7`)
		if code := r.wait(t); code != 7 {
			t.Fatalf("exit code = %d, want the command's 7 (stderr %q)", code, r.stderr())
		}
		out := readFile(t, filepath.Join(dir, "out"))
		if !regexp.MustCompile(`^[1-9][0-9]* k1 k2\n$`).MatchString(out) {
			t.Errorf("the command saw LATCH_TOKEN LATCH_KEYS = %q, want a token and \"k1 k2\"", out)
		}
	})

	t.Run("killed by a signal", func(t *testing.T) {
		r := latchRun(t, bin, t.TempDir(), "--addr", addr, "k", "--", "sh", "-c", "kill -KILL $$")
		if code := r.wait(t); code != 128+9 {
			t.Fatalf("exit code = %d, want 137", code)
		}
	})

	t.Run("never overlap", func(t *testing.T) {
		dir := t.TempDir()
		const procs = 8
		var runs []*proc
		for range procs {
			runs = append(runs, latchRun(t, bin, dir, "--addr", addr, "shared-file", "--", "sh", "-c",
				`echo "start $$" >> log; sleep 0.02; echo "end $$" >> log`))
		}
		for _, r := range runs {
			if code := r.wait(t); code != 0 {
				t.Fatalf("exit code = %d (stderr %q)", code, r.stderr())
			}
		}
		lines := strings.Fields(strings.ReplaceAll(readFile(t, filepath.Join(dir, "log")), "\n", " "))
		if len(lines) != 4*procs {
			t.Fatalf("log has %d words, want %d: %q", len(lines), 4*procs, lines)
		}
		for i := 0; i < len(lines); i += 4 {
			if lines[i] != "start" || lines[i+2] != "end" || lines[i+1] != lines[i+3] {
				t.Fatalf("log interleaves at line %d: %q", i/2, lines)
			}
		}
	})

	t.Run("busy", func(t *testing.T) {
		dir := t.TempDir()
		holder := latchRun(t, bin, dir, "--addr", addr, "busy", "--", "sh", "-c", `touch held; while [ ! -e release ]; do sleep 0.01; done`)
		waitFile(t, filepath.Join(dir, "held"))
		tests := []struct {
			args []string
			want int
		}{
			{[]string{"-n"}, 1},
			{[]string{"-n", "-E", "75"}, 75},
			{[]string{"-w", "50ms"}, 1},
			{[]string{"-w", "0.05", "-E", "3"}, 3},
			{[]string{"-w", "0"}, 1},
			{[]string{"-s", "-n"}, 1},
		}
		for _, tt := range tests {
			args := append(append([]string{"--addr", addr}, tt.args...), "busy", "--", "touch", "ran")
			r := latchRun(t, bin, dir, args...)
			if code := r.wait(t); code != tt.want {
				t.Errorf("latch run %q: exit code = %d, want %d (stderr %q)", tt.args, code, tt.want, r.stderr())
			}
		}
		if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
			t.Error("a command ran without the lock")
		}
		touch(t, filepath.Join(dir, "release"))
		if code := holder.wait(t); code != 0 {
			t.Fatalf("holder: exit code = %d", code)
		}
	})

	t.Run("shared", func(t *testing.T) {
		dir := t.TempDir()
		// Each reader waits until both hold the lock, so they must share it.
		var readers []*proc
		for i := range 2 {
			readers = append(readers, latchRun(t, bin, dir, "--addr", addr, "-s", "doc", "--", "sh", "-c",
				fmt.Sprintf(`touch r%d; while [ ! -e r0 ] || [ ! -e r1 ] || [ ! -e go ]; do sleep 0.01; done; echo reader >> log`, i)))
		}
		waitFile(t, filepath.Join(dir, "r0"))
		waitFile(t, filepath.Join(dir, "r1"))
		if code := latchRun(t, bin, dir, "--addr", addr, "-n", "doc", "--", "touch", "ran").wait(t); code != 1 {
			t.Errorf("writer -n beside readers: exit code = %d, want 1", code)
		}
		// A waiting writer runs only once both readers are done.
		writer := latchRun(t, bin, dir, "--addr", addr, "-v", "doc", "--", "sh", "-c", "echo writer >> log")
		waitLine(t, writer, "waiting for the lock")
		touch(t, filepath.Join(dir, "go"))
		for _, r := range append(readers, writer) {
			if code := r.wait(t); code != 0 {
				t.Fatalf("exit code = %d (stderr %q)", code, r.stderr())
			}
		}
		if got := readFile(t, filepath.Join(dir, "log")); got != "reader\nreader\nwriter\n" {
			t.Errorf("log = %q, want both readers before the writer", got)
		}
	})

	t.Run("signal forwarded", func(t *testing.T) {
		dir := t.TempDir()
		r := latchRun(t, bin, dir, "--addr", addr, "sig", "--", "sh", "-c",
			`trap 'echo got TERM > out; exit 42' TERM; touch ready; while :; do sleep 0.01; done`)
		waitFile(t, filepath.Join(dir, "ready"))
		r.cmd.Process.Signal(syscall.SIGTERM)
		if code := r.wait(t); code != 42 {
			t.Fatalf("exit code = %d, want the command's 42 (stderr %q)", code, r.stderr())
		}
		if got := readFile(t, filepath.Join(dir, "out")); got != "got TERM\n" {
			t.Errorf("the command wrote %q", got)
		}
	})

	t.Run("interrupted while waiting", func(t *testing.T) {
		dir := t.TempDir()
		holder := latchRun(t, bin, dir, "--addr", addr, "int", "--", "sh", "-c", `touch held; while [ ! -e release ]; do sleep 0.01; done`)
		waitFile(t, filepath.Join(dir, "held"))
		waiter := latchRun(t, bin, dir, "--addr", addr, "-v", "int", "--", "touch", "ran")
		waitLine(t, waiter, "waiting for the lock")
		waiter.cmd.Process.Signal(syscall.SIGINT)
		if code := waiter.wait(t); code != 130 {
			t.Errorf("exit code = %d, want 130 (stderr %q)", code, waiter.stderr())
		}
		touch(t, filepath.Join(dir, "release"))
		holder.wait(t)
		if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
			t.Error("the interrupted waiter ran its command")
		}
	})

	t.Run("server killed", func(t *testing.T) {
		srv := startServe(t, bin)
		dir := t.TempDir()
		r := latchRun(t, bin, dir, "--addr", srv.addr, "k", "--", "sh", "-c",
			`echo $$ > pid; touch held; while :; do sleep 0.01; done; echo never > out`)
		waitFile(t, filepath.Join(dir, "held"))
		srv.cmd.Process.Kill()
		if code := r.wait(t); code != 125 {
			t.Fatalf("exit code = %d, want 125", code)
		}
		if !strings.Contains(r.stderr(), "lock lost") {
			t.Errorf("stderr = %q, want it to say the lock was lost", r.stderr())
		}
		checkGone(t, dir)
	})

	// A stopped server answers nothing but keeps the connection: a
	// partition. The command is killed, with SIGKILL since it ignores
	// SIGTERM.
	t.Run("server unresponsive", func(t *testing.T) {
		srv := startServe(t, bin)
		dir := t.TempDir()
		r := latchRun(t, bin, dir, "--addr", srv.addr, "--session-ttl", "1s", "k", "--", "sh", "-c",
			`trap '' TERM; echo $$ > pid; touch held; while :; do sleep 0.01; done`)
		waitFile(t, filepath.Join(dir, "held"))
		srv.cmd.Process.Signal(syscall.SIGSTOP)
		defer srv.cmd.Process.Signal(syscall.SIGCONT)
		if code := r.wait(t); code != 125 {
			t.Fatalf("exit code = %d, want 125", code)
		}
		if !strings.Contains(r.stderr(), "keepalive not answered in time") {
			t.Errorf("stderr = %q, want it to say the keepalives went unanswered", r.stderr())
		}
		checkGone(t, dir)
	})
}

// buildLatch builds the latch binary into a temporary directory.
func buildLatch(t *testing.T) string {
	t.Helper()
	gocmd, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to build latch with: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "latch")
	if out, err := exec.Command(gocmd, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// serveProc is a running "latch serve".
type serveProc struct {
	cmd  *exec.Cmd
	addr string // of its dlock listener
}

// startServe starts "latch serve" with its dlock listener on a free port,
// found in its log, and stops it when the test ends.
func startServe(t *testing.T, bin string) *serveProc {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--dlock-addr=127.0.0.1:0", "--memcache-addr=", "--redis-addr=", "--zookeeper-addr=", "--admin-addr=", "--log-format=json")
	cmd.Env = cleanEnv()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addrc := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var l struct{ Msg, Component, Addr string }
			if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "listening" && l.Component == "dlock" {
				addrc <- l.Addr
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Kill()
		<-done
		cmd.Wait()
	})
	select {
	case addr := <-addrc:
		return &serveProc{cmd: cmd, addr: addr}
	case <-done:
		t.Fatal("latch serve ended without logging its dlock address")
	case <-time.After(30 * time.Second):
		t.Fatal("latch serve did not log its dlock address")
	}
	return nil
}

// proc is a running "latch run".
type proc struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	errBuf strings.Builder
	lines  chan string // stderr, line by line
	exited chan struct{}
	code   int
}

// latchRun starts "latch run args..." in dir.
func latchRun(t *testing.T, bin, dir string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"run"}, args...)...)
	cmd.Dir = dir
	cmd.Env = cleanEnv()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, lines: make(chan string, 100), exited: make(chan struct{})}
	go func() {
		defer close(p.exited)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.mu.Lock()
			p.errBuf.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
		err := cmd.Wait()
		var exit *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &exit):
			p.code = exit.ExitCode()
		default:
			p.code = -1
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.exited
	})
	return p
}

// wait waits for latch run to exit and returns its exit code.
func (p *proc) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-p.exited:
		return p.code
	case <-time.After(60 * time.Second):
		t.Fatalf("latch run did not exit; stderr %q", p.stderr())
		return 0
	}
}

func (p *proc) stderr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.errBuf.String()
}

// waitLine waits until latch run logs a line containing s.
func waitLine(t *testing.T, p *proc, s string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case l := <-p.lines:
			if strings.Contains(l, s) {
				return
			}
		case <-p.exited:
			t.Fatalf("latch run exited before logging %q; stderr %q", s, p.stderr())
		case <-deadline:
			t.Fatalf("latch run did not log %q; stderr %q", s, p.stderr())
		}
	}
}

// waitFile waits until path exists.
func waitFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", path)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// checkGone checks that the command whose pid is in dir/pid has exited.
func checkGone(t *testing.T, dir string) {
	t.Helper()
	pid, err := strconv.Atoi(strings.TrimSpace(readFile(t, filepath.Join(dir, "pid"))))
	if err != nil {
		t.Fatal(err)
	}
	// latch run reaped its command before exiting: the pid is gone (or
	// reused, which a test cannot tell from here, and is unlikely).
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the command (pid %d) still runs after latch run exited: kill(0) = %v", pid, err)
	}
}
