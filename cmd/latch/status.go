package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/latchd/latch/internal/statuscmd"
)

// runStatus implements "latch status": flag parsing; internal/statuscmd
// does the rest.
func runStatus(args []string, env *environment) int {
	opts := statuscmd.Options{Addr: statuscmd.DefaultAddr, Out: env.stdout}
	if addr := env.getenv("LATCH_ADMIN_ADDR"); addr != "" {
		opts.Addr = addr
	}
	fs := env.newFlagSet("status")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: latch status [flags]

Show who holds which lock of a latch server, since when, who waits for it,
and the live sessions, from the server's admin API.

Flags:
`)
		fs.PrintDefaults()
	}
	fs.StringVar(&opts.Addr, "admin-addr", opts.Addr, "admin API `address` of the server, host:port or URL (env LATCH_ADMIN_ADDR)")
	fs.StringVar(&opts.Prefix, "prefix", "", "show only the keys starting with this `prefix`")
	fs.BoolVar(&opts.JSON, "json", false, "print the admin API's JSON instead of tables")
	fs.BoolVar(&opts.Watch, "watch", false, "redraw every --interval until interrupted")
	fs.DurationVar(&opts.Interval, "interval", statuscmd.DefaultInterval, "with --watch, redraw every `duration`")
	var tf tlsFlags
	tf.register(fs)
	if code, done := parseFlags(fs, args); done {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(env.stderr, "latch status: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if opts.Interval <= 0 {
		fmt.Fprintf(env.stderr, "latch status: --interval must be positive\n")
		return 2
	}
	tlsCfg, err := tf.config()
	if err != nil {
		fmt.Fprintf(env.stderr, "latch status: %v\n", err)
		return 2
	}
	opts.TLS = tlsCfg
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := statuscmd.Run(ctx, opts); err != nil {
		fmt.Fprintf(env.stderr, "%v\n", err)
		return 1
	}
	return 0
}
