//go:build linux

package main

import (
	"flag"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/latchd/latch/internal/config"
)

// The files of contrib/: the systemd unit, its sysusers.d and tmpfiles.d
// files, and the default configuration the unit names.
const (
	unitFile     = "../../contrib/systemd/latch.service"
	sysusersFile = "../../contrib/systemd/latch.sysusers"
	tmpfilesFile = "../../contrib/systemd/latch.tmpfiles"
	contribTOML  = "../../contrib/latch.toml"

	unitExecStart = "ExecStart=/usr/bin/latch serve --config /etc/latch/latch.toml"
	// maxExposure is the highest "systemd-analyze security" exposure the
	// unit may have (Debian's redis-server unit has 1.2).
	maxExposure = 2.0
)

// systemdTool returns the path of a systemd tool, failing the test when it
// is not installed (make deps installs Debian's systemd package).
func systemdTool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is not installed (Debian package systemd; make deps installs it): %v", name, err)
	}
	return path
}

// builtUnit writes the unit into a directory of its own with ExecStart's
// /usr/bin/latch replaced by the binary built for the tests, which
// systemd-analyze verify needs to exist; the rest is the file as shipped.
func builtUnit(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	unit := string(b)
	if strings.Count(unit, unitExecStart+"\n") != 1 {
		t.Fatalf("%s: want one line %q", unitFile, unitExecStart)
	}
	bin, err := builtLatch()
	if err != nil {
		t.Fatal(err)
	}
	unit = strings.Replace(unit, "ExecStart=/usr/bin/latch ", "ExecStart="+bin+" ", 1)
	path := filepath.Join(t.TempDir(), "latch.service")
	if err := os.WriteFile(path, []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestSystemdUnit checks contrib/systemd/latch.service with systemd's own
// tools: "systemd-analyze verify" finds nothing to say, and "systemd-analyze
// security --offline=true" gives it an exposure of maxExposure or better.
func TestSystemdUnit(t *testing.T) {
	analyze := systemdTool(t, "systemd-analyze")
	unit := builtUnit(t)

	// verify exits 0 on a setting it ignores (a misspelt value, an unknown
	// key) but says so: anything it says fails the test.
	out, err := exec.Command(analyze, "verify", "--man=no", unit).CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}

	out, err = exec.Command(analyze, "security", "--offline=true", "--no-pager", unit).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze security: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	last := lines[len(lines)-1]
	m := regexp.MustCompile(`Overall exposure level for latch\.service: (\d+\.\d+)`).FindStringSubmatch(last)
	if m == nil {
		t.Fatalf("systemd-analyze security: no exposure level in its last line %q\n%s", last, out)
	}
	exposure, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("systemd-analyze security: exposure %.1f", exposure)
	if exposure > maxExposure {
		t.Errorf("exposure %.1f, want %.1f or better:\n%s", exposure, maxExposure, out)
	}
}

// TestSystemdUsersAndDirs applies latch.sysusers and latch.tmpfiles to an
// empty root, as a package's install does to /: they make the latch user
// and group, and /var/lib/latch owned by them, mode 0750.
func TestSystemdUsersAndDirs(t *testing.T) {
	sysusers := systemdTool(t, "systemd-sysusers")
	tmpfiles := systemdTool(t, "systemd-tmpfiles")
	if os.Geteuid() != 0 {
		t.Fatal("systemd-tmpfiles --create needs root to chown /var/lib/latch")
	}
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ tool, file string }{
		{sysusers, sysusersFile},
		{tmpfiles, tmpfilesFile},
	} {
		abs, err := filepath.Abs(c.file)
		if err != nil {
			t.Fatal(err)
		}
		args := []string{"--root=" + root, abs}
		if c.tool == tmpfiles {
			args = append([]string{"--create"}, args...)
		}
		if out, err := exec.Command(c.tool, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v\n%s", filepath.Base(c.tool), strings.Join(args, " "), err, out)
		}
	}
	passwd, err := os.ReadFile(filepath.Join(root, "etc/passwd"))
	if err != nil {
		t.Fatal(err)
	}
	var uid, gid int
	found := false
	for _, l := range strings.Split(string(passwd), "\n") {
		f := strings.Split(l, ":")
		if len(f) == 7 && f[0] == "latch" {
			found = true
			uid, _ = strconv.Atoi(f[2])
			gid, _ = strconv.Atoi(f[3])
			if f[5] != "/var/lib/latch" || !strings.HasSuffix(f[6], "nologin") {
				t.Errorf("latch's passwd line %q: want home /var/lib/latch and no login shell", l)
			}
		}
	}
	if !found || uid == 0 {
		t.Fatalf("no system user latch in:\n%s", passwd)
	}
	fi, err := os.Stat(filepath.Join(root, "var/lib/latch"))
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || fi.Mode().Perm() != 0o750 || int(st.Uid) != uid || int(st.Gid) != gid {
		t.Errorf("/var/lib/latch: %v owned by %d:%d, want a directory 0750 owned by latch (%d:%d)", fi.Mode(), st.Uid, st.Gid, uid, gid)
	}
}

// TestContribConfig loads contrib/latch.toml as "latch serve --config"
// does: every front end at its default address on localhost, the data
// dir /var/lib/latch; "latch config check" finds nothing wrong in it; and
// "latch serve --config" serves with it (with the addresses and data dir
// of the test, which flags override).
func TestContribConfig(t *testing.T) {
	load := func(args ...string) config.Config {
		t.Helper()
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		cfg, err := config.Load(fs, args, nil)
		if err != nil {
			t.Fatalf("config.Load(%q): %v", args, err)
		}
		return cfg
	}
	def := load()
	cfg := load("--config", contribTOML)
	for _, c := range []struct{ name, got, want string }{
		{"memcache.addr", cfg.Memcache.Addr, def.Memcache.Addr},
		{"redis.addr", cfg.Redis.Addr, def.Redis.Addr},
		{"dlock.addr", cfg.DLock.Addr, def.DLock.Addr},
		{"zookeeper.addr", cfg.ZooKeeper.Addr, def.ZooKeeper.Addr},
		{"admin.addr", cfg.Admin.Addr, def.Admin.Addr},
		{"cluster.data-dir", cfg.Cluster.DataDir, "/var/lib/latch"},
	} {
		if c.got != c.want {
			t.Errorf("%s: %s = %q, want %q", contribTOML, c.name, c.got, c.want)
		}
		if strings.HasSuffix(c.name, ".addr") && !strings.HasPrefix(c.got, "127.0.0.1:") {
			t.Errorf("%s: %s = %q, not on localhost", contribTOML, c.name, c.got)
		}
	}

	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin, err := builtLatch()
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "config", "check", contribTOML).CombinedOutput(); err != nil {
		t.Errorf("latch config check %s: %v\n%s", contribTOML, err, out)
	}
	p := newProc(t, "contrib", "--config", contribTOML, "--data-dir", t.TempDir())
	p.start()
	for range 200 {
		if readyz(t, p) == http.StatusOK {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("latch serve --config %s: /readyz not 200 in 10 s; log: %s", contribTOML, p.logText())
}
