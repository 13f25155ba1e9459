package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/latchd/latch/internal/config"
	"github.com/latchd/latch/internal/server"
)

// runServe implements "latch serve": it runs a server until SIGINT or
// SIGTERM, then shuts it down gracefully within the shutdown-timeout.
func runServe(args []string, env *environment) int {
	fs := env.newFlagSet("serve")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: latch serve [flags]

Run a lock server until SIGINT or SIGTERM. SIGHUP reloads, without a
restart: it reads the settings again and applies the certificates (of
every listener and of the connections between nodes), the token files,
the admin token, the allow-lists and the log level; open connections and
their locks are untouched (docs/configuration.md names the settings that
need a restart). SIGUSR1 and SIGPIPE are ignored. Under systemd
(Type=notify, NOTIFY_SOCKET set) it sends READY=1 once it serves and has
caught up with its cluster, RELOADING=1 and READY=1 around a SIGHUP
reload, and STOPPING=1 when it shuts down. Every flag can also be
set by the LATCH_* environment variable named beside it, or in the TOML
file named by --config. Flags win over the environment, the environment
over the file.

Flags:
`)
		fs.PrintDefaults()
	}
	config.RegisterFlags(fs)
	cfg, err := config.Load(fs, args, env.getenv)
	if errors.Is(err, config.ErrFlags) {
		code, _ := flagExit(err) // fs has reported it
		return code
	}
	if err != nil {
		fmt.Fprintf(env.stderr, "latch serve: %v\n", err)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(env.stderr, "latch serve: unexpected arguments %q\n", fs.Args())
		return 2
	}

	level := new(slog.LevelVar)
	logger, err := newLevelLogger(env.stderr, cfg.Log, level)
	if err != nil {
		fmt.Fprintf(env.stderr, "latch serve: %v\n", err)
		return 2
	}

	// Catch the signals before serving, so that one sent as soon as the
	// server says it is serving is not lost. SIGHUP reloads. SIGPIPE is
	// caught because Go's default ends the process when a write to a
	// closed standard error raises it (a log collector gone), and every
	// lock with it; SIGUSR1, which Go ignores, is caught to say so.
	sigs := make(chan os.Signal, 4)
	caught := []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE}
	if sigUSR1 != nil {
		caught = append(caught, sigUSR1)
	}
	signal.Notify(sigs, caught...)
	defer signal.Stop(sigs)

	cfg.Server.Version = buildVersion()
	cfg.Server.Commit, _ = buildCommit()
	cfg.Server.LogLevel = level
	// A reload reads the settings as this start did: the same flags and
	// environment, and the file again.
	cfg.Server.Load = func() (config.Config, error) {
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		return config.Load(fs, args, env.getenv)
	}
	// Under systemd (Type=notify), READY=1 once the server serves and
	// has caught up with its cluster, STOPPING=1 when shutdown begins.
	sm := newServiceManager(env.getenv("NOTIFY_SOCKET"), logger)
	srv, err := server.New(cfg, logger)
	if err != nil {
		logger.Error("cannot start", "err", err)
		return 1
	}
	sm.watchReady(srv.Ready)
	logger.Info("serving",
		"version", buildVersion(),
		"pid", os.Getpid(),
		"max-keys", cfg.Lock.MaxKeys,
		"lock-delay", cfg.Lock.LockDelay)

	sig := <-sigs
	for sig != syscall.SIGINT && sig != syscall.SIGTERM {
		switch {
		case sig == syscall.SIGHUP:
			logger.Debug("SIGHUP: reloading")
			sm.reload(srv.Reload) // Reload logs what it did
		case sig == sigUSR1:
			logger.Info("SIGUSR1 ignored")
		}
		// SIGPIPE: a write to a closed pipe fails with EPIPE instead.
		sig = <-sigs
	}
	// A second SIGINT or SIGTERM kills the process at once; SIGHUP,
	// SIGUSR1 and SIGPIPE never do.
	signal.Stop(sigs)
	signal.Ignore(caught[2:]...) // SIGHUP, SIGPIPE, SIGUSR1
	logger.Info("shutting down", "signal", sig.String(), "timeout", cfg.Server.ShutdownTimeout)
	sm.stopping()

	ctx, cancel := context.WithTimeout(context.Background(), cfg.Server.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		logger.Error("shutdown failed", "err", err)
		return 1
	}
	logger.Info("shut down cleanly")
	return 0
}

// newLogger returns the logger c asks for, writing to w.
func newLogger(w io.Writer, c config.LogConfig) (*slog.Logger, error) {
	return newLevelLogger(w, c, new(slog.LevelVar))
}

// newLevelLogger is newLogger at level, which it sets to c's level, and
// which a reload may change.
func newLevelLogger(w io.Writer, c config.LogConfig, level *slog.LevelVar) (*slog.Logger, error) {
	l, err := config.ParseLogLevel(c.Level)
	if err != nil {
		return nil, err
	}
	level.Set(l)
	opts := &slog.HandlerOptions{Level: level}
	switch c.Format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	default:
		return nil, fmt.Errorf("invalid log-format %q: want text or json", c.Format)
	}
}
