package raftrep_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/raft"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/fsm"
	"github.com/latchd/latch/internal/node"
	"github.com/latchd/latch/internal/replica"
	"github.com/latchd/latch/internal/replica/raftrep"
	"github.com/latchd/latch/internal/vfs"
)

// cluster is an in-process cluster of nodes over a pipeNet, inside a
// synctest bubble: time is virtual, so elections and leases run on it.
type cluster struct {
	t     *testing.T
	net   *pipeNet
	peers []raftrep.Peer
	nodes map[string]*node.Node
	reps  map[string]*raftrep.Replicator
	// dirs holds each node's data dir, when the test keeps them on disk.
	dirs map[string]string
	// joining holds the nodes that start without state to be added to
	// the running cluster (raftrep.Config.Join).
	joining map[string]bool
	// addrs holds the addresses of nodes that are not at their ID.
	addrs map[string]string
	// snapshots, when set, makes the nodes snapshot every few entries and
	// keep few in the log, so that a lagging node is sent a snapshot.
	snapshots bool
	// latency, when set, delays every AppendEntries (slowTransport).
	latency time.Duration
	// appends, when set, counts the AppendEntries every node sends
	// (slowTransport).
	appends *atomic.Int64
	// logger, when set, is every node's logger.
	logger *slog.Logger
	// fss, when set, holds each node's file system, its data dir "/ID"
	// on it (powerloss_test.go).
	fss map[string]vfs.FS
}

func newCluster(t *testing.T, n int, disk bool) *cluster {
	c := makeCluster(t, n, disk)
	c.startAll()
	return c
}

// makeCluster makes a cluster of n nodes, not started, for a test to set
// options on before startAll.
func makeCluster(t *testing.T, n int, disk bool) *cluster {
	c := &cluster{t: t, net: newPipeNet(), nodes: make(map[string]*node.Node), reps: make(map[string]*raftrep.Replicator), dirs: make(map[string]string)}
	for i := range n {
		id := fmt.Sprintf("n%d", i+1)
		c.peers = append(c.peers, raftrep.Peer{ID: id, Addr: id})
		if disk {
			c.dirs[id] = t.TempDir()
		}
	}
	return c
}

// startAll starts every node, and stops those running when the test ends.
func (c *cluster) startAll() {
	for _, p := range c.peers {
		c.start(p.ID)
	}
	c.t.Cleanup(func() {
		for id := range c.nodes {
			c.stop(id)
		}
	})
}

// start starts node id (again: its stores are in memory, so a restart is a
// node that lost its disk and catches up from the others).
func (c *cluster) start(id string) {
	c.t.Helper()
	if err := c.tryStart(id); err != nil {
		c.t.Fatalf("start %s: %v", id, err)
	}
}

// tryStart starts node id, or says why it could not.
func (c *cluster) tryStart(id string) error {
	var trans raft.Transport
	inmem, end := c.net.add(c.addr(id))
	trans = inmem
	if c.latency > 0 || c.appends != nil {
		trans = slowTransport{inmem, c.latency, c.appends}
	}
	n, err := node.New(node.Config{
		NodeID:  id,
		NodeTTL: 10 * time.Second,
		Replicator: func(sm replica.StateMachine) (replica.Replicator, error) {
			rc := raftrep.Config{ID: id, Addr: c.addr(id), Dir: c.dirs[id], Peers: c.peers, Join: c.joining[id], Transport: trans, Network: end, Logger: c.logger}
			if fsys := c.fss[id]; fsys != nil {
				rc.FS, rc.Dir = fsys, "/"+id
				if c.logger != nil {
					rc.Logger = c.logger.With("node", id)
				}
			}
			if c.snapshots {
				rc.SnapshotThreshold, rc.SnapshotInterval, rc.TrailingLogs = 8, time.Second, 2
			}
			r, err := raftrep.New(rc, sm)
			c.reps[id] = r
			return r, err
		},
	})
	if err != nil {
		c.net.remove(c.addr(id))
		delete(c.reps, id)
		return err
	}
	c.nodes[id] = n
	return nil
}

// stop shuts node id down.
func (c *cluster) stop(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.nodes[id].Shutdown(ctx)
	delete(c.nodes, id)
	delete(c.reps, id)
	c.net.remove(c.addr(id))
}

// addr returns node id's address: its ID, unless addrs has another.
func (c *cluster) addr(id string) string {
	if a, ok := c.addrs[id]; ok {
		return a
	}
	return id
}

// leader waits for a leader that every running node agrees on, and
// returns it.
func (c *cluster) leader() string {
	c.t.Helper()
	if id := c.waitLeader(); id != "" {
		return id
	}
	c.t.Fatal("no leader after 10 s")
	return ""
}

// waitLeader is leader, "" when there is none after 10 s.
func (c *cluster) waitLeader() string {
	for range 100 {
		time.Sleep(100 * time.Millisecond)
		seen := ""
		agreed := true
		for _, r := range c.reps {
			id, _, ok := r.Leader()
			if !ok || seen != "" && id != seen {
				agreed = false
				break
			}
			seen = id
		}
		if agreed && seen != "" {
			if _, ok := c.reps[seen]; ok {
				time.Sleep(time.Second) // its promotion
				return seen
			}
		}
	}
	return ""
}

// other returns a running node that is not id.
func (c *cluster) other(not ...string) string {
	for id := range c.nodes {
		if !contains(not, id) {
			return id
		}
	}
	c.t.Fatal("no other node")
	return ""
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (c *cluster) open(id string, opts latch.SessionOptions) latch.Session {
	c.t.Helper()
	s, err := c.nodes[id].OpenSession(opts)
	if err != nil {
		c.t.Fatalf("open a session on %s: %v", id, err)
	}
	return s
}

// TestClusterFailover: a lock taken through a follower is held by the
// whole cluster; when the leader is cut off, a new one is elected, the
// leased lock stays held through the failover (no lease ends by it), a
// waiter parked on a follower is granted by the new leader when the lock
// is released, nothing is granted twice, and the old leader catches up
// when the partition heals.
func TestClusterFailover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, false)
		lead := c.leader()
		f1 := c.other(lead)
		f2 := c.other(lead, f1)

		holder := c.open(f1, latch.SessionOptions{Protocol: "test"})
		g, err := holder.Acquire(context.Background(), latch.LockRequest{Keys: []string{"k"}, Lease: 20 * time.Second})
		if err != nil {
			t.Fatalf("acquire on follower %s: %v", f1, err)
		}
		other := c.open(f2, latch.SessionOptions{Protocol: "test"})
		if _, err := other.Acquire(context.Background(), latch.LockRequest{Keys: []string{"k"}, Wait: latch.NoWait}); !errors.Is(err, latch.ErrWouldBlock) {
			t.Fatalf("second acquire of k on %s: %v, want busy", f2, err)
		}
		type outcome struct {
			g   latch.Grant
			err error
		}
		waited := make(chan outcome, 1)
		go func() {
			g, err := other.Acquire(context.Background(), latch.LockRequest{Keys: []string{"k"}, Wait: latch.WaitForever})
			waited <- outcome{g, err}
		}()
		time.Sleep(time.Second)

		// Cut the leader off; the others elect a new one.
		c.net.partition(lead)
		time.Sleep(3 * time.Second)
		lead2 := c.leaderAmong(f1, f2)
		if lead2 == lead {
			t.Fatalf("leader %s kept its place while cut off", lead)
		}
		select {
		case o := <-waited:
			t.Fatalf("the waiter was answered during the failover: %+v", o)
		default:
		}
		info, ok := c.nodes[lead2].Lock("k")
		if !ok || len(info.Holders) != 1 || info.Holders[0].Session != holder.ID() {
			t.Fatalf("k after the failover = %+v, %v; want held by session %d", info, ok, holder.ID())
		}
		if err := holder.Release("k"); err != nil {
			t.Fatalf("release through %s after the failover: %v", f1, err)
		}
		select {
		case o := <-waited:
			if o.err != nil || o.g.Token <= g.Token {
				t.Fatalf("the waiter got %+v, want a grant after token %d", o, g.Token)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the waiter was not granted after the release")
		}

		c.net.heal()
		time.Sleep(3 * time.Second)
		for id, n := range c.nodes {
			info, ok := n.Lock("k")
			if !ok || len(info.Holders) != 1 || info.Holders[0].Session != other.ID() {
				t.Errorf("node %s: k = %+v, %v; want held by session %d", id, info, ok, other.ID())
			}
		}
		holder.Close()
		other.Close()
	})
}

// leaderAmong waits for a leader among ids.
func (c *cluster) leaderAmong(ids ...string) string {
	c.t.Helper()
	for range 100 {
		time.Sleep(100 * time.Millisecond)
		for _, id := range ids {
			if l, self, _ := c.reps[id].Leader(); self {
				time.Sleep(time.Second)
				return l
			}
		}
	}
	c.t.Fatal("no leader among", ids)
	return ""
}

// TestDeadNodeSessions: the sessions bound to the connections of a node
// that is cut off end a node TTL after its last heartbeat (not before),
// releasing their locks with their lock-delay; the node itself lets go of
// its clients before that.
func TestDeadNodeSessions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, false)
		lead := c.leader()
		f1 := c.other(lead)
		s := c.open(f1, latch.SessionOptions{Protocol: "memcache", LockDelay: 3 * time.Second})
		if _, err := s.Acquire(context.Background(), latch.LockRequest{Keys: []string{"c"}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second) // a heartbeat of f1 commits
		cut := time.Now()
		c.net.partition(f1)
		held := func() bool {
			info, ok := c.nodes[lead].Lock("c")
			return ok && len(info.Holders) == 1
		}
		time.Sleep(9 * time.Second)
		if !held() {
			t.Fatalf("c released %v after its node was cut off, before the node TTL", time.Since(cut))
		}
		select {
		case <-s.Done():
		default:
			t.Error("the cut-off node still vouches for its session after 9 s of a 10 s node TTL")
		}
		time.Sleep(2 * time.Second)
		if held() {
			t.Fatalf("c still held %v after its node was cut off", time.Since(cut))
		}
		other := c.open(lead, latch.SessionOptions{})
		if _, err := other.Acquire(context.Background(), latch.LockRequest{Keys: []string{"c"}, Wait: latch.NoWait}); !errors.Is(err, latch.ErrWouldBlock) {
			t.Fatalf("c right after its session ended: %v, want busy (lock-delay)", err)
		}
		time.Sleep(3 * time.Second)
		if _, err := other.Acquire(context.Background(), latch.LockRequest{Keys: []string{"c"}, Wait: latch.NoWait}); err != nil {
			t.Fatalf("c after the lock-delay: %v", err)
		}
		other.Close()
		c.net.heal()
	})
}

// TestCutOffNodeSessions: a node cut off from the majority fails its
// sessions' calls with latch.ErrUnavailable. When it lets go of its
// clients, the waiting request of a session bound to its connection fails
// with latch.ErrSessionEnded (the node proposes its end), but that of a
// session with a TTL, and every later call of that session, fails with
// latch.ErrUnavailable alone: the node cannot vouch for it, but it has not
// ended, and another node resumes it with its lock.
func TestCutOffNodeSessions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c := newCluster(t, 3, false)
		lead := c.leader()
		f1 := c.other(lead)
		holder := c.open(lead, latch.SessionOptions{})
		if _, err := holder.Acquire(ctx, latch.LockRequest{Keys: []string{"busy"}}); err != nil {
			t.Fatal(err)
		}
		withTTL := c.open(f1, latch.SessionOptions{TTL: time.Minute})
		if _, err := withTTL.Acquire(ctx, latch.LockRequest{Keys: []string{"k"}}); err != nil {
			t.Fatal(err)
		}
		bound := c.open(f1, latch.SessionOptions{})
		wait := func(s latch.Session) chan error {
			ch := make(chan error, 1)
			go func() {
				_, err := s.Acquire(ctx, latch.LockRequest{Keys: []string{"busy"}, Wait: latch.WaitForever})
				ch <- err
			}()
			return ch
		}
		waitTTL, waitBound := wait(withTTL), wait(bound)
		time.Sleep(time.Second) // both wait; a heartbeat of f1 commits
		cut := time.Now()
		c.net.partition(f1)

		// Two election timeouts without a leader: refused at once.
		time.Sleep(4 * time.Second)
		if err := withTTL.KeepAlive(); !errors.Is(err, latch.ErrUnavailable) {
			t.Fatalf("keepalive on the cut-off node %v after the cut: %v, want ErrUnavailable", time.Since(cut), err)
		}

		// The node lets go of its clients (80% of the node TTL).
		time.Sleep(6 * time.Second)
		select {
		case err := <-waitBound:
			if !errors.Is(err, latch.ErrSessionEnded) {
				t.Errorf("waiting request of a session without a TTL: %v, want ErrSessionEnded", err)
			}
		default:
			t.Fatal("the waiting request of a session without a TTL was not answered when the node let go")
		}
		select {
		case err := <-waitTTL:
			if !errors.Is(err, latch.ErrUnavailable) || errors.Is(err, latch.ErrSessionEnded) {
				t.Errorf("waiting request of a session with a TTL: %v, want ErrUnavailable and not ErrSessionEnded", err)
			}
		default:
			t.Fatal("the waiting request of a session with a TTL was not answered when the node let go")
		}
		select {
		case <-withTTL.Done():
		default:
			t.Fatal("the cut-off node still vouches for its session with a TTL")
		}
		if err := withTTL.KeepAlive(); !errors.Is(err, latch.ErrUnavailable) || errors.Is(err, latch.ErrNoSession) {
			t.Errorf("keepalive of a session with a TTL let go: %v, want ErrUnavailable and not ErrNoSession", err)
		}
		if err := bound.KeepAlive(); !errors.Is(err, latch.ErrNoSession) {
			t.Errorf("keepalive of a session without a TTL let go: %v, want ErrNoSession", err)
		}

		// It lives on: the leader's node resumes it, with its lock.
		resumed, err := c.nodes[lead].ResumeSession(withTTL.ID(), latch.SessionOptions{TTL: time.Minute})
		if err != nil {
			t.Fatalf("resume on %s: %v", lead, err)
		}
		info, ok := c.nodes[lead].Lock("k")
		if !ok || len(info.Holders) != 1 || info.Holders[0].Session != withTTL.ID() {
			t.Fatalf("k after the resume = %+v, %v; want held by session %d", info, ok, withTTL.ID())
		}
		resumed.Close()
		holder.Close()
		c.net.heal()
	})
}

// TestCutOffNodeOpenSession: a session opened on a node just cut off from
// the majority (before it refuses new work) waits for its commit, but not
// for ever: the call fails with latch.ErrUnavailable when the node lets go
// of its clients, although the node had no session then. When the cut
// heals and the open commits after all, the node ends that session, which
// nobody holds and which its heartbeats would otherwise keep alive.
func TestCutOffNodeOpenSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, false)
		lead := c.leader()
		f1 := c.other(lead)
		c.net.partition(f1)
		opened := make(chan error, 1)
		go func() {
			s, err := c.nodes[f1].OpenSession(latch.SessionOptions{Protocol: "test"})
			if err == nil {
				s.Close()
			}
			opened <- err
		}()
		time.Sleep(9 * time.Second) // 80% of the node TTL, and a heartbeat
		select {
		case err := <-opened:
			if !errors.Is(err, latch.ErrUnavailable) {
				t.Fatalf("open on the cut-off node: %v, want ErrUnavailable", err)
			}
		default:
			t.Fatal("the open on the cut-off node still waits when the node let go of its clients")
		}
		c.net.heal()
		time.Sleep(5 * time.Second)
		for _, si := range c.nodes[lead].Sessions() {
			if si.Node == f1 {
				t.Errorf("session %d of %s lives on with nobody on it: %+v", si.ID, f1, si)
			}
		}
	})
}

// TestStaleAcquireAfterResume: a Lock that a node cut off from the
// majority proposed for a session with a TTL, and answered
// latch.ErrUnavailable when it let go of its clients, stays in its outbox;
// the session is resumed on another node, and when the partition heals
// the old node sends the acquire again. It is applied after the resume,
// and must not take the key: the client does not know the session holds
// it, and the session lives on, so the key would be held for good.
func TestStaleAcquireAfterResume(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c := newCluster(t, 3, false)
		lead := c.leader()
		f1 := c.other(lead)
		s := c.open(f1, latch.SessionOptions{TTL: time.Minute})
		time.Sleep(time.Second) // a heartbeat of f1 commits
		c.net.partition(f1)
		lock := make(chan error, 1)
		go func() {
			_, err := s.Acquire(ctx, latch.LockRequest{Keys: []string{"leak"}, Wait: latch.NoWait})
			lock <- err
		}()

		// The node lets go of its clients (80% of the node TTL): the
		// outcome of the Lock is unknown.
		time.Sleep(9 * time.Second)
		select {
		case err := <-lock:
			if !errors.Is(err, latch.ErrUnavailable) {
				t.Fatalf("Lock on the cut-off node: %v, want ErrUnavailable", err)
			}
		default:
			t.Fatal("the Lock on the cut-off node was not answered when it let go")
		}
		resumed, err := c.nodes[lead].ResumeSession(s.ID(), latch.SessionOptions{TTL: time.Minute})
		if err != nil {
			t.Fatalf("resume on %s: %v", lead, err)
		}

		// The old node rejoins and sends its outbox again.
		c.net.heal()
		time.Sleep(5 * time.Second)
		c.leader() // the cluster settles after the heal
		for id, n := range c.nodes {
			if info, ok := n.Lock("leak"); ok {
				t.Errorf("on %s, leak is held after the resume, by the old connection's Lock: %+v", id, info)
			}
		}
		if _, err := resumed.Acquire(ctx, latch.LockRequest{Keys: []string{"leak"}, Wait: latch.NoWait}); err != nil {
			t.Errorf("Lock of the resumed session: %v", err)
		}
		resumed.Close()
	})
}

// TestRestartFromDisk: a node stopped and started again from its data dir
// rejoins, catches up on what happened without it, and a lease taken
// before keeps its holder.
func TestRestartFromDisk(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, true)
		lead := c.leader()
		f1 := c.other(lead)
		s := c.open(lead, latch.SessionOptions{})
		g, err := s.Acquire(context.Background(), latch.LockRequest{Keys: []string{"leased"}, Lease: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		c.stop(f1)
		if _, err := s.Acquire(context.Background(), latch.LockRequest{Keys: []string{"later"}}); err != nil {
			t.Fatalf("acquire with a node down: %v", err)
		}
		c.start(f1)
		time.Sleep(3 * time.Second)
		for _, key := range []string{"leased", "later"} {
			info, ok := c.nodes[f1].Lock(key)
			if !ok || len(info.Holders) != 1 {
				t.Errorf("%s on the restarted node = %+v, %v", key, info, ok)
			}
		}
		if info, _ := c.nodes[f1].Lock("leased"); len(info.Holders) == 1 && info.Holders[0].Token != g.Token {
			t.Errorf("leased token on the restarted node %d, want %d", info.Holders[0].Token, g.Token)
		}
		s.Close()
	})
}

// TestReadsWaitForCatchUp: a node started again from its data dir serves
// its clients' reads (memcached get, Redis GET) only once it holds what
// the cluster committed before: not the misses of a state still being
// replayed.
func TestReadsWaitForCatchUp(t *testing.T) {
	// With snapshots, the restarted node restores one from its disk as it
	// starts, before it hears from the leader: its reads wait all the same.
	for _, snapshots := range []bool{false, true} {
		t.Run(fmt.Sprint("snapshots=", snapshots), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := makeCluster(t, 3, true)
				c.snapshots = snapshots
				c.startAll()
				lead := c.leader()
				f1 := c.other(lead)
				if r := c.nodes[lead].Do(nil, &fsm.Command{Op: fsm.OpItemSet, Key: []byte("item"), Value: []byte("v")}); r.Err != nil {
					t.Fatalf("set: %v", r.Err)
				}
				for i := range 30 { // enough entries for a snapshot
					key := "lock"
					if i > 0 {
						key = fmt.Sprint("lock", i)
					}
					if r := c.nodes[lead].Owned(&fsm.Command{Op: fsm.OpOwned, Owned: fsm.OwnedAcquire, Value: []byte("me"), Req: latch.LockRequest{Keys: []string{key}, Lease: time.Hour}}); r.Err != nil || r.Count != 1 {
						t.Fatalf("SET NX %s: %+v", key, r)
					}
				}
				time.Sleep(5 * time.Second) // f1 applies them all, and snapshots
				c.stop(f1)
				c.start(f1)
				if c.nodes[f1].CaughtUp() {
					t.Error("the restarted node says it caught up before it heard from the leader")
				}
				if it, err := c.nodes[f1].Get(c.nodes[f1].Now(), []byte("item")); err != nil || string(it.Value) != "v" {
					t.Errorf("get on the restarted node: %q, %v; want v", it.Value, err)
				}
				if !c.nodes[f1].CaughtUp() {
					t.Error("the restarted node served a read before it caught up")
				}
				if r, _ := c.nodes[f1].OwnedGet("lock"); r.Err != nil || r.Found != 1 || r.Owner != "me" {
					t.Errorf("GET on the restarted node: %+v; want held by me", r)
				}
			})
		})
	}
}

// TestInitialClusterIgnoredWarned: a node restarted from its data dir with
// an initial cluster other than its members warns that the list is
// ignored; restarted with the same list, it does not.
func TestInitialClusterIgnoredWarned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := makeCluster(t, 3, true)
		var logs syncBuffer
		c.logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
		c.startAll()
		lead := c.leader()
		f1 := c.other(lead)
		const warning = "the initial cluster is ignored"
		c.stop(f1)
		c.start(f1)
		if strings.Contains(logs.String(), warning) {
			t.Fatalf("warned on a restart with the same list: %s", logs.String())
		}
		c.stop(f1)
		c.peers = append(c.peers, raftrep.Peer{ID: "n9", Addr: "n9"})
		c.start(f1)
		if !strings.Contains(logs.String(), warning) || !strings.Contains(logs.String(), "n9=n9") {
			t.Fatalf("no warning on a restart with another list: %s", logs.String())
		}
	})
}

// syncBuffer is a bytes.Buffer for several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestSnapshotCatchUp: a node that was down while the others took
// snapshots and dropped the log it missed is sent a snapshot when it comes
// back, restores it, and serves the same state; a node restarted from its
// own snapshot on disk does too.
func TestSnapshotCatchUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := makeCluster(t, 3, true)
		c.snapshots = true
		c.startAll()
		lead := c.leader()
		f1 := c.other(lead)
		c.stop(f1)
		s := c.open(lead, latch.SessionOptions{})
		for i := range 60 {
			key := fmt.Sprintf("k%02d", i)
			if _, err := s.Acquire(context.Background(), latch.LockRequest{Keys: []string{key}, Lease: time.Hour}); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(5 * time.Second) // snapshots are taken
		c.start(f1)
		time.Sleep(5 * time.Second)
		got := c.nodes[f1].Locks("k", "", 0)
		if len(got) != 60 {
			t.Fatalf("the node sent a snapshot has %d locks, want 60", len(got))
		}
		// Its log, emptied when the snapshot was installed, takes the
		// entries after it, and holds them across a restart.
		for i := range 10 {
			if _, err := s.Acquire(context.Background(), latch.LockRequest{Keys: []string{fmt.Sprintf("k%02d", 60+i)}, Lease: time.Hour}); err != nil {
				t.Fatal(err)
			}
		}
		c.stop(f1)
		c.start(f1)
		time.Sleep(5 * time.Second)
		if got := c.nodes[f1].Locks("k", "", 0); len(got) != 70 {
			t.Fatalf("the node sent a snapshot has %d locks after a restart, want 70", len(got))
		}
		// Restarted from its own snapshot and log.
		lead2 := c.leader()
		f2 := c.other(lead2)
		c.stop(f2)
		c.start(f2)
		time.Sleep(5 * time.Second)
		if got := c.nodes[f2].Locks("k", "", 0); len(got) != 70 {
			t.Fatalf("the node restarted from disk has %d locks, want 70", len(got))
		}
		s.Close()
	})
}

// TestMembership: a node started to join (Join) takes no part until it is
// added, through a follower that forwards the request to the leader; once
// added it catches up with the state and serves. Removing the leader
// leaves a cluster that elects another among the rest, keeps its locks,
// and counts the removed node out.
func TestMembership(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, false)
		c.joining = map[string]bool{"n4": true}
		lead := c.leader()
		f := c.other(lead)
		holder := c.open(f, latch.SessionOptions{Protocol: "test", TTL: time.Minute})
		g, err := holder.Acquire(context.Background(), latch.LockRequest{Keys: []string{"k"}, Lease: time.Minute})
		if err != nil {
			t.Fatalf("acquire: %v", err)
		}

		c.start("n4")
		time.Sleep(3 * time.Second)
		if st, err := c.reps["n4"].Status(); err != nil || len(st.Members) != 0 || st.Leader != "" {
			t.Fatalf("n4 before it is added: %+v, %v; want no members and no leader", st, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.reps[f].AddVoter(ctx, "n4", "n4"); err != nil {
			t.Fatalf("add n4 through follower %s: %v", f, err)
		}
		time.Sleep(2 * time.Second)
		info, ok := c.nodes["n4"].Lock("k")
		if !ok || len(info.Holders) != 1 || info.Holders[0].Token != g.Token {
			t.Fatalf("k on n4 after it joined = %+v, %v; want held with token %d", info, ok, g.Token)
		}
		for id, r := range c.reps {
			if st, err := r.Status(); err != nil || len(st.Members) != 4 {
				t.Errorf("%s after the add: %+v, %v; want 4 members", id, st, err)
			}
		}
		// Refused, with the reason, on the leader and forwarded to it.
		for _, via := range []string{lead, f} {
			r := c.reps[via]
			if err := r.RemoveServer(ctx, "n9"); !errors.Is(err, raftrep.ErrNoMember) {
				t.Errorf("remove n9 through %s: %v; want ErrNoMember", via, err)
			}
			if err := r.Transfer(ctx, "n9"); !errors.Is(err, raftrep.ErrNoMember) {
				t.Errorf("transfer to n9 through %s: %v; want ErrNoMember", via, err)
			}
			if err := r.AddVoter(ctx, "n9", "n4"); !errors.Is(err, raftrep.ErrInvalidMember) || !strings.Contains(err.Error(), "address n4 is member n4's") {
				t.Errorf("add n9 at n4's address through %s: %v; want ErrInvalidMember", via, err)
			}
		}

		// Remove the leader, through itself, and stop it.
		if err := c.reps[lead].RemoveServer(ctx, lead); err != nil {
			t.Fatalf("remove leader %s: %v", lead, err)
		}
		c.stop(lead)
		var rest []string
		for id := range c.nodes {
			rest = append(rest, id)
		}
		lead2 := c.leaderAmong(rest...)
		st, err := c.reps[lead2].Status()
		if err != nil || len(st.Members) != 3 {
			t.Fatalf("after removing %s: %+v, %v; want 3 members", lead, st, err)
		}
		for _, m := range st.Members {
			if m.ID == lead {
				t.Errorf("removed %s still a member: %+v", lead, st.Members)
			}
		}
		// The lock is still held, and the new member serves.
		if info, ok := c.nodes[lead2].Lock("k"); !ok || len(info.Holders) != 1 {
			t.Errorf("k after the removal = %+v, %v; want held", info, ok)
		}
		s4 := c.open("n4", latch.SessionOptions{Protocol: "test"})
		g2, err := s4.Acquire(context.Background(), latch.LockRequest{Keys: []string{"k2"}})
		if err != nil || g2.Token <= g.Token {
			t.Fatalf("acquire through n4: %+v, %v; want a grant after token %d", g2, err, g.Token)
		}
		s4.Close()
		holder.Close()
	})
}

// TestCloseHandsOverLeadership: a leader that stops gracefully hands its
// leadership over first, so that the others have a leader again within a
// round of votes, not after a heartbeat timeout (1 s here) and an
// election.
func TestCloseHandsOverLeadership(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, false)
		lead := c.leader()
		start := time.Now()
		c.stop(lead)
		for {
			id, _, ok := c.reps[c.other()].Leader()
			if ok && id != lead {
				break
			}
			if time.Since(start) > 500*time.Millisecond {
				t.Fatalf("no new leader %v after the leader %s stopped", time.Since(start), lead)
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}

// TestFollowerToldOfCommitAtOnce: on an idle cluster, a request through a
// follower is answered as soon as its entry commits, not when Raft's
// CommitTimeout next sends the follower the commit index (1 to 2 ms after
// the entry: the leader sends a commit notice). Time in the bubble passes
// only on timers, so the request takes no time at all, or a
// CommitTimeout.
func TestFollowerToldOfCommitAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, false)
		f := c.other(c.leader())
		s := c.open(f, latch.SessionOptions{Protocol: "test"})
		for i := range 5 {
			time.Sleep(50 * time.Millisecond) // idle
			start := time.Now()
			if _, err := s.Acquire(context.Background(), latch.LockRequest{Keys: []string{fmt.Sprint("k", i)}}); err != nil {
				t.Fatalf("acquire through follower %s: %v", f, err)
			}
			if d := time.Since(start); d >= time.Millisecond {
				t.Errorf("acquire %d through follower %s took %v, want the commit's time (none here)", i, f, d)
			}
		}
		s.Close()
	})
}

// TestGatherClosedLoop: clients on the leader that each take and release
// a lock in a loop are carried together, one entry for all of them,
// rather than in two halves that take turns (gather). Every AppendEntries
// takes 200 us, so that a commit takes time, and a client takes 20 us to
// send its next request once answered (its network's round trip), so
// that whether it is in the next entry is decided by the bubble's time,
// not by which goroutine the scheduler (randomised under -race) runs
// first.
func TestGatherClosedLoop(t *testing.T) {
	const clients, cycles = 8, 20
	const rtt = 20 * time.Microsecond
	synctest.Test(t, func(t *testing.T) {
		c := makeCluster(t, 3, false)
		c.latency = 200 * time.Microsecond
		c.startAll()
		lead := c.leader()
		before := c.reps[lead].Counters()
		var wg sync.WaitGroup
		for i := range clients {
			s := c.open(lead, latch.SessionOptions{Protocol: "test"})
			key := fmt.Sprint("k", i)
			wg.Go(func() {
				defer s.Close()
				for range cycles {
					time.Sleep(rtt)
					if _, err := s.Acquire(context.Background(), latch.LockRequest{Keys: []string{key}}); err != nil {
						t.Errorf("acquire %s: %v", key, err)
						return
					}
					time.Sleep(rtt)
					if err := s.Release(key); err != nil {
						t.Errorf("release %s: %v", key, err)
						return
					}
				}
			})
		}
		wg.Wait()
		after := c.reps[lead].Counters()
		entries, batches := after.Entries-before.Entries, after.Batches-before.Batches
		// 2 x 20 requests of 8 clients: about 40 entries of 8 batches
		// together, 80 of 4 in turns.
		if per := float64(batches) / float64(entries); per < clients*3/4 {
			t.Errorf("%d entries carried %d batches, %.1f each; want at least %d each", entries, batches, per, clients*3/4)
		}
	})
}

// TestFollowerSeesLeaderCommitAtOnce: a lock taken by a client of the
// leader, in an entry that carries no other node's batch, shows on the
// followers at once: the leader's commit notice tells them, not Raft's
// CommitTimeout (50 ms) after the entry.
func TestFollowerSeesLeaderCommitAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, false)
		lead := c.leader()
		c.seenAtOnce(lead, slices.Collect(maps.Keys(c.nodes))...)
	})
}

// seenAtOnce takes five locks, an idle 200 ms apart, through a client of
// the leader, and checks that each shows on nodes 1 ms after its grant.
func (c *cluster) seenAtOnce(lead string, nodes ...string) {
	c.t.Helper()
	s := c.open(lead, latch.SessionOptions{Protocol: "test"})
	defer s.Close()
	for i := range 5 {
		time.Sleep(200 * time.Millisecond) // idle
		key := fmt.Sprint("k", i)
		if _, err := s.Acquire(context.Background(), latch.LockRequest{Keys: []string{key}}); err != nil {
			c.t.Fatalf("acquire %s on the leader: %v", key, err)
		}
		time.Sleep(time.Millisecond)
		for _, id := range nodes {
			if info, ok := c.nodes[id].Lock(key); !ok || len(info.Holders) != 1 {
				c.t.Errorf("%s not held on %s (at %s) 1 ms after the leader's grant", key, id, c.addr(id))
			}
		}
	}
}

// TestIdleClusterQuiet: an idle cluster's leader sends its followers
// Raft's heartbeats and little else. With Raft's CommitTimeout at 1 ms it
// sent each an AppendEntries every 1 to 2 ms, which cost an idle 3-node
// cluster a third of a core; the commit notices made that timer a
// fallback, at Raft's default.
func TestIdleClusterQuiet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := makeCluster(t, 3, false)
		c.appends = new(atomic.Int64)
		c.startAll()
		c.leader()
		time.Sleep(time.Second)
		before := c.appends.Load()
		const idle = 5 * time.Second
		time.Sleep(idle)
		// Heartbeats: 10 a second to each of 2 followers; CommitTimeout:
		// one every 50-100 ms to each; the nodes' own heartbeats (every
		// NodeTTL/10 = 1 s): an entry each, and its notices.
		if n, most := c.appends.Load()-before, int64(idle/time.Second)*80; n > most {
			t.Errorf("an idle cluster sent %d AppendEntries in %v, want at most %d", n, idle, most)
		}
	})
}

// TestNoticesFollowMovedMember: a member removed and added again at
// another address is told of commits there at once: the leader's notices
// follow the configuration, rather than go on to the old address and
// leave the node to Raft's CommitTimeout (50-100 ms a request). (Added
// again without its removal, Raft updates the address of its replication
// in place, and its pipeline logs that address without the lock that
// guards it: a data race in hashicorp/raft v1.7.3 that -race reports.)
func TestNoticesFollowMovedMember(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, false)
		lead := c.leader()
		moved := c.other(lead)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.reps[lead].RemoveServer(ctx, moved); err != nil {
			t.Fatalf("remove %s: %v", moved, err)
		}
		c.stop(moved)
		c.addrs = map[string]string{moved: moved + "-new"}
		c.joining = map[string]bool{moved: true}
		c.start(moved)
		if err := c.reps[lead].AddVoter(ctx, moved, c.addr(moved)); err != nil {
			t.Fatalf("add %s again at %s: %v", moved, c.addr(moved), err)
		}
		time.Sleep(3 * time.Second) // it catches up
		c.seenAtOnce(lead, moved)
	})
}
