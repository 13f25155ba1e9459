// Package idleread reads a connection's next input without holding a
// buffer while it waits for it. A front end whose connection has been
// silent a while lets go of its read and write buffers, waits in the
// netpoller through the connection's syscall.RawConn, and reads what comes
// into a pooled buffer: an idle connection then costs its goroutine and
// little else. It owns the wait and the pool; what a front end does with
// the bytes is its own.
package idleread
