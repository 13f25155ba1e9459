package memcache_test

import (
	"bufio"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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
		if out := run(t, "", "/usr/bin/memcstat", servers); !strings.Contains(out, "version: 1.6.0") {
			t.Errorf("memcstat says:\n%s\nwant version: 1.6.0", out)
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
		if out := run(t, dir, "node", "version.js", addr); strings.TrimSpace(out) != "version 1.6.0 major 1 minor 6 bugfix 0" {
			t.Errorf("npm memcached's version() says %q", out)
		}
	})
}

// TestVersionExtraTokens checks, against the real peers, that latch
// answers "version" and quits on "quit" whatever tokens follow, as yrmcds
// 1.1.9 and memcached 1.6 do (memcached 1.5 answered ERROR; memccapable
// expects either by the version announced, and latch announces 1.6.0).
// Each request runs on a fresh connection.
func TestVersionExtraTokens(t *testing.T) {
	const (
		version = "VERSION "  // a VERSION reply, whatever the version
		closed  = closedReply // the server closed the connection
	)
	servers := []struct {
		name string
		addr string
		// want maps each request to the reply's start (or closed).
		want map[string]string
	}{
		{"yrmcds", latchtest.StartYrmcds(t), map[string]string{
			"version foo bar": version,
			"version noreply": version,
			"quit foo bar":    closed,
		}},
		{"memcached", latchtest.StartMemcached(t), map[string]string{
			"version foo bar": version,
			"version noreply": version,
			"quit foo bar":    closed,
		}},
		{"latch", latchtest.StartLatch(t), map[string]string{
			"version foo bar": version,
			"version noreply": version,
			"quit foo bar":    closed,
		}},
	}
	for _, s := range servers {
		for _, req := range slices.Sorted(maps.Keys(s.want)) {
			got, err := firstReply(s.addr, req+"\r\n")
			if err != nil {
				t.Errorf("%s: %q: %v", s.name, req, err)
				continue
			}
			if want := s.want[req]; !strings.HasPrefix(got, want) {
				t.Errorf("%s: %q answers %q, want %q", s.name, req, got, want)
			}
		}
	}
}

// closedReply is firstReply's answer when the server closes the connection.
const closedReply = "<closed>"

// firstReply sends req on a new connection to addr and returns the first
// reply line with its CRLF, or closedReply when the server closes the
// connection without one.
func firstReply(addr, req string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err == io.EOF && line == "" {
		return closedReply, nil
	}
	return line, err
}
