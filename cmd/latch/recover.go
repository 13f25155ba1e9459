package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/latchd/latch/internal/config"
	"github.com/latchd/latch/internal/server"
)

// runRecover implements "latch recover": a stopped node of a cluster that
// lost its quorum becomes a cluster of one.
func runRecover(args []string, env *environment) int {
	fs := env.newFlagSet("recover")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: latch recover [--force | --dry-run] --data-dir DIR [serve's flags]

Recover a cluster that lost its quorum for good: run it on a stopped
surviving member, the one whose log goes furthest. The node becomes a
cluster of one that holds everything its log held; start it again with
"latch serve" and the same data dir and node id, then add the other
members back as new ones, with empty data dirs (each started with
"latch serve --initial-cluster-state existing", then "latch cluster
add"). docs/operations.md has the steps.

recover takes serve's flags, environment and --config, and uses the data
dir, the node id (checked against the one the data dir records; empty
takes it) and the settings of the state (memcache-memory-mb, the lock
limits): give it the node's own configuration.

It refuses a data dir that a running process holds, one that a disk
error halted, and, unless --force, a node while another member of its
cluster answers on its Raft address (a TCP connection from this host,
within 2 seconds): that member may have a leader, or regain the quorum
with this node. Stop the others first; --force only for members that are
gone from this cluster though their address answers. --dry-run changes
nothing: it prints the last entry of the node's log (to choose among
survivors: the highest term, then the highest index), its members and
which of them answer.

Flags:
  -config file
    	read settings from this TOML file (env LATCH_CONFIG)
  -data-dir dir
    	the stopped node's data dir (env LATCH_DATA_DIR)
  -dry-run
    	change nothing: print the node's last entry, its members and which answer
  -force
    	recover even while other members answer
  -node-id id
    	the node's id (env LATCH_NODE_ID)
`)
	}
	force := fs.Bool("force", false, "recover even while other members answer")
	dryRun := fs.Bool("dry-run", false, "change nothing: print the node's last entry, its members and which answer")
	cfg, err := config.Load(fs, args, env.getenv)
	if errors.Is(err, config.ErrFlags) {
		code, _ := flagExit(err)
		return code
	}
	if err != nil {
		fmt.Fprintf(env.stderr, "latch recover: %v\n", err)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(env.stderr, "latch recover: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if cfg.Cluster.DataDir == "" {
		fmt.Fprintln(env.stderr, "latch recover: --data-dir is required")
		return 2
	}
	logger, err := newLogger(env.stderr, cfg.Log)
	if err != nil {
		fmt.Fprintf(env.stderr, "latch recover: %v\n", err)
		return 2
	}
	if *force && *dryRun {
		fmt.Fprintln(env.stderr, "latch recover: --force and --dry-run exclude each other")
		return 2
	}
	rec, err := server.Recover(cfg, *force, *dryRun, logger)
	if err != nil {
		fmt.Fprintf(env.stderr, "latch recover: %v\n", err)
		return 1
	}
	out := env.stdout
	if rec.AlreadyAlone {
		fmt.Fprintf(out, "node %s (%s) is already the only member of its cluster: nothing to recover; start it with latch serve\n", rec.ID, rec.Addr)
		return 0
	}
	var dropped []string
	for _, m := range rec.Dropped {
		dropped = append(dropped, m.ID+"="+m.Addr)
	}
	if *dryRun {
		fmt.Fprintf(out, "node %s (%s): its log ends at entry %d (term %d)\n", rec.ID, rec.Addr, rec.Index, rec.Term)
		for _, m := range rec.Dropped {
			state := "does not answer"
			if slices.Contains(rec.Answering, m) {
				state = "answers: recover refuses without --force"
			}
			fmt.Fprintf(out, "member %s (%s) %s\n", m.ID, m.Addr, state)
		}
		fmt.Fprintln(out, "dry run: nothing changed")
		return 0
	}
	for _, m := range rec.Answering {
		fmt.Fprintf(out, "warning: member %s (%s) answered; recovered anyway (--force)\n", m.ID, m.Addr)
	}
	fmt.Fprintf(out, `node %s is now a cluster of one, holding its log to entry %d (term %d)
members dropped: %s
next:
  1. start it: latch serve --data-dir %s --node-id %s --raft-addr ... --initial-cluster %s=%s
  2. for each new member, with an empty data dir: start it with latch serve --initial-cluster-state existing
     --initial-cluster %s=%s,ID=RAFT_ADDR, then latch cluster --admin-addr (this node's) add ID RAFT_ADDR
`, rec.ID, rec.Index, rec.Term, strings.Join(dropped, ", "), cfg.Cluster.DataDir, rec.ID, rec.ID, rec.Addr, rec.ID, rec.Addr)
	return 0
}
