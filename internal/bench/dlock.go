package bench

import (
	"bufio"
	"encoding/binary"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/latchd/latch/dlockpb"
	"github.com/latchd/latch/internal/frame"
)

// Field numbers of the dlock messages, read from the generated descriptors
// so that proto/dlock.proto stays their single source. The hot path
// encodes and decodes with protowire: no message is allocated per request.
var (
	fReqVersion  = fieldNum(pb.File_dlock_proto.Messages().ByName("Request"), "version")
	fReqID       = fieldNum(pb.File_dlock_proto.Messages().ByName("Request"), "id")
	fReqType     = fieldNum(pb.File_dlock_proto.Messages().ByName("Request"), "type")
	fReqLock     = fieldNum(pb.File_dlock_proto.Messages().ByName("Request"), "lock")
	fLockWait    = fieldNum(pb.File_dlock_proto.Messages().ByName("RequestLock"), "wait_micro")
	fLockKeys    = fieldNum(pb.File_dlock_proto.Messages().ByName("RequestLock"), "keys")
	fLockTryOnce = fieldNum(pb.File_dlock_proto.Messages().ByName("RequestLock"), "try_once")
	fRespVersion = fieldNum(pb.File_dlock_proto.Messages().ByName("Response"), "version")
	fRespID      = fieldNum(pb.File_dlock_proto.Messages().ByName("Response"), "request_id")
	fRespStatus  = fieldNum(pb.File_dlock_proto.Messages().ByName("Response"), "status")
	fRespText    = fieldNum(pb.File_dlock_proto.Messages().ByName("Response"), "error_text")
	fRespTokens  = fieldNum(pb.File_dlock_proto.Messages().ByName("Response"), "tokens")
)

func fieldNum(md protoreflect.MessageDescriptor, name protoreflect.Name) protowire.Number {
	fd := md.Fields().ByName(name)
	if fd == nil {
		panic("bench: dlock.proto has no field " + string(md.Name()) + "." + string(name))
	}
	return fd.Number()
}

// dlockCodec speaks dlock, version 2 or 3. Version 3 replies are matched
// by request_id; version 2 replies come in request order.
type dlockCodec struct {
	protoVersion uint32
	waitMicro    uint64 // of Lock; 0 waits forever
	tryOnce      bool   // version 3 Lock: fail at once when busy
}

// maxResponse bounds a dlock reply the codec accepts.
const maxResponse = readBufSize - frame.HeaderSize

func (c *dlockCodec) appendReq(b []byte, o op, key []byte, seq uint32) []byte {
	b, off := frame.Start(b)
	b = protowire.AppendTag(b, fReqVersion, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(c.protoVersion))
	if c.protoVersion >= 3 {
		b = protowire.AppendTag(b, fReqID, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(seq))
	}
	typ := pb.RequestType_Ping
	switch o {
	case opLock:
		typ = pb.RequestType_Lock
	case opUnlock:
		typ = pb.RequestType_Unlock
	}
	b = protowire.AppendTag(b, fReqType, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(typ))
	if typ != pb.RequestType_Ping {
		lock := o == opLock
		n := protowire.SizeTag(fLockKeys) + protowire.SizeBytes(len(key))
		if lock && c.waitMicro != 0 {
			n += protowire.SizeTag(fLockWait) + protowire.SizeVarint(c.waitMicro)
		}
		try := lock && c.tryOnce && c.protoVersion >= 3
		if try {
			n += protowire.SizeTag(fLockTryOnce) + 1
		}
		b = protowire.AppendTag(b, fReqLock, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(n))
		if lock && c.waitMicro != 0 {
			b = protowire.AppendTag(b, fLockWait, protowire.VarintType)
			b = protowire.AppendVarint(b, c.waitMicro)
		}
		b = protowire.AppendTag(b, fLockKeys, protowire.BytesType)
		b = protowire.AppendBytes(b, key)
		if try {
			b = protowire.AppendTag(b, fLockTryOnce, protowire.VarintType)
			b = protowire.AppendVarint(b, 1)
		}
	}
	_ = frame.Finish(b, off) // a request is always short
	return b
}

// dlockReply is the part of a Response the codec checks.
type dlockReply struct {
	version, status uint64
	id              uint64
	tokens          int
	text            []byte
}

func readDLockReply(r *bufio.Reader) (dlockReply, error) {
	p, err := r.Peek(frame.HeaderSize)
	if err != nil {
		return dlockReply{}, err
	}
	n := int(binary.BigEndian.Uint32(p))
	if n > maxResponse {
		return dlockReply{}, broken("dlock: a %d-byte reply", n)
	}
	p, err = r.Peek(frame.HeaderSize + n)
	if err != nil {
		return dlockReply{}, err
	}
	defer r.Discard(frame.HeaderSize + n)
	b := p[frame.HeaderSize:]
	var d dlockReply
	for len(b) > 0 {
		num, typ, k := protowire.ConsumeTag(b)
		if k < 0 {
			return dlockReply{}, broken("dlock: bad reply: %v", protowire.ParseError(k))
		}
		b = b[k:]
		switch {
		case typ == protowire.VarintType && (num == fRespVersion || num == fRespID || num == fRespStatus || num == fRespTokens):
			v, k := protowire.ConsumeVarint(b)
			if k < 0 {
				return dlockReply{}, broken("dlock: bad reply: %v", protowire.ParseError(k))
			}
			switch num {
			case fRespVersion:
				d.version = v
			case fRespID:
				d.id = v
			case fRespStatus:
				d.status = v
			case fRespTokens:
				d.tokens++
			}
			b = b[k:]
		case typ == protowire.BytesType && (num == fRespText || num == fRespTokens):
			v, k := protowire.ConsumeBytes(b)
			if k < 0 {
				return dlockReply{}, broken("dlock: bad reply: %v", protowire.ParseError(k))
			}
			if num == fRespText {
				d.text = v
			} else {
				for len(v) > 0 { // packed tokens
					_, m := protowire.ConsumeVarint(v)
					if m < 0 {
						return dlockReply{}, broken("dlock: bad tokens: %v", protowire.ParseError(m))
					}
					v = v[m:]
					d.tokens++
				}
			}
			b = b[k:]
		default:
			k := protowire.ConsumeFieldValue(num, typ, b)
			if k < 0 {
				return dlockReply{}, broken("dlock: bad reply: %v", protowire.ParseError(k))
			}
			b = b[k:]
		}
	}
	return d, nil
}

func (c *dlockCodec) readReply(r *bufio.Reader, o op, _ []byte, seq uint32) (outcome, error) {
	d, err := readDLockReply(r)
	if err != nil {
		return 0, err
	}
	if c.protoVersion >= 3 && d.id != uint64(seq) {
		return 0, broken("dlock: reply to request %d, want %d", d.id, seq)
	}
	if want := max(c.protoVersion, 2); d.version != uint64(want) {
		return 0, &unexpectedError{op: o, got: "version " + strconv.FormatUint(d.version, 10)}
	}
	switch {
	case d.status == uint64(pb.ResponseStatus_Ok):
		if o == opLock && c.protoVersion >= 3 && d.tokens == 0 {
			return 0, &unexpectedError{op: o, got: "Ok without a fencing token"}
		}
		return done, nil
	case o == opLock && d.status == uint64(pb.ResponseStatus_AcquireTimeout):
		return refused, nil
	}
	return 0, &unexpectedError{op: o, got: "status " + pb.ResponseStatus(d.status).String() + " " + strconv.Quote(string(d.text))}
}

func (c *dlockCodec) version(r *bufio.Reader, seq uint32) (string, error) {
	_, err := c.readReply(r, opPing, nil, seq)
	return "", err
}
