package zookeeper

import (
	"errors"
	"fmt"
	"time"

	"github.com/latchd/latch/internal/netserve"
)

// Config configures a Server. Start from DefaultConfig. The toml tags name
// the settings of the configuration file's [zookeeper] table
// (internal/config); the fields tagged "-" are set by the program.
type Config struct {
	// The server's settings: Addr, Allow, MaxConns (a connection over it
	// is closed without a word, as ZooKeeper's maxClientCnxns does), the
	// timeouts (ReadTimeout bounds a request's bytes once it started;
	// IdleTimeout, 0 by default, closes a connection that sends nothing,
	// which a ZooKeeper client never does: it pings), TLS, Logger and
	// Metrics. The ZooKeeper front end serves each connection on a
	// goroutine of its own: Loops is not used.
	netserve.Config
	// TickTime is ZooKeeper's tickTime: the session timeouts a client
	// may ask for are clamped to [MinSessionTimeout, MaxSessionTimeout],
	// 2 and 20 ticks unless set.
	TickTime          time.Duration `toml:"tick-time"`
	MinSessionTimeout time.Duration `toml:"min-session-timeout"`
	MaxSessionTimeout time.Duration `toml:"max-session-timeout"`
	// MaxWatches limits the watches one connection holds; a read that
	// would set one more fails with an error, and the watch is not set.
	MaxWatches int `toml:"max-watches"`
	// MaxQueued is how many bytes of replies and events may wait for a
	// client that does not read; past it the connection is closed.
	MaxQueued int `toml:"max-queued"`
	// TouchEvery is how often the sessions that had traffic have their
	// timeouts restarted, in one command for all of them.
	TouchEvery time.Duration `toml:"-"`
	// Version is latch's version, reported as "3.8.0-latch-<Version>".
	Version string `toml:"-"`
}

// DefaultConfig returns the defaults of latch serve.
func DefaultConfig() Config {
	return Config{
		Config: netserve.Config{
			Addr:         "127.0.0.1:2181",
			ReadTimeout:  30 * time.Second,
			WriteTimeout: 10 * time.Second,
			MaxConns:     4096,
		},
		TickTime:   2 * time.Second,
		MaxWatches: 65536,
		MaxQueued:  16 << 20,
		TouchEvery: time.Second,
	}
}

// Validate reports every invalid setting of c, joined into one error. Each
// names its field.
func (c Config) Validate() error {
	var errs []error
	if err := c.Config.ValidateAs("zookeeper-"); err != nil {
		errs = append(errs, fmt.Errorf("zookeeper: %w", err))
	}
	if c.TickTime <= 0 {
		errs = append(errs, fmt.Errorf("zookeeper: invalid TickTime %v: must be positive", c.TickTime))
	}
	lo, hi := c.sessionTimeouts()
	if c.MinSessionTimeout < 0 || c.MaxSessionTimeout < 0 || lo > hi {
		errs = append(errs, fmt.Errorf("zookeeper: invalid session timeouts [%v, %v]", lo, hi))
	}
	if hi > maxTimeout {
		errs = append(errs, fmt.Errorf("zookeeper: invalid MaxSessionTimeout %v: at most %v", hi, maxTimeout))
	}
	if c.MaxWatches <= 0 {
		errs = append(errs, fmt.Errorf("zookeeper: invalid MaxWatches %d: must be positive", c.MaxWatches))
	}
	if c.MaxQueued < 1<<20 {
		errs = append(errs, fmt.Errorf("zookeeper: invalid MaxQueued %d: must be at least 1 MiB", c.MaxQueued))
	}
	if c.TouchEvery <= 0 {
		errs = append(errs, fmt.Errorf("zookeeper: invalid TouchEvery %v: must be positive", c.TouchEvery))
	}
	return errors.Join(errs...)
}

// maxTimeout is the longest session timeout: an int32 of milliseconds.
const maxTimeout = time.Duration(1<<31-1) * time.Millisecond

// sessionTimeouts returns the bounds of a session's timeout.
func (c Config) sessionTimeouts() (lo, hi time.Duration) {
	lo, hi = c.MinSessionTimeout, c.MaxSessionTimeout
	if lo == 0 {
		lo = 2 * c.TickTime
	}
	if hi == 0 {
		hi = 20 * c.TickTime
	}
	return lo, hi
}

// negotiate returns the timeout of a session whose client asked for ms
// milliseconds: clamped to the bounds, as ZooKeeper does.
func (c Config) negotiate(ms int32) time.Duration {
	lo, hi := c.sessionTimeouts()
	return min(max(time.Duration(ms)*time.Millisecond, lo), hi)
}
