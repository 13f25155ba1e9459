//go:build !linux

package evloop

import (
	"errors"
	"fmt"
	"net"
)

// A Loop is not available on this system: New returns an error.
type Loop struct{}

// New returns an error wrapping errors.ErrUnsupported: event loops need
// Linux's epoll.
func New(Config) (*Loop, error) {
	return nil, fmt.Errorf("evloop: %w", errors.ErrUnsupported)
}

// ErrNotSocket is returned by Add for a connection it cannot serve.
var ErrNotSocket = errors.New("evloop: not a socket connection")

// A Conn is a connection a Loop serves: none here.
type Conn struct{}

// Close does nothing.
func (*Conn) Close() {}

// Send returns false.
func (*Conn) Send([]byte) bool { return false }

// Pause does nothing.
func (*Conn) Pause() {}

// Resume does nothing.
func (*Conn) Resume() {}

// Add returns ErrNotSocket.
func (*Loop) Add(net.Conn, Handler) error { return ErrNotSocket }

// Close does nothing.
func (*Loop) Close() {}

// Len returns 0.
func (*Loop) Len() int { return 0 }

// Run returns at once.
func (*Loop) Run() {}
