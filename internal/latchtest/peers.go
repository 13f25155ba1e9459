package latchtest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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
	port, repl := FreePort(t), FreePort(t)
	conf := fmt.Sprintf(`virtual_ip = "127.0.0.1"
port = %d
repl_port = %d
temp_dir = "%s"
log.threshold = error
log.file = "%s"
workers = 2
gc_interval = 1
`, port, repl, dir, filepath.Join(dir, "yrmcds.log"))
	path := filepath.Join(dir, "yrmcds.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	start(t, "yrmcds", addr, exec.Command(YrmcdsPath, "-f", path))
	return addr
}

// StartMemcached starts Debian's memcached with two worker threads on a free
// loopback port and returns its address. It is stopped when the test ends.
func StartMemcached(t testing.TB) string {
	t.Helper()
	need(t, MemcachedPath, "memcached")
	port := FreePort(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	args := []string{"-l", "127.0.0.1", "-p", strconv.Itoa(port), "-U", "0", "-t", "2", "-m", "1024"}
	if os.Geteuid() == 0 {
		args = append(args, "-u", "root")
	}
	start(t, "memcached", addr, exec.Command(MemcachedPath, args...))
	return addr
}

// start runs cmd and waits until addr accepts connections.
func start(t testing.TB, name, addr string, cmd *exec.Cmd) {
	t.Helper()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("latchtest: starting %s: %v", name, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		select {
		case err := <-exited:
			t.Fatalf("latchtest: %s exited before serving on %s: %v\n%s", name, addr, err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("latchtest: %s does not serve on %s: %v\n%s", name, addr, err, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
