//go:build !unix

package dlock

import "net"

// nonblockingWrite returns nil: answers posted from outside the
// connection's goroutines are written by a goroutine of their own.
func nonblockingWrite(net.Conn) func([]byte) (int, error) { return nil }
