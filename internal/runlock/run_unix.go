//go:build unix

package runlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/latchd/latch"
	"github.com/latchd/latch/client"
)

// forwarded are the signals latch run passes on to the command. Before the
// command starts, they abandon the wait for the lock.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// Run takes the lock cfg names, runs the command under it, and returns the
// exit code latch run should exit with:
//
//   - the command's exit status, or 128 plus the number of the signal that
//     killed it, when it ran to its end under the lock;
//   - cfg.ConflictCode when the keys could not be taken at once or in
//     time; the error is then a *latch.BusyError naming the busy keys;
//   - 128 plus a signal's number when a forwarded signal arrived before the
//     lock was taken;
//   - ExitNotFound or ExitCannotRun when the command could not be started;
//   - ExitError when anything else failed, including the loss of the lock
//     while the command ran, after it was stopped.
//
// The error says what went wrong, for the user; it is nil when the command
// ran to its end under the lock, whatever its status.
func Run(ctx context.Context, cfg Config) (int, error) {
	tm, err := cfg.timing()
	if err != nil {
		return ExitError, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)

	// Abandon the wait for the lock on a forwarded signal.
	waitCtx, cancelWait := context.WithCancel(ctx)
	defer cancelWait()
	var caught os.Signal
	gotSignal := make(chan struct{})
	watching := make(chan struct{})
	go func() {
		defer close(watching)
		select {
		case caught = <-sigs:
			close(gotSignal)
			cancelWait()
		case <-waitCtx.Done():
		}
	}()
	// stopWatching ends the watch; after it, caught is set if gotSignal
	// is closed, and later signals stay in sigs for the command.
	stopWatching := func() {
		cancelWait()
		<-watching
	}

	opts := []client.Option{
		client.SessionTTL(tm.ttl),
		client.SafetyMargin(tm.margin),
		client.AccessToken(cfg.Token),
		client.Logger(log),
	}
	if cfg.TLS != nil {
		opts = append(opts, client.TLS(cfg.TLS))
	}
	c, err := client.Dial(waitCtx, cfg.Addr, opts...)
	if err != nil {
		stopWatching()
		return interrupted(gotSignal, caught, ExitError, err)
	}
	defer c.Close()

	log.Debug("waiting for the lock", "keys", cfg.Keys, "mode", cfg.Mode)
	l, err := lockRetrying(waitCtx, c, cfg, log)
	stopWatching()
	if err != nil {
		var busy *latch.BusyError
		if errors.As(err, &busy) {
			return cfg.ConflictCode, busy
		}
		return interrupted(gotSignal, caught, ExitError, err)
	}
	// A signal from now on is the command's.
	select {
	case <-gotSignal:
		l.Unlock(context.WithoutCancel(ctx))
		return 128 + int(caught.(syscall.Signal)), fmt.Errorf("interrupted by %v", caught)
	default:
	}
	log.Info("locked", "keys", l.Keys(), "token", l.Token(), "session", c.SessionID())

	env := cfg.Env
	if env == nil {
		env = os.Environ()
	}
	env = append(env[:len(env):len(env)],
		"LATCH_TOKEN="+strconv.FormatUint(uint64(l.Token()), 10),
		"LATCH_KEYS="+strings.Join(l.Keys(), " "))
	ch, err := startChild(cfg.Command, env, cfg.Stdin, cfg.Stdout, cfg.Stderr)
	if err != nil {
		l.Unlock(context.WithoutCancel(ctx))
		code := ExitCannotRun
		var ee *execError
		if errors.As(err, &ee) {
			code = ee.code
		}
		return code, err
	}
	return supervise(ctx, l, ch, sigs, tm, log)
}

// The pauses between the attempts of lockRetrying while the Client moves
// its session: doubling from retryMin up to retryMax.
const (
	retryMin = 10 * time.Millisecond
	retryMax = 250 * time.Millisecond
)

// lockRetrying takes the keys as cfg asks, as lock does, and sends the
// request again when a failover of the session lost its answer: it failed
// with an error wrapping client.ErrConnectionLost (its server died, fell
// silent, shut down, or answered Unavailable), so its outcome is unknown,
// but the Client resumes the session on another server and gives the
// request's keys back there. It retries while the session lives (the
// Client's Done is open), ctx is not done, and cfg.Wait, counted from the
// first attempt, has time left; with NoWait too, whose answer was lost.
//
// Until the session has moved, a request fails at once with
// ErrConnectionLost, and then with latch.ErrAlreadyHeld while the Client
// gives the keys back; the Client has no signal for the end of the move,
// so those attempts are retried after a short pause. The move ends within
// the session TTL: the session is resumed, or the Client stops.
func lockRetrying(ctx context.Context, c *client.Client, cfg Config, log *slog.Logger) (*client.Lock, error) {
	var deadline time.Time
	if cfg.Wait > 0 {
		deadline = time.Now().Add(cfg.Wait)
	}
	wait := cfg.Wait
	var pause time.Duration // 0 until a failover
	for {
		sent := time.Now()
		l, err := lock(ctx, c, cfg, wait)
		moving := errors.Is(err, client.ErrConnectionLost) || pause > 0 && errors.Is(err, latch.ErrAlreadyHeld)
		if err == nil || !moving {
			return l, err
		}
		if !deadline.IsZero() {
			if wait = time.Until(deadline); wait <= 0 {
				return nil, err
			}
		}
		if pause == 0 || time.Since(sent) >= retryMax {
			// The first failover, or a later one that took a request
			// sent once the session had moved.
			log.Warn("lock request lost in a failover of the session; retrying it", "keys", cfg.Keys, "err", err)
			pause = retryMin
		} else {
			log.Debug("retrying the lock request", "err", err)
			pause = min(2*pause, retryMax)
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-c.Done():
			t.Stop()
			return nil, fmt.Errorf("retrying the lock request after a failover: %w", c.Err())
		case <-ctx.Done():
			t.Stop()
			return nil, err
		}
	}
}

// lock takes the keys as cfg asks, waiting at most wait (cfg.Wait, or what
// is left of it).
func lock(ctx context.Context, c *client.Client, cfg Config, wait time.Duration) (*client.Lock, error) {
	var opts []client.LockOption
	if cfg.Lease > 0 {
		opts = append(opts, client.Lease(cfg.Lease))
	}
	if cfg.Limit > 0 {
		opts = append(opts, client.Limit(cfg.Limit))
	}
	if wait > 0 {
		opts = append(opts, client.Wait(wait))
	}
	switch {
	case cfg.Mode == latch.Shared && cfg.Wait == latch.NoWait:
		return c.TryRLock(ctx, cfg.Keys, opts...)
	case cfg.Mode == latch.Shared:
		return c.RLock(ctx, cfg.Keys, opts...)
	case cfg.Wait == latch.NoWait:
		return c.TryLock(ctx, cfg.Keys, opts...)
	default:
		return c.Lock(ctx, cfg.Keys, opts...)
	}
}

// interrupted returns 128+signal if a forwarded signal ended the wait for
// the lock, else code and err.
func interrupted(got <-chan struct{}, caught os.Signal, code int, err error) (int, error) {
	select {
	case <-got:
		return 128 + int(caught.(syscall.Signal)), fmt.Errorf("interrupted by %v", caught)
	default:
		return code, err
	}
}

// supervise waits for the command to exit, forwarding signals to it and
// renewing the lease, and stops it if the lock is lost or ctx is done.
func supervise(ctx context.Context, l *client.Lock, ch *child, sigs <-chan os.Signal, tm timing, log *slog.Logger) (int, error) {
	var renew <-chan time.Time
	if tm.renew > 0 {
		t := time.NewTicker(tm.renew)
		defer t.Stop()
		renew = t.C
	}
	for {
		// An exit that is already there wins over a lock lost at the
		// same time: the command ended before its lock could pass on.
		select {
		case <-ch.exited:
			return finish(ctx, l, ch, log)
		default:
		}
		select {
		case <-ch.exited:
			return finish(ctx, l, ch, log)
		case sig := <-sigs:
			log.Debug("forwarding a signal", "signal", sig)
			if err := ch.signal(sig.(syscall.Signal)); err != nil {
				log.Warn("forwarding a signal", "signal", sig, "err", err)
			}
		case <-renew:
			rctx, cancel := context.WithTimeout(ctx, tm.renew)
			err := l.Renew(rctx, tm.lease)
			cancel()
			if err != nil {
				// Done closes when it is too late; keep trying until then.
				log.Warn("renewing the lease", "err", err)
			}
		case <-l.Done():
			err := fmt.Errorf("lock lost, command stopped: %w", l.Err())
			log.Info("stopping the command", "kill-after", tm.killAfter)
			stop(ch, tm.killAfter)
			log.Info("command stopped", "status", ch.status())
			return ExitError, err
		case <-ctx.Done():
			stop(ch, tm.killAfter)
			l.Unlock(context.WithoutCancel(ctx))
			return ExitError, fmt.Errorf("command stopped: %w", ctx.Err())
		}
	}
}

// finish releases the lock of a command that exited and returns its status.
func finish(ctx context.Context, l *client.Lock, ch *child, log *slog.Logger) (int, error) {
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := l.Unlock(uctx); err != nil {
		// Closing the connection releases a lock without a lease anyway.
		log.Warn("unlocking", "err", err)
	}
	return ch.status(), nil
}

// stop stops the command's process group: SIGTERM, then SIGKILL once
// killAfter has passed if any process of the group is left. It returns
// when the command has exited and the group is empty or killed.
func stop(ch *child, killAfter time.Duration) {
	ch.signal(syscall.SIGTERM)
	deadline := time.Now().Add(killAfter)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for time.Now().Before(deadline) {
		<-tick.C
		if !ch.groupAlive() {
			break
		}
	}
	ch.signal(syscall.SIGKILL)
	<-ch.exited
}
