package latchtest

import (
	"bufio"
	"io"

	"google.golang.org/protobuf/proto"

	"github.com/latchd/latch/internal/frame"
)

// EachMessage reads the framed protobuf messages of r (dlock's framing)
// into a new message from newMsg each and calls f with the frame's bytes
// and the message, until r ends or fails, a frame does not decode, or f
// returns false. Test proxies that look into dlock traffic use it.
func EachMessage[M proto.Message](r io.Reader, newMsg func() M, f func(b []byte, m M) bool) {
	fr := frame.NewReader(bufio.NewReader(r), 0)
	for {
		b, err := fr.Read()
		if err != nil {
			return
		}
		m := newMsg()
		if err := proto.Unmarshal(b, m); err != nil || !f(b, m) {
			return
		}
	}
}
