package resp

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"time"

	"github.com/latchd/latch/internal/metrics"
)

// Config configures a Server.
type Config struct {
	// Addr is the TCP address to listen on, "host:port"; port 0 picks a
	// free one (Server.Addr).
	Addr string
	// Version is latch's version, reported by INFO as latch_version.
	Version string
	// MaxConns limits the open connections; 0 means no limit. A connection
	// over the limit is answered "-ERR max number of clients reached" (as
	// Redis answers) and closed.
	MaxConns int
	// IdleTimeout closes a connection that sends nothing for this long
	// between requests (Redis's timeout); 0 means never. Locks do not
	// belong to connections, so closing one releases nothing.
	IdleTimeout time.Duration
	// ReadTimeout bounds the time a request may take to arrive once its
	// first byte has (a slow-loris is disconnected); 0: no bound.
	ReadTimeout time.Duration
	// WriteTimeout bounds each write of replies; 0: no bound.
	WriteTimeout time.Duration
	// Limits bound requests: arguments, argument and inline line sizes.
	Limits Limits
	// MaxValue is the longest owner value (the value of SET and friends)
	// accepted, in bytes; a longer one is refused with an error.
	MaxValue int
	// Tokens, when not empty, are the secrets AUTH accepts (AUTH token, or
	// AUTH user token with any user); until a connection has
	// authenticated, every command but AUTH, HELLO and QUIT answers
	// NOAUTH. A token's rights and key prefixes limit what the connection
	// may then do.
	Tokens []Token
	// TLS, when set, makes Start serve TLS only, with this configuration.
	TLS *tls.Config
	// Allow, when not empty, limits the clients served to those whose
	// address is in one of these networks; others are closed at once.
	Allow []netip.Prefix
	// Loops is the number of event loops (package evloop) that serve the
	// plain TCP connections, on Linux; 0, TLS connections, and other
	// systems get a goroutine per connection. Only for a Service that
	// answers inline (latch.Inline; a node in memory): a loop's
	// connections all wait while one of its requests does, and on a
	// latch.Replicated one each request waits for its commit.
	Loops int
	// Logger receives lifecycle and error logs; nil discards them.
	Logger *slog.Logger
	// Metrics counts connections and requests by command; nil counts
	// nothing.
	Metrics *metrics.Protocol
}

// Token is a secret AUTH accepts, and what it allows.
type Token struct {
	Value string
	// ReadOnly limits the connection to commands that change no lock.
	ReadOnly bool
	// Prefixes, when not empty, limit the keys the connection may name to
	// those starting with one of them.
	Prefixes []string
}

// allowsKey reports whether t lets a connection name key.
func (t *Token) allowsKey(key []byte) bool {
	if len(t.Prefixes) == 0 {
		return true
	}
	for _, p := range t.Prefixes {
		if strings.HasPrefix(string(key), p) {
			return true
		}
	}
	return false
}

// DefaultConfig returns the defaults of latch serve.
func DefaultConfig() Config {
	return Config{
		Addr:         "127.0.0.1:6379",
		MaxConns:     4096,
		ReadTimeout:  30 * time.Second,
		WriteTimeout: 10 * time.Second,
		Limits:       Limits{MaxArgs: 1024, MaxBulk: 64 << 10, MaxInline: 64 << 10},
		MaxValue:     4096,
	}
}

// validate reports what is wrong with c.
func (c *Config) validate() error {
	var errs []error
	if c.IdleTimeout < 0 || c.ReadTimeout < 0 || c.WriteTimeout < 0 {
		errs = append(errs, fmt.Errorf("redis: negative timeout (idle %v, read %v, write %v)", c.IdleTimeout, c.ReadTimeout, c.WriteTimeout))
	}
	if c.Loops < 0 {
		errs = append(errs, fmt.Errorf("redis: negative loops %d", c.Loops))
	}
	if c.MaxConns < 0 {
		errs = append(errs, fmt.Errorf("redis: negative max conns %d", c.MaxConns))
	}
	if c.Limits.MaxArgs < 8 || c.Limits.MaxBulk < 1024 || c.Limits.MaxInline < 1024 {
		errs = append(errs, fmt.Errorf("redis: limits %+v: want at least 8 arguments of 1024 bytes and inline lines of 1024", c.Limits))
	}
	if c.MaxValue < 1 {
		errs = append(errs, fmt.Errorf("redis: max value %d: must be positive", c.MaxValue))
	}
	for i, t := range c.Tokens {
		if t.Value == "" {
			errs = append(errs, fmt.Errorf("redis: token %d is empty", i))
		}
	}
	return errors.Join(errs...)
}
