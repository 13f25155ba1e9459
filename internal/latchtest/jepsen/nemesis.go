//go:build linux

package jepsen

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/latchd/latch/internal/latchtest/jepsen/cluster"
	"github.com/latchd/latch/internal/latchtest/lazyfs"
)

// Fault kinds, as counted in the report.
const (
	faultKill          = "kill"           // SIGKILL a random node, restart it
	faultKillLeader    = "kill-leader"    // SIGKILL the leader, restart it
	faultPauseLeader   = "pause-leader"   // SIGSTOP the leader, SIGCONT
	faultPauseHolder   = "pause-holder"   // SIGSTOP the node a lock holder is connected to
	faultPartition     = "partition"      // a random majority from the minority
	faultIsolateLeader = "isolate-leader" // the leader from everyone
	faultBridge        = "bridge"         // two halves that only one node hears both of
	faultPowerLoss     = "power-loss"     // cut a random node's power: its disk loses what was not synced; restart it
	faultPowerLossAll  = "power-loss-all" // the same to every node at once
)

var faultKinds = []string{faultKill, faultKillLeader, faultPauseLeader, faultPauseHolder, faultPartition, faultIsolateLeader, faultBridge, faultPowerLoss, faultPowerLossAll}

// faultWeights weighs the draw of a fault kind (1 when not listed): a
// power loss, the only fault that loses what a node wrote, is drawn about
// as often as all the kinds that do not.
var faultWeights = map[string]int{faultPowerLoss: 4, faultPowerLossAll: 3}

// nemesis injects faults into the cluster on a schedule drawn from a seed:
// a healthy spell, one fault for a while, its end, and so on.
type nemesis struct {
	kinds []string // the kinds of faults to draw from
	c     *cluster.Cluster
	// disks holds each node's data dir's file system, by node ID: a
	// power loss crashes it.
	disks map[string]*lazyfs.FS
	fw    *cluster.Firewall
	w     *workers
	rng   *rand.Rand
	logf  func(format string, args ...any)
}

// run injects faults until ctx ends, then heals everything: every node
// runs, none is paused, no cut remains, and a leader is agreed on. It
// returns how many faults of each kind it injected.
func (n *nemesis) run(ctx context.Context) (map[string]int, error) {
	counts := map[string]int{}
	for ctx.Err() == nil {
		sleep(ctx, time.Duration(2000+n.rng.IntN(3000))*time.Millisecond)
		if ctx.Err() != nil {
			break
		}
		kind := n.draw()
		d := time.Duration(1000+n.rng.IntN(5000)) * time.Millisecond
		did, err := n.inject(ctx, kind, d)
		if err != nil {
			return counts, err
		}
		if did {
			counts[kind]++
		}
	}
	return counts, n.heal()
}

// draw draws the kind of the next fault, by faultWeights.
func (n *nemesis) draw() string {
	weight := func(k string) int { return cmp.Or(faultWeights[k], 1) }
	total := 0
	for _, k := range n.kinds {
		total += weight(k)
	}
	r := n.rng.IntN(total)
	for _, k := range n.kinds {
		if r -= weight(k); r < 0 {
			return k
		}
	}
	panic("unreachable")
}

// inject injects one fault of kind for d; false when it could not (no
// leader, no holder).
func (n *nemesis) inject(ctx context.Context, kind string, d time.Duration) (bool, error) {
	if kind == faultPowerLoss || kind == faultPowerLossAll {
		return true, n.powerLoss(ctx, kind, d)
	}
	leader := n.c.Leader(ctx)
	var victim *cluster.Node
	switch kind {
	case faultKill:
		victim = n.c.Nodes[n.rng.IntN(len(n.c.Nodes))]
	case faultKillLeader, faultPauseLeader, faultIsolateLeader:
		victim = leader
	case faultPauseHolder:
		id := n.w.holderTarget(n.rng)
		for _, x := range n.c.Nodes {
			if x.ID == id {
				victim = x
			}
		}
	}
	if victim == nil && kind != faultPartition && kind != faultBridge {
		return false, nil
	}
	switch kind {
	case faultKill, faultKillLeader:
		n.logf("nemesis: SIGKILL %s for %v (%s)", victim.ID, d, kind)
		if err := n.c.Kill(victim); err != nil {
			return false, err
		}
		sleep(ctx, d)
		rctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		return true, n.c.Restart(rctx, victim)
	case faultPauseLeader, faultPauseHolder:
		n.logf("nemesis: SIGSTOP %s for %v (%s)", victim.ID, d, kind)
		if err := n.c.Pause(victim); err != nil {
			return false, err
		}
		sleep(ctx, d)
		return true, n.c.Resume(victim)
	}
	var sides [][]*cluster.Node
	nodes := append([]*cluster.Node(nil), n.c.Nodes...)
	n.rng.Shuffle(len(nodes), func(i, j int) { nodes[i], nodes[j] = nodes[j], nodes[i] })
	switch kind {
	case faultPartition:
		minority := len(nodes) / 2
		sides = [][]*cluster.Node{nodes[:minority], nodes[minority:]}
	case faultIsolateLeader:
		var rest []*cluster.Node
		for _, x := range nodes {
			if x != victim {
				rest = append(rest, x)
			}
		}
		sides = [][]*cluster.Node{{victim}, rest}
	case faultBridge:
		// nodes[0] hears both halves; the halves do not hear each other.
		half := (len(nodes) - 1) / 2
		sides = [][]*cluster.Node{nodes[1 : 1+half], nodes[1+half:]}
	}
	n.logf("nemesis: %s %v for %v", kind, names(sides), d)
	if err := n.fw.Partition(sides...); err != nil {
		return false, err
	}
	sleep(ctx, d)
	return true, n.fw.Heal()
}

// powerLoss cuts the power of a random node, or of every node, for d: it
// stops them, cuts their disks, kills them, crashes the disks (losing what
// was not synced; half the time torn: a random part of it survives), and
// restarts them.
func (n *nemesis) powerLoss(ctx context.Context, kind string, d time.Duration) error {
	victims := n.c.Nodes
	if kind == faultPowerLoss {
		victims = []*cluster.Node{n.c.Nodes[n.rng.IntN(len(n.c.Nodes))]}
	}
	var torn *rand.Rand
	how := "losing everything unsynced"
	if n.rng.IntN(2) == 0 {
		torn = rand.New(rand.NewPCG(n.rng.Uint64(), n.rng.Uint64()))
		how = "torn"
	}
	n.logf("nemesis: power off %v for %v, %s (%s)", ids(victims), d, how, kind)
	for _, v := range victims {
		if n.disks[v.ID] == nil {
			return fmt.Errorf("jepsen: %s: node %s has no lazyfs disk", kind, v.ID)
		}
	}
	// The disks' power goes before the nodes die: a node killed during a
	// sync would wait for its answer, and the sync would complete.
	err := n.c.PowerOff(victims, func() {
		for _, v := range victims {
			n.disks[v.ID].Cut()
		}
	})
	if err != nil {
		return err
	}
	for _, v := range victims {
		disk := n.disks[v.ID]
		files, ops := disk.Unsynced()
		if err := disk.Crash(torn); err != nil {
			return err
		}
		n.logf("nemesis: %s lost its unsynced writes to %q and directory operations %q", v.ID, files, ops)
	}
	sleep(ctx, d)
	rctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, v := range victims {
		if err := n.c.Restart(rctx, v); err != nil {
			return err
		}
	}
	return nil
}

func ids(nodes []*cluster.Node) []string {
	var s []string
	for _, x := range nodes {
		s = append(s, x.ID)
	}
	return s
}

// heal ends every fault and waits for a leader.
func (n *nemesis) heal() error {
	if err := n.fw.Heal(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, x := range n.c.Nodes {
		switch x.State() {
		case cluster.Paused:
			if err := n.c.Resume(x); err != nil {
				return err
			}
		case cluster.Killed:
			if err := n.c.Restart(ctx, x); err != nil {
				return err
			}
		}
	}
	_, err := n.c.WaitLeader(ctx)
	return err
}

func names(sides [][]*cluster.Node) string {
	s := ""
	for i, side := range sides {
		if i > 0 {
			s += " | "
		}
		for j, x := range side {
			if j > 0 {
				s += ","
			}
			s += x.ID
		}
	}
	return fmt.Sprintf("[%s]", s)
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
}
