package idleread

import (
	"sync"
	"time"
)

// After is how long a connection must have waited for its last input for
// its front end to give its buffers back during the next wait. A busy
// connection keeps them: dropping and taking them costs a little CPU on
// every wait.
const After = 10 * time.Millisecond

// size is the size of a buffer.
const size = 4 << 10

// buffer holds what Waiter.Read read, in an Input.
type buffer [size]byte

var pool = sync.Pool{New: func() any { return new(buffer) }}

// Input is what Waiter.Read read, taken from it by Read as the front end's
// buffered reader asks; its buffer goes back to the pool once all is taken.
// The zero Input is empty.
type Input struct {
	buf  *buffer
	rest []byte
}

// Len returns how many bytes are left to take.
func (in *Input) Len() int { return len(in.rest) }

// Read takes up to len(p) bytes into p and returns how many it took.
func (in *Input) Read(p []byte) int {
	n := copy(p, in.rest)
	in.rest = in.rest[n:]
	if len(in.rest) == 0 && in.buf != nil {
		pool.Put(in.buf)
		in.buf, in.rest = nil, nil
	}
	return n
}
