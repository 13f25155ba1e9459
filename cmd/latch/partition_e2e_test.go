//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/client"
	"github.com/latchd/latch/internal/latchtest"
)

// raftNet carries the Raft and forwarding connections of a cluster whose
// nodes listen on 127.0.0.1, 127.0.0.2 and 127.0.0.3 (Linux routes all of
// 127/8 to the loopback interface), each through a proxy of the test that
// the nodes advertise: cutting a node off closes and refuses the
// connections to it (through its proxy) and from it (they leave from its
// IP), as a partition would, without a network namespace.
type raftNet struct {
	mu    sync.Mutex
	cut   map[string]bool // IPs of the nodes cut off
	conns []raftConn
	lns   []net.Listener
	wg    sync.WaitGroup
}

type raftConn struct {
	from, to string // IPs
	a, b     net.Conn
}

// proxy listens on a free port of 127.0.0.1 and forwards to target, the
// Raft address of the node whose IP is to. It returns its address.
func (rn *raftNet) proxy(t *testing.T, to, target string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rn.mu.Lock()
	rn.lns = append(rn.lns, ln)
	rn.mu.Unlock()
	rn.wg.Add(1)
	go func() {
		defer rn.wg.Done()
		for {
			a, err := ln.Accept()
			if err != nil {
				return
			}
			from := a.RemoteAddr().(*net.TCPAddr).IP.String()
			b, err := net.Dial("tcp", target)
			if err != nil {
				a.Close()
				continue
			}
			rn.mu.Lock()
			if rn.cut[from] || rn.cut[to] {
				rn.mu.Unlock()
				a.Close()
				b.Close()
				continue
			}
			rn.conns = append(rn.conns, raftConn{from: from, to: to, a: a, b: b})
			rn.mu.Unlock()
			rn.wg.Add(2)
			go rn.pipe(a, b)
			go rn.pipe(b, a)
		}
	}()
	return ln.Addr().String()
}

func (rn *raftNet) pipe(dst, src net.Conn) {
	defer rn.wg.Done()
	io.Copy(dst, src)
	dst.Close()
	src.Close()
}

// cutOff cuts the node at ip off from the others.
func (rn *raftNet) cutOff(ip string) {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	rn.cut[ip] = true
	for _, c := range rn.conns {
		if c.from == ip || c.to == ip {
			c.a.Close()
			c.b.Close()
		}
	}
}

func (rn *raftNet) close() {
	rn.mu.Lock()
	for _, ln := range rn.lns {
		ln.Close()
	}
	for _, c := range rn.conns {
		c.a.Close()
		c.b.Close()
	}
	rn.mu.Unlock()
	rn.wg.Wait()
}

// startCutCluster is startCluster over a raftNet: it starts n1 to n3, n<i>
// on 127.0.0.<i>, and returns them with their IPs and the network.
func startCutCluster(t *testing.T, extra ...string) (map[string]*node, map[string]string, *raftNet) {
	t.Helper()
	rn := &raftNet{cut: map[string]bool{}}
	t.Cleanup(rn.close)
	ips := map[string]string{}
	real, advertise := map[string]string{}, map[string]string{}
	var members []string
	for i, a := range freePorts(t, 3) {
		id, ip := fmt.Sprintf("n%d", i+1), fmt.Sprintf("127.0.0.%d", i+1)
		_, port, _ := net.SplitHostPort(a)
		ips[id], real[id] = ip, net.JoinHostPort(ip, port)
		advertise[id] = rn.proxy(t, ip, real[id])
		members = append(members, id+"="+advertise[id])
	}
	procs := map[string]*node{}
	for id := range ips {
		args := []string{"--data-dir", t.TempDir(), "--node-id", id, "--raft-addr", real[id], "--raft-advertise", advertise[id],
			"--initial-cluster", strings.Join(members, ","), "--election-timeout", "500ms"}
		procs[id] = newProc(t, id, append(args, extra...)...)
	}
	for _, p := range procs {
		p.start()
	}
	return procs, ips, rn
}

// TestClusterPartitionedNode: a follower is cut off from the other two
// nodes by a partition that leaves its clients' connections open. It
// answers a Go client's session Unavailable (it can no longer commit, and
// lets go of its clients: the Lock waiting on it, then the keepalives),
// and the client moves the session to another node at once, without
// waiting for the server to fall silent, and keeps its lock: Done never
// closes. The Lock that waited on the cut-off node fails with
// ErrConnectionLost, is withdrawn from the key's queue when the session
// moves, and its key can be requested again. (Without the client's
// handling of Unavailable, the client gives its session up.)
func TestClusterPartitionedNode(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	procs, ips, rn := startCutCluster(t, "--node-ttl", "2s")
	leader := waitLeader(t, procs)
	var cut *node
	var cutIP string
	addrs := []string{}
	for id, p := range procs {
		if id != leader && cut == nil {
			cut, cutIP = p, ips[id]
			addrs = append([]string{p.dlock}, addrs...)
		} else {
			addrs = append(addrs, p.dlock)
		}
	}
	ctx := context.Background()
	// With a 20 s TTL the client sends a keepalive every 5 s and gives a
	// silent server up after 10 s without an answer: far later than the
	// cut-off node answers Unavailable (at once two election timeouts
	// after it lost its leader; what waits, when it lets go of its
	// clients, 80% of the 2 s node TTL after its last heartbeat).
	const ttl = 20 * time.Second
	var log latchtest.SyncBuffer
	logger := slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c := dialAll(t, "every node", addrs, client.SessionTTL(ttl), client.Logger(logger))
	held, err := c.Lock(ctx, []string{"k"})
	if err != nil {
		t.Fatal(err)
	}
	other := procs[leader].dial(t)
	busy, err := other.Lock(ctx, []string{"busy"})
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() {
		_, err := c.Lock(ctx, []string{"busy"})
		waited <- err
	}()
	for {
		l, err := procs[leader].lock("busy")
		if err == nil && len(l.Waiters) == 1 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}

	rn.cutOff(cutIP)
	cutAt := time.Now()
	for !strings.Contains(log.String(), "client: session resumed") {
		if err := c.Err(); err != nil {
			t.Fatalf("the client gave its session up %v after %s was cut off: %v", time.Since(cutAt), cut.name, err)
		}
		if time.Since(cutAt) > ttl {
			t.Fatalf("the session was not resumed in the TTL after %s was cut off; client log:\n%s", cut.name, log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	moved := time.Since(cutAt)
	t.Logf("session moved off the cut-off node %v after the cut (TTL %v)", moved, ttl)
	lost := log.String()
	lost = lost[strings.Index(lost, "connection lost; resuming the session"):]
	if !strings.Contains(lost[:strings.IndexByte(lost, '\n')], "Unavailable") {
		t.Errorf("the client gave the cut-off node up for another reason than an Unavailable answer:\n%s", log.String())
	}

	select {
	case err := <-waited:
		if !errors.Is(err, client.ErrConnectionLost) {
			t.Errorf("the Lock waiting on the cut-off node: %v, want ErrConnectionLost", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the Lock waiting on the cut-off node was not answered")
	}
	// Past the node TTL (a session bound to the cut-off node would have
	// ended), the lock is still the session's.
	time.Sleep(3 * time.Second)
	select {
	case <-held.Done():
		t.Fatalf("the lock ended: %v", held.Err())
	default:
	}
	if err := c.Err(); err != nil {
		t.Fatalf("the client stopped: %v", err)
	}
	l, err := procs[leader].lock("k")
	if err != nil || len(l.Holders) != 1 || l.Holders[0].Session != uint64(c.SessionID()) {
		t.Fatalf("k = %+v, %v; want held by the session %d", l, err, c.SessionID())
	}
	l, err = procs[leader].lock("busy")
	if err != nil || len(l.Waiters) != 0 {
		t.Fatalf("busy = %+v, %v; want no waiter (the moved session's was withdrawn)", l, err)
	}
	if err := busy.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for {
		again, err := c.TryLock(ctx, []string{"busy"})
		if err == nil {
			again.Unlock(ctx)
			break
		}
		if !errors.Is(err, latch.ErrAlreadyHeld) || time.Since(cutAt) > 2*ttl {
			t.Fatalf("busy through the moved session: %v", err)
		}
		time.Sleep(20 * time.Millisecond) // its keys are given back
	}
	if err := held.Unlock(ctx); err != nil {
		t.Errorf("unlock k: %v", err)
	}
}
