//go:build linux

// Package cluster runs the latch cluster of a Jepsen-style test: 3 or 5
// "latch serve" processes, each on its own loopback IP (127.0.0.11 and up)
// for Raft and every front end (dlock, memcached, Redis, ZooKeeper,
// admin), with its own data dir, which the test kills with SIGKILL and
// starts again, pauses with SIGSTOP and resumes with SIGCONT, and cuts
// apart with nftables rules between their IPs (Firewall). It is meant to
// run inside a network namespace of the test's own, where those IPs and
// rules touch nothing else.
//
// Every process gets SIGKILL when the test process dies (Pdeathsig), so a
// crashed test leaves no server behind.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/latchd/latch/internal/admin"
)

// Ports every node listens on, each on its own IP.
const (
	raftPort     = 7000
	dlockPort    = 7001
	memcachePort = 7002
	adminPort    = 7003
	redisPort    = 7004
	zkPort       = 7005
)

// Config is the cluster to run.
type Config struct {
	Bin   string // the latch binary
	Dir   string // where data dirs and logs go
	Nodes int    // 3 or 5
	// ElectionTimeout and NodeTTL are latch serve's flags of those names.
	ElectionTimeout time.Duration
	NodeTTL         time.Duration
	// DataDir, if set, returns node id's data dir, made ready (the test
	// mounts a file system there); nil: Dir/id, made here.
	DataDir func(id string) (string, error)
}

// State is a node's process state.
type State int

// States.
const (
	Running State = iota
	Paused        // SIGSTOP
	Killed        // SIGKILL, not restarted yet
)

// Node is one latch serve process.
type Node struct {
	ID, IP                                         string
	Raft, DLock, Memcache, Admin, Redis, ZooKeeper string // host:port
	dataDir, logPath                               string
	args                                           []string

	mu      sync.Mutex
	cmd     *exec.Cmd
	state   State
	exited  chan struct{} // closed when cmd ended
	killing bool          // the test ended the process
	crashes []string      // unexpected exits, with their logs' tails
}

// Cluster is the running cluster. Its methods are safe for concurrent use.
type Cluster struct {
	cfg   Config
	Nodes []*Node
}

// Start starts every node and waits until they agree on a leader, or ctx
// ends.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	c := &Cluster{cfg: cfg}
	var members []string
	for i := range cfg.Nodes {
		ip := fmt.Sprintf("127.0.0.%d", 11+i)
		n := &Node{
			ID: fmt.Sprintf("n%d", i+1), IP: ip,
			Raft:      fmt.Sprintf("%s:%d", ip, raftPort),
			DLock:     fmt.Sprintf("%s:%d", ip, dlockPort),
			Memcache:  fmt.Sprintf("%s:%d", ip, memcachePort),
			Admin:     fmt.Sprintf("%s:%d", ip, adminPort),
			Redis:     fmt.Sprintf("%s:%d", ip, redisPort),
			ZooKeeper: fmt.Sprintf("%s:%d", ip, zkPort),
			state:     Killed,
		}
		n.dataDir = filepath.Join(cfg.Dir, n.ID)
		n.logPath = filepath.Join(cfg.Dir, n.ID+".log")
		var err error
		if cfg.DataDir != nil {
			n.dataDir, err = cfg.DataDir(n.ID)
		} else {
			err = os.MkdirAll(n.dataDir, 0o755)
		}
		if err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
		members = append(members, n.ID+"="+n.Raft)
		c.Nodes = append(c.Nodes, n)
	}
	for _, n := range c.Nodes {
		n.args = []string{"serve",
			"--node-id", n.ID, "--raft-addr", n.Raft, "--initial-cluster", strings.Join(members, ","),
			"--data-dir", n.dataDir,
			"--dlock-addr", n.DLock, "--memcache-addr", n.Memcache, "--admin-addr", n.Admin, "--redis-addr", n.Redis,
			// A ZooKeeper tick of 1 s, so that the workload's session
			// timeout of 3 s is granted as asked (2 to 20 ticks).
			"--zookeeper-addr", n.ZooKeeper, "--zookeeper-tick-time", "1s",
			"--election-timeout", cfg.ElectionTimeout.String(), "--node-ttl", cfg.NodeTTL.String(),
			// Snapshots every thousand entries or so, so that the faults
			// meet them: written, restored at a restart, lost in a power cut.
			"--snapshot-entries", "1024", "--snapshot-interval", "1s",
		}
		if err := c.start(ctx, n); err != nil {
			c.Close()
			return nil, err
		}
	}
	if _, err := c.WaitLeader(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// start starts n's process and waits until its admin API answers.
func (c *Cluster) start(ctx context.Context, n *Node) error {
	log, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	cmd := exec.Command(c.cfg.Bin, n.args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), "LATCH_LOG_LEVEL=debug")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("cluster: starting %s: %w", n.ID, err)
	}
	exited := make(chan struct{})
	n.mu.Lock()
	n.cmd, n.state, n.exited, n.killing = cmd, Running, exited, false
	n.mu.Unlock()
	go func() {
		err := cmd.Wait()
		log.Close()
		n.mu.Lock()
		if !n.killing {
			n.crashes = append(n.crashes, fmt.Sprintf("%s exited by itself (%v); log:\n%s", n.ID, err, tail(n.logPath)))
			n.state = Killed
		}
		n.mu.Unlock()
		close(exited)
	}()
	for {
		if resp, err := http.Get("http://" + n.Admin + "/healthz"); err == nil {
			resp.Body.Close()
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("cluster: %s exited at its start; log:\n%s", n.ID, tail(n.logPath))
		case <-ctx.Done():
			return fmt.Errorf("cluster: %s's admin API not up: %w", n.ID, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// tail returns the end of the file at path.
func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// DataDir is n's data dir.
func (n *Node) DataDir() string { return n.dataDir }

// State returns n's process state.
func (n *Node) State() State {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.state
}

// Crashes returns the node's unexpected exits.
func (n *Node) Crashes() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.crashes...)
}

// Kill ends n's process with SIGKILL and waits for its end.
func (c *Cluster) Kill(n *Node) error {
	n.mu.Lock()
	if n.state == Killed {
		n.mu.Unlock()
		return nil
	}
	n.killing = true
	cmd, exited := n.cmd, n.exited
	n.state = Killed
	n.mu.Unlock()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("cluster: killing %s: %w", n.ID, err)
	}
	<-exited
	return nil
}

// PowerOff ends the processes of nodes as a power loss does: it stops them
// all (SIGSTOP), calls cut (which cuts their disks' power: no process runs
// to see it), kills them (SIGKILL) and waits for their ends. A process
// that a cut disk makes exit by itself meanwhile has not crashed.
func (c *Cluster) PowerOff(nodes []*Node, cut func()) error {
	var cmds []*exec.Cmd
	var exited []chan struct{}
	var errs []error
	for _, n := range nodes {
		n.mu.Lock()
		if n.state != Killed {
			n.killing = true
			n.state = Killed
			cmds, exited = append(cmds, n.cmd), append(exited, n.exited)
		}
		n.mu.Unlock()
	}
	for _, cmd := range cmds {
		if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil && !errors.Is(err, os.ErrProcessDone) {
			errs = append(errs, fmt.Errorf("cluster: stopping %v: %w", cmd.Args, err))
		}
	}
	cut()
	for _, cmd := range cmds {
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
			errs = append(errs, fmt.Errorf("cluster: killing %v: %w", cmd.Args, err))
		}
	}
	for _, ch := range exited {
		<-ch
	}
	return errors.Join(errs...)
}

// Restart starts a killed node again, from its data dir.
func (c *Cluster) Restart(ctx context.Context, n *Node) error {
	if n.State() != Killed {
		return fmt.Errorf("cluster: restarting %s, which runs", n.ID)
	}
	return c.start(ctx, n)
}

// Pause stops n's process with SIGSTOP.
func (c *Cluster) Pause(n *Node) error { return c.signal(n, syscall.SIGSTOP, Running, Paused) }

// Resume continues a paused node with SIGCONT.
func (c *Cluster) Resume(n *Node) error { return c.signal(n, syscall.SIGCONT, Paused, Running) }

func (c *Cluster) signal(n *Node, sig syscall.Signal, from, to State) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.state != from {
		return fmt.Errorf("cluster: %v to %s in state %d", sig, n.ID, n.state)
	}
	if err := n.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("cluster: %v to %s: %w", sig, n.ID, err)
	}
	n.state = to
	return nil
}

// views asks every running node which node it names as the leader: ""
// for one that names none or does not answer.
func (c *Cluster) views(ctx context.Context) map[*Node]string {
	views := map[*Node]string{}
	for _, n := range c.Nodes {
		if n.State() != Running {
			continue
		}
		qctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		st, err := admin.NewClient(n.Admin).Cluster(qctx)
		cancel()
		if err == nil {
			views[n] = st.Leader
		} else {
			views[n] = ""
		}
	}
	return views
}

// Leader returns the node that most running nodes name as their leader,
// nil when none names one.
func (c *Cluster) Leader(ctx context.Context) *Node {
	votes := map[string]int{}
	for _, leader := range c.views(ctx) {
		if leader != "" {
			votes[leader]++
		}
	}
	var best *Node
	for _, n := range c.Nodes {
		if votes[n.ID] > 0 && (best == nil || votes[n.ID] > votes[best.ID]) {
			best = n
		}
	}
	return best
}

// WaitLeader waits until every running node names the same leader, which
// runs too.
func (c *Cluster) WaitLeader(ctx context.Context) (*Node, error) {
	for {
		leader, agreed := "", true
		for _, l := range c.views(ctx) {
			if l == "" || leader != "" && l != leader {
				agreed = false
				break
			}
			leader = l
		}
		for _, n := range c.Nodes {
			if agreed && n.ID == leader && n.State() == Running {
				return n, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("cluster: no leader agreed on: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Close kills every node.
func (c *Cluster) Close() {
	for _, n := range c.Nodes {
		c.Kill(n)
	}
}
