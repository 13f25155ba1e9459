package netserve

import (
	"sync/atomic"

	"github.com/latchd/latch/internal/evloop"
)

// loopRef is a loop connection's handle (evloop.Conn), for closing it
// from outside its loop. The loop gives it before it serves the connection
// (loopHandler.Attach).
type loopRef struct{ c atomic.Pointer[evloop.Conn] }

func (r *loopRef) close() error {
	if lc := r.c.Load(); lc != nil {
		lc.Close()
	}
	return nil
}

// Attach keeps the loop connection's handle (evloop.Attacher), and passes
// it on to the protocol's handler if it wants it too.
func (l *loopHandler) Attach(lc *evloop.Conn) {
	l.c.loop.c.Store(lc)
	if a, ok := l.h.(evloop.Attacher); ok {
		a.Attach(lc)
	}
}

// KeepIdle keeps an idle connection that is busy (Hooks.Busy), as the read
// path of a goroutine's connection does (evloop.IdleKeeper).
func (l *loopHandler) KeepIdle() bool { return l.c.busy() }
