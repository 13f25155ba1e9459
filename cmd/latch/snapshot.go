package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/latchd/latch/internal/config"
	"github.com/latchd/latch/internal/replica/raftrep"
	"github.com/latchd/latch/internal/snapcmd"
	"github.com/latchd/latch/internal/statuscmd"
)

// runSnapshot implements "latch snapshot": flag parsing; internal/snapcmd
// does the rest.
func runSnapshot(args []string, env *environment) int {
	fs := env.newFlagSet("snapshot")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: latch snapshot save FILE [--admin-addr ADDR] [--admin-token TOKEN]
       latch snapshot inspect FILE [--json]
       latch snapshot restore FILE --data-dir DIR [--node-id ID --initial-cluster ID=HOST:PORT,...]

save takes a backup of the committed state of a running node, any member
of a cluster, through its admin API (GET /v1/snapshot, with the admin
token when the server has one), without stopping it, verifies it and
writes it to FILE: one file with its metadata, the state, and the SHA-256
of each part and of the whole file.

inspect verifies FILE (every checksum; the state decodes and holds what
the metadata counts) and prints its metadata. A changed or truncated file
is refused, saying what is wrong.

restore verifies FILE and makes DIR, which must be new or empty, the data
dir of a new node holding its state: a single node (no --initial-cluster;
the node id defaults to latch's), or one member of a new cluster (run it
once per member, with the same FILE and the same --initial-cluster, then
start the members with the same --initial-cluster). The sessions bound to
the old nodes' connections end; the fencing-token counter and the zxid are
raised past anything the old cluster could have issued; leases and
sessions with a TTL keep the time they had left, counted from the new
cluster's first leader (docs/operations.md, "Restore"). Stop the old
cluster first: a client that reaches both would see two lock tables.

Flags:
`)
		fs.PrintDefaults()
	}
	addr := statuscmd.DefaultAddr
	if a := env.getenv("LATCH_ADMIN_ADDR"); a != "" {
		addr = a
	}
	fs.StringVar(&addr, "admin-addr", addr, "save: admin API `address` of the node, host:port or URL (env LATCH_ADMIN_ADDR)")
	token := fs.String("admin-token", env.getenv("LATCH_ADMIN_TOKEN"), "save: the admin `token` (env LATCH_ADMIN_TOKEN)")
	var tf tlsFlags
	tf.register(fs)
	asJSON := fs.Bool("json", false, "inspect: print the metadata as JSON")
	dataDir := fs.String("data-dir", "", "restore: the new node's data `dir`")
	nodeID := fs.String("node-id", "", "restore: the new node's `id` (required with --initial-cluster)")
	initial := fs.String("initial-cluster", "", "restore: the new cluster's members, `ID=HOST:PORT,...`, as the nodes will be started with")
	// Flags may come before and after the operation and its file.
	var rest []string
	for {
		if code, done := parseFlags(fs, args); done {
			return code
		}
		if fs.NArg() == 0 {
			break
		}
		rest = append(rest, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(rest) != 2 {
		fs.Usage()
		return 2
	}
	op, file := rest[0], rest[1]
	fail := func(err error) int {
		fmt.Fprintf(env.stderr, "latch snapshot %s: %v\n", op, err)
		return 1
	}
	switch op {
	case "save":
		tlsCfg, err := tf.config()
		if err != nil {
			fmt.Fprintf(env.stderr, "latch snapshot: %v\n", err)
			return 2
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		if err := snapcmd.Save(ctx, snapcmd.SaveOptions{Addr: addr, Token: *token, TLS: tlsCfg, File: file, Out: env.stdout}); err != nil {
			return fail(err)
		}
	case "inspect":
		if err := snapcmd.Inspect(snapcmd.InspectOptions{File: file, JSON: *asJSON, Out: env.stdout}); err != nil {
			return fail(err)
		}
	case "restore":
		if *dataDir == "" {
			fmt.Fprintln(env.stderr, "latch snapshot restore: --data-dir is required")
			return 2
		}
		cc := config.ClusterConfig{InitialCluster: *initial}
		ps, err := cc.Peers()
		if err != nil {
			fmt.Fprintf(env.stderr, "latch snapshot restore: %v\n", err)
			return 2
		}
		id := *nodeID
		if id == "" {
			if len(ps) > 0 {
				fmt.Fprintln(env.stderr, "latch snapshot restore: --node-id is required with --initial-cluster")
				return 2
			}
			id = "latch" // a durable single node's id
		}
		var peers []raftrep.Peer
		for _, p := range ps {
			peers = append(peers, raftrep.Peer{ID: p.ID, Addr: p.Addr})
		}
		if err := snapcmd.Restore(snapcmd.RestoreOptions{File: file, DataDir: *dataDir, NodeID: id, Peers: peers, Out: env.stdout}); err != nil {
			return fail(err)
		}
	default:
		fs.Usage()
		return 2
	}
	return 0
}
