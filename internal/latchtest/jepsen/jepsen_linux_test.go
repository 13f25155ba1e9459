//go:build linux

package jepsen

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/latchd/latch/internal/latchtest/jepsen/cluster"
	"github.com/latchd/latch/internal/latchtest/lazyfs"
)

// The environment of TestJepsen. make jepsen sets JEPSEN=1; the others
// are the user's, but for nsEnv, latchEnv and outEnv, which the test sets
// for the copy of itself it runs inside the namespace.
const (
	runEnv     = "JEPSEN"         // 1: run TestJepsen
	timeEnv    = "JEPSEN_TIME"    // how long the workloads run (a Go duration; 60s)
	seedEnv    = "JEPSEN_SEED"    // the nemesis's and workloads' seed (random)
	controlEnv = "JEPSEN_CONTROL" // 1: the control, fencing off
	nodesEnv   = "JEPSEN_NODES"   // 3 or 5 (3)
	faultsEnv  = "JEPSEN_FAULTS"  // the kinds of faults, separated by commas (all)
	keepEnv    = "JEPSEN_OUT"     // keep the histories in this directory, whatever the outcome
	nsEnv      = "JEPSEN_NETNS"   // set inside the namespace: its name
	latchEnv   = "JEPSEN_LATCH"   // inside: the latch binary
	outEnv     = "JEPSEN_OUT_DIR" // inside: where the run's files go
)

const summaryPrefix = "jepsen: ops="

// TestJepsen runs the workloads against a cluster of real latch serve
// processes under faults, and fails when the history is not safe. It
// creates a network namespace, runs a copy of itself there (where the
// nodes, their clients and the nftables rules live), and deletes the
// namespace after. It runs only under make jepsen, as root, with nft.
func TestJepsen(t *testing.T) {
	if os.Getenv(runEnv) == "" {
		t.Skip("run by make jepsen (JEPSEN=1)")
	}
	if os.Getenv(nsEnv) != "" {
		inNamespace(t)
		return
	}
	if os.Geteuid() != 0 {
		t.Fatal("jepsen: needs root, for a network namespace and nftables")
	}
	for _, tool := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("jepsen: %s not found (make deps installs nftables): %v", tool, err)
		}
	}
	d, err := duration()
	if err != nil {
		t.Fatal(err)
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(seedEnv); s != "" {
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("jepsen: %s=%q: %v", seedEnv, s, err)
		}
	}
	out := os.Getenv(keepEnv)
	keep := out != ""
	if keep {
		err = os.MkdirAll(out, 0o755)
	} else {
		out, err = os.MkdirTemp("", "latch-jepsen-")
	}
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(out, "latch")
	if b, err := exec.Command("go", "build", "-o", bin, "github.com/latchd/latch/cmd/latch").CombinedOutput(); err != nil {
		t.Fatalf("jepsen: go build: %v\n%s", err, b)
	}

	ns := fmt.Sprintf("latch-jepsen-%d", os.Getpid())
	if b, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("jepsen: ip netns add %s: %v: %s", ns, err, b)
	}
	defer func() {
		if b, err := exec.Command("ip", "netns", "delete", ns).CombinedOutput(); err != nil {
			t.Errorf("jepsen: ip netns delete %s: %v: %s", ns, err, b)
		}
	}()
	if b, err := exec.Command("ip", "-n", ns, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("jepsen: lo up in %s: %v: %s", ns, err, b)
	}
	fmt.Printf("jepsen: seed %d, %v, namespace %s, files in %s\n", seed, d, ns, out)

	// The copy of the test in the namespace, in a process group of its
	// own, killed whole when it ends or overruns.
	ctx, cancel := context.WithTimeout(context.Background(), d+5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", ns, os.Args[0], "-test.run=^TestJepsen$", "-test.v", "-test.timeout=0")
	cmd.Env = append(os.Environ(), nsEnv+"="+ns, latchEnv+"="+bin, outEnv+"="+out, seedEnv+"="+strconv.FormatUint(seed, 10))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(pr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if l := sc.Text(); strings.HasPrefix(l, summaryPrefix) {
				lines <- l
			} else {
				fmt.Println(l)
			}
		}
	}()
	waited := make(chan error, 1)
	go func() { err := cmd.Wait(); pw.Close(); waited <- err }()
	for l := range lines {
		summaryLine = l
	}
	err = <-waited
	// Whatever is left of the group (nothing, unless the copy crashed).
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	switch {
	case err != nil:
		fmt.Printf("jepsen: not safe or not run (%v); history, visualisations and node logs in %s\n", err, out)
		t.Fail()
	case summaryLine == "":
		t.Errorf("jepsen: the run printed no summary; files in %s", out)
	case keep:
		fmt.Printf("jepsen: files in %s\n", out)
	default:
		os.RemoveAll(out)
	}
}

func duration() (time.Duration, error) {
	s := os.Getenv(timeEnv)
	if s == "" {
		return time.Minute, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("jepsen: %s=%q: want a positive Go duration (90s, 20m)", timeEnv, s)
	}
	return d, nil
}

// inNamespace is TestJepsen inside its namespace: it starts the cluster,
// runs the workloads under the nemesis, checks the history.
func inNamespace(t *testing.T) {
	d, err := duration()
	if err != nil {
		t.Fatal(err)
	}
	seed, err := strconv.ParseUint(os.Getenv(seedEnv), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	nodes := 3
	if s := os.Getenv(nodesEnv); s != "" {
		if nodes, err = strconv.Atoi(s); err != nil || nodes != 3 && nodes != 5 {
			t.Fatalf("jepsen: %s=%q: want 3 or 5", nodesEnv, s)
		}
	}
	control := os.Getenv(controlEnv) == "1"
	kinds := faultKinds
	if s := os.Getenv(faultsEnv); s != "" {
		kinds = strings.Split(s, ",")
		for _, k := range kinds {
			if !slices.Contains(faultKinds, k) {
				t.Fatalf("jepsen: %s: unknown fault %q; the kinds are %v", faultsEnv, k, faultKinds)
			}
		}
	}
	out := os.Getenv(outEnv)
	logf := func(format string, args ...any) {
		fmt.Printf("%s %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
	}

	// Each node's data dir is a lazyfs mount (mnt/ID) over nodes/ID, in
	// this process's mount namespace (ip netns exec made it), which the
	// nodes share and which ends with them. Unmounted after the nodes
	// are killed (defers run last first), whatever the outcome.
	disks := map[string]*lazyfs.FS{}
	defer func() {
		if err := closeDisks(disks); err != nil {
			t.Error(err)
		}
	}()
	dataDir := func(id string) (string, error) {
		backing, mnt := filepath.Join(out, "nodes", id), filepath.Join(out, "mnt", id)
		for _, d := range []string{backing, mnt} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return "", err
			}
		}
		disk, err := lazyfs.Mount(backing, mnt, lazyfs.Options{SyncDelay: syncDelay})
		if err != nil {
			return "", err
		}
		disks[id] = disk
		return mnt, nil
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Config{
		Bin: os.Getenv(latchEnv), Dir: filepath.Join(out, "nodes"), Nodes: nodes,
		ElectionTimeout: 500 * time.Millisecond, NodeTTL: 3 * time.Second,
		DataDir: dataDir,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fw, err := cluster.NewFirewall("latch_jepsen")
	if err != nil {
		t.Fatal(err)
	}
	defer fw.Close()
	var targets []Target
	for _, n := range c.Nodes {
		targets = append(targets, Target{ID: n.ID, DLock: n.DLock, Memcache: n.Memcache, Redis: n.Redis, ZooKeeper: n.ZooKeeper, Admin: n.Admin})
	}
	logf("cluster of %d up; workloads for %v, seed %d, control %v", nodes, d, seed, control)
	res, err := run(config{
		duration: d, seed: seed, fencing: !control, fencedKeys: 2, targets: targets, out: out, logf: logf,
		nemesis: func(ctx context.Context, w *workers) (map[string]int, error) {
			n := &nemesis{kinds: kinds, c: c, disks: disks, fw: fw, w: w, rng: rand.New(rand.NewPCG(seed, 0)), logf: logf}
			return n.run(ctx)
		},
	})
	for _, n := range c.Nodes {
		for _, crash := range n.Crashes() {
			t.Errorf("jepsen: a node crashed: %s", crash)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	// The nodes stopped, their Raft logs must agree wherever their terms
	// do. They are read from the backing dirs, unmounted: what the nodes
	// wrote, synced or not.
	c.Close()
	if err := closeDisks(disks); err != nil {
		t.Fatal(err)
	}
	dirs := map[string]string{}
	for _, n := range c.Nodes {
		dirs[n.ID] = filepath.Join(out, "nodes", n.ID)
	}
	logs, err := compareRaftLogs(dirs)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range res.details() {
		fmt.Println(l)
	}
	fmt.Printf("raft: entries_compared=%d diverged=%d\n", logs.entries, logs.diverged)
	for _, p := range logs.problems {
		fmt.Println("problem: " + p)
	}
	summaryLine = res.summary()
	if !res.safe() || logs.diverged > 0 {
		t.Errorf("jepsen: the history is not safe (seed %d): %s", seed, summaryLine)
	}
}

// syncDelay is how long a sync takes on a node's disk: a flush of a
// solid-state disk's cache. At once, the writes a power loss can take are
// only those between a write and the sync called right after it, rarely
// any.
const syncDelay = 2 * time.Millisecond

// closeDisks unmounts every disk and forgets it.
func closeDisks(disks map[string]*lazyfs.FS) error {
	var errs []error
	for id, disk := range disks {
		errs = append(errs, disk.Close())
		delete(disks, id)
	}
	return errors.Join(errs...)
}
