package netserve

import (
	"net"
	"net/netip"
	"testing"
)

func TestAllowed(t *testing.T) {
	nets := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	tests := []struct {
		addr net.Addr
		want bool
	}{
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5}, true},
		{&net.TCPAddr{IP: net.ParseIP("::ffff:127.0.0.9"), Port: 5}, true}, // v4 in a v6 socket
		{&net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 5}, false},
		{&net.TCPAddr{IP: net.ParseIP("fd12::1"), Port: 5}, true},
		{&net.TCPAddr{IP: net.IPv6loopback, Port: 5}, false},
		{&net.UnixAddr{Name: "/tmp/x", Net: "unix"}, false},
		{textAddr("127.0.0.1:80"), true}, // any Addr that spells ip:port
	}
	for _, tt := range tests {
		if got := Allowed(tt.addr, nets); got != tt.want {
			t.Errorf("Allowed(%v) = %v, want %v", tt.addr, got, tt.want)
		}
	}
}

type textAddr string

func (a textAddr) Network() string { return "pipe" }
func (a textAddr) String() string  { return string(a) }
