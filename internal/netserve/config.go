package netserve

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/latchd/latch/internal/metrics"
)

// Config is the part of a front end's configuration that the server owns.
// Every front end's Config embeds it; the toml tags name the settings of
// the front end's table of the configuration file (internal/config), and
// the fields tagged "-" are set by the program.
type Config struct {
	// Addr is the TCP address to listen on, "host:port"; port 0 picks a
	// free one (Server.Addr).
	Addr string `toml:"addr"`
	// Allow, when not empty, is a comma-separated list of the client
	// networks served (CIDRs like 10.0.0.0/8, or single addresses): a
	// connection from elsewhere is closed at once, without a byte and
	// before any TLS handshake, and counted as refused ("allow").
	Allow string `toml:"allow"`
	// MaxConns limits the open connections; 0 means no limit. A connection
	// over the limit gets the protocol's refusal (Protocol.Refusal) and is
	// closed, counted as refused ("max_conns").
	MaxConns int `toml:"max-conns"`
	// IdleTimeout closes a connection that sends nothing for this long
	// between requests, unless its protocol reports it busy (it holds a
	// lock, or a request of it waits: Hooks.Busy). 0: never.
	IdleTimeout time.Duration `toml:"idle-timeout"`
	// ReadTimeout bounds the time a request may take to arrive once its
	// first byte has: a client that stalls inside a request (a slow-loris)
	// is disconnected. 0: no bound.
	ReadTimeout time.Duration `toml:"read-timeout"`
	// WriteTimeout bounds each write of replies: a client that does not
	// read them for this long is disconnected. 0: no bound.
	WriteTimeout time.Duration `toml:"write-timeout"`
	// Loops is the number of event loops serving plain TCP connections,
	// for a protocol that can be served so (LoopProtocol) on a system that
	// has them (Linux): 0 picks half the CPUs, at least one (DefaultLoops);
	// -1 serves every connection from a goroutine of its own. TLS
	// connections always get a goroutine each.
	Loops int `toml:"loops"`

	// TLS, when set, makes the server speak TLS only, with this
	// configuration.
	TLS *tls.Config `toml:"-"`
	// Logger receives lifecycle and error logs; nil discards them.
	Logger *slog.Logger `toml:"-"`
	// Metrics counts the connections, accepted, refused and open; nil
	// counts nothing.
	Metrics *metrics.Protocol `toml:"-"`
}

// Validate reports every invalid setting of c, joined into one error, each
// naming its setting.
func (c Config) Validate() error { return c.ValidateAs("") }

// ValidateAs is Validate, naming each setting with prefix before its name,
// as the settings of a front end are named in flags ("memcache-" for
// memcache-max-conns).
func (c Config) ValidateAs(prefix string) error {
	var errs []error
	for _, v := range []struct {
		name  string
		value any
		bad   bool
		want  string
	}{
		{"max-conns", c.MaxConns, c.MaxConns < 0, "must not be negative (0: no limit)"},
		{"idle-timeout", c.IdleTimeout, c.IdleTimeout < 0, "must not be negative (0: never)"},
		{"read-timeout", c.ReadTimeout, c.ReadTimeout < 0, "must not be negative (0: no bound)"},
		{"write-timeout", c.WriteTimeout, c.WriteTimeout < 0, "must not be negative (0: no bound)"},
		{"loops", c.Loops, c.Loops < -1, "want -1 (none), 0 (half the CPUs) or more"},
	} {
		if v.bad {
			errs = append(errs, fmt.Errorf("invalid %s%s %v: %s", prefix, v.name, v.value, v.want))
		}
	}
	if _, err := ParseNetworks(c.Allow); err != nil {
		errs = append(errs, fmt.Errorf("invalid %sallow %q: %w", prefix, c.Allow, err))
	}
	return errors.Join(errs...)
}

// DefaultLoops returns the event loops a server runs for the setting n
// (Config.Loops) on procs CPUs: by default half of them, at least one. The
// lock table is one critical section, so more loops add only parsing and
// socket work in parallel, and the other CPUs are left to the other front
// ends and the clients (on a benchmark's machine, to the load generator).
func DefaultLoops(n, procs int) int {
	switch {
	case n < 0:
		return 0
	case n == 0:
		return max(1, procs/2)
	}
	return n
}

// ParseNetworks parses a comma-separated list of networks: CIDRs like
// 10.0.0.0/8 or single IP addresses, which stand for themselves alone.
// Empty (or blank) is no list. An IPv4-mapped IPv6 network is turned into
// its IPv4 network, as peers' addresses are compared unmapped.
func ParseNetworks(s string) ([]netip.Prefix, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var nets []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		p, err := netip.ParsePrefix(f)
		if err != nil {
			a, aerr := netip.ParseAddr(f)
			if aerr != nil || a.Zone() != "" {
				return nil, fmt.Errorf("%q is neither a CIDR (10.0.0.0/8) nor an IP address", f)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		if a := p.Addr(); a.Is4In6() {
			if p.Bits() < 96 {
				return nil, fmt.Errorf("%q: an IPv4-mapped network needs at least 96 bits", f)
			}
			p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
		}
		nets = append(nets, p.Masked())
	}
	return nets, nil
}

// Allowed reports whether addr, a TCP address, is in one of the networks
// of allow. An address that is not an IP address is not.
func Allowed(addr net.Addr, allow []netip.Prefix) bool {
	var ip netip.Addr
	switch a := addr.(type) {
	case *net.TCPAddr:
		ip = a.AddrPort().Addr()
	default:
		ap, err := netip.ParseAddrPort(addr.String())
		if err != nil {
			return false
		}
		ip = ap.Addr()
	}
	ip = ip.Unmap()
	for _, p := range allow {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}
