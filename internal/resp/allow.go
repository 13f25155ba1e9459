package resp

import (
	"log/slog"
	"net"
	"net/netip"
)

// allowListener accepts only connections from the networks in allow; it
// closes any other at once, without a byte, as yrmcds closes a connection
// over its max_connections.
type allowListener struct {
	net.Listener
	allow []netip.Prefix
	log   *slog.Logger
}

// Accept returns the next connection from an allowed network.
func (l *allowListener) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if allowed(nc.RemoteAddr(), l.allow) {
			return nc, nil
		}
		l.log.Debug("redis: connection from outside redis-allow closed", "peer", nc.RemoteAddr().String())
		nc.Close()
	}
}

// allowed reports whether addr, a TCP address, is in one of the networks of
// allow. An address that is not an IP address is not.
func allowed(addr net.Addr, allow []netip.Prefix) bool {
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
