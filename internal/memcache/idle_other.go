//go:build !linux

package memcache

import (
	"net"
	"sync"
)

// idleWaiter would read a connection's next input without holding a
// buffer while it waits; this platform has none, so connections keep their
// buffers between requests.
type idleWaiter struct{}

func newIdleWaiter(net.Conn) *idleWaiter { return nil }

func (*idleWaiter) read(*sync.Pool) (*[bufSize]byte, int, error) { return nil, 0, nil }
