//go:build !unix

package timedwrite

import "net"

// nonblocking returns nil: a Writer sets the deadline before every write.
func nonblocking(net.Conn) func([]byte) (int, error) { return nil }
