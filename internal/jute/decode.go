package jute

import (
	"encoding/binary"
	"errors"
	"strconv"
)

// Errors a Decoder records, wrapped in a *DecodeError that says where.
var (
	// ErrShort: the input ends inside a field.
	ErrShort = errors.New("jute: input ends inside a field")
	// ErrLength: a buffer, string or vector length that is negative (other
	// than -1, null) or larger than the bytes left could hold.
	ErrLength = errors.New("jute: invalid length")
	// ErrMultiOp: a multi request or response names an op that cannot be
	// part of one.
	ErrMultiOp = errors.New("jute: op not allowed in a multi")
)

// DecodeError is the error a Decoder records: what went wrong and at which
// offset of its input.
type DecodeError struct {
	Off int   // offset of the field that failed
	Err error // ErrShort, ErrLength or ErrMultiOp
	Val int64 // the length or op read, where Err is ErrLength or ErrMultiOp
}

func (e *DecodeError) Error() string {
	s := e.Err.Error() + " at offset " + strconv.Itoa(e.Off)
	if e.Err != ErrShort {
		s += " (" + strconv.FormatInt(e.Val, 10) + ")"
	}
	return s
}

func (e *DecodeError) Unwrap() error { return e.Err }

// A Decoder reads jute values from a byte slice. It keeps the first error:
// after it every read returns a zero value and reads nothing. The zero
// Decoder reads an empty input.
type Decoder struct {
	b      []byte
	off    int
	err    error
	noncan bool
}

// NewDecoder returns a Decoder of b.
func NewDecoder(b []byte) *Decoder { return &Decoder{b: b} }

// Reset makes b the input, read from its start, and clears the error.
func (d *Decoder) Reset(b []byte) { *d = Decoder{b: b} }

// Err returns the first error met, nil if none.
func (d *Decoder) Err() error { return d.err }

// Offset returns how many bytes were read.
func (d *Decoder) Offset() int { return d.off }

// Len returns how many bytes are left.
func (d *Decoder) Len() int { return len(d.b) - d.off }

// Canonical reports whether everything read so far would encode back to
// the same bytes: false once a boolean byte other than 0 or 1, or a null
// ustring, was read.
func (d *Decoder) Canonical() bool { return !d.noncan }

func (d *Decoder) fail(err error, off int, val int64) {
	if d.err == nil {
		d.err = &DecodeError{Off: off, Err: err, Val: val}
	}
}

// take returns the next n bytes, or nil (recording ErrShort) if fewer are
// left or an error was met.
func (d *Decoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n > len(d.b)-d.off {
		d.fail(ErrShort, d.off, 0)
		return nil
	}
	p := d.b[d.off : d.off+n : d.off+n]
	d.off += n
	return p
}

// Int reads a jute int.
func (d *Decoder) Int() int32 {
	p := d.take(4)
	if p == nil {
		return 0
	}
	return int32(binary.BigEndian.Uint32(p))
}

// Long reads a jute long.
func (d *Decoder) Long() int64 {
	p := d.take(8)
	if p == nil {
		return 0
	}
	return int64(binary.BigEndian.Uint64(p))
}

// Bool reads a jute boolean: any byte but 0 is true.
func (d *Decoder) Bool() bool {
	p := d.take(1)
	if p == nil {
		return false
	}
	if p[0] > 1 {
		d.noncan = true
	}
	return p[0] != 0
}

// length reads a length or count whose elements take at least unit bytes
// each; -1 (null) is returned as is.
func (d *Decoder) length(unit int) int {
	off := d.off
	n := d.Int()
	if d.err != nil || n == -1 {
		return int(n)
	}
	if n < 0 || int64(n)*int64(unit) > int64(d.Len()) {
		d.fail(ErrLength, off, int64(n))
		return 0
	}
	return int(n)
}

// Buffer reads a jute buffer: nil for null (-1), else a sub-slice of the
// input (non-nil, even when empty), borrowed: valid only as long as the
// input is, and not to be written to.
func (d *Decoder) Buffer() []byte {
	n := d.length(1)
	if n <= 0 {
		if n == 0 && d.err == nil {
			return d.b[d.off:d.off:d.off]
		}
		return nil
	}
	return d.take(n)
}

// Str reads a jute ustring (its bytes as sent, not checked for UTF-8). A
// null string reads as "" and makes the input non-canonical.
func (d *Decoder) Str() string {
	n := d.length(1)
	if n == -1 && d.err == nil {
		d.noncan = true
	}
	if n <= 0 {
		return ""
	}
	return string(d.take(n))
}

// preallocation caps how many elements a vector's count may reserve before
// they are read: a count is only a claim.
const preallocation = 64

// Strings reads a vector<ustring>, appending to dst[:0]: nil for a null
// vector, a non-nil slice otherwise.
func (d *Decoder) Strings(dst []string) []string {
	n := d.length(4)
	if n < 0 || d.err != nil {
		return nil
	}
	dst = dst[:0]
	if dst == nil {
		dst = make([]string, 0, min(n, preallocation))
	}
	for range n {
		s := d.Str()
		if d.err != nil {
			return dst
		}
		dst = append(dst, s)
	}
	return dst
}

// ACLs reads a vector<ACL>, appending to dst[:0]: nil for a null vector, a
// non-nil slice otherwise.
func (d *Decoder) ACLs(dst []ACL) []ACL {
	n := d.length(aclMinSize)
	if n < 0 || d.err != nil {
		return nil
	}
	dst = dst[:0]
	if dst == nil {
		dst = make([]ACL, 0, min(n, preallocation))
	}
	for range n {
		var a ACL
		a.Decode(d)
		if d.err != nil {
			return dst
		}
		dst = append(dst, a)
	}
	return dst
}
