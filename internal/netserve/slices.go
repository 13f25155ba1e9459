package netserve

import "errors"

// ErrIncomplete is what an Input answers once its slice is read: for a
// LoopProtocol's parsers, the end of what its event loop has read so far,
// in the middle of a request.
var ErrIncomplete = errors.New("netserve: end of the input at hand")

// Input reads a slice, the input an event loop gives a LoopProtocol's
// handler, then answers ErrIncomplete. It lets a protocol run its
// io.Reader parsers over a loop's input. The zero Input is empty.
type Input struct {
	b   []byte
	pos int
}

// Reset makes b the input, from its start.
func (r *Input) Reset(b []byte) { r.b, r.pos = b, 0 }

// Pos returns how many bytes were read.
func (r *Input) Pos() int { return r.pos }

// Len returns how many bytes are left.
func (r *Input) Len() int { return len(r.b) - r.pos }

func (r *Input) Read(p []byte) (int, error) {
	if r.pos == len(r.b) {
		return 0, ErrIncomplete
	}
	n := copy(p, r.b[r.pos:])
	r.pos += n
	return n, nil
}

// Output appends what is written to B: a handler's replies, appended to
// the out slice its event loop gives it.
type Output struct{ B []byte }

func (w *Output) Write(p []byte) (int, error) {
	w.B = append(w.B, p...)
	return len(p), nil
}
