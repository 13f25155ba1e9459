package bench

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/latchd/latch/dlockpb"
	"github.com/latchd/latch/internal/frame"
)

// kind is what readReply made of a reply: an outcome, an unexpected reply
// or a broken stream.
type kind string

const (
	kDone       kind = "done"
	kRefused    kind = "refused"
	kMiss       kind = "miss"
	kUnexpected kind = "unexpected"
	kBroken     kind = "broken"
)

func classify(out outcome, err error) kind {
	var ue *unexpectedError
	switch {
	case errors.As(err, &ue):
		return kUnexpected
	case err != nil:
		return kBroken
	}
	return [...]kind{done: kDone, refused: kRefused, miss: kMiss}[out]
}

func TestTextReplies(t *testing.T) {
	c := newTextCodec([]byte("abc"), 60)
	tests := []struct {
		op    op
		reply string
		want  kind
	}{
		{opLock, "OK\r\n", kDone},
		{opLock, "LOCKED\r\n", kRefused},
		{opLock, "NOT_FOUND\r\n", kUnexpected},
		{opLock, "ERROR\r\n", kUnexpected},
		{opUnlock, "OK\r\n", kDone},
		{opUnlock, "CLIENT_ERROR object is not locked or not found\r\n", kUnexpected},
		{opAdd, "STORED\r\n", kDone},
		{opAdd, "NOT_STORED\r\n", kRefused},
		{opAdd, "LOCKED\r\n", kUnexpected},
		{opDelete, "DELETED\r\n", kDone},
		{opDelete, "NOT_FOUND\r\n", kUnexpected},
		{opSet, "STORED\r\n", kDone},
		{opSet, "OK\r\n", kUnexpected},
		{opGet, "END\r\n", kMiss},
		{opGet, "VALUE k 0 3\r\nabc\r\nEND\r\n", kDone},
		{opGet, "VALUE k 0 3 99\r\nabc\r\nEND\r\n", kDone},
		{opGet, "VALUE other 0 3\r\nabc\r\nEND\r\n", kUnexpected},
		{opGet, "VALUE k 0 2\r\nab\r\nEND\r\n", kUnexpected},
		{opGet, "VALUE k 0 3\r\nabcd\r\nEND\r\n", kBroken},
		{opGet, "VALUE k 0 3\r\nabc\r\nVALUE\r\n", kBroken},
		{opGet, "VALUE k 0 x\r\n", kBroken},
		{opLock, "OK\n", kBroken},
		{opLock, "", kBroken},
		{opPing, "VERSION 1.6.21\r\n", kDone},
	}
	for _, tt := range tests {
		t.Run(tt.op.String()+" "+strings.TrimSpace(tt.reply), func(t *testing.T) {
			r := bufio.NewReader(strings.NewReader(tt.reply))
			if got := classify(c.readReply(r, tt.op, []byte("k"), 1)); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestTextRequests(t *testing.T) {
	c := newTextCodec([]byte("abc"), 60)
	var b []byte
	for _, o := range []op{opGet, opSet, opAdd, opDelete, opLock, opUnlock, opPing} {
		b = c.appendReq(b, o, []byte("k"), 1)
	}
	want := "get k\r\nset k 0 0 3\r\nabc\r\nadd k 0 60 1\r\nx\r\ndelete k\r\nlock k\r\nunlock k\r\nversion\r\n"
	if string(b) != want {
		t.Errorf("requests\n%q\nwant\n%q", b, want)
	}
}

// binReplyBytes encodes a binary response.
func binReplyBytes(opcode byte, status uint16, opaque uint32, extras, key, value []byte) []byte {
	b := []byte{binResponse, opcode, byte(len(key) >> 8), byte(len(key)), byte(len(extras)), 0}
	b = binary.BigEndian.AppendUint16(b, status)
	b = binary.BigEndian.AppendUint32(b, uint32(len(extras)+len(key)+len(value)))
	b = binary.BigEndian.AppendUint32(b, opaque)
	b = binary.BigEndian.AppendUint64(b, 0)
	return append(append(append(b, extras...), key...), value...)
}

func TestBinaryReplies(t *testing.T) {
	c := newBinaryCodec([]byte("abc"), 60)
	flags := []byte{0, 0, 0, 0}
	tests := []struct {
		name  string
		op    op
		reply []byte
		want  kind
	}{
		{"lock ok", opLock, binReplyBytes(binLock, stOK, 7, nil, nil, nil), kDone},
		{"lock locked", opLock, binReplyBytes(binLock, stLocked, 7, nil, nil, []byte("Locked")), kRefused},
		{"lock not found", opLock, binReplyBytes(binLock, stNotFound, 7, nil, nil, []byte("Not found")), kUnexpected},
		{"unlock ok", opUnlock, binReplyBytes(binUnlock, stOK, 7, nil, nil, nil), kDone},
		{"unlock not locked", opUnlock, binReplyBytes(binUnlock, 0x11, 7, nil, nil, []byte("Not locked")), kUnexpected},
		{"add ok", opAdd, binReplyBytes(binAdd, stOK, 7, nil, nil, nil), kDone},
		{"add exists", opAdd, binReplyBytes(binAdd, stExists, 7, nil, nil, []byte("Exists")), kRefused},
		{"delete ok", opDelete, binReplyBytes(binDelete, stOK, 7, nil, nil, nil), kDone},
		{"get hit", opGet, binReplyBytes(binGet, stOK, 7, flags, nil, []byte("abc")), kDone},
		{"get short value", opGet, binReplyBytes(binGet, stOK, 7, flags, nil, []byte("ab")), kUnexpected},
		{"get miss", opGet, binReplyBytes(binGet, stNotFound, 7, nil, nil, []byte("Not found")), kMiss},
		{"set ok", opSet, binReplyBytes(binSet, stOK, 7, nil, nil, nil), kDone},
		{"wrong opaque", opSet, binReplyBytes(binSet, stOK, 8, nil, nil, nil), kBroken},
		{"wrong opcode", opSet, binReplyBytes(binAdd, stOK, 7, nil, nil, nil), kBroken},
		{"bad magic", opSet, append([]byte{0x80}, binReplyBytes(binSet, stOK, 7, nil, nil, nil)[1:]...), kBroken},
		{"truncated", opSet, binReplyBytes(binSet, stOK, 7, nil, nil, nil)[:10], kBroken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := bufio.NewReader(bytes.NewReader(tt.reply))
			if got := classify(c.readReply(r, tt.op, []byte("k"), 7)); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestBinaryRequests(t *testing.T) {
	c := newBinaryCodec([]byte("abc"), 60)
	b := c.appendReq(nil, opAdd, []byte("key"), 9)
	want := []byte{0x80, binAdd, 0, 3, 8, 0, 0, 0, 0, 0, 0, 12, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0,
		0, 0, 0, 0, 0, 0, 0, 60, 'k', 'e', 'y', 'x'}
	if !bytes.Equal(b, want) {
		t.Errorf("add\n% x\nwant\n% x", b, want)
	}
}

// dlockFrame encodes resp in a frame.
func dlockFrame(t *testing.T, resp *pb.Response) []byte {
	t.Helper()
	b, err := proto.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	return frame.Append(nil, b)
}

func TestDLockReplies(t *testing.T) {
	v3 := &dlockCodec{protoVersion: 3}
	v2 := &dlockCodec{protoVersion: 2}
	tests := []struct {
		name string
		c    *dlockCodec
		op   op
		resp *pb.Response
		want kind
	}{
		{"v3 lock ok", v3, opLock, &pb.Response{Version: 3, RequestId: 5, Keys: []string{"k"}, Tokens: []uint64{77}}, kDone},
		{"v3 lock ok without token", v3, opLock, &pb.Response{Version: 3, RequestId: 5}, kUnexpected},
		{"v3 lock timeout", v3, opLock, &pb.Response{Version: 3, RequestId: 5, Status: pb.ResponseStatus_AcquireTimeout, Keys: []string{"k"}}, kRefused},
		{"v3 lock invalid key", v3, opLock, &pb.Response{Version: 3, RequestId: 5, Status: pb.ResponseStatus_InvalidKey, ErrorText: "bad"}, kUnexpected},
		{"v3 unlock ok", v3, opUnlock, &pb.Response{Version: 3, RequestId: 5}, kDone},
		{"v3 unlock not held", v3, opUnlock, &pb.Response{Version: 3, RequestId: 5, Status: pb.ResponseStatus_NotHeld}, kUnexpected},
		{"v3 unlock timeout", v3, opUnlock, &pb.Response{Version: 3, RequestId: 5, Status: pb.ResponseStatus_AcquireTimeout}, kUnexpected},
		{"v3 wrong id", v3, opUnlock, &pb.Response{Version: 3, RequestId: 6}, kBroken},
		{"v3 answered as v2", v3, opUnlock, &pb.Response{Version: 2, RequestId: 5}, kUnexpected},
		{"v2 lock ok", v2, opLock, &pb.Response{Version: 2}, kDone},
		{"v2 general", v2, opLock, &pb.Response{Version: 2, Status: pb.ResponseStatus_General, ErrorText: "x"}, kUnexpected},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := bufio.NewReader(bytes.NewReader(dlockFrame(t, tt.resp)))
			if got := classify(tt.c.readReply(r, tt.op, []byte("k"), 5)); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
	t.Run("garbage", func(t *testing.T) {
		r := bufio.NewReader(bytes.NewReader(frame.Append(nil, []byte{0xff, 0xff})))
		if got := classify(v3.readReply(r, opLock, nil, 5)); got != kBroken {
			t.Errorf("got %s, want broken", got)
		}
	})
}

// TestDLockRequests decodes the hand-encoded requests with the generated
// code.
func TestDLockRequests(t *testing.T) {
	tests := []struct {
		name string
		c    *dlockCodec
		op   op
		want *pb.Request
	}{
		{"v3 lock", &dlockCodec{protoVersion: 3, waitMicro: 1000}, opLock,
			&pb.Request{Version: 3, Id: 9, Type: pb.RequestType_Lock, Lock: &pb.RequestLock{WaitMicro: 1000, Keys: []string{"key"}}}},
		{"v3 try lock", &dlockCodec{protoVersion: 3, tryOnce: true}, opLock,
			&pb.Request{Version: 3, Id: 9, Type: pb.RequestType_Lock, Lock: &pb.RequestLock{Keys: []string{"key"}, TryOnce: true}}},
		{"v3 unlock", &dlockCodec{protoVersion: 3, waitMicro: 1000}, opUnlock,
			&pb.Request{Version: 3, Id: 9, Type: pb.RequestType_Unlock, Lock: &pb.RequestLock{Keys: []string{"key"}}}},
		{"v2 lock", &dlockCodec{protoVersion: 2}, opLock,
			&pb.Request{Version: 2, Type: pb.RequestType_Lock, Lock: &pb.RequestLock{Keys: []string{"key"}}}},
		{"v3 ping", &dlockCodec{protoVersion: 3}, opPing,
			&pb.Request{Version: 3, Id: 9, Type: pb.RequestType_Ping}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.c.appendReq([]byte("prefix"), tt.op, []byte("key"), 9)
			fr := frame.NewReader(bytes.NewReader(b[len("prefix"):]), 0)
			payload, err := fr.Read()
			if err != nil {
				t.Fatal(err)
			}
			got := new(pb.Request)
			if err := proto.Unmarshal(payload, got); err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// loopReader serves one byte string over and over.
type loopReader struct {
	data []byte
	off  int
}

func (l *loopReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		k := copy(p[n:], l.data[l.off:])
		n += k
		l.off = (l.off + k) % len(l.data)
	}
	return n, nil
}

// TestNoAllocations checks that a request and its reply cost no
// allocation, for every codec.
func TestNoAllocations(t *testing.T) {
	value := bytes.Repeat([]byte("v"), 100)
	key := []byte("b1:g:42")
	getReply := append(append([]byte("VALUE b1:g:42 0 100\r\n"), value...), "\r\nEND\r\n"...)
	tests := []struct {
		name  string
		c     codec
		op    op
		reply []byte
	}{
		{"text get", newTextCodec(value, 60), opGet, getReply},
		{"text lock", newTextCodec(value, 60), opLock, []byte("OK\r\n")},
		{"binary get", newBinaryCodec(value, 60), opGet, binReplyBytes(binGet, stOK, 1, []byte{0, 0, 0, 0}, nil, value)},
		{"binary set", newBinaryCodec(value, 60), opSet, binReplyBytes(binSet, stOK, 1, nil, nil, nil)},
		{"dlock lock", &dlockCodec{protoVersion: 3, waitMicro: 1e7}, opLock, dlockFrame(t, &pb.Response{Version: 3, RequestId: 1, Keys: []string{"k"}, Tokens: []uint64{1 << 40}, ServerUnixTime: 1 << 60})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := bufio.NewReaderSize(&loopReader{data: tt.reply}, readBufSize)
			buf := make([]byte, 0, 4096)
			allocs := testing.AllocsPerRun(1000, func() {
				buf = tt.c.appendReq(buf[:0], tt.op, key, 1)
				if _, err := tt.c.readReply(r, tt.op, key, 1); err != nil {
					t.Fatal(err)
				}
			})
			if allocs != 0 {
				t.Errorf("%v allocations per request", allocs)
			}
		})
	}
}
