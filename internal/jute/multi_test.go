package jute

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

// multiCreateDelete is, by hand, a multi of create("/a", "x", world:anyone,
// ephemeral sequential) and delete("/b", -1) as the Java client sends it.
var multiCreateDelete = cat(
	hx("00 00 00 01  00  ff ff ff ff"), // header: create, not done, err -1
	hx("00 00 00 02"), []byte("/a"),
	hx("00 00 00 01"), []byte("x"),
	hx("00 00 00 01  00 00 00 1f"),
	hx("00 00 00 05"), []byte("world"),
	hx("00 00 00 06"), []byte("anyone"),
	hx("00 00 00 03"),
	hx("00 00 00 02  00  ff ff ff ff"), // header: delete
	hx("00 00 00 02"), []byte("/b"),
	hx("ff ff ff ff"),
	hx("ff ff ff ff  01  ff ff ff ff"), // end
)

func TestMultiRequestGolden(t *testing.T) {
	m := MultiRequest{Ops: []MultiOp{
		{Type: OpCreate, Path: "/a", Data: []byte("x"), ACL: openACL, Flags: 3},
		{Type: OpDelete, Path: "/b", Version: -1},
	}}
	if b := m.Append(nil); !bytes.Equal(b, multiCreateDelete) {
		t.Errorf("%x\nwant %x", b, multiCreateDelete)
	}
	var got MultiRequest
	d := NewDecoder(multiCreateDelete)
	got.Decode(d)
	if d.Err() != nil || d.Len() != 0 || !reflect.DeepEqual(got, m) {
		t.Errorf("decoded %+v, %v", got, d.Err())
	}
	if got.Ops[0].IsRead() || got.Ops[1].IsRead() {
		t.Error("a write op is flagged as a read")
	}
}

func TestMultiResponseGolden(t *testing.T) {
	ok := MultiResponse{Results: []MultiResult{
		{Type: OpCreate, Path: "/a0000000000"},
		{Type: OpDelete},
	}}
	wantOK := cat(
		hx("00 00 00 01  00  00 00 00 00"), hx("00 00 00 0c"), []byte("/a0000000000"),
		hx("00 00 00 02  00  00 00 00 00"),
		hx("ff ff ff ff  01  ff ff ff ff"),
	)
	if b := ok.Append(nil); !bytes.Equal(b, wantOK) {
		t.Errorf("%x\nwant %x", b, wantOK)
	}
	// The same multi, failed at its delete: results for each op, the
	// error's code in both the header and the ErrorResponse.
	failed := MultiResponse{Results: []MultiResult{
		{Type: OpError, Err: OK},
		{Type: OpError, Err: NoNode},
	}}
	wantFailed := cat(
		hx("ff ff ff ff  00  00 00 00 00"), hx("00 00 00 00"),
		hx("ff ff ff ff  00  ff ff ff 9b"), hx("ff ff ff 9b"),
		hx("ff ff ff ff  01  ff ff ff ff"),
	)
	if b := failed.Append(nil); !bytes.Equal(b, wantFailed) {
		t.Errorf("%x\nwant %x", b, wantFailed)
	}
	var got MultiResponse
	d := NewDecoder(wantFailed)
	got.Decode(d)
	if d.Err() != nil || !d.Canonical() || !reflect.DeepEqual(got, failed) {
		t.Errorf("decoded %+v, %v", got, d.Err())
	}
}

func TestMultiRequestReadOps(t *testing.T) {
	in := cat(
		hx("00 00 00 04  00  ff ff ff ff"), hx("00 00 00 02"), []byte("/a"), hx("01"),
		hx("00 00 00 08  00  ff ff ff ff"), hx("00 00 00 02"), []byte("/b"), hx("00"),
		hx("ff ff ff ff  01  ff ff ff ff"),
	)
	var m MultiRequest
	d := NewDecoder(in)
	m.Decode(d)
	if d.Err() != nil || len(m.Ops) != 2 || !m.Ops[0].IsRead() || !m.Ops[1].IsRead() ||
		m.Ops[0].Path != "/a" || !m.Ops[0].Watch || m.Ops[1].Path != "/b" {
		t.Errorf("decoded %+v, %v", m, d.Err())
	}
}

func TestMultiRequestErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		want error
		ops  int
	}{
		{"sync in a multi", cat(hx("00 00 00 09  00  ff ff ff ff"), hx("00 00 00 01 2f")), ErrMultiOp, 0},
		{"multi in a multi", cat(multiCreateDelete[:len(multiCreateDelete)-9], hx("00 00 00 0e 00 ff ff ff ff")), ErrMultiOp, 2},
		{"no end", multiCreateDelete[:len(multiCreateDelete)-9], ErrShort, 2},
		{"empty", nil, ErrShort, 0},
		{"op cut", multiCreateDelete[:20], ErrShort, 0},
		{"second op cut", multiCreateDelete[:len(multiCreateDelete)-12], ErrShort, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m MultiRequest
			d := NewDecoder(tc.in)
			m.Decode(d)
			if !errors.Is(d.Err(), tc.want) || len(m.Ops) != tc.ops {
				t.Errorf("err %v with %d ops, want %v with %d", d.Err(), len(m.Ops), tc.want, tc.ops)
			}
		})
	}
}

func TestMultiNonCanonical(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
	}{
		{"end with err 0", cat(multiCreateDelete[:len(multiCreateDelete)-9], hx("ff ff ff ff 01 00 00 00 00"))},
		{"end with type 0", cat(multiCreateDelete[:len(multiCreateDelete)-9], hx("00 00 00 00 01 ff ff ff ff"))},
		{"op header err 0", cat(hx("00 00 00 02 00 00 00 00 00"), multiCreateDelete[len(multiCreateDelete)-9-10:])},
	} {
		var m MultiRequest
		d := NewDecoder(tc.in)
		m.Decode(d)
		if d.Err() != nil || d.Canonical() {
			t.Errorf("%s: err %v, canonical %v: want no error, non-canonical", tc.name, d.Err(), d.Canonical())
		}
	}
}

func TestMultiResponseDecodeErrors(t *testing.T) {
	var m MultiResponse
	d := NewDecoder(hx("00 00 00 04  00  00 00 00 00"))
	m.Decode(d)
	if !errors.Is(d.Err(), ErrMultiOp) {
		t.Errorf("getData result: %v, want ErrMultiOp", d.Err())
	}
	d = NewDecoder(cat(hx("ff ff ff ff  00  00 00 00 00"), hx("ff ff ff 9b"), hx("ff ff ff ff  01  ff ff ff ff")))
	m.Decode(d)
	if d.Err() != nil || d.Canonical() || m.Results[0].Err != NoNode {
		t.Errorf("error result with a header err of 0: %+v, %v, canonical %v", m, d.Err(), d.Canonical())
	}
}

// TestMultiDecodeReuses: a MultiRequest decoded again reuses its ops and
// their ACL slices.
func TestMultiDecodeReuses(t *testing.T) {
	var m MultiRequest
	d := NewDecoder(multiCreateDelete)
	m.Decode(d)
	if n := testing.AllocsPerRun(50, func() {
		d.Reset(multiCreateDelete)
		m.Decode(d)
	}); n > 6 { // the strings: "/a", "world", "anyone", "/b"
		t.Errorf("%v allocations per decode", n)
	}
}

func TestMultiResultType(t *testing.T) {
	for _, tc := range []struct {
		op   Op
		want Op
		ok   bool
	}{
		{OpCreate, OpCreate, true},
		{OpCreate2, OpCreate2, true},
		{OpCreateContainer, OpCreate2, true},
		{OpCreateTTL, OpCreate2, true},
		{OpDelete, OpDelete, true},
		{OpDeleteContainer, OpDelete, true},
		{OpSetData, OpSetData, true},
		{OpCheck, OpCheck, true},
		{OpGetData, 0, false},
		{OpSync, 0, false},
	} {
		got, ok := MultiResultType(tc.op)
		if got != tc.want || ok != tc.ok {
			t.Errorf("MultiResultType(%v) = %v, %v; want %v, %v", tc.op, got, ok, tc.want, tc.ok)
		}
	}
}

// TestMultiAppendSkips: an op or result whose type has no place in a multi
// is left out of the encoding.
func TestMultiAppendSkips(t *testing.T) {
	m := MultiRequest{Ops: []MultiOp{{Type: OpSync, Path: "/"}, {Type: OpDelete, Path: "/b", Version: -1}}}
	want := multiCreateDelete[len(multiCreateDelete)-9-10-9:]
	if b := m.Append(nil); !bytes.Equal(b, want) {
		t.Errorf("%x\nwant %x", b, want)
	}
	r := MultiResponse{Results: []MultiResult{{Type: OpGetData}}}
	if b := r.Append(nil); !bytes.Equal(b, hx("ff ff ff ff 01 ff ff ff ff")) {
		t.Errorf("%x", b)
	}
}
