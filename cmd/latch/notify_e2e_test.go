//go:build linux

package main

import (
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// notifySocket opens a unix datagram socket as systemd does for a
// Type=notify service, and returns its NOTIFY_SOCKET environment entry.
func notifySocket(t *testing.T) (string, *net.UnixConn) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return "NOTIFY_SOCKET=" + path, c
}

// notice returns the next datagram of c, or "" when none comes within d.
func notice(t *testing.T, c *net.UnixConn, d time.Duration) string {
	t.Helper()
	if err := c.SetReadDeadline(time.Now().Add(d)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	n, err := c.Read(buf)
	if err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return ""
		}
		t.Fatalf("notify socket: %v", err)
	}
	return string(buf[:n])
}

// awaitNotice returns the first datagram of c with the line want, failing
// the test on one with a line of never, or when none comes in 30 s.
func awaitNotice(t *testing.T, c *net.UnixConn, want, never string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		m := notice(t, c, time.Until(deadline))
		lines := strings.Split(strings.TrimSuffix(m, "\n"), "\n")
		for _, l := range lines {
			if never != "" && l == never {
				t.Fatalf("notified %q before %q", m, want)
			}
		}
		for _, l := range lines {
			if l == want {
				return m
			}
		}
	}
	t.Fatalf("no %q notified in 30 s", want)
	return ""
}

func readyz(t *testing.T, p *node) int {
	t.Helper()
	resp, err := http.Get(p.adminURL + "/readyz")
	if err != nil {
		t.Fatalf("%s: /readyz: %v", p.name, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestSystemdNotify runs "latch serve" as systemd runs a Type=notify
// service, with NOTIFY_SOCKET: READY=1 comes once /readyz answers 200,
// RELOADING=1 (with MONOTONIC_USEC) then READY=1 around a SIGHUP reload,
// STOPPING=1 on SIGTERM, and the server exits cleanly.
func TestSystemdNotify(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	env, c := notifySocket(t)
	p := newProc(t, "solo")
	p.env = []string{env}
	p.start()
	m := awaitNotice(t, c, "READY=1", "STOPPING=1")
	if code := readyz(t, p); code != http.StatusOK {
		t.Errorf("/readyz answers %d once READY=1 was sent (%q)", code, m)
	}
	if !strings.Contains(m, "STATUS=serving") {
		t.Errorf("READY=1 without STATUS=serving: %q", m)
	}

	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	m = awaitNotice(t, c, "RELOADING=1", "STOPPING=1")
	if !strings.Contains(m, "\nMONOTONIC_USEC=") {
		t.Errorf("RELOADING=1 without MONOTONIC_USEC: %q", m)
	}
	m = awaitNotice(t, c, "READY=1", "STOPPING=1")
	if !strings.Contains(m, "STATUS=serving; reloaded") {
		t.Errorf("READY=1 after the reload without its STATUS: %q", m)
	}

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	awaitNotice(t, c, "STOPPING=1", "READY=1")
	select {
	case err := <-p.exited:
		p.cmd = nil
		if err != nil {
			t.Fatalf("exited with %v after SIGTERM; log: %s", err, p.logText())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("did not exit in 30 s after SIGTERM")
	}
	if m := notice(t, c, 100*time.Millisecond); m != "" {
		t.Errorf("notified %q after STOPPING=1", m)
	}
}

// TestSystemdNotifyCatchUp starts one member of a three-node cluster
// alone, with NOTIFY_SOCKET: it listens but cannot catch up with its
// cluster, so it says why in STATUS and never READY=1, until the other
// two start; then READY=1 comes, once /readyz answers 200.
func TestSystemdNotifyCatchUp(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	raft := freePorts(t, 3)
	var members []string
	for i, a := range raft {
		members = append(members, fmt.Sprintf("n%d=%s", i+1, a))
	}
	var procs []*node
	for i, a := range raft {
		id := fmt.Sprintf("n%d", i+1)
		procs = append(procs, newProc(t, id, "--data-dir", t.TempDir(), "--node-id", id, "--raft-addr", a,
			"--initial-cluster", strings.Join(members, ","), "--election-timeout", "500ms", "--node-ttl", "5s"))
	}
	env, c := notifySocket(t)
	first := procs[0]
	first.env = []string{env}
	first.start()

	// Alone, for 3 s (six election timeouts): no READY=1.
	var said []string
	for until := time.Now().Add(3 * time.Second); time.Now().Before(until); {
		m := notice(t, c, time.Until(until))
		if m == "" {
			break
		}
		if strings.Contains(m, "READY=1") {
			t.Fatalf("READY=1 from a member alone, which cannot catch up (%q); log: %s", m, first.logText())
		}
		said = append(said, m)
	}
	if !strings.Contains(strings.Join(said, ""), "STATUS=catching up") {
		t.Errorf("alone, notified %q, want a STATUS saying it catches up", said)
	}
	if code := readyz(t, first); code == http.StatusOK {
		t.Errorf("/readyz answers %d alone", code)
	}

	for _, p := range procs[1:] {
		p.start()
	}
	awaitNotice(t, c, "READY=1", "STOPPING=1")
	if code := readyz(t, first); code != http.StatusOK {
		t.Errorf("/readyz answers %d once READY=1 was sent", code)
	}
}
