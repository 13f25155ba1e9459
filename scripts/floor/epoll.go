package main

import (
	"fmt"
	"net"

	"github.com/latchd/latch/internal/evloop"
)

// serveEpoll serves ln's connections on n event loops (package evloop, as
// latch's Redis front end serves), the connections going to the loops in
// turn.
func serveEpoll(ln *net.TCPListener, n int) error {
	if n < 1 {
		return fmt.Errorf("floor: %d loops", n)
	}
	loops := make([]*evloop.Loop, n)
	for i := range loops {
		l, err := evloop.New(evloop.Config{})
		if err != nil {
			return fmt.Errorf("floor: -mode epoll: %w", err)
		}
		loops[i] = l
		go l.Run()
	}
	for i := 0; ; i++ {
		nc, err := ln.AcceptTCP()
		if err != nil {
			return err
		}
		if err := loops[i%n].Add(nc, handler{}); err != nil {
			return fmt.Errorf("floor: %w", err)
		}
	}
}

// handler answers a connection's complete requests.
type handler struct{}

func (handler) Input(in, out []byte) ([]byte, int, bool) {
	out, rest := answer(out, in)
	return out, len(in) - len(rest), true
}

func (handler) Closed(error) {}
