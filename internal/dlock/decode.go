package dlock

import (
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/latchd/latch/dlockpb"
)

// Field numbers of proto/dlock.proto, for decodeFast.
const (
	fieldVersion     = 1
	fieldID          = 2
	fieldAccessToken = 3
	fieldType        = 4
	fieldCancelID    = 5
	fieldLock        = 51
	fieldSession     = 53

	fieldWaitMicro    = 1
	fieldReleaseMicro = 2
	fieldKeys         = 3
	fieldMode         = 4
	fieldLimit        = 5
	fieldTryOnce      = 6

	fieldTTLMicro = 1
)

// decodedRequest holds a decoded Request with its lock argument and room
// for one key, so that the common request is one allocation (and one more
// per key).
type decodedRequest struct {
	req  pb.Request
	lock pb.RequestLock
	keys [1]string
}

// decodeRequest decodes a Request from body as proto.Unmarshal does: the
// same fields, and the same error for the same input (unwrapped: its text
// is part of the answer). body is not retained.
func decodeRequest(body []byte) (*pb.Request, error) {
	return new(decodedRequest).decode(body)
}

// decode decodes a Request from body as decodeRequest does, into d when it
// can: what it returns is valid until d's next decode, unless it is not
// d.req (a Request that proto.Unmarshal decoded). A connection's reader
// decodes into its own d, so that a request handled at once costs no
// allocation but its key strings.
func (d *decodedRequest) decode(body []byte) (*pb.Request, error) {
	*d = decodedRequest{}
	if decodeFast(d, body) {
		return &d.req, nil
	}
	req := new(pb.Request)
	if err := proto.Unmarshal(body, req); err != nil {
		return nil, err
	}
	return req, nil
}

// decodeFast decodes the well-formed Requests that only hold fields of
// proto/dlock.proto with their declared wire types, each message field at
// most once, and valid UTF-8 strings. It returns false for anything else
// (unknown fields, wrong wire types, a repeated message field, a decoding
// error), which decodeRequest leaves to proto.Unmarshal. What it decodes
// into d.req, which must be empty, equals what proto.Unmarshal decodes.
func decodeFast(d *decodedRequest, b []byte) bool {
	req := &d.req
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		switch {
		case typ == protowire.VarintType && num <= fieldCancelID:
			var v uint64
			if v, n = protowire.ConsumeVarint(b); n < 0 {
				return false
			}
			if !setRequestVarint(req, num, v) {
				return false
			}
		case typ == protowire.BytesType && num == fieldAccessToken:
			var s string
			if s, n = consumeString(b); n < 0 {
				return false
			}
			req.AccessToken = s
		case typ == protowire.BytesType && num == fieldLock && req.Lock == nil:
			var v []byte
			if v, n = protowire.ConsumeBytes(b); n < 0 || !decodeLock(d, v) {
				return false
			}
			req.Lock = &d.lock
		case typ == protowire.BytesType && num == fieldSession && req.Session == nil:
			var v []byte
			var ok bool
			if v, n = protowire.ConsumeBytes(b); n < 0 {
				return false
			}
			if req.Session, ok = decodeSession(v); !ok {
				return false
			}
		default:
			return false
		}
		b = b[n:]
	}
	return true
}

// setRequestVarint sets the varint field num of req to v, converted as
// proto.Unmarshal converts it. It returns false for a field that is not a
// varint of Request.
func setRequestVarint(req *pb.Request, num protowire.Number, v uint64) bool {
	switch num {
	case fieldVersion:
		req.Version = uint32(v)
	case fieldID:
		req.Id = v
	case fieldType:
		req.Type = pb.RequestType(int32(v))
	case fieldCancelID:
		req.CancelId = v
	default:
		return false
	}
	return true
}

// decodeLock decodes b into d.lock, its first key into d.keys. It returns
// false where decodeFast does.
func decodeLock(d *decodedRequest, b []byte) bool {
	l := &d.lock
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		switch {
		case typ == protowire.BytesType && num == fieldKeys:
			var s string
			if s, n = consumeString(b); n < 0 {
				return false
			}
			if l.Keys == nil {
				l.Keys = d.keys[:0]
			}
			l.Keys = append(l.Keys, s)
		case typ == protowire.VarintType:
			var v uint64
			if v, n = protowire.ConsumeVarint(b); n < 0 || !setLockVarint(l, num, v) {
				return false
			}
		default:
			return false
		}
		b = b[n:]
	}
	return true
}

// setLockVarint sets the varint field num of l to v, converted as
// proto.Unmarshal converts it. It returns false for a field that is not a
// varint of RequestLock.
func setLockVarint(l *pb.RequestLock, num protowire.Number, v uint64) bool {
	switch num {
	case fieldWaitMicro:
		l.WaitMicro = v
	case fieldReleaseMicro:
		l.ReleaseMicro = v
	case fieldMode:
		l.Mode = pb.LockMode(int32(v))
	case fieldLimit:
		l.Limit = uint32(v)
	case fieldTryOnce:
		l.TryOnce = protowire.DecodeBool(v)
	default:
		return false
	}
	return true
}

// decodeSession decodes a RequestSession. It returns false where
// decodeFast does.
func decodeSession(b []byte) (*pb.RequestSession, bool) {
	s := new(pb.RequestSession)
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || num != fieldTTLMicro || typ != protowire.VarintType {
			return nil, false
		}
		b = b[n:]
		if s.TtlMicro, n = protowire.ConsumeVarint(b); n < 0 {
			return nil, false
		}
		b = b[n:]
	}
	return s, true
}

// consumeString parses a length-prefixed string that must be valid UTF-8,
// as proto3 strings are. It returns n < 0 when it is not.
func consumeString(b []byte) (string, int) {
	v, n := protowire.ConsumeBytes(b)
	if n < 0 || !utf8.Valid(v) {
		return "", -1
	}
	return string(v), n
}
