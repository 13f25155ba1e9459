package runlock

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/latchd/latch"
)

// Exit codes of latch run besides the command's own status.
const (
	// ExitConflict is the default exit code when the lock could not be
	// taken at once (-n) or in time (-w).
	ExitConflict = 1
	// ExitError: latch run failed: it could not reach the server, the
	// server refused the request, or the lock was lost while the command
	// ran (the command has then been stopped).
	ExitError = 125
	// ExitCannotRun: the command was found but could not be started.
	ExitCannotRun = 126
	// ExitNotFound: the command was not found.
	ExitNotFound = 127
)

// DefaultAddr is the server latch run talks to by default: a local latch
// serve's dlock listener.
const DefaultAddr = "127.0.0.1:11212"

// DefaultSessionTTL is the session TTL when Config.SessionTTL is 0.
const DefaultSessionTTL = 10 * time.Second

// Config says what Run runs under which lock.
type Config struct {
	// Addr is the dlock address of the server, or the addresses of a
	// cluster's servers separated by commas (client.Dial).
	Addr string
	// Token is the access token, for servers configured with tokens.
	Token string
	// TLS, when set, makes latch run speak TLS to the server with this
	// configuration (see client.TLS).
	TLS *tls.Config
	// Keys to lock, all at once.
	Keys []string
	// Mode is latch.Exclusive or latch.Shared.
	Mode latch.Mode
	// Limit caps the holders of a shared lock (0: no cap).
	Limit uint32
	// Wait is how long to wait for the keys: latch.NoWait (try once),
	// latch.WaitForever, or a positive duration.
	Wait time.Duration
	// ConflictCode is the exit code when the keys could not be taken at
	// once or in time.
	ConflictCode int
	// Lease, when positive, takes the lock as a lease of that length,
	// renewed while the command runs. Should latch run die, the lock stays
	// held until the lease ends instead of being released at once.
	Lease time.Duration
	// SessionTTL is the session's TTL; 0 means DefaultSessionTTL.
	SessionTTL time.Duration
	// KillAfter is how long the command has between SIGTERM and SIGKILL
	// when the lock is lost; 0 means a tenth of the session TTL. It must
	// be at most a quarter of the session TTL.
	KillAfter time.Duration

	// Command is the command to run and its arguments.
	Command []string
	// Env is the command's environment, to which LATCH_TOKEN and
	// LATCH_KEYS are added.
	Env []string
	// The command's standard streams. When Stdin is the controlling
	// terminal, the command runs in the terminal's foreground.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Logger receives what latch run does: the lock taken and its token
	// (info), the command stopped (warn). nil: discard.
	Logger *slog.Logger
}

// DefaultConfig returns a Config with the defaults of latch run: an
// exclusive lock, waiting forever, on the local server.
func DefaultConfig() Config {
	return Config{
		Addr:         DefaultAddr,
		Mode:         latch.Exclusive,
		Wait:         latch.WaitForever,
		ConflictCode: ExitConflict,
	}
}

// timing is when latch run gives a lock up and how fast it stops the
// command, derived from the Config (see the package documentation).
type timing struct {
	ttl       time.Duration // session TTL
	killAfter time.Duration // SIGTERM to SIGKILL
	margin    time.Duration // client.SafetyMargin: killAfter + ttl/5
	lease     time.Duration // Config.Lease
	renew     time.Duration // between lease renewals; 0 without a lease
}

// Validate reports what is wrong with c, every problem joined in one error.
// Run validates its Config too.
func (c *Config) Validate() error {
	_, err := c.timing()
	return err
}

// timing reports what is wrong with c, and returns the timing it implies.
func (c *Config) timing() (timing, error) {
	var errs []error
	if c.Addr == "" {
		errs = append(errs, errors.New("no server address"))
	}
	if len(c.Keys) == 0 {
		errs = append(errs, errors.New("no key to lock"))
	}
	for _, k := range c.Keys {
		if err := latch.CheckKey(k); err != nil {
			errs = append(errs, fmt.Errorf("key %q: %w", k, err))
		}
	}
	if len(c.Command) == 0 {
		errs = append(errs, errors.New("no command to run"))
	}
	if c.Mode != latch.Exclusive && c.Mode != latch.Shared {
		errs = append(errs, fmt.Errorf("invalid mode %v", c.Mode))
	}
	if c.Limit != 0 && c.Mode != latch.Shared {
		errs = append(errs, errors.New("a limit needs a shared lock"))
	}
	if c.Wait < 0 && c.Wait != latch.WaitForever {
		errs = append(errs, fmt.Errorf("invalid wait %v", c.Wait))
	}
	if c.ConflictCode < 0 || c.ConflictCode > 255 {
		errs = append(errs, fmt.Errorf("conflict exit code %d: must be 0 to 255", c.ConflictCode))
	}
	t := timing{ttl: c.SessionTTL, killAfter: c.KillAfter, lease: c.Lease}
	if t.ttl == 0 {
		t.ttl = DefaultSessionTTL
	}
	if t.killAfter == 0 {
		t.killAfter = t.ttl / 10
	}
	switch {
	case t.ttl < 0:
		errs = append(errs, fmt.Errorf("session TTL %v: must be positive", t.ttl))
	case t.killAfter < 0 || t.killAfter > t.ttl/4:
		errs = append(errs, fmt.Errorf("kill-after %v: must be positive and at most a quarter of the session TTL %v", t.killAfter, t.ttl))
	}
	t.margin = t.killAfter + t.ttl/5
	switch {
	case c.Lease < 0:
		errs = append(errs, fmt.Errorf("lease %v: must not be negative", c.Lease))
	case c.Lease > 0 && c.Lease < 4*t.margin:
		errs = append(errs, fmt.Errorf("lease %v: must be at least %v with session TTL %v and kill-after %v", c.Lease, 4*t.margin, t.ttl, t.killAfter))
	case c.Lease > 0:
		t.renew = (c.Lease - t.margin) / 3
	}
	return t, errors.Join(errs...)
}
