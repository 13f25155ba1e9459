package memcache

import (
	"bytes"
	"encoding/binary"

	"github.com/latchd/latch"
)

// An event loop (Input) serves a request only once it has all of it, so
// that the parsers, written for a connection they read as they go, never
// stop in the middle of one: nextRequest says, from the bytes at hand,
// whether the next request is whole, and how long it is. It applies the
// parsers' limits exactly (next_test.go holds them to it): a request the
// parsers skip rather than keep (a line over Config.MaxLine, a value over
// the item size limit) is never gathered, but handed to them at once, and
// its rest skipped as it arrives (skipState).

// reqState says how the next request of an event loop's input is served.
type reqState uint8

const (
	// reqIncomplete: the request is not whole yet; more input is needed.
	// What is held is bounded (limits.maxInput).
	reqIncomplete reqState = iota
	// reqWhole: the request is the first n bytes of the input; the
	// parsers read exactly those.
	reqWhole
	// reqOversized: the request is over a limit, and the parsers skip
	// its rest without keeping it: they read what the input has, and the
	// rest is skipped as it arrives.
	reqOversized
)

// limits are the parsers' bounds that decide where a request ends.
type limits struct {
	maxLine int // Config.MaxLine
	maxItem int // the item cache's MaxItemSize
}

// maxInput bounds the incomplete request nextRequest may leave for more
// input: a text line of up to maxLine bytes (or a read buffer, if larger)
// and a data block of up to maxItem, or a binary header, extras and key and
// a value of up to maxItem.
func (lim limits) maxInput() int {
	return max(max(lim.maxLine, bufSize)+2, headerLen+255+latch.MaxKeyLen) + lim.maxItem
}

// nextRequest reports whether in starts with a whole request, and its
// length n when it does (reqWhole). started says whether the connection
// has had a request: at its start, a NUL byte is a whole request of no
// byte (answered rNotMemcached).
func nextRequest(in []byte, started bool, lim limits) (n int, st reqState) {
	switch {
	case len(in) == 0:
		return 0, reqIncomplete
	case in[0] == magicRequest:
		return nextBinary(in, lim)
	case in[0] == 0 && !started:
		return 0, reqWhole
	}
	return nextText(in, lim)
}

// nextText is nextRequest for a text request: a line, and for a storage
// command whose line parses, a data block of <bytes>+2 (serveText,
// textStore).
func nextText(in []byte, lim limits) (int, reqState) {
	i := bytes.IndexByte(in, '\n')
	if i < 0 {
		// readLine keeps a line of up to one read buffer, then up to
		// MaxLine; a longer one is skipped and answered ERROR. It tells
		// once it has read more than both.
		if len(in) > max(bufSize, lim.maxLine) {
			return 0, reqOversized
		}
		return 0, reqIncomplete
	}
	n := i + 1
	if n > bufSize && n > lim.maxLine {
		return n, reqWhole // too long: skipped and answered ERROR
	}
	size, ok := storeSize(in[:n])
	if !ok || size > maxRequest {
		return n, reqWhole // no data block read
	}
	if need := uint64(n) + size + 2; uint64(len(in)) >= need {
		return int(need), reqWhole
	}
	if size > uint64(lim.maxItem) {
		return 0, reqOversized // the block is skipped, not kept
	}
	return 0, reqIncomplete
}

// storeSize returns the <bytes> of line, a whole text line, when it is a
// storage command that textStore accepts and whose data block it then
// reads: a line ending in CRLF whose command is set, add, replace,
// append, prepend or cas, with the number of tokens it takes and numbers
// where it takes them. It checks what textStore checks, in the same
// terms, without allocating.
func storeSize(line []byte) (uint64, bool) {
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return 0, false
	}
	var t [8][]byte
	nt := 0
	for rest := line[:len(line)-2]; ; {
		for len(rest) > 0 && rest[0] == ' ' {
			rest = rest[1:]
		}
		if len(rest) == 0 {
			break
		}
		if nt == len(t) {
			return 0, false // more tokens than any storage command takes
		}
		j := bytes.IndexByte(rest, ' ')
		if j < 0 {
			j = len(rest)
		}
		t[nt], rest = rest[:j], rest[j:]
		nt++
	}
	if nt == 0 {
		return 0, false
	}
	var want int
	switch string(t[0]) {
	case "set", "add", "replace", "append", "prepend":
		want = 5
	case "cas":
		want = 6
	default:
		return 0, false
	}
	if _, ok := noreply(t[:nt], want); !ok {
		return 0, false
	}
	_, ok1 := parseUint(t[2], 32)
	_, ok2 := parseUint(t[3], 63)
	size, ok3 := parseUint(t[4], 32)
	ok4 := true
	if want == 6 {
		_, ok4 = parseUint(t[5], 64)
	}
	return size, ok1 && ok2 && ok3 && ok4
}

// nextBinary is nextRequest for a binary request: a 24-byte header and
// its total body length (serveBinary).
func nextBinary(in []byte, lim limits) (int, reqState) {
	if len(in) < headerLen {
		return 0, reqIncomplete
	}
	keyLen := int(binary.BigEndian.Uint16(in[2:]))
	extLen := int(in[4])
	bodLen := int(binary.BigEndian.Uint32(in[8:]))
	if bodLen > maxRequest {
		return headerLen, reqWhole // refused from its header, and the connection closed
	}
	if n := headerLen + bodLen; len(in) >= n {
		return n, reqWhole
	}
	// serveBinary skips the body of a request it refuses for its key
	// length or for its value's size, without keeping it.
	if keyLen > latch.MaxKeyLen || keyLen+extLen > bodLen || bodLen-keyLen-extLen > lim.maxItem {
		return 0, reqOversized
	}
	return 0, reqIncomplete
}
