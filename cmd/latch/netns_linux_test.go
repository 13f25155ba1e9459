package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Helpers of the tests that run latch as a container or a Kubernetes pod
// would: in network namespaces of their own (made with ip netns, as root;
// like make jepsen, these tests fail rather than skip without root), with
// the tools of the deploy/ module.

// deployEnv, set to 1 by make deploy-check, runs TestImage and
// TestKubernetes: they build latch for two platforms and the deploy/
// module's tools, and take network namespaces, so go test ./... alone
// skips them (as make jepsen's test is skipped without JEPSEN=1).
const deployEnv = "LATCH_DEPLOY_TESTS"

// needDeployRun skips t unless make deploy-check runs it.
func needDeployRun(t *testing.T) {
	t.Helper()
	if os.Getenv(deployEnv) != "1" {
		t.Skipf("run by make deploy-check (%s=1)", deployEnv)
	}
}

// needRoot fails t unless the test runs as root with the commands named.
func needRoot(t *testing.T, tools ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("needs root: it makes network namespaces (make test runs as root in CI)")
	}
	for _, tool := range append([]string{"ip"}, tools...) {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("needs %s (make deps installs it): %v", tool, err)
		}
	}
}

// mustRun runs a command and fails t with its output when it fails.
func mustRun(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %q: %v\n%s", name, args, err, out)
	}
	return string(out)
}

// addNetns makes the network namespace name, its loopback up, and deletes
// it when the test ends.
func addNetns(t *testing.T, name string) {
	t.Helper()
	mustRun(t, "ip", "netns", "add", name)
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "delete", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns delete %s: %v: %s", name, err, out)
		}
	})
	mustRun(t, "ip", "-n", name, "link", "set", "lo", "up")
}

// nsDialer returns a dial function whose connections are made in the
// network namespace ns (by a thread that enters it and is discarded
// after), for clients that take a dialer.
func nsDialer(ns string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		type result struct {
			c   net.Conn
			err error
		}
		done := make(chan result, 1)
		go func() {
			// The thread stays locked: it ends with the goroutine, so no
			// other goroutine runs in ns.
			runtime.LockOSThread()
			f, err := os.Open(filepath.Join("/run/netns", ns))
			if err != nil {
				done <- result{nil, err}
				return
			}
			defer f.Close()
			if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
				done <- result{nil, fmt.Errorf("setns %s: %w", ns, err)}
				return
			}
			var d net.Dialer
			c, err := d.DialContext(ctx, network, addr)
			done <- result{c, err}
		}()
		r := <-done
		return r.c, r.err
	}
}

// nsHTTPClient is an HTTP client whose connections are made in ns.
func nsHTTPClient(ns string) *http.Client {
	return &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{DialContext: nsDialer(ns), DisableKeepAlives: true},
	}
}

// waitNsReady waits until GET url answers 200, or fails t when exited is
// closed first or after limit.
func waitNsReady(t *testing.T, c *http.Client, url string, exited <-chan struct{}, limit time.Duration, log func() string) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		resp, err := c.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-exited:
			t.Fatalf("exited before %s answered 200\n%s", url, log())
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer 200 within %v (last: %v)\n%s", url, limit, err, log())
		}
	}
}

var deployTools sync.Map // name -> func() (string, error)

// deployTool builds the command deploy/cmd/name (of the deploy/ module)
// once per test process and returns its path.
func deployTool(t *testing.T, name string) string {
	t.Helper()
	f, _ := deployTools.LoadOrStore(name, sync.OnceValues(func() (string, error) {
		dir, err := os.MkdirTemp("", "latch-deploy-")
		if err != nil {
			return "", err
		}
		bin := filepath.Join(dir, name)
		cmd := exec.Command("go", "build", "-o", bin, "./cmd/"+name)
		cmd.Dir = "../../deploy"
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("go build deploy/cmd/%s: %v\n%s", name, err, out)
		}
		return bin, nil
	}))
	bin, err := f.(func() (string, error))()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}
