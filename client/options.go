package client

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"time"
)

// Defaults of the Dial options.
const (
	// DefaultSessionTTL is the session TTL when SessionTTL is not given.
	DefaultSessionTTL = 10 * time.Second
	// DefaultDialTimeout bounds connecting and opening the session.
	DefaultDialTimeout = 10 * time.Second
)

// maxResponse is the largest response frame the client reads. A response
// lists at most the keys of a request; the server's own limit on a request
// frame is far below this.
const maxResponse = 16 << 20

// An Option configures a Client in Dial.
type Option func(*options)

type options struct {
	sessionTTL  time.Duration
	margin      time.Duration // < 0: the default, sessionTTL/4
	token       string
	dialTimeout time.Duration
	tls         *tls.Config
	logger      *slog.Logger
	clock       clock // tests only
}

// SessionTTL sets the TTL of the Client's session: the server ends the
// session, releasing its locks that have no lease, when no keepalive from
// the Client reaches it for this long. The Client sends keepalives by
// itself, several per TTL, and gives a server that answers none for two
// keepalive intervals up for another (see Dial). A shorter TTL frees the
// locks of a vanished client sooner, moves off a silent server sooner and
// costs more keepalives. d must be positive; the
// default is DefaultSessionTTL. Keep it below the server's idle timeout
// (latch serve --dlock-idle-timeout, 60s by default): a server that closes
// a silent connection releases its locks at once, which the Client cannot
// see coming in a partition.
func SessionTTL(d time.Duration) Option {
	return func(o *options) { o.sessionTTL = d }
}

// SafetyMargin sets how long before the server could end the session (or a
// lease) the Client gives up on it: Lock.Done closes that long before the
// earliest moment, by the Client's clock, at which the server may release
// the lock. The margin absorbs the difference between the rates of the two
// clocks and gives the lock's owner time to stop its work. It must be at
// least 0 and less than the session TTL; the default is a quarter of the
// TTL. For a leased lock the margin is at most a quarter of the lease.
func SafetyMargin(d time.Duration) Option {
	return func(o *options) { o.margin = d }
}

// AccessToken sets the access token sent with every request, for servers
// configured with tokens.
func AccessToken(token string) Option {
	return func(o *options) { o.token = token }
}

// TLS makes the Client speak TLS to the server, with cfg: for servers
// run with a certificate (latch serve --tls-cert). cfg.RootCAs (nil: the
// system's roots) must hold the CA of the server's certificate, and
// cfg.Certificates a client certificate when the server requires one
// (--tls-client-ca). When cfg.ServerName is empty, the host of the
// address dialed is the name checked. The Client does not modify cfg.
func TLS(cfg *tls.Config) Option {
	return func(o *options) { o.tls = cfg }
}

// DialTimeout bounds how long Dial may take to connect and open the
// session; the context given to Dial bounds it too. The default is
// DefaultDialTimeout; 0 means no bound but the context's.
func DialTimeout(d time.Duration) Option {
	return func(o *options) { o.dialTimeout = d }
}

// Logger sets where the Client logs what happens to its connection (at
// debug level) and why it gave its session up (at warn level). The default
// discards the log.
func Logger(l *slog.Logger) Option {
	return func(o *options) { o.logger = l }
}

// withClock makes the Client measure time with c. Tests only.
func withClock(c clock) Option {
	return func(o *options) { o.clock = c }
}

func buildOptions(opts []Option) (options, error) {
	o := options{
		sessionTTL:  DefaultSessionTTL,
		margin:      -1,
		dialTimeout: DefaultDialTimeout,
	}
	for _, opt := range opts {
		opt(&o)
	}
	if o.sessionTTL <= 0 {
		return o, fmt.Errorf("client: session TTL %v: must be positive", o.sessionTTL)
	}
	if o.sessionTTL < time.Microsecond {
		return o, fmt.Errorf("client: session TTL %v: must be at least 1µs", o.sessionTTL)
	}
	if o.margin < 0 {
		o.margin = o.sessionTTL / 4
	}
	if o.margin >= o.sessionTTL {
		return o, fmt.Errorf("client: safety margin %v: must be less than the session TTL %v", o.margin, o.sessionTTL)
	}
	if o.dialTimeout < 0 {
		return o, fmt.Errorf("client: dial timeout %v: must not be negative", o.dialTimeout)
	}
	if o.logger == nil {
		o.logger = slog.New(slog.DiscardHandler)
	}
	if o.clock == nil {
		o.clock = realClock{}
	}
	return o, nil
}

// A LockOption configures one lock request.
type LockOption func(*lockOptions)

type lockOptions struct {
	wait    time.Duration // < 0: forever
	lease   time.Duration
	limit   uint32
	tryOnce bool
}

// Wait bounds how long the request may wait for busy keys; the context
// bounds it too. A request that waited that long fails with an error
// wrapping latch.ErrTimeout (a *latch.BusyError naming the busy keys).
// d <= 0 does not wait at all, as TryLock. Without Wait, a request waits
// until it is granted or its context is done.
func Wait(d time.Duration) LockOption {
	return func(o *lockOptions) {
		if d <= 0 {
			o.tryOnce, o.wait = true, 0
			return
		}
		o.tryOnce, o.wait = false, d
	}
}

// Lease makes the lock a lease of d: it outlives the Client's session (a
// lost connection, a closed Client) and ends d after it was granted unless
// renewed with Lock.Renew. Without Lease (or with d = 0), the lock is held
// until Unlock or until the session ends.
func Lease(d time.Duration) LockOption {
	return func(o *lockOptions) { o.lease = d }
}

// Limit caps the number of holders of each key of a shared lock (RLock):
// at most n clients hold it at once, a counting semaphore. Every holder and
// waiter of a key must ask for the same limit. 0 means no cap.
func Limit(n uint32) LockOption {
	return func(o *lockOptions) { o.limit = n }
}
