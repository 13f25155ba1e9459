package dlock

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
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
	// while none of its requests waits. It also bounds the time the rest of
	// a frame may take once its first byte arrived. 0: never.
	IdleTimeout time.Duration
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
	// access_token.
	Tokens []string
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
		WriteTimeout: 10 * time.Second,
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
	if c.IdleTimeout < 0 || c.WriteTimeout < 0 {
		errs = append(errs, fmt.Errorf("dlock: negative timeout (idle %v, write %v)", c.IdleTimeout, c.WriteTimeout))
	}
	if c.MaxKeys < 0 {
		errs = append(errs, fmt.Errorf("dlock: negative max keys %d", c.MaxKeys))
	}
	if c.MaxPending <= 0 {
		errs = append(errs, fmt.Errorf("dlock: max pending %d: must be positive", c.MaxPending))
	}
	for i, t := range c.Tokens {
		if t == "" {
			errs = append(errs, fmt.Errorf("dlock: access token %d is empty", i+1))
		}
	}
	return errors.Join(errs...)
}

// minFrame is the smallest MaxFrame accepted: room for a request with a
// few keys and an access token.
const minFrame = 512

// LoadTokens reads access tokens from the file at path: one token per line,
// surrounding white space trimmed; empty lines and lines starting with '#'
// are skipped. A file without any token is an error, as it would refuse
// every request.
func LoadTokens(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("dlock: access tokens: %w", err)
	}
	defer f.Close()
	toks, err := ReadTokens(f)
	if err != nil {
		return nil, fmt.Errorf("dlock: access tokens in %s: %w", path, err)
	}
	return toks, nil
}

// ReadTokens reads access tokens as LoadTokens does.
func ReadTokens(r io.Reader) ([]string, error) {
	var toks []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		toks = append(toks, line)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(toks) == 0 {
		return nil, errors.New("no token (one per line; '#' starts a comment)")
	}
	return toks, nil
}
