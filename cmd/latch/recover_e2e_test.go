//go:build unix

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"

	"github.com/latchd/latch"
	"github.com/latchd/latch/client"
	"github.com/latchd/latch/internal/admin"
)

// argAfter returns the value given to flag in args ("" if none).
func argAfter(args []string, flag string) string {
	if i := slices.Index(args, flag); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

// setArg sets flag's value in args, appending it when it is not there.
func setArg(args []string, flag, value string) []string {
	if i := slices.Index(args, flag); i >= 0 && i+1 < len(args) {
		args[i+1] = value
		return args
	}
	return append(args, flag, value)
}

// TestClusterRecover: a 3-node cluster loses two nodes and their data
// dirs. latch recover refuses the survivor while it runs, then while the
// others run, then while its data dir is halted; once they are gone, it
// makes the survivor a cluster of one.
// Started again, the survivor serves every leased lock (with its token,
// its lease not shortened) and item it had; two new nodes added with
// latch cluster add catch up, and the cluster grants a token above every
// one before.
func TestClusterRecover(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	// Snapshots every few entries: the survivor recovers from a snapshot
	// and the log after it.
	procs, raftAddrs := startCluster(t, "--snapshot-entries", "16", "--snapshot-interval", "200ms")
	waitLeader(t, procs)
	const survivor = "n1"
	s := procs[survivor]
	ctx := context.Background()

	// Leased locks through every node, and an item through every node.
	tokens := map[string]latch.Token{}
	var top latch.Token
	for _, id := range []string{"n1", "n2", "n3"} {
		c := procs[id].dial(t)
		for j := range 3 {
			key := fmt.Sprintf("lease-%s-%d", id, j)
			l, err := c.Lock(ctx, []string{key}, client.Lease(10*time.Minute))
			if err != nil {
				t.Fatalf("lock %s through %s: %v", key, id, err)
			}
			tokens[key], top = l.Token(), max(top, l.Token())
		}
		if err := gomemcache.New(procs[id].mc).Set(&gomemcache.Item{Key: "item-" + id, Value: []byte("of " + id)}); err != nil {
			t.Fatalf("set item through %s: %v", id, err)
		}
	}
	// The survivor holds them all (a commit needs two of three nodes,
	// which may not have included it yet).
	expires := map[string]time.Time{}
	for key, tok := range tokens {
		var l admin.Lock
		var err error
		for range 100 {
			if l, err = s.lock(key); err == nil && len(l.Holders) == 1 {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil || len(l.Holders) != 1 || l.Holders[0].Token != uint64(tok) || l.Holders[0].LeaseExpiresAt.IsZero() {
			t.Fatalf("%s on %s = %+v, %v; want held with token %d and a lease", key, survivor, l, err, tok)
		}
		expires[key] = l.Holders[0].LeaseExpiresAt.Time
	}
	for _, id := range []string{"n1", "n2", "n3"} {
		if it, err := gomemcache.New(s.mc).Get("item-" + id); err != nil || string(it.Value) != "of "+id {
			t.Fatalf("item-%s on %s: %v, %v", id, survivor, it, err)
		}
	}

	dataDir := argAfter(s.args, "--data-dir")
	var snaps []os.DirEntry
	for range 100 {
		if snaps, _ = os.ReadDir(filepath.Join(dataDir, "snap")); len(snaps) > 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(snaps) == 0 {
		t.Fatalf("%s took no snapshot in 10 s", survivor)
	}
	recoverCmd := func(args ...string) (string, error) {
		cmd := exec.Command(s.bin, append([]string{"recover", "--data-dir", dataDir}, args...)...)
		cmd.Env = cleanEnv()
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	// Refused while the survivor runs: its data dir is locked.
	if out, err := recoverCmd(); err == nil || !strings.Contains(out, "in use by another process") {
		t.Fatalf("latch recover on a running node: %v, %s; want it refused", err, out)
	}
	s.kill()
	// Refused while the others run: they may have a leader.
	if out, err := recoverCmd(); err == nil || !strings.Contains(out, "other members are running") || !strings.Contains(out, "n2 ("+raftAddrs[1]+")") {
		t.Fatalf("latch recover while n2 and n3 run: %v, %s; want it refused, naming them", err, out)
	} else {
		t.Logf("latch recover while n2 and n3 run:\n%s", out)
	}
	// The other two are lost, with their disks.
	for _, id := range []string{"n2", "n3"} {
		procs[id].kill()
		if err := os.RemoveAll(argAfter(procs[id].args, "--data-dir")); err != nil {
			t.Fatal(err)
		}
	}
	// Refused on a data dir that a disk error halted, until the halt is
	// cleared.
	if err := os.WriteFile(filepath.Join(dataDir, "halted"), []byte("a test's disk error\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := recoverCmd(); err == nil || !strings.Contains(out, "stopped on a disk error") {
		t.Fatalf("latch recover on a halted data dir: %v, %s; want it refused", err, out)
	}
	if out, err := exec.Command(s.bin, "datadir", "--data-dir", dataDir, "clear-halt").CombinedOutput(); err != nil {
		t.Fatalf("latch datadir clear-halt: %v, %s", err, out)
	}
	out, err := recoverCmd("--dry-run")
	if err != nil || !strings.Contains(out, "member n2 ("+raftAddrs[1]+") does not answer") || !strings.Contains(out, "nothing changed") {
		t.Fatalf("latch recover --dry-run: %v, %s", err, out)
	}
	t.Logf("latch recover --dry-run:\n%s", out)
	out, err = recoverCmd("--node-id", survivor)
	if err != nil || !strings.Contains(out, "node n1 is now a cluster of one") {
		t.Fatalf("latch recover: %v, %s", err, out)
	}
	t.Logf("latch recover:\n%s", out)

	// Started again, with itself alone as its initial cluster.
	self := survivor + "=" + raftAddrs[0]
	s.args = setArg(s.args, "--initial-cluster", self)
	s.start()
	var st admin.ClusterStatus
	for range 100 {
		if st, err = s.cluster(); err == nil && st.Leader == survivor {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if st.Leader != survivor || len(st.Members) != 1 {
		t.Fatalf("cluster after the recovery = %+v, %v; want %s leading alone; log: %s", st, err, survivor, s.logText())
	}
	checkLocks := func(p *node) {
		t.Helper()
		for key, tok := range tokens {
			var l admin.Lock
			var err error
			for range 100 {
				if l, err = p.lock(key); err == nil && len(l.Holders) == 1 {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if err != nil || len(l.Holders) != 1 || l.Holders[0].Token != uint64(tok) {
				t.Fatalf("%s on %s = %+v, %v; want held with token %d", key, p.name, l, err, tok)
			}
			if key == "lease-n2-0" {
				t.Logf("%s on %s: lease to %v (before the loss: %v)", key, p.name, l.Holders[0].LeaseExpiresAt, expires[key])
			}
			if l.Holders[0].LeaseExpiresAt.Before(expires[key]) {
				t.Errorf("%s on %s: its lease ends at %v, before %v: shortened", key, p.name, l.Holders[0].LeaseExpiresAt, expires[key])
			}
		}
	}
	checkLocks(s)
	mc := gomemcache.New(s.mc)
	mc.Timeout = 5 * time.Second
	for _, id := range []string{"n1", "n2", "n3"} {
		if it, err := mc.Get("item-" + id); err != nil || string(it.Value) != "of "+id {
			t.Errorf("item-%s after the recovery: %v, %v", id, it, err)
		}
	}

	// n2 and n3 come back as new members, with empty data dirs.
	for i, id := range []string{"n2", "n3"} {
		p := procs[id]
		p.args = setArg(p.args, "--data-dir", t.TempDir())
		p.args = setArg(p.args, "--initial-cluster", self+","+id+"="+raftAddrs[i+1])
		p.args = setArg(p.args, "--initial-cluster-state", "existing")
		p.start()
		if out, err := exec.Command(s.bin, "cluster", "--admin-addr", s.adminURL, "add", id, raftAddrs[i+1]).CombinedOutput(); err != nil {
			t.Fatalf("latch cluster add %s: %v\n%s", id, err, out)
		}
	}
	if leader := waitLeader(t, procs); leader != survivor {
		t.Logf("leader after the adds: %s", leader)
	}
	for _, id := range []string{"n2", "n3"} {
		for range 100 {
			if st, err = procs[id].cluster(); err == nil && len(st.Members) == 3 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if len(st.Members) != 3 {
			t.Fatalf("cluster on %s after the adds = %+v, %v; want 3 members", id, st, err)
		}
	}
	checkLocks(procs["n2"])
	checkLocks(procs["n3"])

	// The cluster serves on: a new lock, through a new member, with a
	// token above every one before.
	c := procs["n3"].dial(t)
	l, err := c.Lock(ctx, []string{"after"}, client.Lease(time.Minute))
	if err != nil || l.Token() <= top {
		t.Fatalf("lock after the recovery: %v, %v; want a token above %d", l, err, top)
	}
	checkLocks(s)
	if t.Failed() {
		t.Log(logsOf(procs))
	}
}
