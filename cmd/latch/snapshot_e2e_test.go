//go:build unix

package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"

	"github.com/latchd/latch/client"
	"github.com/latchd/latch/internal/snapcmd"
)

// TestClusterSnapshotRestore: a backup saved from a follower of a 3-node
// cluster while clients lock and release verifies (latch snapshot
// inspect); a copy with any one byte changed is refused by inspect and by
// restore; restored into the data dirs of a new 3-node cluster, it serves
// every leased lock (with its token) and every item of the backup, and
// the first token the new cluster grants is above every token the old one
// granted, before the backup and after it.
func TestClusterSnapshotRestore(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	const token = "backup-token"
	procs, _ := startCluster(t, "--admin-token", token)
	leader := waitLeader(t, procs)
	var follower *node
	for id, p := range procs {
		if id != leader {
			follower = p
			break
		}
	}
	ctx := context.Background()
	all := make([]string, 0, 3)
	for _, p := range procs {
		all = append(all, p.dlock)
	}

	// Leased locks held across the backup, and items.
	keeper := dialAll(t, "every node", all)
	kept := map[string]uint64{}
	for i := range 5 {
		key := fmt.Sprintf("kept/%d", i)
		l, err := keeper.Lock(ctx, []string{key}, client.Lease(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		kept[key] = uint64(l.Token())
	}
	mc := memcacheClient(procs[leader].mc)
	for i := range 10 {
		if err := mc.Set(&gomemcache.Item{Key: fmt.Sprintf("item%d", i), Value: []byte(fmt.Sprint("value", i))}); err != nil {
			t.Fatal(err)
		}
	}

	// A memcached lock: its session is bound to the connection, and to
	// the node (ended by the restore).
	lockItem0 := func(addr string) string {
		t.Helper()
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		if _, err := conn.Write([]byte("lock item0\r\n")); err != nil {
			t.Fatal(err)
		}
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		line, _ := bufio.NewReader(conn).ReadString('\n')
		return line
	}
	if line := lockItem0(follower.mc); line != "OK\r\n" {
		t.Fatalf("memcached lock item0: %q", line)
	}

	// The load: clients on every node take and release leased locks, and
	// record the highest token they were granted.
	var maxToken atomic.Uint64
	note := func(tok uint64) {
		for {
			old := maxToken.Load()
			if tok <= old || maxToken.CompareAndSwap(old, tok) {
				return
			}
		}
	}
	for _, v := range kept {
		note(v)
	}
	loadCtx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var grants atomic.Int64
	for w := range 6 {
		p := procs[fmt.Sprintf("n%d", w%3+1)]
		c := p.dial(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; loadCtx.Err() == nil; i++ {
				l, err := c.Lock(loadCtx, []string{fmt.Sprintf("load/%d/%d", w, i%4)}, client.Lease(time.Hour))
				if err != nil {
					continue
				}
				note(uint64(l.Token()))
				grants.Add(1)
				l.Unlock(ctx)
			}
		}()
	}
	time.Sleep(500 * time.Millisecond)

	file := filepath.Join(t.TempDir(), "backup.snap")
	before := grants.Load()
	out, err := exec.Command(follower.bin, "snapshot", "save", file, "--admin-addr", follower.adminURL, "--admin-token", token).CombinedOutput()
	if err != nil {
		t.Fatalf("snapshot save: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "verified") {
		t.Errorf("snapshot save output: %s", out)
	}
	time.Sleep(500 * time.Millisecond) // grants after the backup
	stopLoad()
	wg.Wait()
	t.Logf("%d grants under load, %d of them before the save ended", grants.Load(), before)
	if grants.Load() == before {
		t.Error("no grant after the backup")
	}
	// Without the token the node refuses.
	if out, err := exec.Command(follower.bin, "snapshot", "save", file+".x", "--admin-addr", follower.adminURL).CombinedOutput(); err == nil || !strings.Contains(string(out), "401") {
		t.Errorf("snapshot save without the token: %v, %s", err, out)
	}

	out, err = exec.Command(follower.bin, "snapshot", "inspect", file).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "verified") {
		t.Fatalf("snapshot inspect: %v\n%s", err, out)
	}
	t.Logf("inspect:\n%s", out)

	// What the backup holds: its leased locks and its items.
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	meta, st, err := snapcmd.Verify(b)
	if err != nil {
		t.Fatal(err)
	}
	leases := map[string]uint64{}
	for _, k := range st.Engine().Keys("", "", 0) {
		for _, h := range k.Holders {
			if h.Expires != 0 {
				leases[k.Key] = uint64(h.Token)
			}
		}
	}
	for key, tok := range kept {
		if leases[key] != tok {
			t.Errorf("the backup holds %s with token %d, want %d", key, leases[key], tok)
		}
	}
	if meta.Items != 10 || len(leases) != meta.Leases {
		t.Errorf("backup meta %+v; %d leases in its state", meta, len(leases))
	}

	// One byte changed, anywhere: refused by inspect and by restore.
	for _, at := range []int{0, 9, 20, len(b) / 4, len(b) / 2, 3 * len(b) / 4, len(b) - 40, len(b) - 1} {
		bad := filepath.Join(t.TempDir(), "bad.snap")
		c := append([]byte(nil), b...)
		c[at] ^= 0x20
		if err := os.WriteFile(bad, c, 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(follower.bin, "snapshot", "inspect", bad).CombinedOutput(); err == nil || !strings.Contains(string(out), "corrupt") {
			t.Errorf("inspect of the backup with byte %d changed: %v, %s", at, err, out)
		}
		dir := filepath.Join(t.TempDir(), "data")
		out, err := exec.Command(follower.bin, "snapshot", "restore", bad, "--data-dir", dir).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "refused") {
			t.Errorf("restore of the backup with byte %d changed: %v, %s", at, err, out)
		}
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("the refused restore (byte %d) made a data dir", at)
		}
	}

	// The old cluster goes; a new one starts from the backup.
	for _, p := range procs {
		p.kill()
	}
	raft := freePorts(t, 3)
	var members []string
	for i, a := range raft {
		members = append(members, fmt.Sprintf("n%d=%s", i+1, a))
	}
	fresh := map[string]*node{}
	for i, a := range raft {
		id := fmt.Sprintf("n%d", i+1)
		dir := t.TempDir()
		out, err := exec.Command(follower.bin, "snapshot", "restore", file, "--data-dir", dir, "--node-id", id, "--initial-cluster", strings.Join(members, ",")).CombinedOutput()
		if err != nil {
			t.Fatalf("snapshot restore %s: %v\n%s", id, err, out)
		}
		if i == 0 {
			t.Logf("restore:\n%s", out)
		}
		if !strings.Contains(string(out), "1 session bound to the old nodes' connections ended") {
			t.Errorf("restore %s did not end the memcached connection's session:\n%s", id, out)
		}
		fresh[id] = newProc(t, id, "--data-dir", dir, "--node-id", id, "--raft-addr", a,
			"--initial-cluster", strings.Join(members, ","), "--election-timeout", "500ms", "--node-ttl", "5s")
	}
	for _, p := range fresh {
		p.start()
	}
	lead2 := waitLeader(t, fresh)
	for _, p := range fresh {
		waitReady(t, p)
	}
	for key, tok := range leases {
		l, err := fresh[lead2].lock(key)
		if err != nil || len(l.Holders) != 1 || l.Holders[0].Token != tok {
			t.Errorf("%s in the restored cluster = %+v, %v; want held with token %d", key, l, err, tok)
		}
	}
	for _, p := range fresh {
		mc := memcacheClient(p.mc)
		for i := range 10 {
			it, err := mc.Get(fmt.Sprintf("item%d", i))
			if err != nil || string(it.Value) != fmt.Sprint("value", i) {
				t.Errorf("item%d on %s after the restore: %v, %v", i, p.name, it, err)
			}
		}
	}
	// The memcached connection's lock ended with the restore.
	if line := lockItem0(fresh[lead2].mc); line != "OK\r\n" {
		t.Errorf("memcached lock item0 after the restore: %q, want OK (the old connection's lock ended)", line)
	}
	c := dialAll(t, "the restored cluster", []string{fresh["n2"].dlock})
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	l, err := c.Lock(cctx, []string{"after-restore"})
	if err != nil {
		t.Fatal(err)
	}
	if uint64(l.Token()) <= maxToken.Load() {
		t.Errorf("first token after the restore %d, want above %d, the highest the old cluster granted", l.Token(), maxToken.Load())
	}
	t.Logf("highest token of the old cluster %d; first of the restored one %d", maxToken.Load(), l.Token())
}

// TestSnapshotMemoryToDurable: a backup of an in-memory node, restored
// into a data dir, starts a durable single node that holds its leased
// lock and its item, and grants tokens above the old node's.
func TestSnapshotMemoryToDurable(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	mem := newProc(t, "memory")
	mem.start()
	ctx := context.Background()
	c := mem.dial(t)
	l, err := c.Lock(ctx, []string{"leased"}, client.Lease(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if err := memcacheClient(mem.mc).Set(&gomemcache.Item{Key: "item", Value: []byte("kept")}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "b.snap")
	if out, err := exec.Command(mem.bin, "snapshot", "save", "--admin-addr", mem.adminURL, file).CombinedOutput(); err != nil {
		t.Fatalf("snapshot save: %v\n%s", err, out)
	}
	last, err := c.Lock(ctx, []string{"after"})
	if err != nil {
		t.Fatal(err)
	}
	mem.kill()
	dir := filepath.Join(t.TempDir(), "data")
	if out, err := exec.Command(mem.bin, "snapshot", "restore", file, "--data-dir", dir).CombinedOutput(); err != nil {
		t.Fatalf("snapshot restore: %v\n%s", err, out)
	}
	durable := newProc(t, "durable", "--data-dir", dir)
	durable.start()
	waitReady(t, durable)
	var held bool
	for range 100 {
		if got, err := durable.lock("leased"); err == nil && len(got.Holders) == 1 && got.Holders[0].Token == uint64(l.Token()) {
			held = true
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !held {
		t.Fatal("the leased lock is not held, with its token, on the restored node")
	}
	if it, err := memcacheClient(durable.mc).Get("item"); err != nil || string(it.Value) != "kept" {
		t.Errorf("item on the restored node: %v, %v", it, err)
	}
	l2, err := durable.dial(t).Lock(ctx, []string{"new"})
	if err != nil {
		t.Fatal(err)
	}
	if l2.Token() <= last.Token() {
		t.Errorf("token after the restore %d, want above %d", l2.Token(), last.Token())
	}
}

// waitReady waits until p answers /readyz 200: it caught up and serves
// reads.
func waitReady(t *testing.T, p *node) {
	t.Helper()
	for range 200 {
		if resp, err := http.Get(p.adminURL + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: not ready in 10 s; log: %s", p.name, p.logText())
}

// memcacheClient returns a memcached client of addr that waits for a
// loaded test machine (gomemcache's default timeout is 100 ms).
func memcacheClient(addr string) *gomemcache.Client {
	c := gomemcache.New(addr)
	c.Timeout = 5 * time.Second
	return c
}
