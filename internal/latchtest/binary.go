package latchtest

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

// Binary protocol constants.
const (
	magicRequest  = 0x80
	magicResponse = 0x81
	headerLen     = 24

	opNoop = 0x0a
	opStat = 0x10
	opKeys = 0x50
	opVer  = 0x0b

	// sentinelOpaque marks the Noop the runner sends after a binary step.
	sentinelOpaque = 0x5e971e1c
)

// opNames names the binary opcodes yrmcds implements (yrmcds.md 4.3, 4.4).
var opNames = map[byte]string{
	0x00: "Get", 0x01: "Set", 0x02: "Add", 0x03: "Replace", 0x04: "Delete",
	0x05: "Increment", 0x06: "Decrement", 0x07: "Quit", 0x08: "Flush",
	0x09: "GetQ", 0x0a: "Noop", 0x0b: "Version", 0x0c: "GetK", 0x0d: "GetKQ",
	0x0e: "Append", 0x0f: "Prepend", 0x10: "Stat", 0x11: "SetQ", 0x12: "AddQ",
	0x13: "ReplaceQ", 0x14: "DeleteQ", 0x15: "IncrementQ", 0x16: "DecrementQ",
	0x17: "QuitQ", 0x18: "FlushQ", 0x19: "AppendQ", 0x1a: "PrependQ",
	0x1c: "Touch", 0x1d: "GaT", 0x1e: "GaTQ", 0x23: "GaTK", 0x24: "GaTKQ",
	0x40: "Lock", 0x41: "LockQ", 0x42: "Unlock", 0x43: "UnlockQ",
	0x44: "UnlockAll", 0x45: "UnlockAllQ", 0x46: "LaG", 0x47: "LaGQ",
	0x48: "LaGK", 0x49: "LaGKQ", 0x4a: "RaU", 0x4b: "RaUQ", 0x50: "Keys",
}

// opCodes is opNames inverted.
var opCodes = func() map[string]byte {
	m := make(map[string]byte, len(opNames))
	for op, name := range opNames {
		m[name] = op
	}
	return m
}()

// statusNames names the binary statuses (yrmcds.md 4.2).
var statusNames = map[uint16]string{
	0x0000: "OK", 0x0001: "NotFound", 0x0002: "Exists", 0x0003: "TooLarge",
	0x0004: "Invalid", 0x0005: "NotStored", 0x0006: "NonNumeric",
	0x0010: "Locked", 0x0011: "NotLocked", 0x0081: "UnknownCommand",
	0x0082: "OutOfMemory",
}

// binSpec is a binary request as a step describes it.
type binSpec struct {
	op         byte
	key, value []segment
	nums       map[string]uint64 // the numeric fields given
	casRef     bool              // cas={cas}
	extras     []byte
	extrasSet  bool
}

// numFields are the numeric fields of a binary step, with their bit sizes.
var numFields = map[string]int{
	"flags": 32, "exp": 32, "cas": 64, "opaque": 32, "delta": 64,
	"initial": 64, "dtype": 8, "vbucket": 16, "magic": 8, "keylen": 16,
	"extlen": 8, "bodylen": 32,
}

// parseBinSpec parses "<Opcode> name=value ...".
func parseBinSpec(s string) (*binSpec, error) {
	f := splitFields(s)
	if len(f) == 0 {
		return nil, fmt.Errorf("want an opcode")
	}
	b := &binSpec{nums: map[string]uint64{}}
	if v, ok := strings.CutPrefix(f[0], "op="); ok {
		n, err := strconv.ParseUint(v, 0, 8)
		if err != nil {
			return nil, fmt.Errorf("bad opcode %q", v)
		}
		b.op = byte(n)
	} else if op, ok := opCodes[f[0]]; ok {
		b.op = op
	} else {
		return nil, fmt.Errorf("unknown opcode %q", f[0])
	}
	seen := map[string]bool{}
	for _, field := range f[1:] {
		name, val, ok := strings.Cut(field, "=")
		if !ok {
			return nil, fmt.Errorf("field %q: want name=value", field)
		}
		if seen[name] {
			return nil, fmt.Errorf("field %q given twice", name)
		}
		seen[name] = true
		var err error
		switch name {
		case "key":
			b.key, err = parseText(val)
		case "value":
			b.value, err = parseText(val)
		case "extras":
			b.extrasSet = true
			b.extras, err = hex.DecodeString(val)
		default:
			bits, ok := numFields[name]
			if !ok {
				return nil, fmt.Errorf("unknown field %q", name)
			}
			if name == "cas" && val == "{cas}" {
				b.casRef = true
				continue
			}
			var n uint64
			n, err = strconv.ParseUint(val, 0, bits)
			b.nums[name] = n
		}
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", name, err)
		}
	}
	return b, nil
}

// splitFields splits s at spaces outside braces, so that a field may hold
// a {rep N X} macro.
func splitFields(s string) []string {
	var (
		out   []string
		depth int
		start = -1
	)
	for i := 0; i <= len(s); i++ {
		switch {
		case i == len(s) || s[i] == ' ' && depth == 0:
			if start >= 0 {
				out = append(out, s[start:i])
				start = -1
			}
			continue
		case s[i] == '{':
			depth++
		case s[i] == '}' && depth > 0:
			depth--
		}
		if start < 0 {
			start = i
		}
	}
	return out
}

// build returns the request's bytes; lastCAS replaces {cas}.
func (b *binSpec) build(lastCAS uint64) []byte {
	key, value := literal(b.key, lastCAS), literal(b.value, lastCAS)
	extras := b.extras
	if !b.extrasSet {
		extras = b.defaultExtras()
	}
	h := make([]byte, headerLen, headerLen+len(extras)+len(key)+len(value))
	num := func(name string, def uint64) uint64 {
		if v, ok := b.nums[name]; ok {
			return v
		}
		return def
	}
	h[0] = byte(num("magic", magicRequest))
	h[1] = b.op
	binary.BigEndian.PutUint16(h[2:], uint16(num("keylen", uint64(len(key)))))
	h[4] = byte(num("extlen", uint64(len(extras))))
	h[5] = byte(num("dtype", 0))
	binary.BigEndian.PutUint16(h[6:], uint16(num("vbucket", 0)))
	binary.BigEndian.PutUint32(h[8:], uint32(num("bodylen", uint64(len(extras)+len(key)+len(value)))))
	binary.BigEndian.PutUint32(h[12:], uint32(num("opaque", 0)))
	cas := num("cas", 0)
	if b.casRef {
		cas = lastCAS
	}
	binary.BigEndian.PutUint64(h[16:], cas)
	h = append(h, extras...)
	h = append(h, key...)
	return append(h, value...)
}

// defaultExtras returns the extras an opcode takes when the step does not
// give them.
func (b *binSpec) defaultExtras() []byte {
	exp := uint32(b.nums["exp"])
	switch opNames[b.op] {
	case "Set", "Add", "Replace", "SetQ", "AddQ", "ReplaceQ", "RaU", "RaUQ":
		e := binary.BigEndian.AppendUint32(nil, uint32(b.nums["flags"]))
		return binary.BigEndian.AppendUint32(e, exp)
	case "Increment", "Decrement", "IncrementQ", "DecrementQ":
		e := binary.BigEndian.AppendUint64(nil, b.nums["delta"])
		e = binary.BigEndian.AppendUint64(e, b.nums["initial"])
		return binary.BigEndian.AppendUint32(e, exp)
	case "Touch", "GaT", "GaTQ", "GaTK", "GaTKQ":
		return binary.BigEndian.AppendUint32(nil, exp)
	}
	if _, ok := b.nums["exp"]; ok {
		return binary.BigEndian.AppendUint32(nil, exp)
	}
	return nil
}

// noop returns the sentinel Noop request.
func noop() []byte {
	h := make([]byte, headerLen)
	h[0], h[1] = magicRequest, opNoop
	binary.BigEndian.PutUint32(h[12:], sentinelOpaque)
	return h
}

// packet is a decoded binary reply.
type packet struct {
	header [headerLen]byte
	body   []byte
}

func (p *packet) op() byte         { return p.header[1] }
func (p *packet) keyLen() int      { return int(binary.BigEndian.Uint16(p.header[2:])) }
func (p *packet) extLen() int      { return int(p.header[4]) }
func (p *packet) status() uint16   { return binary.BigEndian.Uint16(p.header[6:]) }
func (p *packet) bodyLen() int     { return int(binary.BigEndian.Uint32(p.header[8:])) }
func (p *packet) opaque() uint32   { return binary.BigEndian.Uint32(p.header[12:]) }
func (p *packet) cas() uint64      { return binary.BigEndian.Uint64(p.header[16:]) }
func (p *packet) consistent() bool { return p.extLen()+p.keyLen() <= len(p.body) }

// parts splits the body into extras, key and value; consistent must hold.
func (p *packet) parts() (extras, key, value []byte) {
	e, k := p.extLen(), p.keyLen()
	return p.body[:e], p.body[e : e+k], p.body[e+k:]
}
