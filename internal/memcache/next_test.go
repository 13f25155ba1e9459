package memcache

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
)

// Limits of the tests here and of their servers (diffServer): items of up
// to diffMaxItem bytes, so that short inputs have oversized values too, and
// lines of up to diffMaxLine (a line is too long only beyond a read buffer
// too: bufSize).
const (
	diffMaxItem = 64
	diffMaxLine = 6 << 10
)

func diffLimits() limits { return limits{maxLine: diffMaxLine, maxItem: diffMaxItem} }

// TestNextRequest: where nextRequest ends a request, per protocol and
// limit.
func TestNextRequest(t *testing.T) {
	lim := diffLimits()
	long := strings.Repeat("x", diffMaxLine) // a line this long plus its LF is too long
	hdr := func(op byte, keyLen, extLen, bodLen int) []byte {
		h := make([]byte, headerLen)
		h[0], h[1] = magicRequest, op
		binary.BigEndian.PutUint16(h[2:], uint16(keyLen))
		h[4] = byte(extLen)
		binary.BigEndian.PutUint32(h[8:], uint32(bodLen))
		return h
	}
	cat := func(b ...[]byte) string { return string(bytes.Join(b, nil)) }
	tests := []struct {
		name    string
		in      string
		started bool
		n       int
		st      reqState
	}{
		{"empty", "", true, 0, reqIncomplete},
		{"line without LF", "get a", true, 0, reqIncomplete},
		{"line", "get a\r\nget b", true, 7, reqWhole},
		{"bare LF", "get a\nx", true, 6, reqWhole},
		{"blank line", "\r\n", true, 2, reqWhole},
		{"NUL first", "\x00\x00\x00\x05", false, 0, reqWhole},
		{"NUL later", "\x00get\r\n", true, 6, reqWhole},
		{"set, block whole", "set k 0 0 3\r\nabc\r\nget k\r\n", true, 18, reqWhole},
		{"set, block not CRLF-ended", "set k 0 0 3\r\nabcdef", true, 18, reqWhole},
		{"set, block incomplete", "set k 0 0 3\r\nab", true, 0, reqIncomplete},
		{"set, block's CRLF incomplete", "set k 0 0 3\r\nabc\r", true, 0, reqIncomplete},
		{"set noreply", "set k 0 0 1 noreply\r\n", true, 0, reqIncomplete},
		{"set, bad noreply", "set k 0 0 1 norepl\r\n", true, 20, reqWhole},
		{"set, too few tokens", "set k 0 0\r\n", true, 11, reqWhole},
		{"set, too many tokens", "set k 0 0 1 noreply x\r\n", true, 23, reqWhole},
		{"set, bad flags", "set k 4294967296 0 1\r\n", true, 22, reqWhole},
		{"set, negative exptime", "set k 0 -1 1\r\n", true, 14, reqWhole},
		{"set, signed size", "set k 0 0 +1\r\nx\r\n", true, 17, reqWhole},
		{"set, bare LF", "set k 0 0 1\nx\r\n", true, 12, reqWhole},
		{"SET is no command", "SET k 0 0 1\r\n", true, 13, reqWhole},
		{"tab is no separator", "set\tk 0 0 1\r\n", true, 13, reqWhole},
		{"spaces around tokens", "  add  k 0 0 1  \r\n", true, 0, reqIncomplete},
		{"cas", "cas k 0 0 1 7\r\nx\r\n", true, 18, reqWhole},
		{"cas without its unique", "cas k 0 0 1\r\nx\r\n", true, 13, reqWhole},
		{"append", "append k 0 0 2\r\nx", true, 0, reqIncomplete},
		{"size over the item limit, incomplete", "set k 0 0 65\r\nx", true, 0, reqOversized},
		{"size over the item limit, whole", "set k 0 0 65\r\n" + strings.Repeat("x", 65) + "\r\n", true, 81, reqWhole},
		{"size over the request limit", "set k 0 0 40000000\r\n", true, 20, reqWhole},
		{"line at the limit", long[:diffMaxLine-1] + "\n", true, diffMaxLine, reqWhole},
		{"line over the limit", long + "\nget", true, diffMaxLine + 1, reqWhole},
		{"incomplete line at the limit", long, true, 0, reqIncomplete},
		{"incomplete line over the limit", long + "x", true, 0, reqOversized},
		{"binary, short header", cat(hdr(opGet, 1, 0, 1))[:23], true, 0, reqIncomplete},
		{"binary, no body", cat(hdr(opNoop, 0, 0, 0), hdr(opNoop, 0, 0, 0)), true, 24, reqWhole},
		{"binary, body", cat(hdr(opGet, 1, 0, 1), []byte("k"), hdr(opNoop, 0, 0, 0)), true, 25, reqWhole},
		{"binary, body incomplete", cat(hdr(opSet, 1, 8, 10), make([]byte, 9)), true, 0, reqIncomplete},
		{"binary, NUL first is binary too", cat(hdr(opGet, 1, 0, 1), []byte("k")), false, 25, reqWhole},
		{"binary, body over the request limit", cat(hdr(opSet, 1, 8, maxRequest+1)), true, 24, reqWhole},
		{"binary, key over its limit", cat(hdr(opGet, 251, 0, 251)), true, 0, reqOversized},
		{"binary, key and extras over the body", cat(hdr(opSet, 5, 8, 10), make([]byte, 5)), true, 0, reqOversized},
		{"binary, value over the item limit", cat(hdr(opSet, 1, 8, 9+65)), true, 0, reqOversized},
		{"binary, value over the item limit, whole", cat(hdr(opSet, 1, 8, 9+65), make([]byte, 74)), true, 98, reqWhole},
		{"binary, value at the item limit", cat(hdr(opSet, 1, 8, 9+64)), true, 0, reqIncomplete},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, st := nextRequest([]byte(tt.in), tt.started, lim)
			if n != tt.n || st != tt.st {
				t.Errorf("nextRequest = %d, %d; want %d, %d", n, st, tt.n, tt.st)
			}
		})
	}
}

// TestMaxInput: the input held for an incomplete request stays within
// maxInput, the bound the event loops enforce.
func TestMaxInput(t *testing.T) {
	lim := diffLimits()
	longest := []string{
		strings.Repeat("x", max(diffMaxLine, bufSize)),
		"set " + strings.Repeat("k", max(diffMaxLine, bufSize)-len("set  0 0 64\r\n")) + " 0 0 64\r\n" + strings.Repeat("v", 65),
	}
	b := binReq(opSet, bytes.Repeat([]byte("k"), 250), make([]byte, 8), make([]byte, diffMaxItem), 0, 0)
	b[4] = 255 // extras of 255 bytes, key of 250, value of diffMaxItem: the body of the largest whole request
	binary.BigEndian.PutUint32(b[8:], 255+250+diffMaxItem)
	b = append(b[:headerLen], make([]byte, 255+250+diffMaxItem-1)...)
	longest = append(longest, string(b))
	for _, in := range longest {
		if _, st := nextRequest([]byte(in), true, lim); st != reqIncomplete {
			t.Fatalf("%.20q... (%d bytes): %d, want incomplete", in, len(in), st)
		}
		if len(in) > lim.maxInput() {
			t.Errorf("%.20q...: %d bytes held, over maxInput %d", in, len(in), lim.maxInput())
		}
	}
}

// FuzzNextRequest: nextRequest never panics, and a whole request lies
// within its input.
func FuzzNextRequest(f *testing.F) {
	for _, s := range append(textSeeds(), binarySeeds()...) {
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, in []byte, started bool) {
		n, st := nextRequest(in, started, diffLimits())
		if st == reqWhole && (n < 0 || n > len(in)) {
			t.Fatalf("whole request of %d bytes in %d", n, len(in))
		}
		if st != reqWhole && n != 0 {
			t.Fatalf("state %d with length %d", st, n)
		}
	})
}
