package bench

import (
	"bufio"
	"encoding/binary"
	"strconv"
)

// Binary protocol: magic bytes, opcodes (memcached's, and yrmcds's Lock
// and Unlock) and statuses.
const (
	binRequest  = 0x80
	binResponse = 0x81
	binHeader   = 24

	binGet     = 0x00
	binSet     = 0x01
	binAdd     = 0x02
	binDelete  = 0x04
	binVersion = 0x0b
	binLock    = 0x40
	binUnlock  = 0x42

	stOK       = 0x0000
	stNotFound = 0x0001
	stExists   = 0x0002
	stLocked   = 0x0010
)

var binOpcodes = [...]byte{
	opGet: binGet, opSet: binSet, opAdd: binAdd, opDelete: binDelete,
	opLock: binLock, opUnlock: binUnlock, opPing: binVersion,
}

// binaryCodec speaks the memcached binary protocol, with yrmcds's Lock and
// Unlock opcodes. Replies are matched to requests by opcode and opaque.
type binaryCodec struct {
	value     []byte
	exptime   uint32 // of the add recipe
	valueSize int
}

func newBinaryCodec(value []byte, exptime int) *binaryCodec {
	return &binaryCodec{value: value, exptime: uint32(exptime), valueSize: len(value)}
}

func (c *binaryCodec) appendReq(b []byte, o op, key []byte, seq uint32) []byte {
	var ext, val int
	switch o {
	case opSet:
		ext, val = 8, len(c.value)
	case opAdd:
		ext, val = 8, 1
	case opPing:
		key = nil
	}
	b = append(b, binRequest, binOpcodes[o], byte(len(key)>>8), byte(len(key)), byte(ext), 0, 0, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(ext+len(key)+val))
	b = binary.BigEndian.AppendUint32(b, seq)
	b = binary.BigEndian.AppendUint64(b, 0)
	switch o {
	case opSet:
		b = binary.BigEndian.AppendUint64(b, 0) // flags 0, exptime 0
	case opAdd:
		b = binary.BigEndian.AppendUint32(b, 0)
		b = binary.BigEndian.AppendUint32(b, c.exptime)
	}
	b = append(b, key...)
	switch o {
	case opSet:
		b = append(b, c.value...)
	case opAdd:
		b = append(b, 'x')
	}
	return b
}

// binReply is a response header and its body, valid until the next read.
type binReply struct {
	opcode        byte
	keyLen        int
	extLen        int
	status        uint16
	opaque        uint32
	body          []byte
	bodyTruncated bool // the body did not fit the buffer: body is empty
}

func readBinReply(r *bufio.Reader) (binReply, error) {
	p, err := r.Peek(binHeader)
	if err != nil {
		return binReply{}, err
	}
	if p[0] != binResponse {
		return binReply{}, broken("binary: magic 0x%02x, want 0x81", p[0])
	}
	h := binReply{
		opcode: p[1],
		keyLen: int(binary.BigEndian.Uint16(p[2:])),
		extLen: int(p[4]),
		status: binary.BigEndian.Uint16(p[6:]),
		opaque: binary.BigEndian.Uint32(p[12:]),
	}
	n := int(binary.BigEndian.Uint32(p[8:]))
	r.Discard(binHeader)
	if n < h.keyLen+h.extLen {
		return binReply{}, broken("binary: body of %d bytes shorter than key and extras", n)
	}
	if binHeader+n > r.Size() {
		if _, err := r.Discard(n); err != nil {
			return binReply{}, err
		}
		h.bodyTruncated = true
		return h, nil
	}
	// Peek, then Discard: the body stays valid until the next read.
	body, err := r.Peek(n)
	if err != nil {
		return binReply{}, err
	}
	r.Discard(n)
	h.body = body
	return h, nil
}

func (c *binaryCodec) readReply(r *bufio.Reader, o op, _ []byte, seq uint32) (outcome, error) {
	h, err := readBinReply(r)
	if err != nil {
		return 0, err
	}
	if h.opcode != binOpcodes[o] || h.opaque != seq {
		return 0, broken("binary: reply opcode 0x%02x opaque %d to %s opaque %d", h.opcode, h.opaque, o, seq)
	}
	switch {
	case h.status == stOK:
		if o == opGet {
			if n := len(h.body) - h.extLen - h.keyLen; h.extLen != 4 || n != c.valueSize || h.bodyTruncated {
				return 0, &unexpectedError{op: o, got: "value of " + strconv.Itoa(n) + " bytes with " + strconv.Itoa(h.extLen) + " bytes of extras"}
			}
		}
		return done, nil
	case o == opGet && h.status == stNotFound:
		return miss, nil
	case o == opLock && h.status == stLocked, o == opAdd && h.status == stExists:
		return refused, nil
	}
	msg := h.body[min(h.extLen+h.keyLen, len(h.body)):]
	return 0, &unexpectedError{op: o, got: "status 0x" + strconv.FormatUint(uint64(h.status), 16) + " " + strconv.Quote(string(msg))}
}

func (c *binaryCodec) version(r *bufio.Reader, seq uint32) (string, error) {
	h, err := readBinReply(r)
	if err != nil {
		return "", err
	}
	if h.opcode != binVersion || h.opaque != seq || h.status != stOK {
		return "", broken("binary: version: opcode 0x%02x opaque %d status 0x%04x", h.opcode, h.opaque, h.status)
	}
	return string(h.body[h.extLen+h.keyLen:]), nil
}
