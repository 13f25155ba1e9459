package frame

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// FuzzReader reads frames from arbitrary bytes, whole and one byte at a
// time. Both must agree; every frame must respect the limit; and the frames
// read, written back with Append, must reproduce the input up to where
// reading stopped.
func FuzzReader(f *testing.F) {
	f.Add([]byte{}, uint16(64))
	f.Add([]byte("\x00\x00\x00\x03abc\x00\x00\x00\x00"), uint16(64))
	f.Add([]byte("\x00\x00\x00\x06\x08\x02\x10\x01\x20\x01"), uint16(64))
	f.Add([]byte("\x00\x00\x01\x00"), uint16(16))
	f.Add([]byte("\xff\xff\xff\xff"), uint16(0))
	f.Add([]byte("\x00\x00\x00\x05ab"), uint16(64))
	f.Fuzz(func(t *testing.T, data []byte, limit uint16) {
		whole := readAll(t, NewReader(bytes.NewReader(data), int(limit)))
		bytewise := readAll(t, NewReader(iotest.OneByteReader(bytes.NewReader(data)), int(limit)))
		if len(whole.frames) != len(bytewise.frames) || whole.err.Error() != bytewise.err.Error() {
			t.Fatalf("whole: %d frames, %v; one byte at a time: %d frames, %v",
				len(whole.frames), whole.err, len(bytewise.frames), bytewise.err)
		}
		var again []byte
		for i, fr := range whole.frames {
			if !bytes.Equal(fr, bytewise.frames[i]) {
				t.Fatalf("frame %d: whole %q, one byte at a time %q", i, fr, bytewise.frames[i])
			}
			if limit > 0 && len(fr) > int(limit) {
				t.Fatalf("frame %d has %d bytes, over the limit %d", i, len(fr), limit)
			}
			again = Append(again, fr)
		}
		if !bytes.HasPrefix(data, again) {
			t.Fatalf("frames written back (%d bytes) are not a prefix of the input", len(again))
		}
		switch {
		case whole.err == io.EOF:
			if len(again) != len(data) {
				t.Fatalf("clean EOF after %d of %d bytes", len(again), len(data))
			}
		case errors.Is(whole.err, ErrTooLarge), whole.err == io.ErrUnexpectedEOF:
		default:
			t.Fatalf("unexpected error %v", whole.err)
		}
	})
}

type result struct {
	frames [][]byte
	err    error
}

func readAll(t *testing.T, r *Reader) result {
	var res result
	for {
		fr, err := r.Read()
		if err != nil {
			res.err = err
			return res
		}
		res.frames = append(res.frames, bytes.Clone(fr))
		if len(res.frames) > 1<<20 {
			t.Fatal("too many frames")
		}
	}
}
