package jute

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

// hx decodes hex digits, ignoring spaces: golden bytes written by hand.
func hx(s string) []byte {
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		panic(err)
	}
	return b
}

// cat joins pieces of golden bytes.
func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func TestDecoderPrimitives(t *testing.T) {
	in := cat(
		hx("ff ff ff fe"),             // int -2
		hx("80 00 00 00 00 00 00 01"), // long MinInt64+1
		hx("01 00"),                   // true, false
		hx("00 00 00 03"), []byte("abc"),
		hx("ff ff ff ff"),               // null buffer
		hx("00 00 00 00"),               // empty buffer
		hx("00 00 00 02"), []byte("/x"), // string
		hx("00 00 00 02 00 00 00 01"), []byte("a"), hx("00 00 00 00"), // ["a", ""]
		hx("ff ff ff ff"), // null vector
		hx("00 00 00 00"), // empty vector
		hx("00 00 00 01 00 00 00 1f 00 00 00 05"), []byte("world"), hx("00 00 00 06"), []byte("anyone"),
	)
	d := NewDecoder(in)
	if v := d.Int(); v != -2 {
		t.Errorf("Int = %d", v)
	}
	if v := d.Long(); v != -1<<63+1 {
		t.Errorf("Long = %d", v)
	}
	if a, b := d.Bool(), d.Bool(); !a || b {
		t.Errorf("Bool, Bool = %v, %v", a, b)
	}
	if v := d.Buffer(); string(v) != "abc" {
		t.Errorf("Buffer = %q", v)
	}
	if v := d.Buffer(); v != nil {
		t.Errorf("null Buffer = %q, want nil", v)
	}
	if v := d.Buffer(); v == nil || len(v) != 0 {
		t.Errorf("empty Buffer = %#v, want non-nil empty", v)
	}
	if v := d.Str(); v != "/x" {
		t.Errorf("Str = %q", v)
	}
	if v := d.Strings(nil); len(v) != 2 || v[0] != "a" || v[1] != "" {
		t.Errorf("Strings = %q", v)
	}
	if v := d.Strings([]string{"old"}); v != nil {
		t.Errorf("null Strings = %q, want nil", v)
	}
	if v := d.Strings(nil); v == nil || len(v) != 0 {
		t.Errorf("empty Strings = %#v, want non-nil empty", v)
	}
	if v := d.ACLs(nil); len(v) != 1 || v[0] != (ACL{Perms: PermAll, Scheme: "world", ID: "anyone"}) {
		t.Errorf("ACLs = %+v", v)
	}
	if d.Err() != nil || d.Len() != 0 || d.Offset() != len(in) || !d.Canonical() {
		t.Errorf("after all: err %v, %d left, offset %d of %d, canonical %v", d.Err(), d.Len(), d.Offset(), len(in), d.Canonical())
	}
}

func TestDecoderBorrowsBuffers(t *testing.T) {
	in := cat(hx("00 00 00 02"), []byte("hi"))
	var d Decoder
	d.Reset(in)
	b := d.Buffer()
	in[4] = 'H'
	if string(b) != "Hi" {
		t.Errorf("Buffer = %q: not a sub-slice of the input", b)
	}
	if cap(b) != 2 {
		t.Errorf("cap(Buffer) = %d: an append could write over the input", cap(b))
	}
}

func TestDecoderErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		read func(d *Decoder)
		want error
		off  int
	}{
		{"int short", hx("00 00 01"), func(d *Decoder) { d.Int() }, ErrShort, 0},
		{"long short", hx("00 00 00 00 00 00 01"), func(d *Decoder) { d.Long() }, ErrShort, 0},
		{"bool empty", nil, func(d *Decoder) { d.Bool() }, ErrShort, 0},
		{"buffer over", hx("00 00 00 03 61 62"), func(d *Decoder) { d.Buffer() }, ErrLength, 0},
		{"buffer -2", hx("ff ff ff fe 61 62"), func(d *Decoder) { d.Buffer() }, ErrLength, 0},
		{"string over", cat(hx("00 00 00 01 00 00 00 05"), []byte("abcd")), func(d *Decoder) { d.Int(); d.Str() }, ErrLength, 4},
		{"string min int", hx("80 00 00 00"), func(d *Decoder) { d.Str() }, ErrLength, 0},
		{"vector over", hx("00 00 00 02 00 00 00 00"), func(d *Decoder) { d.Strings(nil) }, ErrLength, 0},
		{"vector negative", hx("ff ff ff f0"), func(d *Decoder) { d.Strings(nil) }, ErrLength, 0},
		{"acl vector over", hx("00 00 00 01 00 00 00 00 00 00 00 00"), func(d *Decoder) { d.ACLs(nil) }, ErrLength, 0},
		{"vector element short", hx("00 00 00 01 00 00 00 05 61"), func(d *Decoder) { d.Strings(nil) }, ErrLength, 4},
		{"first error kept", hx("00 00 01"), func(d *Decoder) { d.Long(); d.Bool(); d.Buffer() }, ErrShort, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := NewDecoder(tc.in)
			tc.read(d)
			var de *DecodeError
			if !errors.Is(d.Err(), tc.want) || !errors.As(d.Err(), &de) || de.Off != tc.off {
				t.Fatalf("err = %v, want %v at offset %d", d.Err(), tc.want, tc.off)
			}
			// After an error, reads return zero values and read nothing.
			off := d.Offset()
			if d.Int() != 0 || d.Long() != 0 || d.Bool() || d.Buffer() != nil || d.Str() != "" ||
				d.Strings(nil) != nil || d.ACLs(nil) != nil || d.Offset() != off {
				t.Error("a read after the error returned something")
			}
		})
	}
}

func TestDecodeErrorText(t *testing.T) {
	d := NewDecoder(hx("00 00 00 00 ff ff ff fe"))
	d.Int()
	d.Buffer()
	if got, want := d.Err().Error(), "jute: invalid length at offset 4 (-2)"; got != want {
		t.Errorf("error %q, want %q", got, want)
	}
	d.Reset(hx("00"))
	d.Int()
	if got, want := d.Err().Error(), "jute: input ends inside a field at offset 0"; got != want {
		t.Errorf("error %q, want %q", got, want)
	}
}

func TestDecoderCanonical(t *testing.T) {
	d := NewDecoder(hx("01"))
	d.Bool()
	if !d.Canonical() {
		t.Error("true (1) made the input non-canonical")
	}
	d.Reset(hx("02"))
	if !d.Bool() || d.Canonical() {
		t.Error("a boolean byte 2: want true and non-canonical")
	}
	d.Reset(hx("ff ff ff ff"))
	if d.Str() != "" || d.Canonical() || d.Err() != nil {
		t.Error("a null ustring: want \"\", non-canonical, no error")
	}
	d.Reset(hx("ff ff ff ff"))
	if d.Buffer() != nil || !d.Canonical() {
		t.Error("a null buffer: want nil, canonical")
	}
}

func TestAppendPrimitives(t *testing.T) {
	var b []byte
	b = AppendInt(b, -2)
	b = AppendLong(b, 1<<40)
	b = AppendBool(b, true)
	b = AppendBool(b, false)
	b = AppendBuffer(b, nil)
	b = AppendBuffer(b, []byte{})
	b = AppendBuffer(b, []byte("ab"))
	b = AppendString(b, "")
	b = AppendStrings(b, nil)
	b = AppendStrings(b, []string{"x"})
	b = AppendACLs(b, nil)
	b = AppendACLs(b, []ACL{})
	want := cat(
		hx("ff ff ff fe"), hx("00 00 01 00 00 00 00 00"), hx("01 00"),
		hx("ff ff ff ff"), hx("00 00 00 00"), hx("00 00 00 02 61 62"),
		hx("00 00 00 00"), hx("ff ff ff ff"), hx("00 00 00 01 00 00 00 01 78"),
		hx("ff ff ff ff"), hx("00 00 00 00"),
	)
	if !bytes.Equal(b, want) {
		t.Errorf("got  %x\nwant %x", b, want)
	}
}

// TestDecodeAllocations: reading ints, buffers and a reused vector of a
// record allocates nothing.
func TestDecodeAllocations(t *testing.T) {
	r := SetDataRequest{Path: "", Data: []byte("data"), Version: 3}
	in := r.Append(nil)
	var d Decoder
	var got SetDataRequest
	if n := testing.AllocsPerRun(100, func() {
		d.Reset(in)
		got.Decode(&d)
	}); n != 0 {
		t.Errorf("%v allocations per decode", n)
	}
	acls := CreateRequest{Path: "", ACL: []ACL{{Perms: 1}}, Flags: 1}
	in = acls.Append(nil)
	var c CreateRequest
	c.ACL = make([]ACL, 0, 1)
	if n := testing.AllocsPerRun(100, func() {
		d.Reset(in)
		c.Decode(&d)
	}); n != 0 {
		t.Errorf("%v allocations per decode with a reused ACL slice", n)
	}
}
