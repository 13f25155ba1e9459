package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/runlock"
)

// runRun implements "latch run": flag parsing; internal/runlock does the
// rest.
func runRun(args []string, env *environment) int {
	cfg := runlock.DefaultConfig()
	if addr := env.getenv("LATCH_ADDR"); addr != "" {
		cfg.Addr = addr
	}
	cfg.Token = env.getenv("LATCH_ACCESS_TOKEN")

	fs := env.newFlagSet("run")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: latch run [flags] KEY... -- COMMAND [ARG...]

Run COMMAND while holding a lock on every KEY, taken from a latch server:
flock(1) across machines. The lock is exclusive unless -s is given. The
command gets LATCH_TOKEN (the lock's fencing token) and LATCH_KEYS (the
keys, separated by spaces) in its environment. If the lock may be lost
(the server is gone or unreachable), the command's process group gets
SIGTERM, then SIGKILL after --kill-after, before the server could grant
the lock to anyone else.

Exit status: the command's (128+N if killed by signal N); the -E code if
the keys were busy (-n, -w); 125 if latch run failed or the lock was lost;
126 if the command could not be run; 127 if it was not found; 2 on a bad
command line.

Flags:
`)
		fs.PrintDefaults()
	}
	shared := fs.Bool("s", false, "take a shared lock (readers)")
	exclusive := fs.Bool("x", false, "take an exclusive lock (the default)")
	noWait := fs.Bool("n", false, "fail at once if a key is busy")
	var wait waitFlag
	fs.Var(&wait, "w", "wait at most this `duration` for busy keys (10s, or seconds: 10); 0 is -n")
	fs.IntVar(&cfg.ConflictCode, "E", cfg.ConflictCode, "exit `code` when the keys are busy (-n, -w)")
	limit := fs.Uint("limit", 0, "with -s, allow at most `n` holders of each key (a semaphore)")
	fs.DurationVar(&cfg.Lease, "ttl", 0, "take the lock as a lease of this `duration`, renewed while the command runs, which outlives latch run if it dies")
	fs.StringVar(&cfg.Addr, "addr", cfg.Addr, "dlock `address` of the latch server, or of every server of a cluster separated by commas: the session moves to another if its server dies (env LATCH_ADDR)")
	fs.DurationVar(&cfg.SessionTTL, "session-ttl", runlock.DefaultSessionTTL, "the server ends the session (and releases the lock) when latch run is silent for this `duration`")
	fs.DurationVar(&cfg.KillAfter, "kill-after", 0, "when the lock is lost, SIGKILL the command this `duration` after SIGTERM (default: a tenth of --session-ttl)")
	fs.StringVar(&cfg.Token, "token", cfg.Token, "access `token` for the server (env LATCH_ACCESS_TOKEN)")
	verbose := fs.Bool("v", false, "tell what latch run does, on standard error")
	var tf tlsFlags
	tf.register(fs)
	if code, done := parseFlags(fs, args); done {
		return code
	}

	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(env.stderr, "latch run: "+format+"\n", a...)
		return 2
	}
	rest := fs.Args()
	dash := slices.Index(rest, "--")
	// The flag package consumes the first "--" when no key comes before
	// it: "latch run -- cmd".
	flagsEnded := len(rest) < len(args) && args[len(args)-len(rest)-1] == "--"
	switch {
	case dash < 0 && flagsEnded:
		return usageErr("no key to lock")
	case dash < 0:
		return usageErr("missing -- between the keys and the command; see latch help run")
	case dash == 0:
		return usageErr("no key to lock")
	case dash == len(rest)-1:
		return usageErr("no command after --")
	}
	cfg.Keys, cfg.Command = rest[:dash], rest[dash+1:]

	if *shared && *exclusive {
		return usageErr("-s and -x exclude each other")
	}
	if *shared || *limit > 0 {
		cfg.Mode = latch.Shared
	}
	if *exclusive && *limit > 0 {
		return usageErr("--limit needs a shared lock (-s)")
	}
	if *limit > 1<<32-1 {
		return usageErr("--limit %d is too large", *limit)
	}
	cfg.Limit = uint32(*limit)
	if wait.set {
		cfg.Wait = wait.d
	}
	if *noWait {
		cfg.Wait = latch.NoWait
	}
	if err := cfg.Validate(); err != nil {
		return usageErr("%v", err)
	}
	tlsCfg, err := tf.config()
	if err != nil {
		return usageErr("%v", err)
	}
	cfg.TLS = tlsCfg

	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelDebug
	}
	cfg.Logger = slog.New(slog.NewTextHandler(env.stderr, &slog.HandlerOptions{Level: level})).With("cmd", "latch run")
	cfg.Stdin, cfg.Stdout, cfg.Stderr = os.Stdin, env.stdout, env.stderr

	code, err := runlock.Run(context.Background(), cfg)
	var busy *latch.BusyError
	switch {
	case err == nil:
	case errors.As(err, &busy) && !*verbose:
		// Silent, as flock(1) is: the exit code tells.
	default:
		fmt.Fprintf(env.stderr, "latch run: %v\n", err)
	}
	return code
}

// waitFlag is the value of -w: a duration, or a number of seconds as
// flock(1) takes it.
type waitFlag struct {
	set bool
	d   time.Duration
}

func (w *waitFlag) String() string {
	if w == nil || !w.set {
		return ""
	}
	return w.d.String()
}

func (w *waitFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		secs, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || secs < 0 || secs > float64(1<<62)/float64(time.Second) {
			return errors.New("not a duration (like 10s or 1m30s) or a number of seconds")
		}
		d = time.Duration(secs * float64(time.Second))
	}
	if d < 0 {
		return errors.New("negative wait")
	}
	w.set, w.d = true, d
	return nil
}
