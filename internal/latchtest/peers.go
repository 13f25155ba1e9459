package latchtest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Paths of the peers' binaries, as Debian installs them.
const (
	YrmcdsPath    = "/usr/sbin/yrmcdsd"
	MemcachedPath = "/usr/bin/memcached"
)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("latchtest: finding a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// need fails the test when a peer's binary is missing.
func need(t testing.TB, path, pkg string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("latchtest: %s is missing (Debian package %s; `make test` installs it): %v", path, pkg, err)
	}
}

// StartYrmcds starts Debian's yrmcds as a master on a free loopback port
// with its compiled-in defaults (1 MiB max_data_size) and returns its
// memcache address. It is stopped when the test ends.
func StartYrmcds(t testing.TB) string {
	t.Helper()
	need(t, YrmcdsPath, "yrmcds")
	dir := t.TempDir()
	return launch(t, "yrmcds", func(attempt int) (string, *exec.Cmd) {
		port, repl := FreePort(t), FreePort(t)
		conf := fmt.Sprintf(`virtual_ip = "127.0.0.1"
port = %d
repl_port = %d
temp_dir = "%s"
log.threshold = error
log.file = "%s"
workers = 2
gc_interval = 1
`, port, repl, dir, filepath.Join(dir, fmt.Sprintf("yrmcds-%d.log", attempt)))
		path := filepath.Join(dir, fmt.Sprintf("yrmcds-%d.conf", attempt))
		if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		return addr, exec.Command(YrmcdsPath, "-f", path)
	})
}

// StartMemcached starts Debian's memcached with two worker threads on a free
// loopback port and returns its address. It is stopped when the test ends.
func StartMemcached(t testing.TB) string {
	t.Helper()
	need(t, MemcachedPath, "memcached")
	return launch(t, "memcached", func(int) (string, *exec.Cmd) {
		port := FreePort(t)
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		args := []string{"-l", "127.0.0.1", "-p", strconv.Itoa(port), "-U", "0", "-t", "2", "-m", "1024"}
		if os.Geteuid() == 0 {
			args = append(args, "-u", "root")
		}
		return addr, exec.Command(MemcachedPath, args...)
	})
}

// launchAttempts bounds the attempts to start a peer: a port FreePort
// found free may be taken by the time the peer binds it (by another test's
// server or peer), and the peer then exits; it is started again on other
// ports.
const launchAttempts = 5

// launch starts the peer that newCmd describes (its address and command,
// for the given attempt) and waits until it serves. It returns the
// address once the server there answers "stats" with the peer's own pid:
// a connection that succeeds may reach another process that took the
// port. The peer is killed when the test ends.
func launch(t testing.TB, name string, newCmd func(attempt int) (string, *exec.Cmd)) string {
	t.Helper()
	return launchProbe(t, name, 10*time.Second, func(addr string, pid int) error {
		got, err := peerPID(addr)
		if err == nil && got != pid {
			err = fmt.Errorf("pid %d answers, not %d", got, pid)
		}
		return err
	}, newCmd)
}

// launchProbe is launch with the test that the peer serves, for a peer
// that speaks no memcached protocol: serves returns nil once the process
// with that pid serves at addr, and launchProbe waits up to wait for it
// after each start.
func launchProbe(t testing.TB, name string, wait time.Duration, serves func(addr string, pid int) error, newCmd func(attempt int) (string, *exec.Cmd)) string {
	t.Helper()
	var outs []string
	for attempt := 1; attempt <= launchAttempts; attempt++ {
		addr, cmd := newCmd(attempt)
		var out SyncBuffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatalf("latchtest: starting %s: %v", name, err)
		}
		exited := make(chan struct{})
		var waitErr error
		go func() {
			waitErr = cmd.Wait()
			close(exited)
		}()
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			<-exited
		})
		deadline := time.Now().Add(wait)
		for {
			err := serves(addr, cmd.Process.Pid)
			if err == nil {
				return addr
			}
			select {
			case <-exited:
				// Most likely a port was taken: try others.
				outs = append(outs, fmt.Sprintf("attempt %d on %s: %v\n%s", attempt, addr, waitErr, out.String()))
			default:
				if time.Now().After(deadline) {
					t.Fatalf("latchtest: %s does not serve on %s within %v (last: %v)\n%s", name, addr, wait, err, out.String())
				}
				time.Sleep(20 * time.Millisecond)
				continue
			}
			break
		}
	}
	t.Fatalf("latchtest: %s exited before serving, %d times:\n%s", name, launchAttempts, strings.Join(outs, "\n"))
	return ""
}

// peerPID asks the memcached-protocol server at addr for its pid (the
// "pid" line of "stats").
func peerPID(addr string) (int, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(2 * time.Second)); err != nil {
		return 0, err
	}
	if _, err := c.Write([]byte("stats\r\n")); err != nil {
		return 0, err
	}
	r := bufio.NewReader(c)
	pid := 0
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return 0, err
		}
		line = strings.TrimRight(line, "\r\n")
		if v, ok := strings.CutPrefix(line, "STAT pid "); ok {
			pid, _ = strconv.Atoi(v)
		}
		if line == "END" {
			return pid, nil
		}
		if !strings.HasPrefix(line, "STAT ") {
			return 0, fmt.Errorf("unexpected reply to stats: %q", line)
		}
	}
}
