package dlock

import (
	"errors"
	"fmt"
	"time"

	"github.com/latchd/latch/internal/netserve"
)

// Config configures a Server. Start from DefaultConfig. The toml tags name
// the settings of the configuration file's [dlock] table (internal/config);
// the fields tagged "-" are set by the program.
type Config struct {
	// The server's settings: Addr, Allow, MaxConns (a connection over it
	// gets one Response: version 2, request_id 0, status General,
	// error_text "TooManyConnections: ..."; and is closed), the timeouts
	// (IdleTimeout never closes a connection while one of its requests
	// waits, nor sooner than IdleTimeout after its last answer), Loops
	// (event loops serve the plain connections of an inline service),
	// TLS, Logger and Metrics (connections, and requests by type).
	netserve.Config
	// MaxFrame is the largest request frame accepted, in bytes. A larger
	// frame is answered with an error and the connection is closed.
	MaxFrame int `toml:"max-frame"`
	// MaxKeys limits the keys of one request; 0 means no limit. Lock
	// requests are checked by the lock service too.
	MaxKeys int `toml:"-"`
	// MaxPending limits the requests one connection may have waiting
	// (version 3) or queued behind a waiting Lock (version 2).
	MaxPending int `toml:"-"`
	// Tokens, when not empty, are the access tokens a request must carry in
	// access_token, each with the rights and keys it allows: a read-only
	// token allows Ping and, in version 3, Session; key prefixes limit
	// the keys Lock, Unlock and Renew may name.
	Tokens []netserve.Token `toml:"-"`
}

// DefaultConfig returns the defaults of latch serve.
func DefaultConfig() Config {
	return Config{
		Config: netserve.Config{
			Addr:         "127.0.0.1:11212",
			IdleTimeout:  60 * time.Second,
			ReadTimeout:  30 * time.Second,
			WriteTimeout: 10 * time.Second,
			MaxConns:     4096,
		},
		MaxFrame:   256 << 10,
		MaxKeys:    1000,
		MaxPending: 1024,
	}
}

// Validate reports every invalid setting of c, joined into one error. Each
// names its field.
func (c Config) Validate() error {
	var errs []error
	if err := c.Config.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("dlock: %w", err))
	}
	if c.MaxFrame < minFrame {
		errs = append(errs, fmt.Errorf("dlock: invalid MaxFrame %d: must be at least %d", c.MaxFrame, minFrame))
	}
	if c.MaxKeys < 0 {
		errs = append(errs, fmt.Errorf("dlock: invalid MaxKeys %d: must not be negative (0: no limit)", c.MaxKeys))
	}
	if c.MaxPending <= 0 {
		errs = append(errs, fmt.Errorf("dlock: invalid MaxPending %d: must be positive", c.MaxPending))
	}
	if err := netserve.CheckTokens(c.Tokens); err != nil {
		errs = append(errs, fmt.Errorf("dlock: invalid Tokens: %w", err))
	}
	return errors.Join(errs...)
}

// minFrame is the smallest MaxFrame accepted: room for a request with a
// few keys and an access token.
const minFrame = 512
