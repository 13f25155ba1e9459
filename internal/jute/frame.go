package jute

import (
	"encoding/binary"
	"errors"
	"strconv"
)

// MaxFrame is the largest frame body ZooKeeper accepts by default
// (jute.maxbuffer, 0xfffff bytes).
const MaxFrame = 0xfffff

// FrameHeaderSize is the size of a frame's length.
const FrameHeaderSize = 4

// ErrFrameLength is wrapped by the error for a frame length that is
// negative or over the limit: ZooKeeper closes such a connection.
var ErrFrameLength = errors.New("jute: invalid frame length")

// FrameLengthError reports an invalid frame length. It wraps ErrFrameLength.
type FrameLengthError struct {
	Len   int32 // the length read
	Limit int   // the limit it broke
}

func (e *FrameLengthError) Error() string {
	return "jute: frame length " + strconv.Itoa(int(e.Len)) + " outside 0.." + strconv.Itoa(e.Limit)
}

func (e *FrameLengthError) Unwrap() error { return ErrFrameLength }

// NextFrame cuts the next frame from the start of in, buffered input, whose
// bodies may be up to limit bytes (MaxFrame as ZooKeeper's default). It
// returns the body, a sub-slice of in, and n, the bytes the frame takes in
// in (FrameHeaderSize + len(body)). While in does not yet hold the whole
// frame it returns n == 0 and a nil error: read more and call again. A
// length that is negative or over limit is an error wrapping
// ErrFrameLength, known as soon as the length's 4 bytes are in.
func NextFrame(in []byte, limit int) (body []byte, n int, err error) {
	if len(in) < FrameHeaderSize {
		return nil, 0, nil
	}
	l := int32(binary.BigEndian.Uint32(in))
	if l < 0 || int64(l) > int64(limit) {
		return nil, 0, &FrameLengthError{Len: l, Limit: limit}
	}
	n = FrameHeaderSize + int(l)
	if len(in) < n {
		return nil, 0, nil
	}
	return in[FrameHeaderSize:n:n], n, nil
}

// StartFrame appends room for a frame's length to b and returns b and the
// frame's offset in it, for FinishFrame once the body is appended.
func StartFrame(b []byte) ([]byte, int) {
	return append(b, 0, 0, 0, 0), len(b)
}

// FinishFrame writes the length of the frame StartFrame began at off,
// whose body is the rest of b, and returns that length. A body over
// MaxFrame is the caller's to refuse: ZooKeeper's clients refuse a reply
// over their own jute.maxbuffer.
func FinishFrame(b []byte, off int) int {
	l := len(b) - off - FrameHeaderSize
	binary.BigEndian.PutUint32(b[off:], uint32(l))
	return l
}

// AppendFrame appends body as one frame.
func AppendFrame(b, body []byte) []byte {
	return append(AppendInt(b, int32(len(body))), body...)
}

// fourLetterWords are ZooKeeper 3.8's four-letter words
// (FourLetterCommands). Its other command, "telnet close" (the bytes
// ff f4 ff fd), reads as a negative frame length, which closes the
// connection anyway.
var fourLetterWords = [...]string{
	"conf", "cons", "crst", "dirs", "dump", "envi", "gtmk", "hash", "isro",
	"mntr", "ruok", "srst", "srvr", "stat", "stmk", "wchc", "wchp", "wchs",
}

// FourLetterWord reports whether first4, the first 4 bytes of a
// connection, are one of ZooKeeper's four-letter words (ruok, srvr, stat,
// mntr, envi, isro, conf, cons, wchs, dump and the rest), and which. Every
// one reads as a frame length far over MaxFrame, so a connection that does
// not start with one starts with a frame. ZooKeeper answers the word in
// text and closes; "stmk" is followed by an 8-byte trace mask.
func FourLetterWord(first4 []byte) (string, bool) {
	if len(first4) < 4 {
		return "", false
	}
	for _, w := range fourLetterWords {
		if string(first4[:4]) == w {
			return w, true
		}
	}
	return "", false
}
