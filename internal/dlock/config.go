package dlock

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/latchd/latch/internal/metrics"
)

// Config configures a Server.
type Config struct {
	// Addr is the TCP address to listen on, like "127.0.0.1:11212"; port 0
	// picks a free port (see Server.Addr).
	Addr string
	// MaxFrame is the largest request frame accepted, in bytes. A larger
	// frame is answered with an error and the connection is closed.
	MaxFrame int
	// IdleTimeout closes a connection that sends nothing for this long
	// while none of its requests waits. 0: never.
	IdleTimeout time.Duration
	// ReadTimeout bounds the time the rest of a frame may take once its
	// first byte arrived: a client that stalls inside a frame (a
	// slow-loris) is disconnected. 0: IdleTimeout bounds it instead.
	ReadTimeout time.Duration
	// MaxConns limits the open connections; 0 means no limit. A connection
	// over the limit gets one Response (version 2, request_id 0, status
	// General, error_text "TooManyConnections: ...") and is closed.
	MaxConns int
	// WriteTimeout bounds each write of answers to a connection; a client
	// that does not read its answers for this long is disconnected. 0:
	// never.
	WriteTimeout time.Duration
	// MaxKeys limits the keys of one request; 0 means no limit. Lock
	// requests are checked by the lock service too.
	MaxKeys int
	// MaxPending limits the requests one connection may have waiting
	// (version 3) or queued behind a waiting Lock (version 2).
	MaxPending int
	// Tokens, when not empty, are the access tokens a request must carry in
	// access_token, each with the rights and keys it allows (see Token).
	Tokens []Token
	// TLS, when set, makes Start serve TLS only, with this configuration.
	TLS *tls.Config
	// Logger receives connection events (debug) and failures. nil: discard.
	Logger *slog.Logger
	// Metrics counts connections and requests (by request type). nil:
	// nothing is counted.
	Metrics *metrics.Protocol
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

// validate reports what is wrong with c.
func (c *Config) validate() error {
	var errs []error
	if c.MaxFrame < minFrame {
		errs = append(errs, fmt.Errorf("dlock: max frame %d: must be at least %d", c.MaxFrame, minFrame))
	}
	if c.IdleTimeout < 0 || c.ReadTimeout < 0 || c.WriteTimeout < 0 {
		errs = append(errs, fmt.Errorf("dlock: negative timeout (idle %v, read %v, write %v)", c.IdleTimeout, c.ReadTimeout, c.WriteTimeout))
	}
	if c.MaxConns < 0 {
		errs = append(errs, fmt.Errorf("dlock: negative max conns %d", c.MaxConns))
	}
	if c.MaxKeys < 0 {
		errs = append(errs, fmt.Errorf("dlock: negative max keys %d", c.MaxKeys))
	}
	if c.MaxPending <= 0 {
		errs = append(errs, fmt.Errorf("dlock: max pending %d: must be positive", c.MaxPending))
	}
	if err := checkTokens(c.Tokens); err != nil {
		errs = append(errs, fmt.Errorf("dlock: %w", err))
	}
	return errors.Join(errs...)
}

// minFrame is the smallest MaxFrame accepted: room for a request with a
// few keys and an access token.
const minFrame = 512
