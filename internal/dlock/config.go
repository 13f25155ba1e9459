package dlock

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/latchd/latch/internal/metrics"
)

// Config configures a Server. Start from DefaultConfig. The toml tags name
// the settings of the configuration file's [dlock] table (internal/config);
// the fields tagged "-" are set by the program.
type Config struct {
	// Addr is the TCP address to listen on, like "127.0.0.1:11212"; port 0
	// picks a free port (see Server.Addr).
	Addr string `toml:"addr"`
	// MaxFrame is the largest request frame accepted, in bytes. A larger
	// frame is answered with an error and the connection is closed.
	MaxFrame int `toml:"max-frame"`
	// IdleTimeout closes a connection that sends nothing for this long
	// while none of its requests waits. 0: never.
	IdleTimeout time.Duration `toml:"idle-timeout"`
	// ReadTimeout bounds the time the rest of a frame may take once its
	// first byte arrived: a client that stalls inside a frame (a
	// slow-loris) is disconnected. 0: IdleTimeout bounds it instead.
	ReadTimeout time.Duration `toml:"read-timeout"`
	// MaxConns limits the open connections; 0 means no limit. A connection
	// over the limit gets one Response (version 2, request_id 0, status
	// General, error_text "TooManyConnections: ...") and is closed.
	MaxConns int `toml:"max-conns"`
	// WriteTimeout bounds each write of answers to a connection; a client
	// that does not read its answers for this long is disconnected. 0:
	// never.
	WriteTimeout time.Duration `toml:"write-timeout"`
	// MaxKeys limits the keys of one request; 0 means no limit. Lock
	// requests are checked by the lock service too.
	MaxKeys int `toml:"-"`
	// MaxPending limits the requests one connection may have waiting
	// (version 3) or queued behind a waiting Lock (version 2).
	MaxPending int `toml:"-"`
	// Tokens, when not empty, are the access tokens a request must carry in
	// access_token, each with the rights and keys it allows (see Token).
	Tokens []Token `toml:"-"`
	// TLS, when set, makes Start serve TLS only, with this configuration.
	TLS *tls.Config `toml:"-"`
	// Logger receives connection events (debug) and failures. nil: discard.
	Logger *slog.Logger `toml:"-"`
	// Metrics counts connections and requests (by request type). nil:
	// nothing is counted.
	Metrics *metrics.Protocol `toml:"-"`
}

// DefaultConfig returns the defaults of latch serve.
func DefaultConfig() Config {
	return Config{
		Addr:         "127.0.0.1:11212",
		MaxFrame:     256 << 10,
		IdleTimeout:  60 * time.Second,
		ReadTimeout:  30 * time.Second,
		WriteTimeout: 10 * time.Second,
		MaxConns:     4096,
		MaxKeys:      1000,
		MaxPending:   1024,
	}
}

// Validate reports every invalid setting of c, joined into one error. Each
// names its field.
func (c Config) Validate() error {
	var errs []error
	if c.MaxFrame < minFrame {
		errs = append(errs, fmt.Errorf("dlock: invalid MaxFrame %d: must be at least %d", c.MaxFrame, minFrame))
	}
	for _, v := range []struct {
		name string
		d    time.Duration
	}{
		{"IdleTimeout", c.IdleTimeout},
		{"ReadTimeout", c.ReadTimeout},
		{"WriteTimeout", c.WriteTimeout},
	} {
		if v.d < 0 {
			errs = append(errs, fmt.Errorf("dlock: invalid %s %v: must not be negative", v.name, v.d))
		}
	}
	if c.MaxConns < 0 {
		errs = append(errs, fmt.Errorf("dlock: invalid MaxConns %d: must not be negative (0: no limit)", c.MaxConns))
	}
	if c.MaxKeys < 0 {
		errs = append(errs, fmt.Errorf("dlock: invalid MaxKeys %d: must not be negative (0: no limit)", c.MaxKeys))
	}
	if c.MaxPending <= 0 {
		errs = append(errs, fmt.Errorf("dlock: invalid MaxPending %d: must be positive", c.MaxPending))
	}
	if err := checkTokens(c.Tokens); err != nil {
		errs = append(errs, fmt.Errorf("dlock: invalid Tokens: %w", err))
	}
	return errors.Join(errs...)
}

// minFrame is the smallest MaxFrame accepted: room for a request with a
// few keys and an access token.
const minFrame = 512
