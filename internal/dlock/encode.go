package dlock

import (
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/latchd/latch/dlockpb"
)

// appendResponse appends the encoding of resp to b: the bytes proto.Marshal
// produces, written field by field in field-number order with protowire, as
// every answer needs. A Response with a string that is not valid UTF-8
// (which proto.Marshal refuses) or with unknown fields goes to proto.Marshal.
func appendResponse(b []byte, resp *pb.Response) ([]byte, error) {
	if !fastEncodable(resp) {
		return proto.MarshalOptions{}.MarshalAppend(b, resp)
	}
	b = appendVarintField(b, 1, uint64(resp.Version))
	b = appendVarintField(b, 2, resp.RequestId)
	b = appendVarintField(b, 3, uint64(int64(resp.Status))) // an enum is an int32
	if resp.ErrorText != "" {
		b = protowire.AppendTag(b, 4, protowire.BytesType)
		b = protowire.AppendString(b, resp.ErrorText)
	}
	for _, k := range resp.Keys {
		b = protowire.AppendTag(b, 5, protowire.BytesType)
		b = protowire.AppendString(b, k)
	}
	b = appendVarintField(b, 6, uint64(resp.ServerUnixTime))
	if len(resp.Tokens) > 0 {
		n := 0
		for _, t := range resp.Tokens {
			n += protowire.SizeVarint(t)
		}
		b = protowire.AppendTag(b, 7, protowire.BytesType) // packed
		b = protowire.AppendVarint(b, uint64(n))
		for _, t := range resp.Tokens {
			b = protowire.AppendVarint(b, t)
		}
	}
	b = appendVarintField(b, 8, uint64(resp.LeaseExpires))
	b = appendVarintField(b, 9, resp.SessionId)
	return b, nil
}

// appendVarintField appends a varint field, unless v is 0 (proto3 leaves
// zero scalars out).
func appendVarintField(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

// fastEncodable reports whether appendResponse may encode resp itself.
func fastEncodable(resp *pb.Response) bool {
	if len(resp.ProtoReflect().GetUnknown()) > 0 || !utf8.ValidString(resp.ErrorText) {
		return false
	}
	for _, k := range resp.Keys {
		if !utf8.ValidString(k) {
			return false
		}
	}
	return true
}
