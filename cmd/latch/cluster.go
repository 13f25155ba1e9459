package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/latchd/latch/internal/statuscmd"
)

// runCluster implements "latch cluster": flag parsing; internal/statuscmd
// does the rest.
func runCluster(args []string, env *environment) int {
	opts := statuscmd.ClusterOptions{Options: statuscmd.Options{Addr: statuscmd.DefaultAddr, Out: env.stdout}}
	if addr := env.getenv("LATCH_ADMIN_ADDR"); addr != "" {
		opts.Addr = addr
	}
	opts.Token = env.getenv("LATCH_ADMIN_TOKEN")
	fs := env.newFlagSet("cluster")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: latch cluster [flags] status
       latch cluster [flags] add ID RAFT_ADDR
       latch cluster [flags] remove ID
       latch cluster [flags] transfer [ID]

Show a latch cluster's members and leader, add or remove a member, or hand
the leadership to a member (any other one without ID), through any
member's admin API. Changes need the admin token when the server has one.

Flags:
`)
		fs.PrintDefaults()
	}
	fs.StringVar(&opts.Addr, "admin-addr", opts.Addr, "admin API `address` of a member, host:port or URL (env LATCH_ADMIN_ADDR)")
	fs.StringVar(&opts.Token, "admin-token", opts.Token, "the admin `token` (env LATCH_ADMIN_TOKEN)")
	fs.BoolVar(&opts.JSON, "json", false, "print the admin API's JSON instead of a table")
	var tf tlsFlags
	tf.register(fs)
	if code, done := parseFlags(fs, args); done {
		return code
	}
	rest := fs.Args()
	if len(rest) == 0 {
		rest = []string{"status"}
	}
	opts.Op = rest[0]
	want := map[string][2]int{"status": {1, 1}, "add": {3, 3}, "remove": {2, 2}, "transfer": {1, 2}}[opts.Op]
	if want[0] == 0 || len(rest) < want[0] || len(rest) > want[1] {
		fs.Usage()
		return 2
	}
	if len(rest) > 1 {
		opts.ID = rest[1]
	}
	if len(rest) > 2 {
		opts.RaftAddr = rest[2]
	}
	tlsCfg, err := tf.config()
	if err != nil {
		fmt.Fprintf(env.stderr, "latch cluster: %v\n", err)
		return 2
	}
	opts.TLS = tlsCfg
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := statuscmd.RunCluster(ctx, opts); err != nil {
		fmt.Fprintf(env.stderr, "%v\n", err)
		return 1
	}
	return 0
}
