// Package tcptest gives tests the two ends of a real loopback TCP
// connection, for code that treats TCP sockets apart from other net.Conns
// (non-blocking writes, waits without buffers). It is used by tests only.
package tcptest

import (
	"net"
	"testing"
)

// Pair returns the two ends of a loopback TCP connection, closed when the
// test ends.
func Pair(t testing.TB) (server, client net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		client.Close()
		t.Fatal("tcptest: accept failed")
	}
	t.Cleanup(func() { server.Close(); client.Close() })
	return server, client
}
