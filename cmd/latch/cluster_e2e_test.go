//go:build unix

package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"

	"github.com/latchd/latch"
	"github.com/latchd/latch/client"
	"github.com/latchd/latch/internal/admin"
	"github.com/latchd/latch/internal/tlsconf/tlstest"
)

// builtLatch is the latch binary, built once for the cluster tests.
var builtLatch = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "latch-e2e-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "latch")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

// freePorts returns n loopback addresses with ports free at the time,
// below Linux's ephemeral range (32768-60999): a port from that range,
// free when chosen, may be the local end of some outgoing connection by
// the time a process binds it (the nodes' own connections to each other
// take them), which fails its start. A port is handed out once per test
// process (givenPorts): the clusters of tests that run at the same time
// never share one, though each frees its ports before its processes bind
// them.
func freePorts(t *testing.T, n int) []string {
	t.Helper()
	var addrs []string
	var lns []net.Listener
	givenMu.Lock()
	defer givenMu.Unlock()
	for tries := 0; len(lns) < n; tries++ {
		if tries > 1000 {
			t.Fatal("no free port below 32768")
		}
		port := 20000 + rand.IntN(12768)
		if givenPorts[port] {
			continue
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		givenPorts[port] = true
		lns = append(lns, ln)
		addrs = append(addrs, ln.Addr().String())
	}
	for _, ln := range lns {
		ln.Close()
	}
	return addrs
}

// givenPorts are the ports freePorts has handed out in this process.
var (
	givenMu    sync.Mutex
	givenPorts = map[int]bool{}
)

// node is one "latch serve" process with fixed addresses, which a test
// kills and starts again.
type node struct {
	t                   *testing.T
	bin, name           string
	args                []string
	env                 []string // added to its environment
	dlock, mc, adminURL string
	zk                  string // the ZooKeeper front end's address
	cmd                 *exec.Cmd
	exited              chan error // receives Wait's result once it ends
	log                 *os.File
}

func newProc(t *testing.T, name string, extra ...string) *node {
	bin, err := builtLatch()
	if err != nil {
		t.Fatal(err)
	}
	ports := freePorts(t, 4)
	p := &node{t: t, bin: bin, name: name, dlock: ports[0], mc: ports[1], adminURL: "http://" + ports[2], zk: ports[3]}
	p.args = append([]string{"serve", "--dlock-addr", ports[0], "--memcache-addr", ports[1], "--admin-addr", ports[2], "--redis-addr=", "--zookeeper-addr", ports[3]}, extra...)
	t.Cleanup(func() { p.kill() })
	return p
}

// start starts the process and waits until its admin API answers.
func (p *node) start() {
	p.t.Helper()
	f, err := os.OpenFile(filepath.Join(p.t.TempDir(), p.name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		p.t.Fatal(err)
	}
	p.log = f
	p.cmd = exec.Command(p.bin, p.args...)
	p.cmd.Env = append(append(cleanEnv(), "LATCH_LOG_LEVEL=debug"), p.env...)
	p.cmd.Stdout, p.cmd.Stderr = f, f
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- p.cmd.Wait() }()
	p.exited = exited
	for range 200 {
		if resp, err := http.Get(p.adminURL + "/healthz"); err == nil {
			resp.Body.Close()
			return
		}
		select {
		case err := <-exited:
			p.cmd = nil // exited: nothing left to kill
			p.t.Fatalf("%s: exited (%v) before its admin API answered; log: %s", p.name, err, p.logText())
		case <-time.After(50 * time.Millisecond):
		}
	}
	p.t.Fatalf("%s: admin API not up in 10 s; log: %s", p.name, p.logText())
}

// logsOf returns the tails of the logs of procs, by name, for a failure's
// message.
func logsOf(procs map[string]*node) string {
	var b strings.Builder
	for _, id := range slices.Sorted(maps.Keys(procs)) {
		fmt.Fprintf(&b, "--- %s's log:\n%s\n", id, procs[id].logText())
	}
	return b.String()
}

func (p *node) logText() string {
	b, _ := os.ReadFile(p.log.Name())
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// kill ends the process with SIGKILL, if it runs.
func (p *node) kill() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	p.cmd.Process.Kill()
	<-p.exited
	p.cmd = nil
	p.log.Close()
}

func (p *node) cluster() (admin.ClusterStatus, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return admin.NewClient(p.adminURL).Cluster(ctx)
}

func (p *node) lock(key string) (admin.Lock, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return admin.NewClient(p.adminURL).Lock(ctx, key)
}

func (p *node) dial(t *testing.T, opts ...client.Option) *client.Client {
	t.Helper()
	return dialAll(t, p.name, []string{p.dlock}, opts...)
}

// dialAll connects a Client to the first of addrs that answers within
// 10 s, or fails the test naming what (the nodes dialed), and closes it
// when the test ends.
func dialAll(t *testing.T, what string, addrs []string, opts ...client.Option) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, strings.Join(addrs, ","), opts...)
	if err != nil {
		t.Fatalf("%s: dial: %v", what, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestDurableRestart: latch serve --data-dir keeps leased locks, items and
// the token counter across a SIGKILL and a restart, and releases the locks
// bound to connections, whose connections are gone; a Go client's session
// (it has a TTL) resumes on the restarted node and keeps its locks.
func TestDurableRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	p := newProc(t, "durable", "--data-dir", t.TempDir())
	p.start()
	c := p.dial(t)
	ctx := context.Background()
	leased, err := c.Lock(ctx, []string{"leased"}, client.Lease(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if err := gomemcache.New(p.mc).Set(&gomemcache.Item{Key: "item", Value: []byte("kept")}); err != nil {
		t.Fatal(err)
	}
	// A memcached lock: its session is bound to the connection.
	mc, err := net.Dial("tcp", p.mc)
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Close()
	if err := gomemcache.New(p.mc).Set(&gomemcache.Item{Key: "conn", Value: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if _, err := mc.Write([]byte("lock conn\r\n")); err != nil {
		t.Fatal(err)
	}
	mc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if line, err := bufio.NewReader(mc).ReadString('\n'); err != nil || line != "OK\r\n" {
		t.Fatalf("memcached lock conn: %q, %v", line, err)
	}
	p.kill()
	p.start()

	var st admin.ClusterStatus
	for range 100 {
		if st, err = p.cluster(); err == nil && st.Leader != "" {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if st.Mode != "durable" || st.Leader != "latch" {
		t.Fatalf("cluster after restart = %+v, %v; want a durable node leading", st, err)
	}
	// Ready once it caught up with its log.
	ready := false
	for range 100 {
		if resp, err := http.Get(p.adminURL + "/readyz"); err == nil {
			resp.Body.Close()
			if ready = resp.StatusCode == http.StatusOK; ready {
				break
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !ready {
		t.Fatal("the restarted node never became ready (/readyz)")
	}
	// The previous incarnation's sessions end once the node leads again.
	var conn admin.Lock
	for range 100 {
		conn, err = p.lock("conn")
		if err != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err == nil {
		t.Errorf("the connection-bound lock survived the restart: %+v", conn)
	}
	l, err := p.lock("leased")
	if err != nil || len(l.Holders) != 1 || l.Holders[0].Token != uint64(leased.Token()) {
		t.Errorf("leased lock after the restart = %+v, %v; want held with token %d", l, err, leased.Token())
	}
	it, err := gomemcache.New(p.mc).Get("item")
	if err != nil || string(it.Value) != "kept" {
		t.Errorf("item after the restart = %v, %v", it, err)
	}
	c2 := p.dial(t)
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	l2, err := c2.TryLock(tctx, []string{"conn"})
	if err != nil {
		t.Fatal(err)
	}
	if l2.Token() <= leased.Token() {
		t.Errorf("token after the restart %d, want above %d", l2.Token(), leased.Token())
	}
	// The first client resumed its session on the restarted node.
	var again *client.Lock
	for range 100 {
		if again, err = c.TryLock(tctx, []string{"again"}); !errors.Is(err, client.ErrConnectionLost) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Errorf("the first client after the restart: %v", err)
	} else if again.Token() <= leased.Token() {
		t.Errorf("token of the resumed session %d, want above %d", again.Token(), leased.Token())
	}
	select {
	case <-leased.Done():
		t.Errorf("the leased lock of the resumed session ended: %v", leased.Err())
	default:
	}
	resp, err := http.Get(p.adminURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, m := range []string{
		"latch_raft_entries_total", "latch_raft_commit_seconds_total", "latch_raft_leader 1", "latch_raft_applied_index", "latch_raft_leader_changes_total",
		`latch_raft_commit_duration_seconds_bucket{le="10"}`, "latch_raft_members 1", `latch_build_info{commit="`, `latch_limit{name="snapshot_entries",protocol=""} 16384`,
	} {
		if !strings.Contains(string(body), m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}
}

// TestDataDirInUse: a second latch serve given a data dir that another
// one holds exits at once with an error naming the holder, rather than
// wait on the first's lock; once the first is gone, the dir serves again,
// to its own node ID only.
func TestDataDirInUse(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := t.TempDir()
	first := newProc(t, "first", "--data-dir", dir)
	first.start()
	second := newProc(t, "second", "--data-dir", dir)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, second.bin, second.args...)
	cmd.Env = cleanEnv()
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("the second process still ran after 10 s: %s", out)
	}
	want := fmt.Sprintf("data dir %s is in use by another process (pid %d)", dir, first.cmd.Process.Pid)
	if err == nil || !strings.Contains(string(out), want) {
		t.Fatalf("the second process: %v, output %q; want a failure saying %q", err, out, want)
	}
	first.kill()
	// The dir belongs to the first's node ID (the default one).
	other := exec.Command(second.bin, append(second.args, "--node-id", "other")...)
	other.Env = cleanEnv()
	out, err = other.CombinedOutput()
	if want := "belongs to node latch, not other"; err == nil || !strings.Contains(string(out), want) {
		t.Fatalf("a node of another ID on the dir: %v, output %q; want a failure saying %q", err, out, want)
	}
	second.start()
}

// TestDiskFull: a durable node whose log cannot be written (its files may
// not grow past a limit, set with prlimit(1): writes past it fail as on a
// full disk) stops, rather than go on without committing anything, and
// refuses to start again until its halt is cleared (latch datadir
// clear-halt); then, without the limit, it serves every item it
// acknowledged.
func TestDiskFull(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Fatalf("prlimit (util-linux) not found: %v", err)
	}
	dataDir := t.TempDir()
	p := newProc(t, "full", "--data-dir", dataDir)
	bin, args := p.bin, p.args
	p.bin, p.args = prlimit, append([]string{"--fsize=4000000", bin}, args...)
	p.start()
	mc, err := net.Dial("tcp", p.mc)
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Close()
	r := bufio.NewReader(mc)
	value := strings.Repeat("x", 200<<10)
	stored := 0
	for ; stored < 100; stored++ {
		mc.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := fmt.Fprintf(mc, "set k%d 0 0 %d\r\n%s\r\n", stored, len(value), value); err != nil {
			break
		}
		if line, err := r.ReadString('\n'); err != nil || line != "STORED\r\n" {
			break
		}
	}
	if stored == 0 || stored == 100 {
		t.Fatalf("%d items stored before the limit; want some, then a failure", stored)
	}
	select {
	case err := <-p.exited:
		if err == nil {
			t.Errorf("the node exited with status 0 once its log failed")
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the node still runs 10 s after its log failed; log: %s", p.logText())
	}
	if log := p.logText(); !strings.Contains(log, "a write to the data dir failed; this node stops") || !strings.Contains(log, "file too large") {
		t.Errorf("the log does not say why the node stopped: %s", log)
	}
	p.cmd = nil
	p.log.Close()

	// It left a mark: started again, it refuses, saying why, until an
	// operator clears it.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	again := exec.CommandContext(ctx, bin, args...)
	again.Env = cleanEnv()
	if out, err := again.CombinedOutput(); err == nil || !strings.Contains(string(out), "stopped on a disk error") || !strings.Contains(string(out), "clear-halt") {
		t.Fatalf("started again after the failure: %v, output %q; want a refusal naming the halt and clear-halt", err, out)
	}
	if ctx.Err() != nil {
		t.Fatal("started again after the failure, it ran for 10 s")
	}
	clear := exec.Command(bin, "datadir", "--data-dir", dataDir, "clear-halt")
	clear.Env = cleanEnv()
	if out, err := clear.CombinedOutput(); err != nil || !strings.Contains(string(out), "halt cleared") {
		t.Fatalf("latch datadir clear-halt: %v, output %q", err, out)
	}

	p.bin, p.args = bin, args
	p.start()
	items := gomemcache.New(p.mc)
	items.Timeout = 5 * time.Second
	for i := range stored {
		var it *gomemcache.Item
		for range 50 { // until the restarted node leads
			if it, err = items.Get(fmt.Sprintf("k%d", i)); err == nil || errors.Is(err, gomemcache.ErrCacheMiss) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil || len(it.Value) != len(value) {
			t.Fatalf("k%d, acknowledged before the failure, after the restart: %v", i, err)
		}
	}
}

// TestClusterKillLeader: three latch serve processes on loopback with
// their own data dirs. The leader is killed with SIGKILL while a leased
// lock taken through a follower is held and a request on the other
// follower waits for it: the lock is not released early, not granted
// twice, the waiter is served by the new leader once the holder releases,
// and the killed node rejoins.
func TestClusterKillLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	procs, _ := startCluster(t)
	leader := waitLeader(t, procs)
	var f1, f2 string
	for id := range procs {
		if id != leader {
			if f1 == "" {
				f1 = id
			} else {
				f2 = id
			}
		}
	}
	ctx := context.Background()
	holder := procs[f1].dial(t)
	held, err := holder.Lock(ctx, []string{"k"}, client.Lease(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	waiter := procs[f2].dial(t)
	type outcome struct {
		l   *client.Lock
		err error
	}
	waited := make(chan outcome, 1)
	go func() {
		l, err := waiter.Lock(ctx, []string{"k"})
		waited <- outcome{l, err}
	}()
	// A client with a TTL session on the leader, which knows every node.
	mover := dialAll(t, "every node", []string{procs[leader].dlock, procs[f1].dlock, procs[f2].dlock}, client.SessionTTL(6*time.Second))
	moved, err := mover.Lock(ctx, []string{"r"})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)

	killedAt := time.Now()
	killed := procs[leader]
	killed.kill()
	delete(procs, leader)
	newLeader := waitLeader(t, procs)
	t.Logf("leader %s killed; %s leads %v later", leader, newLeader, time.Since(killedAt))
	select {
	case o := <-waited:
		t.Fatalf("the waiter was answered while the lock is held: %+v", o)
	default:
	}
	l, err := procs[f1].lock("k")
	if err != nil || len(l.Holders) != 1 || l.Holders[0].Token != uint64(held.Token()) {
		t.Fatalf("k after the failover = %+v, %v; want held with token %d", l, err, held.Token())
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatalf("unlock after the failover: %v", err)
	}
	select {
	case o := <-waited:
		if o.err != nil || o.l.Token() <= held.Token() {
			t.Fatalf("the waiter got %+v, %v; want a grant after token %d", o.l, o.err, held.Token())
		}
		t.Logf("waiter granted %v after the kill", time.Since(killedAt))
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was not granted after the release")
	}

	// The client of the killed node resumed its session elsewhere: its
	// lock is still its own, and it goes on taking locks.
	var again *client.Lock
	for range 100 {
		if again, err = mover.Lock(ctx, []string{"r2"}); !errors.Is(err, client.ErrConnectionLost) && !errors.Is(err, latch.ErrAlreadyHeld) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("lock after the failover through the resumed session: %v", err)
	}
	select {
	case <-moved.Done():
		t.Fatalf("the resumed session's lock ended: %v", moved.Err())
	default:
	}
	if l, err := procs[f1].lock("r"); err != nil || len(l.Holders) != 1 || l.Holders[0].Session != uint64(mover.SessionID()) {
		t.Fatalf("r after the failover = %+v, %v; want held by the resumed session %d", l, err, mover.SessionID())
	}
	if err := moved.Unlock(ctx); err != nil {
		t.Errorf("unlock through the resumed session: %v", err)
	}
	again.Unlock(ctx)
	t.Logf("session resumed on another node %v after the kill", time.Since(killedAt))

	// The killed node rejoins from its data dir and catches up.
	rejoined := killed
	rejoined.start()
	caughtUp := false
	for range 100 {
		if l, err := rejoined.lock("k"); err == nil && len(l.Holders) == 1 && l.Holders[0].Session == uint64(waiter.SessionID()) {
			caughtUp = true
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !caughtUp {
		st, err := rejoined.cluster()
		t.Fatalf("the restarted node did not catch up: cluster %+v, %v; log: %s", st, err, rejoined.logText())
	}
	procs[leader] = rejoined

	// latch cluster, through a follower: the status, then the leadership
	// handed to the rejoined node.
	cli := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(rejoined.bin, append([]string{"cluster", "--admin-addr", procs[f1].adminURL}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("latch cluster %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	if out := cli("status"); !strings.Contains(out, "CLUSTER: cluster, node "+f1) || strings.Count(out, "follower")+strings.Count(out, "leader ") < 3 {
		t.Errorf("latch cluster status:\n%s", out)
	}
	cli("transfer", leader)
	if got := waitLeader(t, procs); got != leader {
		t.Errorf("leader after latch cluster transfer %s = %s", leader, got)
	}
	// Requests that name no member, or a bad address, are refused with the
	// reason, also when the follower asked has the leader answer them.
	st, err := procs[f1].cluster()
	if err != nil || len(st.Members) == 0 {
		t.Fatalf("cluster status: %+v, %v", st, err)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"remove", "n9"}, "404 Not Found"},
		{[]string{"transfer", "n9"}, "404 Not Found"},
		{[]string{"add", "n9", "nonsense"}, `400 Bad Request: {"error":"raft_addr \"nonsense\": want HOST:PORT"}`},
		{[]string{"add", "n9", st.Members[0].RaftAddr}, "is member " + st.Members[0].ID + "'s"},
	} {
		out, err := exec.Command(rejoined.bin, append([]string{"cluster", "--admin-addr", procs[f1].adminURL}, tt.args...)...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), tt.want) {
			t.Errorf("latch cluster %v: %v, %s; want a failure with %q", tt.args, err, out, tt.want)
		}
	}
	if st2, err := procs[f1].cluster(); err != nil || len(st2.Members) != len(st.Members) {
		t.Errorf("members after the refused requests: %+v, %v; want %d", st2.Members, err, len(st.Members))
	}
}

// TestClusterStopNode: a node stopped with SIGSTOP answers nothing and
// keeps its clients' connections open. A Go client whose TTL session is on
// it gives the connection up as silent and resumes the session on another
// node within the TTL: its lock stays held long past the TTL, and when the
// node continues, its end of the old connection (which the client closed
// once the session had moved) does not end the session.
func TestClusterStopNode(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	// A node TTL longer than the stop: the stopped node does not let its
	// clients go when it continues, so it ends the old connection's
	// session the ordinary way, which the cluster must ignore.
	procs, _ := startCluster(t, "--node-ttl", "30s")
	leader := waitLeader(t, procs)
	var stopped *node
	addrs := []string{procs[leader].dlock}
	for id, p := range procs {
		if id == leader {
			continue
		}
		if stopped == nil {
			stopped = p
			addrs = append([]string{p.dlock}, addrs...)
		} else {
			addrs = append(addrs, p.dlock)
		}
	}
	ctx := context.Background()
	const ttl = 3 * time.Second
	c := dialAll(t, "every node", addrs, client.SessionTTL(ttl))
	held, err := c.Lock(ctx, []string{"k"})
	if err != nil {
		t.Fatal(err)
	}

	if err := stopped.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stoppedAt := time.Now()
	continued := false
	cont := func() {
		if !continued {
			continued = true
			if err := stopped.cmd.Process.Signal(syscall.SIGCONT); err != nil {
				t.Errorf("SIGCONT %s: %v", stopped.name, err)
			}
		}
	}
	defer cont()

	// Within the TTL, the session moves and takes locks again. (A request
	// sent to the stopped node fails with ErrConnectionLost, and its keys
	// are ErrAlreadyHeld until the moved session has given them back.)
	var again *client.Lock
	for {
		lctx, cancel := context.WithTimeout(ctx, ttl)
		again, err = c.Lock(lctx, []string{"k2"})
		cancel()
		if !errors.Is(err, client.ErrConnectionLost) && !errors.Is(err, latch.ErrAlreadyHeld) || time.Since(stoppedAt) > 2*ttl {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("lock through the session after %s stopped: %v", stopped.name, err)
	}
	moved := time.Since(stoppedAt)
	t.Logf("session moved off the stopped node %v after the SIGSTOP (TTL %v)", moved, ttl)
	if moved >= ttl {
		t.Errorf("the session moved %v after the SIGSTOP, not within its TTL %v", moved, ttl)
	}

	// Long past the TTL, the first lock is still the session's.
	time.Sleep(time.Until(stoppedAt.Add(2 * ttl)))
	checkHeld := func(when string, leader *node) {
		t.Helper()
		select {
		case <-held.Done():
			t.Fatalf("%s: the lock ended: %v", when, held.Err())
		default:
		}
		l, err := leader.lock("k")
		if err != nil || len(l.Holders) != 1 || l.Holders[0].Session != uint64(c.SessionID()) {
			t.Fatalf("%s: k = %+v, %v; want held by the session %d", when, l, err, c.SessionID())
		}
	}
	// (The stopped node's admin API does not answer: ask the leader.)
	checkHeld("twice the TTL after the SIGSTOP", procs[leader])

	// The node continues and reads the end of the old connection.
	cont()
	closed := false
	for range 200 {
		b, _ := os.ReadFile(stopped.log.Name())
		if closed = strings.Contains(string(b), "dlock: connection closed"); closed {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !closed {
		t.Fatalf("%s did not close the old connection after SIGCONT; log: %s", stopped.name, stopped.logText())
	}
	checkHeld("after the stopped node continued", procs[waitLeader(t, procs)])
	if err := held.Unlock(ctx); err != nil {
		t.Errorf("unlock k: %v", err)
	}
	if err := again.Unlock(ctx); err != nil {
		t.Errorf("unlock k2: %v", err)
	}
}

// TestClusterShutdownNode: a node shut down gracefully (SIGTERM), as in a
// rolling restart, a follower or the leader, lets go of the Go client's
// TTL session without ending it: the Lock the client had waiting through
// it fails with latch.ErrUnavailable and client.ErrConnectionLost (not
// ShuttingDown, which would end the session), the client resumes its
// session on another node, and its lock stays held with the same fencing
// token.
func TestClusterShutdownNode(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	for _, leads := range []bool{false, true} {
		name := "follower"
		if leads {
			name = "leader"
		}
		t.Run(name, func(t *testing.T) { testShutdownNode(t, leads) })
	}
}

// testShutdownNode is TestClusterShutdownNode, shutting down the leader
// when leads is set, a follower otherwise.
func testShutdownNode(t *testing.T, leads bool) {
	procs, _ := startCluster(t)
	leader := waitLeader(t, procs)
	var down, up *node // up stays up
	var addrs []string
	for id, p := range procs {
		if down == nil && (id == leader) == leads {
			down = p
			addrs = append([]string{p.dlock}, addrs...)
			continue
		}
		up = p
		addrs = append(addrs, p.dlock)
	}
	ctx := context.Background()
	const ttl = 5 * time.Second
	c := dialAll(t, "every node", addrs, client.SessionTTL(ttl))
	held, err := c.Lock(ctx, []string{"k"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := up.dial(t).Lock(ctx, []string{"busy"}); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() {
		lctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		_, err := c.Lock(lctx, []string{"busy"})
		waited <- err
	}()
	for range 200 {
		if l, err := up.lock("busy"); err == nil && len(l.Waiters) == 1 {
			break
		}
		time.Sleep(25 * time.Millisecond)
	}

	if err := down.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-down.exited:
		if err != nil {
			t.Errorf("%s exited after SIGTERM: %v", down.name, err)
		}
		down.cmd = nil
		down.log.Close()
	case <-time.After(20 * time.Second):
		t.Fatalf("%s did not exit within 20 s of SIGTERM; log: %s", down.name, down.logText())
	}
	select {
	case err := <-waited:
		if !errors.Is(err, latch.ErrUnavailable) || !errors.Is(err, client.ErrConnectionLost) {
			t.Errorf("the Lock waiting through %s: %v, want ErrUnavailable and ErrConnectionLost", down.name, err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the Lock waiting through %s was not answered", down.name)
	}

	// The session moves and takes locks again.
	var again *client.Lock
	for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		lctx, cancel := context.WithTimeout(ctx, ttl)
		again, err = c.Lock(lctx, []string{"k2"})
		cancel()
		if !errors.Is(err, client.ErrConnectionLost) && !errors.Is(err, latch.ErrAlreadyHeld) || time.Since(start) > 2*ttl {
			break
		}
	}
	if err != nil {
		t.Fatalf("lock through the session after %s shut down: %v (client: %v)\n%s", down.name, err, c.Err(), logsOf(procs))
	}
	select {
	case <-held.Done():
		t.Fatalf("the lock ended: %v", held.Err())
	default:
	}
	l, err := up.lock("k")
	if err != nil || len(l.Holders) != 1 || l.Holders[0].Session != uint64(c.SessionID()) || l.Holders[0].Token != uint64(held.Token()) {
		t.Fatalf("k = %+v, %v; want held by the session %d with token %d", l, err, c.SessionID(), held.Token())
	}
	if err := held.Unlock(ctx); err != nil {
		t.Errorf("unlock k: %v", err)
	}
	if err := again.Unlock(ctx); err != nil {
		t.Errorf("unlock k2: %v", err)
	}
}

// startCluster starts three cluster nodes, n1 to n3, each with extra
// flags, and returns them and their Raft addresses (n1's first).
func startCluster(t *testing.T, extra ...string) (map[string]*node, []string) {
	t.Helper()
	return startClusterEach(t, nil, extra...)
}

// startClusterEach is startCluster with, besides extra, the flags each
// returns for node i (0 to 2) when each is not nil.
func startClusterEach(t *testing.T, each func(i int) []string, extra ...string) (map[string]*node, []string) {
	t.Helper()
	raft := freePorts(t, 3)
	var members []string
	for i, a := range raft {
		members = append(members, fmt.Sprintf("n%d=%s", i+1, a))
	}
	procs := map[string]*node{}
	for i, a := range raft {
		id := fmt.Sprintf("n%d", i+1)
		args := []string{"--data-dir", t.TempDir(), "--node-id", id, "--raft-addr", a,
			"--initial-cluster", strings.Join(members, ","), "--election-timeout", "500ms", "--node-ttl", "5s"}
		if each != nil {
			args = append(args, each(i)...)
		}
		procs[id] = newProc(t, id, append(args, extra...)...)
	}
	for _, p := range procs {
		p.start()
	}
	return procs, raft
}

// waitLeader waits until every process agrees on a leader among them.
func waitLeader(t *testing.T, procs map[string]*node) string {
	t.Helper()
	for range 200 {
		leader := ""
		agreed := true
		for _, p := range procs {
			st, err := p.cluster()
			if err != nil || st.Leader == "" || leader != "" && st.Leader != leader {
				agreed = false
				break
			}
			leader = st.Leader
		}
		if _, ok := procs[leader]; agreed && ok {
			return leader
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("no leader agreed on in 10 s")
	return ""
}

// TestClusterPeerTLS: three nodes whose Raft and forwarding connections
// are mutual TLS (--peer-tls-*) elect a leader and serve a lock taken
// through a follower (forwarded to the leader over TLS).
func TestClusterPeerTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	pki := tlstest.New(t)
	procs, raft := startCluster(t, "--peer-tls-cert", pki.PeerCertFile, "--peer-tls-key", pki.PeerKeyFile, "--peer-tls-ca", pki.CAFile)
	leader := waitLeader(t, procs)
	var follower string
	for id := range procs {
		if id != leader {
			follower = id
		}
	}
	// The Raft port speaks TLS, and only to holders of a peer certificate.
	peer, err := tls.LoadX509KeyPair(pki.PeerCertFile, pki.PeerKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, certs := range [][]tls.Certificate{{peer}, nil} {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", raft[0], &tls.Config{RootCAs: pki.Pool(), Certificates: certs})
		if err == nil {
			// A refused certificate shows here with TLS 1.3; an
			// accepted one leaves the server waiting for the Mux's
			// first byte (for 5 s).
			conn.SetReadDeadline(time.Now().Add(time.Second))
			_, err = conn.Read(make([]byte, 1))
			conn.Close()
			if errors.Is(err, os.ErrDeadlineExceeded) {
				err = nil
			}
		}
		if (err == nil) != (certs != nil) {
			t.Errorf("TLS to the Raft port with %d certificates: %v", len(certs), err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := procs[follower].dial(t)
	l, err := c.Lock(ctx, []string{"k"}, client.Lease(time.Minute))
	if err != nil {
		t.Fatalf("lock through follower %s: %v", follower, err)
	}
	if info, err := procs[leader].lock("k"); err != nil || len(info.Holders) != 1 {
		t.Fatalf("k on leader %s = %+v, %v; want held", leader, info, err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	// Rotation: a new peer certificate (the three nodes share the files),
	// SIGHUP to each; every Raft port then presents it, and a follower
	// killed and started again, whose connections are all new, rejoins
	// and serves a lock forwarded to the leader.
	rotated := pki.Reissue(t, true).Leaf.SerialNumber.String()
	for id, p := range procs {
		p.cmd.Process.Signal(syscall.SIGHUP)
		deadline := time.Now().Add(10 * time.Second)
		// "reloaded", or "reload: nothing changed" when a handshake has
		// picked the files up first.
		for !strings.Contains(p.logText(), "msg=reloaded") && !strings.Contains(p.logText(), `msg="reload: nothing changed"`) {
			if time.Now().After(deadline) {
				t.Fatalf("%s logged no reload in 10 s: %s", id, p.logText())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	peerCfg := &tls.Config{RootCAs: pki.Pool(), Certificates: []tls.Certificate{pki.Peer}}
	for i, addr := range raft {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, peerCfg)
		if err != nil {
			t.Fatalf("TLS to n%d's Raft port after the rotation: %v", i+1, err)
		}
		if got := conn.ConnectionState().PeerCertificates[0].SerialNumber.String(); got != rotated {
			t.Errorf("n%d's Raft port presents serial %s, want the rotated %s", i+1, got, rotated)
		}
		conn.Close()
	}
	procs[follower].kill()
	procs[follower].start()
	leader = waitLeader(t, procs)
	c = procs[follower].dial(t)
	_, err = c.Lock(ctx, []string{"k2"}, client.Lease(time.Minute))
	if err != nil {
		t.Fatalf("lock through the restarted follower %s after the rotation: %v\n%s", follower, err, logsOf(procs))
	}
	if info, err := procs[leader].lock("k2"); err != nil || len(info.Holders) != 1 {
		t.Fatalf("k2 on leader %s = %+v, %v; want held", leader, info, err)
	}
}
