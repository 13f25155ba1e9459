package frame

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
)

// HeaderSize is the size of a frame's length prefix.
const HeaderSize = 4

// MaxSize is the largest payload the 4-byte header can describe.
const MaxSize = math.MaxUint32

// ErrTooLarge is wrapped by the error for a frame longer than a limit.
var ErrTooLarge = errors.New("frame: too large")

// TooLargeError reports a frame longer than the limit. It wraps ErrTooLarge.
type TooLargeError struct {
	Size uint64 // the frame's payload length (from its header)
	Max  int    // the limit it exceeds
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("frame: %d bytes, more than the limit of %d", e.Size, e.Max)
}

func (e *TooLargeError) Unwrap() error { return ErrTooLarge }

// keepBuffer is the largest payload buffer a Reader keeps between frames; a
// larger one serves one frame and is dropped at the next Read.
const keepBuffer = 64 << 10

// Reader reads frames from an io.Reader. It is not safe for concurrent use.
type Reader struct {
	r   io.Reader
	max int
	hdr [HeaderSize]byte
	buf []byte
}

// NewReader returns a Reader of frames from r whose payloads are at most
// limit bytes (limit <= 0: no limit beyond MaxSize). r should be buffered (a
// bufio.Reader): the Reader makes two reads per frame.
func NewReader(r io.Reader, limit int) *Reader {
	if limit <= 0 || uint64(limit) > MaxSize {
		limit = int(min(uint64(MaxSize), uint64(math.MaxInt)))
	}
	return &Reader{r: r, max: limit}
}

// Max returns the Reader's limit on payload length.
func (r *Reader) Max() int { return r.max }

// Read reads the next frame and returns its payload. The payload is valid
// until the next call to Read; a caller that keeps it must copy it.
//
// Errors: io.EOF when r ends cleanly between frames; io.ErrUnexpectedEOF
// when it ends inside a frame; a *TooLargeError (wrapping ErrTooLarge) for a
// frame over the limit, whose payload has not been read, so that the stream
// is no longer at a frame boundary; otherwise r's error. After an error the
// Reader should not be used again, except after a timeout of r that came
// before any byte of a frame was read.
func (r *Reader) Read() ([]byte, error) {
	if cap(r.buf) > keepBuffer {
		r.buf = nil
	}
	if _, err := io.ReadFull(r.r, r.hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(r.hdr[:])
	if uint64(n) > uint64(r.max) {
		return nil, &TooLargeError{Size: uint64(n), Max: r.max}
	}
	if int(n) <= cap(r.buf) || n <= keepBuffer {
		if int(n) > cap(r.buf) {
			r.buf = make([]byte, n, max(int(n), min(2*cap(r.buf), keepBuffer)))
		}
		r.buf = r.buf[:n]
		if _, err := io.ReadFull(r.r, r.buf); err != nil {
			return nil, noEOF(err)
		}
		return r.buf, nil
	}
	// A large frame: grow the buffer as its bytes arrive, so that a header
	// alone cannot make the Reader allocate up to its limit.
	r.buf = r.buf[:0]
	for len(r.buf) < int(n) {
		chunk := min(int(n)-len(r.buf), max(len(r.buf), keepBuffer))
		r.buf = slices.Grow(r.buf, chunk)
		m, err := io.ReadFull(r.r, r.buf[len(r.buf):len(r.buf)+chunk])
		r.buf = r.buf[:len(r.buf)+m]
		if err != nil {
			return nil, noEOF(err)
		}
	}
	return r.buf, nil
}

// noEOF turns io.EOF inside a frame into io.ErrUnexpectedEOF.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// Append appends a frame holding payload to dst and returns the extended
// slice. It panics if payload is longer than MaxSize.
func Append(dst, payload []byte) []byte {
	if uint64(len(payload)) > MaxSize {
		panic("frame: payload longer than MaxSize")
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(payload)))
	return append(dst, payload...)
}

// Start appends a placeholder header to dst and returns the extended slice
// and the offset of the frame in it. Append the payload to the slice, then
// call Finish with the offset to fill in the header:
//
//	buf, off := frame.Start(buf)
//	buf, err = proto.MarshalOptions{}.MarshalAppend(buf, msg)
//	err = frame.Finish(buf, off)
func Start(dst []byte) ([]byte, int) {
	return append(dst, 0, 0, 0, 0), len(dst)
}

// Finish writes the header of the frame that starts at off in buf (as
// returned by Start), whose payload runs to the end of buf. It fails if the
// payload is longer than MaxSize.
func Finish(buf []byte, off int) error {
	n := len(buf) - off - HeaderSize
	if n < 0 {
		return fmt.Errorf("frame: finish at offset %d of a %d-byte buffer", off, len(buf))
	}
	if uint64(n) > MaxSize {
		return &TooLargeError{Size: uint64(n), Max: MaxSize}
	}
	binary.BigEndian.PutUint32(buf[off:], uint32(n))
	return nil
}

// Writer writes frames to an io.Writer, each with a single Write call. It
// is not safe for concurrent use.
type Writer struct {
	w   io.Writer
	buf []byte
}

// NewWriter returns a Writer of frames to w.
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: w}
}

// Write writes one frame holding payload.
func (w *Writer) Write(payload []byte) error {
	if uint64(len(payload)) > MaxSize {
		return &TooLargeError{Size: uint64(len(payload)), Max: MaxSize}
	}
	w.buf = Append(w.buf[:0], payload)
	_, err := w.w.Write(w.buf)
	if cap(w.buf) > keepBuffer {
		w.buf = nil
	}
	return err
}
