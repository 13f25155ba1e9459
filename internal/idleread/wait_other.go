//go:build !linux

package idleread

import "net"

// Waiter would read a connection's next input without holding a buffer
// while it waits; this platform has none, so New returns nil and
// connections keep their buffers between requests.
type Waiter struct{}

// New returns nil on this platform.
func New(net.Conn) *Waiter { return nil }

// Read is never called: New returns no Waiter.
func (*Waiter) Read(*Input) error { return nil }
