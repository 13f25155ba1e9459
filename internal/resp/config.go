package resp

import (
	"errors"
	"fmt"
	"time"

	"github.com/latchd/latch/internal/netserve"
)

// Config configures a Server. Start from DefaultConfig. The toml tags name
// the settings of the configuration file's [redis] table (internal/config);
// the fields tagged "-" are set by the program.
type Config struct {
	// The server's settings: Addr, Allow, MaxConns (one more connection
	// is answered "-ERR max number of clients reached", as Redis answers),
	// the timeouts (IdleTimeout is Redis's timeout; locks do not belong to
	// connections, so closing one releases nothing), Loops, TLS, Logger
	// and Metrics (connections, and requests by command).
	netserve.Config
	// Version is latch's version, reported by INFO as latch_version.
	Version string `toml:"-"`
	// Limits bound requests: arguments, argument and inline line sizes.
	Limits Limits `toml:"-"`
	// MaxValue is the longest owner value (the value of SET and friends)
	// accepted, in bytes; a longer one is refused with an error.
	MaxValue int `toml:"max-value"`
	// Tokens, when not empty, are the secrets AUTH accepts (AUTH token, or
	// AUTH user token with any user); until a connection has
	// authenticated, every command but AUTH, HELLO and QUIT answers
	// NOAUTH. A token's rights and key prefixes limit what the connection
	// may then do.
	Tokens []netserve.Token `toml:"-"`
}

// DefaultConfig returns the defaults of latch serve.
func DefaultConfig() Config {
	return Config{
		Config: netserve.Config{
			Addr:         "127.0.0.1:6379",
			MaxConns:     4096,
			ReadTimeout:  30 * time.Second,
			WriteTimeout: 10 * time.Second,
		},
		Limits:   Limits{MaxArgs: 1024, MaxBulk: 64 << 10, MaxInline: 64 << 10},
		MaxValue: 4096,
	}
}

// Validate reports every invalid setting of c, joined into one error.
func (c Config) Validate() error {
	var errs []error
	if err := c.Config.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("redis: %w", err))
	}
	if c.Limits.MaxArgs < 8 || c.Limits.MaxBulk < 1024 || c.Limits.MaxInline < 1024 {
		errs = append(errs, fmt.Errorf("redis: limits %+v: want at least 8 arguments of 1024 bytes and inline lines of 1024", c.Limits))
	}
	if c.MaxValue < 1 {
		errs = append(errs, fmt.Errorf("redis: max value %d: must be positive", c.MaxValue))
	}
	if err := netserve.CheckTokens(c.Tokens); err != nil {
		errs = append(errs, fmt.Errorf("redis: invalid tokens: %w", err))
	}
	return errors.Join(errs...)
}
