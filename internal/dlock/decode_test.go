package dlock

import (
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/latchd/latch/dlockpb"
)

// decodeSeeds are encoded requests for the decoding tests: every field,
// and the inputs decodeFast leaves to proto.Unmarshal.
func decodeSeeds(t testing.TB) [][]byte {
	enc := func(r *pb.Request) []byte {
		b, err := proto.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	full := &pb.Request{
		Version: 3, Id: 1 << 40, AccessToken: "tök", Type: pb.RequestType_Lock, CancelId: 7,
		Lock: &pb.RequestLock{
			WaitMicro: 5, ReleaseMicro: 1 << 50, Keys: []string{"a", "", "b", "a"},
			Mode: pb.LockMode_Shared, Limit: 3, TryOnce: true,
		},
		Session: &pb.RequestSession{TtlMicro: uint64(time.Second / time.Microsecond)},
	}
	lockBytes := enc(&pb.Request{Lock: &pb.RequestLock{Keys: []string{"x"}}})
	return [][]byte{
		nil,
		enc(full),
		enc(&pb.Request{Lock: &pb.RequestLock{}}),
		enc(&pb.Request{Session: &pb.RequestSession{}}),
		enc(v3Lock(1, []string{"q"})),
		v2Lock(1, 0, 0, "q"),
		v2Unlock(2, "q"),
		append(lockBytes, lockBytes...), // lock twice: merged
		protowire.AppendVarint(protowire.AppendTag(nil, fieldType, protowire.VarintType), 1<<63|5),
		protowire.AppendVarint(protowire.AppendTag(nil, fieldVersion, protowire.VarintType), 1<<32|3),
		protowire.AppendVarint(protowire.AppendTag(nil, 52, protowire.VarintType), 1), // reserved
		protowire.AppendVarint(protowire.AppendTag(nil, 99, protowire.VarintType), 1), // unknown
		protowire.AppendBytes(protowire.AppendTag(nil, fieldID, protowire.BytesType), []byte{1}),
		protowire.AppendBytes(protowire.AppendTag(nil, fieldAccessToken, protowire.BytesType), []byte{0xff}),
		protowire.AppendBytes(protowire.AppendTag(nil, fieldLock, protowire.BytesType),
			protowire.AppendBytes(protowire.AppendTag(nil, fieldKeys, protowire.BytesType), []byte{0xc0, 0x80})),
		protowire.AppendBytes(protowire.AppendTag(nil, fieldLock, protowire.BytesType),
			protowire.AppendVarint(protowire.AppendTag(nil, fieldTryOnce, protowire.VarintType), 2)),
		{0x0a, 0xff},
		{0x08},
		{0x08, 0x80},
		{0x00},
		{0x9a, 0x03, 0x80, 0x00}, // lock, its length in a non-minimal varint
		{0x0b, 0x0c},             // a group
	}
}

// checkDecode checks that decodeRequest decodes b as proto.Unmarshal does.
func checkDecode(t *testing.T, b []byte) {
	want := new(pb.Request)
	wantErr := proto.Unmarshal(b, want)
	got, err := decodeRequest(b)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("decodeRequest(%x) error = %v, proto.Unmarshal error = %v", b, err, wantErr)
	}
	if err != nil {
		return
	}
	if !proto.Equal(got, want) {
		t.Fatalf("decodeRequest(%x) = %v, proto.Unmarshal = %v", b, got, want)
	}
	if (got.Lock == nil) != (want.Lock == nil) || (got.Session == nil) != (want.Session == nil) {
		t.Fatalf("decodeRequest(%x) = %v, proto.Unmarshal = %v: presence differs", b, got, want)
	}
	var fast decodedRequest
	if decodeFast(&fast, b) && len(fast.req.ProtoReflect().GetUnknown()) > 0 {
		t.Fatalf("decodeFast(%x) kept unknown fields", b)
	}
	// Decoding into a record that held another request leaves nothing of
	// that one behind.
	var d decodedRequest
	if _, err := d.decode(dirtyRequest); err != nil {
		t.Fatal(err)
	}
	again, err := d.decode(b)
	if err != nil || !proto.Equal(again, want) || (again.Lock == nil) != (want.Lock == nil) || (again.Session == nil) != (want.Session == nil) {
		t.Fatalf("decode(%x) into a used record = %v, %v; proto.Unmarshal = %v", b, again, err, want)
	}
}

// dirtyRequest sets every field decodeFast knows.
var dirtyRequest = func() []byte {
	b, err := proto.Marshal(&pb.Request{
		Version: 3, Id: 9, Type: pb.RequestType_Lock, CancelId: 4, AccessToken: "tok",
		Lock:    &pb.RequestLock{Keys: []string{"x", "y"}, WaitMicro: 1, ReleaseMicro: 2, Mode: pb.LockMode_Shared, Limit: 3, TryOnce: true},
		Session: &pb.RequestSession{TtlMicro: 5},
	})
	if err != nil {
		panic(err)
	}
	return b
}()

func TestDecodeRequest(t *testing.T) {
	for _, b := range decodeSeeds(t) {
		checkDecode(t, b)
	}
	if !decodeFast(new(decodedRequest), v2Lock(1, 0, 0, "q")) {
		t.Error("decodeFast refused a version 2 Lock")
	}
}

// FuzzDecodeRequest checks decodeRequest against proto.Unmarshal.
func FuzzDecodeRequest(f *testing.F) {
	for _, b := range decodeSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(checkDecode)
}
