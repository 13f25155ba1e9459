package jute

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

// requestRecord returns a zero record for a request of type op, nil for an
// op whose request is the header alone or that latch does not read.
func requestRecord(op Op) record {
	switch op {
	case OpCreate, OpCreate2, OpCreateContainer:
		return new(CreateRequest)
	case OpCreateTTL:
		return ttlRecord{new(CreateTTLRequest)}
	case OpDelete, OpDeleteContainer:
		return new(DeleteRequest)
	case OpExists:
		return new(ExistsRequest)
	case OpGetData:
		return new(GetDataRequest)
	case OpSetData:
		return new(SetDataRequest)
	case OpGetACL:
		return new(GetACLRequest)
	case OpSetACL:
		return new(SetACLRequest)
	case OpGetChildren, OpGetChildren2:
		return new(GetChildrenRequest)
	case OpSync:
		return new(SyncRequest)
	case OpCheck:
		return new(CheckVersionRequest)
	case OpMulti, OpMultiRead:
		return new(MultiRequest)
	case OpCheckWatches:
		return new(CheckWatchesRequest)
	case OpRemoveWatches:
		return new(RemoveWatchesRequest)
	case OpSetWatches:
		return new(SetWatches)
	case OpAuth:
		return new(AuthPacket)
	}
	return nil
}

// responseRecord returns a zero record for the reply to op, nil for a
// reply that is the header alone.
func responseRecord(op Op) record {
	switch op {
	case OpCreate:
		return new(CreateResponse)
	case OpCreate2, OpCreateContainer:
		return new(Create2Response)
	case OpExists:
		return new(ExistsResponse)
	case OpGetData:
		return new(GetDataResponse)
	case OpSetData:
		return new(SetDataResponse)
	case OpGetACL:
		return new(GetACLResponse)
	case OpSetACL:
		return new(SetACLResponse)
	case OpGetChildren:
		return new(GetChildrenResponse)
	case OpGetChildren2:
		return new(GetChildren2Response)
	case OpSync:
		return new(SyncResponse)
	case OpMulti:
		return new(MultiResponse)
	case OpNotification:
		return new(WatcherEvent)
	case OpError:
		return new(ErrorResponse)
	}
	return nil
}

// checkDecode decodes in[off:] as r, and checks what is decoded: an error
// is one of the Decoder's; a record re-encodes to the bytes it was read
// from if the Decoder found them canonical, and whatever it re-encodes to
// decodes to the same record.
func checkDecode(t *testing.T, what string, r record, in []byte, off int) {
	d := NewDecoder(in)
	d.off = off
	r.Decode(d)
	if err := d.Err(); err != nil {
		if !errors.Is(err, ErrShort) && !errors.Is(err, ErrLength) && !errors.Is(err, ErrMultiOp) {
			t.Fatalf("%s: unexpected error %v", what, err)
		}
		return
	}
	if d.Offset() > len(in) || d.Offset() < off {
		t.Fatalf("%s: offset %d outside %d..%d", what, d.Offset(), off, len(in))
	}
	enc := r.Append(nil)
	if d.Canonical() && !bytes.Equal(enc, in[off:d.Offset()]) {
		t.Fatalf("%s: canonical input %x re-encodes as %x", what, in[off:d.Offset()], enc)
	}
	again := fresh(r)
	d2 := NewDecoder(enc)
	again.Decode(d2)
	if d2.Err() != nil || d2.Len() != 0 || !d2.Canonical() {
		t.Fatalf("%s: its encoding %x decodes with error %v, %d left, canonical %v", what, enc, d2.Err(), d2.Len(), d2.Canonical())
	}
	if !reflect.DeepEqual(decoded(again), decoded(r)) {
		t.Fatalf("%s: decoded %+v, its encoding decodes to %+v", what, decoded(r), decoded(again))
	}
}

// FuzzDecodeRequest decodes an arbitrary frame body as a request: a
// RequestHeader and the record of its op. The same bytes are also read as
// a connection's first frame (a ConnectRequest) and, after the header, as
// the op's response record. Nothing may panic, and what decodes must
// encode back (see checkDecode).
func FuzzDecodeRequest(f *testing.F) {
	hdr := func(op Op) []byte { return (&RequestHeader{Xid: 1, Type: op}).Append(nil) }
	for _, r := range records() {
		f.Add(r.Append(hdr(0)))
	}
	f.Add(cat(hdr(OpMulti), multiCreateDelete))
	f.Add((&ConnectRequest{TimeOut: 30000, Passwd: make([]byte, 16), HasReadOnly: true}).Append(nil))
	f.Add((&CreateRequest{Path: "/lock/x-", Data: []byte("id"), ACL: openACL, Flags: 3}).Append(hdr(OpCreate2)))
	f.Add((&GetChildrenRequest{Path: "/lock", Watch: true}).Append(hdr(OpGetChildren2)))
	f.Add((&SetWatches{RelativeZxid: 5, DataWatches: []string{"/a"}}).Append(hdr(OpSetWatches)))
	f.Add((&CheckWatchesRequest{Path: "/lock", Type: WatcherAny}).Append(hdr(OpCheckWatches)))
	f.Add((&DeleteRequest{Path: "/a", Version: -1}).Append(hdr(OpDelete)))
	f.Add(cat(hdr(OpCreate), hx("ff ff ff ff ff ff ff ff 00 00 00 00 00 00 00 00")))
	f.Add(cat(hdr(OpMulti), hx("00 00 00 05 02 ff ff ff ff ff ff ff ff ff ff ff ff 00 00 00 00 ff ff ff ff 00 ff ff ff ff")))
	f.Add(hdr(OpPing))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) {
		checkDecode(t, "ConnectRequest", new(ConnectRequest), body, 0)
		checkDecode(t, "ConnectResponse", new(ConnectResponse), body, 0)
		d := NewDecoder(body)
		var h RequestHeader
		h.Decode(d)
		if d.Err() != nil {
			return
		}
		if r := requestRecord(h.Type); r != nil {
			checkDecode(t, h.Type.String()+" request", r, body, d.Offset())
		}
		if r := responseRecord(h.Type); r != nil {
			checkDecode(t, h.Type.String()+" response", r, body, d.Offset())
		}
	})
}

// FuzzFrame cuts frames from arbitrary input with NextFrame, at once and as
// the input arrives in pieces of a given size, under a given limit. Both
// must find the same frames and the same end; the frames written back must
// be the input up to where cutting stopped; and a four-letter word is never
// a valid frame length.
func FuzzFrame(f *testing.F) {
	f.Add([]byte{}, uint8(0), uint16(64))
	f.Add(hx("00 00 00 03 61 62 63 00 00 00 00"), uint8(1), uint16(64))
	f.Add(hx("00 00 00 03 61 62 63 00 00 01"), uint8(2), uint16(64))
	f.Add(hx("00 00 01 00"), uint8(3), uint16(16))
	f.Add(hx("ff ff ff ff"), uint8(0), uint16(0))
	f.Add([]byte("ruok"), uint8(0), uint16(0xffff))
	f.Add(cat(hx("00 00 00 2d"), (&ConnectRequest{Passwd: make([]byte, 16), HasReadOnly: true}).Append(nil)), uint8(7), uint16(0xffff))
	f.Fuzz(func(t *testing.T, in []byte, piece uint8, limit uint16) {
		if w, ok := FourLetterWord(in); ok {
			if _, _, err := NextFrame(in, MaxFrame); err == nil {
				t.Fatalf("four-letter word %q reads as a frame length", w)
			}
		}
		lim := int(limit)
		// At once.
		var frames [][]byte
		var end error
		rest := in
		for {
			body, n, err := NextFrame(rest, lim)
			if err != nil {
				if !errors.Is(err, ErrFrameLength) {
					t.Fatalf("error %v", err)
				}
				end = err
				break
			}
			if n == 0 {
				if body != nil {
					t.Fatal("a body with n == 0")
				}
				break
			}
			if n != FrameHeaderSize+len(body) || len(body) > lim || !bytes.Equal(body, rest[FrameHeaderSize:n]) {
				t.Fatalf("frame of %d bytes, n %d, limit %d", len(body), n, lim)
			}
			frames = append(frames, body)
			rest = rest[n:]
		}
		var again []byte
		for _, fr := range frames {
			var off int
			again, off = StartFrame(again)
			again = append(again, fr...)
			FinishFrame(again, off)
		}
		if !bytes.Equal(again, in[:len(in)-len(rest)]) {
			t.Fatalf("frames written back are not the input before the rest")
		}
		// As it arrives, piece+1 bytes at a time, into a buffer that
		// keeps what it has not cut.
		var buf []byte
		var got [][]byte
		var gotEnd error
		step := int(piece) + 1
	arrive:
		for i := 0; i < len(in); i += step {
			buf = append(buf, in[i:min(i+step, len(in))]...)
			for {
				body, n, err := NextFrame(buf, lim)
				if err != nil {
					gotEnd = err
					break arrive
				}
				if n == 0 {
					break
				}
				got = append(got, bytes.Clone(body))
				buf = buf[n:]
			}
		}
		if len(got) != len(frames) || (end == nil) != (gotEnd == nil) {
			t.Fatalf("at once: %d frames, %v; in pieces of %d: %d frames, %v", len(frames), end, step, len(got), gotEnd)
		}
		for i := range got {
			if !bytes.Equal(got[i], frames[i]) {
				t.Fatalf("frame %d: at once %x, in pieces %x", i, frames[i], got[i])
			}
		}
		if end != nil && end.Error() != gotEnd.Error() {
			t.Fatalf("at once %v, in pieces %v", end, gotEnd)
		}
		if end == nil && !bytes.Equal(buf, rest) {
			t.Fatalf("in pieces, %d bytes left; at once %d", len(buf), len(rest))
		}
	})
}
