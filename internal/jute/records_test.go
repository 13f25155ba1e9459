package jute

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

// record is what every record but CreateTTLRequest is.
type record interface {
	Decode(d *Decoder)
	Append(b []byte) []byte
}

// ttlRecord gives CreateTTLRequest, decode only, an Append for the tests.
type ttlRecord struct{ *CreateTTLRequest }

func (r ttlRecord) Append(b []byte) []byte {
	return AppendLong(r.CreateRequest.Append(b), r.TTL)
}

var (
	stat1 = Stat{
		Czxid: 0x100000001, Mzxid: 0x100000002, Ctime: 1700000000000, Mtime: 1700000000123,
		Version: 1, Cversion: 5, Aversion: -1, EphemeralOwner: 0x0100000000000abc,
		DataLength: 3, NumChildren: 2, Pzxid: 0x100000003,
	}
	openACL = []ACL{{Perms: PermAll, Scheme: "world", ID: "anyone"}}
)

// records lists a value of every record, with its fields set, null and
// empty slices among them.
func records() []record {
	return []record{
		&Stat{},
		&stat1,
		&ACL{Perms: PermRead, Scheme: "digest", ID: "user:hash"},
		&ConnectRequest{ProtocolVersion: 0, LastZxidSeen: 7, TimeOut: 30000, SessionID: 0, Passwd: make([]byte, 16)},
		&ConnectRequest{LastZxidSeen: 9, TimeOut: 4000, SessionID: 0x0100000000000001, Passwd: []byte("0123456789abcdef"), ReadOnly: true, HasReadOnly: true},
		&ConnectRequest{Passwd: nil, HasReadOnly: true},
		&ConnectResponse{TimeOut: 4000, SessionID: 0x0100000000000001, Passwd: []byte("0123456789abcdef")},
		&ConnectResponse{TimeOut: 0, SessionID: 0, Passwd: make([]byte, 16), HasReadOnly: true},
		&RequestHeader{Xid: 3, Type: OpCreate2},
		&RequestHeader{Xid: XidPing, Type: OpPing},
		&ReplyHeader{Xid: 3, Zxid: 0x100000004, Err: NoNode},
		&ReplyHeader{Xid: XidWatch, Zxid: -1, Err: OK},
		&CreateRequest{Path: "/lock/x-", Data: []byte("me"), ACL: openACL, Flags: 3},
		&CreateRequest{Path: "/a", Data: nil, ACL: nil, Flags: 0},
		&CreateRequest{Path: "/c", Data: []byte{}, ACL: []ACL{}, Flags: 4},
		ttlRecord{&CreateTTLRequest{CreateRequest: CreateRequest{Path: "/t", Data: []byte{1}, ACL: openACL, Flags: 5}, TTL: 60000}},
		&CreateResponse{Path: "/lock/x-0000000001"},
		&Create2Response{Path: "/c", Stat: stat1},
		&DeleteRequest{Path: "/a", Version: -1},
		&ExistsRequest{Path: "/a", Watch: true},
		&ExistsResponse{Stat: stat1},
		&GetDataRequest{Path: "/zookeeper/config", Watch: true},
		&GetDataResponse{Data: []byte{}, Stat: stat1},
		&GetDataResponse{Data: nil},
		&SetDataRequest{Path: "/counter", Data: []byte("42"), Version: 7},
		&SetDataResponse{Stat: stat1},
		&GetACLRequest{Path: "/"},
		&GetACLResponse{ACL: openACL, Stat: stat1},
		&SetACLRequest{Path: "/a", ACL: []ACL{{Perms: PermRead | PermAdmin, Scheme: "world", ID: "anyone"}, {Perms: 1, Scheme: "ip", ID: "10.0.0.0/8"}}, Version: -1},
		&SetACLResponse{Stat: stat1},
		&GetChildrenRequest{Path: "/lock", Watch: false},
		&GetChildrenResponse{Children: []string{"x-0000000001", "x-0000000000"}},
		&GetChildrenResponse{Children: []string{}},
		&GetChildrenResponse{Children: nil},
		&GetChildren2Response{Children: []string{"zookeeper"}, Stat: stat1},
		&SyncRequest{Path: "/"},
		&SyncResponse{Path: "/"},
		&CheckVersionRequest{Path: "/a", Version: 2},
		&SetWatches{RelativeZxid: 0x100000009, DataWatches: []string{"/a", "/b"}, ExistWatches: []string{}, ChildWatches: nil},
		&CheckWatchesRequest{Path: "/lock", Type: WatcherAny},
		&RemoveWatchesRequest{Path: "/lock", Type: WatcherData},
		&WatcherEvent{Type: EventNodeDeleted, State: StateSyncConnected, Path: "/lock/x-0000000000"},
		&AuthPacket{Type: 0, Scheme: "digest", Auth: []byte("user:pass")},
		&ErrorResponse{Err: NotEmpty},
		&MultiHeader{Type: OpCheck, Done: false, Err: -1},
		&MultiHeader{Type: -1, Done: true, Err: -1},
		&MultiRequest{Ops: []MultiOp{
			{Type: OpCreate, Path: "/q/e-", Data: []byte("1"), ACL: openACL, Flags: 2},
			{Type: OpCreate2, Path: "/q/f", Data: nil, ACL: openACL},
			{Type: OpCreateContainer, Path: "/q", Data: []byte{}, ACL: openACL, Flags: 4},
			{Type: OpCreateTTL, Path: "/q/t", ACL: openACL, Flags: 5, TTL: 1000},
			{Type: OpDelete, Path: "/q/e-0000000000", Version: -1},
			{Type: OpSetData, Path: "/q", Data: []byte("x"), Version: 3},
			{Type: OpCheck, Path: "/q", Version: 4},
			{Type: OpGetData, Path: "/q", Watch: true},
			{Type: OpGetChildren, Path: "/q"},
		}},
		&MultiRequest{Ops: nil},
		&MultiResponse{Results: []MultiResult{
			{Type: OpCreate, Path: "/q/e-0000000000"},
			{Type: OpCreate2, Path: "/q/f", Stat: stat1},
			{Type: OpDelete},
			{Type: OpSetData, Stat: stat1},
			{Type: OpCheck},
		}},
		&MultiResponse{Results: []MultiResult{
			{Type: OpError, Err: OK},
			{Type: OpError, Err: NodeExists},
			{Type: OpError, Err: RuntimeInconsistency},
		}},
	}
}

// fresh returns a new zero record of r's type.
func fresh(r record) record {
	if _, ok := r.(ttlRecord); ok {
		return ttlRecord{new(CreateTTLRequest)}
	}
	return reflect.New(reflect.TypeOf(r).Elem()).Interface().(record)
}

// decoded returns r's value for comparison (through ttlRecord).
func decoded(r record) any {
	if t, ok := r.(ttlRecord); ok {
		return t.CreateTTLRequest
	}
	return r
}

// TestRoundTrip encodes every record, decodes it, and compares: the same
// value, every byte read, and the same bytes again. Then every prefix of
// the encoding must fail with ErrShort or ErrLength (and leave no panic),
// except where a record may end early (a ConnectRequest without readOnly).
func TestRoundTrip(t *testing.T) {
	for _, r := range records() {
		name := reflect.TypeOf(decoded(r)).Elem().Name()
		b := r.Append([]byte("prefix"))[len("prefix"):]
		got := fresh(r)
		d := NewDecoder(b)
		got.Decode(d)
		if d.Err() != nil {
			t.Errorf("%s: %v", name, d.Err())
			continue
		}
		if d.Len() != 0 || !d.Canonical() {
			t.Errorf("%s: %d bytes left, canonical %v", name, d.Len(), d.Canonical())
		}
		want := decoded(r)
		if !reflect.DeepEqual(decoded(got), want) {
			t.Errorf("%s: decoded %+v\nwant %+v", name, decoded(got), want)
		}
		if again := got.Append(nil); !bytes.Equal(again, b) {
			t.Errorf("%s: encoded again %x\nwant %x", name, again, b)
		}
		for i := range b {
			p := fresh(r)
			d := NewDecoder(b[:i])
			p.Decode(d)
			if d.Err() == nil {
				if c, ok := p.(*ConnectRequest); ok && c.HasReadOnly == false && i == len(b)-1 {
					continue
				}
				if c, ok := p.(*ConnectResponse); ok && c.HasReadOnly == false && i == len(b)-1 {
					continue
				}
				t.Errorf("%s: %d of %d bytes decoded with no error", name, i, len(b))
			} else if !errors.Is(d.Err(), ErrShort) && !errors.Is(d.Err(), ErrLength) {
				t.Errorf("%s: %d of %d bytes: %v", name, i, len(b), d.Err())
			}
		}
	}
}

// TestRecordSizes checks the fixed sizes against the encodings.
func TestRecordSizes(t *testing.T) {
	for _, tc := range []struct {
		r    record
		size int
	}{
		{&stat1, StatSize},
		{&RequestHeader{}, RequestHeaderSize},
		{&ReplyHeader{}, ReplyHeaderSize},
		{&MultiHeader{}, MultiHeaderSize},
	} {
		if n := len(tc.r.Append(nil)); n != tc.size {
			t.Errorf("%T: %d bytes, want %d", tc.r, n, tc.size)
		}
	}
}

func TestConnectRequestGolden(t *testing.T) {
	without := cat(
		hx("00 00 00 00"),                             // protocolVersion 0
		hx("00 00 00 00 00 00 00 10"),                 // lastZxidSeen 16
		hx("00 00 75 30"),                             // timeOut 30000
		hx("01 02 03 04 05 06 07 08"),                 // sessionId
		hx("00 00 00 10"), []byte("0123456789abcdef"), // passwd, 16 bytes
	)
	with := cat(without, hx("01")) // readOnly true
	r := ConnectRequest{LastZxidSeen: 16, TimeOut: 30000, SessionID: 0x0102030405060708, Passwd: []byte("0123456789abcdef")}
	if b := r.Append(nil); !bytes.Equal(b, without) {
		t.Errorf("without readOnly: %x\nwant %x", b, without)
	}
	r.ReadOnly, r.HasReadOnly = true, true
	if b := r.Append(nil); !bytes.Equal(b, with) {
		t.Errorf("with readOnly: %x\nwant %x", b, with)
	}
	for _, tc := range []struct {
		in      []byte
		has, ro bool
	}{{without, false, false}, {with, true, true}, {cat(without, hx("00")), true, false}} {
		var got ConnectRequest
		d := NewDecoder(tc.in)
		got.Decode(d)
		if d.Err() != nil || got.HasReadOnly != tc.has || got.ReadOnly != tc.ro || got.TimeOut != 30000 ||
			got.SessionID != 0x0102030405060708 || string(got.Passwd) != "0123456789abcdef" || got.LastZxidSeen != 16 {
			t.Errorf("decoded %x: %+v, %v", tc.in, got, d.Err())
		}
	}
}

func TestConnectResponseGolden(t *testing.T) {
	// An expired session's answer, to a client that sent readOnly.
	want := cat(
		hx("00 00 00 00"), hx("00 00 00 00"), hx("00 00 00 00 00 00 00 00"),
		hx("00 00 00 10"), make([]byte, 16),
		hx("00"),
	)
	r := ConnectResponse{Passwd: make([]byte, 16), HasReadOnly: true}
	if b := r.Append(nil); !bytes.Equal(b, want) {
		t.Errorf("%x\nwant %x", b, want)
	}
	r.HasReadOnly = false
	if b := r.Append(nil); !bytes.Equal(b, want[:len(want)-1]) {
		t.Errorf("without readOnly: %x", b)
	}
}

func TestWatcherEventGolden(t *testing.T) {
	// A watch event as ZooKeeper sends it: header, then the event.
	want := cat(
		hx("ff ff ff ff"), hx("ff ff ff ff ff ff ff ff"), hx("00 00 00 00"), // xid -1, zxid -1, err 0
		hx("00 00 00 02"), hx("00 00 00 03"), // NodeDeleted, SyncConnected
		hx("00 00 00 07"), []byte("/lock/x"),
	)
	h := ReplyHeader{Xid: XidWatch, Zxid: -1}
	e := WatcherEvent{Type: EventNodeDeleted, State: StateSyncConnected, Path: "/lock/x"}
	if b := e.Append(h.Append(nil)); !bytes.Equal(b, want) {
		t.Errorf("%x\nwant %x", b, want)
	}
}

func TestStatGolden(t *testing.T) {
	s := Stat{Czxid: 1, Mzxid: 2, Ctime: 3, Mtime: 4, Version: 5, Cversion: 6, Aversion: -1,
		EphemeralOwner: -1 << 63, DataLength: 7, NumChildren: 8, Pzxid: 9}
	want := hx(`00 00 00 00 00 00 00 01  00 00 00 00 00 00 00 02
		00 00 00 00 00 00 00 03  00 00 00 00 00 00 00 04
		00 00 00 05  00 00 00 06  ff ff ff ff
		80 00 00 00 00 00 00 00
		00 00 00 07  00 00 00 08
		00 00 00 00 00 00 00 09`)
	if b := s.Append(nil); !bytes.Equal(b, want) {
		t.Errorf("%x\nwant %x", b, want)
	}
	var got Stat
	got.Decode(NewDecoder(want))
	if got != s {
		t.Errorf("decoded %+v", got)
	}
}

func TestCreateRequestGolden(t *testing.T) {
	want := cat(
		hx("00 00 00 08"), []byte("/lock/x-"),
		hx("00 00 00 00"), // data, empty
		hx("00 00 00 01"), // one ACL
		hx("00 00 00 1f"), // perms ALL
		hx("00 00 00 05"), []byte("world"),
		hx("00 00 00 06"), []byte("anyone"),
		hx("00 00 00 03"), // ephemeral sequential
	)
	var r CreateRequest
	d := NewDecoder(want)
	r.Decode(d)
	if d.Err() != nil || r.Path != "/lock/x-" || r.Data == nil || len(r.Data) != 0 || !reflect.DeepEqual(r.ACL, openACL) || r.Flags != 3 {
		t.Errorf("decoded %+v, %v", r, d.Err())
	}
	var ttl CreateTTLRequest
	d = NewDecoder(cat(want, hx("00 00 00 00 00 00 ea 60")))
	ttl.Decode(d)
	if d.Err() != nil || ttl.TTL != 60000 || ttl.Path != "/lock/x-" {
		t.Errorf("CreateTTLRequest %+v, %v", ttl, d.Err())
	}
}
