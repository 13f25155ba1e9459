//go:build linux

package main

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// copyDir copies the files of dir (not its subdirectories) into a new
// temporary directory.
func copyDir(t *testing.T, dir string) string {
	t.Helper()
	dst := t.TempDir()
	for _, name := range dirFiles(t, dir) {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// TestInstallFromRelease runs the "From a release archive" commands of
// docs/install.md on make release's output, as a user who downloaded all
// of it (and saved the key it was signed with as latch.pub) does, with
// VERSION the version in the files' names: the signature and checksums
// verify, the archive unpacks, latch version says what was stamped, and
// ./latch serve becomes ready and stops on Ctrl-C.
func TestInstallFromRelease(t *testing.T) {
	b := release(t)
	dir := copyDir(t, b.dir)
	pub, err := os.ReadFile(b.pub)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "latch.pub"), pub, 0o644); err != nil {
		t.Fatal(err)
	}
	out := installShell(t, dir, installBlock(t, "release-verify"), "VERSION="+b.fileVersion)
	for _, want := range []string{
		"Signature and comment signature verified",
		"latch_" + b.fileVersion + "_linux_amd64.tar.gz: OK",
		"latch " + b.version + " ",
		"commit " + b.commit + " " + b.date,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the release-verify block printed no %q:\n%s", want, out)
		}
	}

	ports := freePorts(t, 5)
	runUntilReady(t, filepath.Join(dir, "latch_"+b.fileVersion+"_linux_amd64"), installBlock(t, "release-run"), ports[4],
		"LATCH_MEMCACHE_ADDR="+ports[0], "LATCH_REDIS_ADDR="+ports[1], "LATCH_DLOCK_ADDR="+ports[2],
		"LATCH_ZOOKEEPER_ADDR="+ports[3], "LATCH_ADMIN_ADDR="+ports[4])
}

// runUntilReady runs block in dir with env, a server that must answer 200
// on adminAddr's /readyz within three minutes (a block may build latch
// first), then stop cleanly on SIGINT as on Ctrl-C.
func runUntilReady(t *testing.T, dir, block, adminAddr string, env ...string) {
	t.Helper()
	cmd := exec.Command("sh", "-ec", block)
	cmd.Dir = dir
	cmd.Env = append(cleanEnv(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- cmd.Wait() }()
	defer func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		resp, err := http.Get("http://" + adminAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case err := <-stopped:
			t.Fatalf("%s exited before it was ready: %v\n%s", block, err, out.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: never ready\n%s", block, out.String())
		}
	}
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-stopped:
	case <-time.After(30 * time.Second):
		t.Fatalf("still running 30 s after Ctrl-C\n%s", out.String())
	}
	if !strings.Contains(out.String(), "shut down cleanly") {
		t.Errorf("no clean shutdown in its log:\n%s", out.String())
	}
}

// writeScript writes an executable shell script.
func writeScript(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("#!/bin/sh\nset -eu\n"+text), 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestInstallFromPackage runs the "From a deb or rpm package" commands of
// docs/install.md, with VERSION the version in the packages' names, on
// make release's packages, in throwaway roots rather than on this
// machine, which has no systemd running either. The commands run as
// written, with sudo, apt, dnf and systemctl standing for what they do
// on the user's machine:
//
//   - apt install installs the deb with dpkg --root, its maintainer
//     scripts included (dpkg runs them outside the root, with DPKG_ROOT
//     set, which they pass to systemd-sysusers and systemd-tmpfiles):
//     then the latch user, /var/lib/latch and the files are there,
//     systemd-analyze verify accepts the installed unit, and the
//     installed latch runs;
//   - systemctl enable --now latch enables the unit in that root
//     (systemctl --root) and starts what the installed unit starts, its
//     ExecStart with the root's paths, as its User, then waits until it
//     is ready, as systemctl does for a Type=notify service; latch status
//     then talks to it;
//   - dnf install installs the rpm with rpm --root, without its
//     scriptlets, which rpm would run chrooted into the root, where there
//     is no shell.
//
// Last, dpkg --purge removes the package and keeps /var/lib/latch.
func TestInstallFromPackage(t *testing.T) {
	b := release(t)
	for _, tool := range []string{"dpkg", "rpm", "systemctl", "systemd-analyze", "setpriv"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s: %v (make deps installs it)", tool, err)
		}
	}
	dir := copyDir(t, b.dir)

	// The root, a system with systemd (its targets and slices, and the
	// kill of the unit's ExecReload) but nothing installed in dpkg's
	// database. The latch user must reach its data dir inside.
	root := t.TempDir()
	for _, d := range []string{root, filepath.Dir(root)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"var/lib/dpkg/updates", "var/lib/dpkg/info", "etc", "bin", "usr/lib/systemd/system"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "var/lib/dpkg/status"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	units, err := filepath.Glob("/usr/lib/systemd/system/*.target")
	if err != nil {
		t.Fatal(err)
	}
	sliceUnits, err := filepath.Glob("/usr/lib/systemd/system/*.slice")
	if err != nil {
		t.Fatal(err)
	}
	kill, err := exec.LookPath("kill")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range append(append(units, sliceUnits...), kill) {
		dst, mode := filepath.Join(root, "usr/lib/systemd/system", filepath.Base(f)), os.FileMode(0o644)
		if f == kill {
			dst, mode = filepath.Join(root, "bin/kill"), 0o755
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, mode); err != nil {
			t.Fatal(err)
		}
	}
	rpmRoot := t.TempDir()

	// sudo, apt, dnf and systemctl as the comment above says.
	ports := freePorts(t, 5)
	bin := t.TempDir()
	writeScript(t, filepath.Join(bin, "sudo"), `exec "$@"`+"\n")
	writeScript(t, filepath.Join(bin, "apt"), `[ $# = 2 ] && [ "$1" = install ] || { echo "apt: want install ./FILE, got $*" >&2; exit 2; }
exec dpkg --root="$ROOT" --force-script-chrootless --force-depends -i "$2"
`)
	writeScript(t, filepath.Join(bin, "dnf"), `[ $# = 2 ] && [ "$1" = install ] || { echo "dnf: want install ./FILE, got $*" >&2; exit 2; }
rpm --root="$RPM_ROOT" --initdb
exec rpm --root="$RPM_ROOT" --force-debian --nodeps --noscripts --notriggers -i "$2"
`)
	writeScript(t, filepath.Join(bin, "systemctl"), `[ "$*" = "enable --now latch" ] || { echo "systemctl: want enable --now latch, got $*" >&2; exit 2; }
/usr/bin/systemctl --root="$ROOT" enable latch
unit="$ROOT/usr/lib/systemd/system/latch.service"
user=$(sed -n 's/^User=//p' "$unit")
uid=$(awk -F: -v u="$user" '$1 == u { print $3 }' "$ROOT/etc/passwd")
gid=$(awk -F: -v u="$user" '$1 == u { print $4 }' "$ROOT/etc/passwd")
start=$(sed -n 's/^ExecStart=//p' "$unit" | sed "s| /| $ROOT/|g; s|^/|$ROOT/|")
cd /
setpriv --reuid="$uid" --regid="$gid" --clear-groups -- $start --data-dir "$ROOT/var/lib/latch" >"$ROOT/latch.log" 2>&1 &
echo $! >"$ROOT/latch.pid"
for i in $(seq 100); do
	"$ROOT/usr/bin/latch" status >/dev/null 2>&1 && exit 0
	sleep 0.1
done
echo "systemctl: latch not ready in 10 s" >&2
cat "$ROOT/latch.log" >&2
exit 1
`)
	env := []string{
		"PATH=" + bin + ":" + filepath.Join(root, "usr/bin") + ":" + os.Getenv("PATH"),
		"ROOT=" + root, "RPM_ROOT=" + rpmRoot, "VERSION=" + b.pkgVersion,
		"LATCH_MEMCACHE_ADDR=" + ports[0], "LATCH_REDIS_ADDR=" + ports[1], "LATCH_DLOCK_ADDR=" + ports[2],
		"LATCH_ZOOKEEPER_ADDR=" + ports[3], "LATCH_ADMIN_ADDR=" + ports[4],
	}
	t.Cleanup(func() {
		if pid, err := os.ReadFile(filepath.Join(root, "latch.pid")); err == nil {
			if n, err := strconv.Atoi(strings.TrimSpace(string(pid))); err == nil {
				_ = syscall.Kill(n, syscall.SIGKILL)
			}
		}
	})

	installShell(t, dir, installBlock(t, "deb-install"), env...)
	passwd, err := os.ReadFile(filepath.Join(root, "etc/passwd"))
	if err != nil {
		t.Fatal(err)
	}
	var uid, gid int
	for _, l := range strings.Split(string(passwd), "\n") {
		if f := strings.Split(l, ":"); len(f) == 7 && f[0] == "latch" {
			uid, _ = strconv.Atoi(f[2])
			gid, _ = strconv.Atoi(f[3])
		}
	}
	if uid == 0 {
		t.Fatalf("the package's postinst made no latch user:\n%s", passwd)
	}
	fi, err := os.Stat(filepath.Join(root, "var/lib/latch"))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); fi.Mode().Perm() != 0o750 || int(st.Uid) != uid || int(st.Gid) != gid {
		t.Errorf("/var/lib/latch: %v %d:%d, want 0750 latch:latch (%d:%d)", fi.Mode(), st.Uid, st.Gid, uid, gid)
	}
	for _, f := range packageFiles {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Errorf("not installed: %v", err)
		}
	}
	if out, err := exec.Command("systemd-analyze", "verify", "--man=no", "--root="+root, "latch.service").CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify of the installed unit: %v\n%s", err, out)
	}
	checkVersion(t, filepath.Join(root, "usr/bin/latch"), b, "linux/amd64")

	out := installShell(t, dir, installBlock(t, "package-start"), env...)
	if !strings.Contains(out, "LOCKS: 0 keys") {
		t.Errorf("package-start printed no latch status:\n%s", out)
	}
	if target, err := os.Readlink(filepath.Join(root, "etc/systemd/system/multi-user.target.wants/latch.service")); err != nil || target != "/usr/lib/systemd/system/latch.service" {
		t.Errorf("systemctl enable latch: multi-user.target.wants/latch.service is %q (%v)", target, err)
	}
	ents, err := os.ReadDir(filepath.Join(root, "var/lib/latch"))
	if err != nil || len(ents) == 0 {
		t.Errorf("latch, run as the unit runs it, wrote nothing in /var/lib/latch (%v)", err)
	}

	installShell(t, dir, installBlock(t, "rpm-install"), env...)
	for _, f := range packageFiles {
		if _, err := os.Stat(filepath.Join(rpmRoot, f)); err != nil {
			t.Errorf("not installed by the rpm: %v", err)
		}
	}
	checkVersion(t, filepath.Join(rpmRoot, "usr/bin/latch"), b, "linux/amd64")

	// Removal: stop latch first (what prerm does under systemd).
	if pid, err := os.ReadFile(filepath.Join(root, "latch.pid")); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(pid))); err == nil {
			_ = syscall.Kill(n, syscall.SIGTERM)
			for i := 0; i < 100 && syscall.Kill(n, 0) == nil; i++ {
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
	purge := exec.Command("dpkg", "--root="+root, "--force-script-chrootless", "--purge", "latch")
	if out, err := purge.CombinedOutput(); err != nil {
		t.Fatalf("dpkg --purge latch: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(root, "usr/bin/latch")); !os.IsNotExist(err) {
		t.Errorf("/usr/bin/latch after purge: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "var/lib/latch")); err != nil {
		t.Errorf("/var/lib/latch is gone after purge: %v", err)
	}
	if log, err := os.ReadFile(filepath.Join(root, "latch.log")); err == nil {
		t.Logf("latch's log:\n%s", log)
	}
}
