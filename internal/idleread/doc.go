// Package idleread reads a connection's next input without holding a
// buffer while it waits for it. A front end whose connection has been
// silent a while lets go of its read and write buffers, waits in the
// netpoller through the connection's syscall.RawConn, and reads what comes
// into a pooled Buffer: an idle connection then costs its goroutine and
// little else. It owns the wait and the pool; what a front end does with
// the bytes is its own.
package idleread

import "sync"

// Size is the size of a Buffer.
const Size = 4 << 10

// Buffer holds what Waiter.Read read. Give it back with Put once its bytes
// are used.
type Buffer [Size]byte

var pool = sync.Pool{New: func() any { return new(Buffer) }}

// Put gives b back to the pool.
func Put(b *Buffer) { pool.Put(b) }
