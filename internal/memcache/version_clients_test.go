package memcache_test

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/internal/latchtest"
)

// TestVersionClients: clients that parse the server's version work with
// latch's: libmemcached's memcping, memcstat and memcdump (Debian's
// libmemcached-tools), which failed with "strtol() failed to parse major
// version", and npm's memcached 2.2.2, whose version() threw inside its
// socket handler and killed node (installed into testdata/npm by make
// deps).
func TestVersionClients(t *testing.T) {
	addr := latchtest.StartLatch(t)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 8)
	if _, err := c.Write([]byte("set dumped 0 0 1\r\nx\r\n")); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Read(buf); err != nil || string(buf[:n]) != "STORED\r\n" {
		t.Fatalf("set: %q, %v", buf[:n], err)
	}
	c.Close()
	run := func(t *testing.T, dir, name string, args ...string) string {
		t.Helper()
		if _, err := exec.LookPath(name); err != nil {
			t.Fatalf("%s is missing (`make test` installs it): %v", name, err)
		}
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		cmd.WaitDelay = 10 * time.Second
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	servers := "--servers=" + addr
	t.Run("memcping", func(t *testing.T) { run(t, "", "/usr/bin/memcping", servers) })
	t.Run("memcstat", func(t *testing.T) {
		if out := run(t, "", "/usr/bin/memcstat", servers); !strings.Contains(out, "version: 1.5.3") {
			t.Errorf("memcstat says:\n%s\nwant version: 1.5.3", out)
		}
	})
	t.Run("memcdump", func(t *testing.T) {
		if out := run(t, "", "/usr/bin/memcdump", servers); strings.TrimSpace(out) != "dumped" {
			t.Errorf("memcdump says %q, want the one key, dumped", out)
		}
	})
	t.Run("npm memcached", func(t *testing.T) {
		dir := filepath.Join("testdata", "npm")
		if _, err := os.Stat(filepath.Join(dir, "node_modules", "memcached")); err != nil {
			t.Fatalf("npm memcached is not installed in %s (`make deps` installs it): %v", dir, err)
		}
		if out := run(t, dir, "node", "version.js", addr); strings.TrimSpace(out) != "version 1.5.3 major 1 minor 5 bugfix 3" {
			t.Errorf("npm memcached's version() says %q", out)
		}
	})
}
