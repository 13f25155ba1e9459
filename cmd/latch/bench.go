package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/latchd/latch/internal/bench"
)

// runBench implements "latch bench": it runs one load-generator run
// against a server and prints its result. The exit code is 1 when the run
// failed or any reply was unexpected.
func runBench(args []string, env *environment) int {
	cfg := bench.DefaultConfig()
	fs := env.newFlagSet("bench")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: latch bench [flags]

Load a memcached (text or binary: latch, yrmcds, memcached) or dlock server
and report operations per second and latency percentiles.

Workloads: cycle (each connection locks and unlocks its own keys), handoff
(every connection contends for one key), getset (a get/set mix), hold (take
and hold --locks locks, report server memory per lock), idle (open --conns
connections, report server memory per connection).

Flags:
`)
		fs.PrintDefaults()
	}
	cfg.RegisterFlags(fs)
	jsonOut := fs.Bool("json", false, "print the result as JSON")
	if code, done := parseFlags(fs, args); done {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(env.stderr, "latch bench: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(env.stderr, "latch bench: %v\n", err)
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := bench.Run(ctx, cfg)
	if res != nil {
		if *jsonOut {
			res.WriteJSON(env.stdout)
		} else {
			res.WriteText(env.stdout)
		}
	}
	switch {
	case err != nil && !errors.Is(err, context.Canceled):
		fmt.Fprintf(env.stderr, "latch bench: %v\n", err)
		return 1
	case res != nil && res.Errors > 0:
		fmt.Fprintf(env.stderr, "latch bench: %d unexpected replies or failed connections\n", res.Errors)
		return 1
	}
	return 0
}
