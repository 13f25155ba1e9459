// Package timedwrite writes to a connection under a time bound that costs
// nothing while the socket takes what it is given at once.
//
// A server must not let a client that stops reading hold one of its
// goroutines forever, so every write of replies is bounded in time. Setting
// a write deadline before each write costs a clock reading and a timer
// update in the runtime for every reply, though nearly every write is taken
// by the socket's buffer without waiting. A Writer first makes one
// non-blocking write; only when the socket takes less does it set the
// deadline and wait for the rest under it, and it clears the deadline
// again afterwards. It owns that write and nothing else: what is written,
// and when, is the front end's.
package timedwrite
