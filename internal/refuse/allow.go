package refuse

import (
	"log/slog"
	"net"
	"net/netip"
)

// AllowList wraps ln so that Accept returns only connections from the
// networks in allow; it closes any other at once, without a byte (as
// yrmcds closes a connection over its max_connections), and logs it at
// debug level as from outside setting (the flag that sets allow, for
// example "memcache-allow"). An empty allow returns ln itself.
func AllowList(ln net.Listener, allow []netip.Prefix, setting string, log *slog.Logger) net.Listener {
	if len(allow) == 0 {
		return ln
	}
	return &allowListener{Listener: ln, allow: allow, setting: setting, log: log}
}

type allowListener struct {
	net.Listener
	allow   []netip.Prefix
	setting string
	log     *slog.Logger
}

// Accept returns the next connection from an allowed network.
func (l *allowListener) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if Allowed(nc.RemoteAddr(), l.allow) {
			return nc, nil
		}
		l.log.Debug("connection from outside "+l.setting+" closed", "peer", nc.RemoteAddr().String())
		nc.Close()
	}
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
