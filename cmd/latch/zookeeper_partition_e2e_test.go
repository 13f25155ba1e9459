//go:build linux

package main

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/latchd/latch/internal/latchtest"
)

// TestClusterZooKeeperPartition: a go-zookeeper client holds zk.Lock
// through a follower that is then cut off from the other two nodes, by a
// partition that leaves the client's connection to it open; another
// client waits for the lock through the leader. The cut-off node, which
// can no longer commit, must not keep answering the holder as if all were
// well while its session lapses in the cluster: it closes the holder's
// connection, which moves its session to another node within its timeout
// (go-zookeeper reports StateDisconnected first, the warning a lock
// recipe heeds) and keeps its lock. The waiter is not granted the lock
// until the holder lets go, and the holder's session never expires.
func TestClusterZooKeeperPartition(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	procs, ips, rn := startCutCluster(t)
	leader := waitLeader(t, procs)
	var cut string
	for id := range procs {
		if id != leader {
			cut = id
			break
		}
	}
	// The holder tries the cut-off node first, then the others.
	hosts := []string{procs[cut].zk}
	for id, p := range procs {
		if id != cut {
			hosts = append(hosts, p.zk)
		}
	}
	var logs latchtest.SyncBuffer
	var mu sync.Mutex
	var states []string
	start := time.Now()
	dial := func(name string, hosts []string, record bool) *zk.Conn {
		t.Helper()
		c, events, err := zk.Connect(hosts, zkSession, zk.WithHostProvider(&orderedHosts{servers: hosts}), zk.WithLogger(zkLog{&logs}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		connected := make(chan struct{})
		go func() {
			var once sync.Once
			for ev := range events {
				if ev.Type != zk.EventSession {
					continue
				}
				if record {
					mu.Lock()
					states = append(states, fmt.Sprintf("%s@%v", ev.State, time.Since(start).Round(time.Millisecond)))
					mu.Unlock()
				}
				if ev.State == zk.StateHasSession {
					once.Do(func() { close(connected) })
				}
			}
		}()
		select {
		case <-connected:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no session in 10 s; log:\n%s", name, logs.String())
		}
		return c
	}
	holder := dial("holder", hosts, true)
	session := holder.SessionID()
	acl := zk.WorldACL(zk.PermAll)
	held := zk.NewLock(holder, "/partition/lock", acl)
	if err := held.Lock(); err != nil {
		t.Fatal(err)
	}
	waiter := dial("waiter", []string{procs[leader].zk}, false)
	granted := make(chan time.Time, 1)
	go func() {
		l := zk.NewLock(waiter, "/partition/lock", acl)
		if err := l.Lock(); err == nil {
			granted <- time.Now()
			l.Unlock()
		}
	}()
	time.Sleep(500 * time.Millisecond)

	rn.cutOff(ips[cut])
	cutAt := time.Now()
	t.Logf("%s (a follower; %s leads) cut off; the holder's session %#x is on it", cut, leader, session)
	// Past twice the session timeout, the holder still holds the lock.
	select {
	case at := <-granted:
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("the waiter was granted the lock %v after the cut, while the holder held it; the holder's states: %v; holder connected to %s\nlog:\n%s\n%s",
			at.Sub(cutAt), states, holder.Server(), logs.String(), logsOf(procs))
	case <-time.After(2 * zkSession):
	}
	mu.Lock()
	seen := strings.Join(states, " ")
	mu.Unlock()
	if holder.SessionID() != session || strings.Contains(seen, zk.StateExpired.String()) {
		t.Fatalf("the holder's session: %#x, states %s; want %#x, not expired", holder.SessionID(), seen, session)
	}
	if holder.Server() == procs[cut].zk {
		t.Fatalf("the holder is still connected to the cut-off node; states %s", seen)
	}
	if err := held.Unlock(); err != nil {
		t.Fatalf("unlock after the move: %v", err)
	}
	select {
	case at := <-granted:
		t.Logf("the holder moved off the cut-off node (states %s); the waiter was granted the lock %v after the cut, once the holder let go", seen, at.Sub(cutAt).Round(time.Millisecond))
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was not granted the lock after the holder let go")
	}
}
