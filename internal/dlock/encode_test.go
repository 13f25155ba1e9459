package dlock

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/latchd/latch/dlockpb"
)

// checkEncode fails the test unless appendResponse encodes resp as
// proto.Marshal does, after a prefix that it must keep.
func checkEncode(t *testing.T, resp *pb.Response) {
	t.Helper()
	want, wantErr := proto.Marshal(resp)
	prefix := []byte{1, 2, 3}
	got, err := appendResponse(bytes.Clone(prefix), resp)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("appendResponse(%v) error %v, proto.Marshal error %v", resp, err, wantErr)
	}
	if err != nil {
		return
	}
	if !bytes.HasPrefix(got, prefix) || !bytes.Equal(got[len(prefix):], want) {
		t.Fatalf("appendResponse(%v) =\n% x, proto.Marshal =\n% x", resp, got[min(len(got), len(prefix)):], want)
	}
}

func TestAppendResponse(t *testing.T) {
	tests := []struct {
		name string
		resp *pb.Response
	}{
		{"empty", &pb.Response{}},
		{"v2 ok", &pb.Response{Version: 2, RequestId: 7, ServerUnixTime: 1_700_000_000_000_000_000}},
		{"v3 grant", &pb.Response{Version: 3, RequestId: 1 << 40, Keys: []string{"a", "b"}, Tokens: []uint64{1, math.MaxUint64}, LeaseExpires: 5, ServerUnixTime: 9}},
		{"error", &pb.Response{Version: 3, RequestId: 2, Status: pb.ResponseStatus_NotHeld, ErrorText: "not held: \"k\""}},
		{"busy keys", &pb.Response{Version: 2, Status: pb.ResponseStatus_AcquireTimeout, Keys: []string{"", "x"}}},
		{"negative times", &pb.Response{ServerUnixTime: -1, LeaseExpires: math.MinInt64}},
		{"session", &pb.Response{Version: 3, SessionId: 300}},
		{"unknown status", &pb.Response{Status: pb.ResponseStatus(-5)}},
		{"long key", &pb.Response{Keys: []string{strings.Repeat("k", 300)}}},
		{"invalid UTF-8", &pb.Response{ErrorText: "\xff"}},
		{"invalid UTF-8 key", &pb.Response{Keys: []string{"ok", "\xc0"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkEncode(t, tt.resp) })
	}
}

// FuzzAppendResponse checks appendResponse against proto.Marshal.
func FuzzAppendResponse(f *testing.F) {
	f.Add(uint32(3), uint64(1), int32(0), "", "a\x00b", int64(1), uint64(5), uint64(0), int64(0), uint64(0))
	f.Add(uint32(2), uint64(0), int32(4), "AcquireTimeout", "", int64(-1), uint64(0), uint64(1<<63), int64(-7), uint64(9))
	f.Fuzz(func(t *testing.T, version uint32, id uint64, status int32, text, keys string, at int64, tok1, tok2 uint64, lease int64, sid uint64) {
		resp := &pb.Response{
			Version: version, RequestId: id, Status: pb.ResponseStatus(status), ErrorText: text,
			ServerUnixTime: at, LeaseExpires: lease, SessionId: sid,
		}
		if keys != "" {
			resp.Keys = strings.Split(keys, "\x00")
		}
		if tok1 != 0 || tok2 != 0 {
			resp.Tokens = []uint64{tok1, tok2}
		}
		checkEncode(t, resp)
	})
}
