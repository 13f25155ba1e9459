package resp

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
)

// A ProtocolError is input that is not a request: it is answered
// "-ERR Protocol error: ..." and the connection is closed, as Redis does.
type ProtocolError struct{ Msg string }

func (e *ProtocolError) Error() string { return "Protocol error: " + e.Msg }

// Limits bound what a Reader accepts.
type Limits struct {
	// MaxArgs is the most arguments of one request, command name included.
	MaxArgs int
	// MaxBulk is the longest argument, in bytes.
	MaxBulk int
	// MaxInline is the longest inline request line, in bytes.
	MaxInline int
}

// Reader reads requests: RESP arrays of bulk strings, and inline commands
// (a line of arguments separated by spaces, with Redis's quoting), as a
// Redis server accepts them.
type Reader struct {
	r     *bufio.Reader
	lim   Limits
	args  [][]byte
	arena []byte
	line  []byte
	keep  bool // Keep: the arena is not reused
}

// NewReader returns a Reader of r, bounded by lim.
func NewReader(r *bufio.Reader, lim Limits) *Reader {
	return &Reader{r: r, lim: lim}
}

// Next reads the next request and returns its arguments, which stay valid
// until the following call (with Keep, longer). An empty request (an empty
// inline line, an array of no element) is skipped. A malformed or
// oversized request returns a *ProtocolError; a failed read returns its
// error.
func (rd *Reader) Next() ([][]byte, error) {
	for {
		b, err := rd.r.Peek(1)
		if err != nil {
			return nil, err
		}
		rd.args = rd.args[:0]
		if !rd.keep {
			rd.arena = rd.arena[:0]
		}
		if b[0] == '*' {
			err = rd.array()
		} else {
			err = rd.inlineLine()
		}
		if err != nil {
			return nil, err
		}
		if len(rd.args) > 0 {
			return rd.args, nil
		}
	}
}

// Keep(true) makes the arguments Next returns stay valid until the first
// call of Next after Keep(false) (the slice of them does not: keep the
// arguments themselves): a connection that defers the execution of a
// pipelined request reads the next one. Held reports how many bytes the
// kept arguments take.
func (rd *Reader) Keep(keep bool) { rd.keep = keep }

// Held returns the bytes of the arguments read since the arena was last
// reused (see Keep).
func (rd *Reader) Held() int { return len(rd.arena) }

// readLine reads a line ending in "\n" of at most max bytes (the "\r"
// before it, if any, is dropped). The line is valid until the next read.
func (rd *Reader) readLine(max int, tooLong string) ([]byte, error) {
	line, err := rd.r.ReadSlice('\n')
	if err == nil {
		if line = trimEOL(line); len(line) > max {
			return nil, &ProtocolError{tooLong}
		}
		return line, nil
	}
	if !errors.Is(err, bufio.ErrBufferFull) {
		return nil, err
	}
	rd.line = append(rd.line[:0], line...)
	for {
		if len(rd.line) > max+2 {
			return nil, &ProtocolError{tooLong}
		}
		line, err = rd.r.ReadSlice('\n')
		rd.line = append(rd.line, line...)
		if err == nil {
			if line = trimEOL(rd.line); len(line) > max {
				return nil, &ProtocolError{tooLong}
			}
			return line, nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return nil, err
		}
	}
}

func trimEOL(line []byte) []byte {
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line
}

// headerMax bounds the line of an array or bulk header ("*123\r\n").
const headerMax = 32

// array reads a RESP array of bulk strings.
func (rd *Reader) array() error {
	if rd.arrayBuffered() {
		return nil
	}
	line, err := rd.readLine(headerMax, "too big mbulk count string")
	if err != nil {
		return err
	}
	n, ok := parseInt(line[1:])
	if !ok || n > 1<<31 {
		return &ProtocolError{"invalid multibulk length"}
	}
	if n <= 0 {
		return nil
	}
	if n > int64(rd.lim.MaxArgs) {
		return &ProtocolError{fmt.Sprintf("too many arguments: %d, at most %d", n, rd.lim.MaxArgs)}
	}
	for range n {
		line, err := rd.readLine(headerMax, "too big bulk count string")
		if errors.Is(err, io.EOF) {
			return io.ErrUnexpectedEOF
		}
		if err != nil {
			return err
		}
		if len(line) == 0 || line[0] != '$' {
			got := byte(' ')
			if len(line) > 0 {
				got = line[0]
			}
			return &ProtocolError{fmt.Sprintf("expected '$', got '%c'", got)}
		}
		l, ok := parseInt(line[1:])
		if !ok || l < 0 || l > 512<<20 {
			return &ProtocolError{"invalid bulk length"}
		}
		if l > int64(rd.lim.MaxBulk) {
			return &ProtocolError{fmt.Sprintf("argument of %d bytes, at most %d", l, rd.lim.MaxBulk)}
		}
		start := len(rd.arena)
		rd.arena = slices.Grow(rd.arena, int(l)+2)[:start+int(l)+2]
		if _, err := io.ReadFull(rd.r, rd.arena[start:]); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
		if rd.arena[len(rd.arena)-2] != '\r' || rd.arena[len(rd.arena)-1] != '\n' {
			return &ProtocolError{"bulk string not followed by CRLF"}
		}
		rd.arena = rd.arena[:len(rd.arena)-2]
		rd.args = append(rd.args, rd.arena[start:len(rd.arena):len(rd.arena)])
	}
	return nil
}

// arrayBuffered reads the array at the start of the buffered input, as
// array does, when all of it has arrived and it is well formed within the
// limits, and reports whether it did: then it parses the buffer in place,
// with no read call for each line and argument. Otherwise it consumes
// nothing and array reads the request the slow way, which waits for the
// rest or finds the error.
func (rd *Reader) arrayBuffered() bool {
	in, _ := rd.r.Peek(rd.r.Buffered())
	line, pos := headerAt(in, 0)
	if pos < 0 {
		return false
	}
	n, ok := parseInt(line[1:])
	if !ok || n <= 0 || n > int64(rd.lim.MaxArgs) {
		return false
	}
	args, start := len(rd.args), len(rd.arena)
	for range n {
		line, next := headerAt(in, pos)
		l, ok := int64(0), false
		if next >= 0 && len(line) > 0 && line[0] == '$' {
			l, ok = parseInt(line[1:])
		}
		if !ok || l < 0 || l > 512<<20 || l > int64(rd.lim.MaxBulk) ||
			next+int(l)+2 > len(in) || in[next+int(l)] != '\r' || in[next+int(l)+1] != '\n' {
			rd.args, rd.arena = rd.args[:args], rd.arena[:start]
			return false
		}
		at := len(rd.arena)
		rd.arena = append(rd.arena, in[next:next+int(l)]...)
		rd.args = append(rd.args, rd.arena[at:len(rd.arena):len(rd.arena)])
		pos = next + int(l) + 2
	}
	rd.r.Discard(pos)
	return true
}

// headerAt returns the header line at in[pos:] without its end, as
// readLine(headerMax) would, and the position after it: -1 when it has
// not all arrived or is too long.
func headerAt(in []byte, pos int) ([]byte, int) {
	rest := in[pos:]
	i := bytes.IndexByte(rest[:min(len(rest), headerMax+2)], '\n')
	if i < 0 {
		return nil, -1
	}
	line := trimEOL(rest[:i+1])
	if len(line) > headerMax {
		return nil, -1
	}
	return line, pos + i + 1
}

// complete reports whether in may start with a whole request: false only
// when it clearly starts with one yet to arrive (an inline line or a
// header without its end, a bulk string shorter than its header says),
// after any empty ones (which the Reader skips), so that its parse would
// be wasted. It reads the headers, not the arguments: a request arriving
// in many reads is not parsed again at each.
func complete(in []byte, lim Limits) bool {
	for len(in) > 0 {
		n, empty := scanRequest(in, lim)
		switch {
		case n < 0:
			return false
		case n == 0 || !empty:
			return true
		}
		in = in[n:]
	}
	return false
}

// scanRequest returns the length of the request at the start of in and
// whether it is empty; -1 when it has not all arrived; 0 when the Reader
// refuses it before its end.
func scanRequest(in []byte, lim Limits) (n int, empty bool) {
	if in[0] != '*' {
		i := bytes.IndexByte(in, '\n')
		if i < 0 {
			if len(in) > lim.MaxInline {
				return 0, false
			}
			return -1, false
		}
		if len(trimEOL(in[:i+1])) > lim.MaxInline {
			return 0, false
		}
		empty = true
		for _, c := range in[:i] {
			empty = empty && isSpace(c)
		}
		return i + 1, empty
	}
	// header returns the header line at in[pos:], without its end, and
	// the position after it: -1 when it has not arrived, 0 when it is too
	// long.
	header := func(pos int) ([]byte, int) {
		rest := in[pos:]
		i := bytes.IndexByte(rest[:min(len(rest), headerMax+2)], '\n')
		switch {
		case i >= 0:
			return trimEOL(rest[:i+1]), pos + i + 1
		case len(rest) > headerMax+2:
			return nil, 0
		}
		return nil, -1
	}
	line, pos := header(0)
	if pos <= 0 {
		return pos, false
	}
	count, ok := parseInt(line[1:])
	switch {
	case !ok || count > int64(lim.MaxArgs):
		return 0, false
	case count <= 0:
		return pos, true
	}
	for range count {
		line, next := header(pos)
		if next <= 0 {
			return next, false
		}
		if len(line) == 0 || line[0] != '$' {
			return 0, false
		}
		l, ok := parseInt(line[1:])
		if !ok || l < 0 || l > int64(lim.MaxBulk) {
			return 0, false
		}
		if pos = next + int(l) + 2; pos > len(in) {
			return -1, false
		}
		if in[pos-2] != '\r' || in[pos-1] != '\n' {
			return 0, false
		}
	}
	return pos, false
}

// inlineLine reads an inline command.
func (rd *Reader) inlineLine() error {
	line, err := rd.readLine(rd.lim.MaxInline, "too big inline request")
	if err != nil {
		return err
	}
	start := len(rd.arena)
	rd.arena = append(rd.arena, line...)
	args, err := SplitArgs(rd.args[:0], rd.arena[start:len(rd.arena):len(rd.arena)])
	if err != nil {
		return err
	}
	if len(args) > rd.lim.MaxArgs {
		return &ProtocolError{fmt.Sprintf("too many arguments: %d, at most %d", len(args), rd.lim.MaxArgs)}
	}
	rd.args = args
	return nil
}

// SplitArgs appends the arguments of an inline command line to dst, as
// Redis's sdssplitargs splits them: separated by spaces (and tabs, CR, LF,
// NUL... as C's isspace), "double quotes" with the escapes \n \r \t \b \a
// \\ \" and \xHH, 'single quotes' with \' only. A closing quote must be
// followed by a space or the end ("unbalanced quotes" otherwise). The
// arguments are written in place into line.
func SplitArgs(dst [][]byte, line []byte) ([][]byte, error) {
	i := 0
	for {
		for i < len(line) && isSpace(line[i]) {
			i++
		}
		if i == len(line) {
			return dst, nil
		}
		out := i // the argument is rewritten from here
		start := out
		inDQ, inSQ := false, false
		for done := false; !done; {
			switch {
			case inDQ:
				if i == len(line) {
					return nil, &ProtocolError{"unbalanced quotes in request"}
				}
				c := line[i]
				switch {
				case c == '\\' && i+3 < len(line) && line[i+1] == 'x' && isHex(line[i+2]) && isHex(line[i+3]):
					line[out] = unhex(line[i+2])<<4 | unhex(line[i+3])
					out++
					i += 4
				case c == '\\' && i+1 < len(line):
					var e byte
					switch line[i+1] {
					case 'n':
						e = '\n'
					case 'r':
						e = '\r'
					case 't':
						e = '\t'
					case 'b':
						e = '\b'
					case 'a':
						e = '\a'
					default:
						e = line[i+1]
					}
					line[out] = e
					out++
					i += 2
				case c == '"':
					if i+1 < len(line) && !isSpace(line[i+1]) {
						return nil, &ProtocolError{"unbalanced quotes in request"}
					}
					i++
					done = true
				default:
					line[out] = c
					out++
					i++
				}
			case inSQ:
				if i == len(line) {
					return nil, &ProtocolError{"unbalanced quotes in request"}
				}
				c := line[i]
				switch {
				case c == '\\' && i+1 < len(line) && line[i+1] == '\'':
					line[out] = '\''
					out++
					i += 2
				case c == '\'':
					if i+1 < len(line) && !isSpace(line[i+1]) {
						return nil, &ProtocolError{"unbalanced quotes in request"}
					}
					i++
					done = true
				default:
					line[out] = c
					out++
					i++
				}
			default:
				if i == len(line) {
					done = true
					break
				}
				switch c := line[i]; {
				case isSpace(c):
					done = true
				case c == '"':
					inDQ = true
					i++
				case c == '\'':
					inSQ = true
					i++
				default:
					line[out] = c
					out++
					i++
				}
			}
		}
		dst = append(dst, line[start:out:out])
	}
}

func isSpace(c byte) bool {
	switch c {
	case ' ', '\n', '\r', '\t', '\v', '\f', 0:
		return true
	}
	return false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

// parseInt parses a decimal integer as Redis's string2ll does: an optional
// minus sign, no plus sign, no leading zeros (but "0"; "-0" is refused),
// no spaces.
func parseInt(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	neg := b[0] == '-'
	d := b
	if neg {
		d = b[1:]
	}
	if len(d) == 0 || (d[0] == '0' && (len(d) > 1 || neg)) {
		return 0, false
	}
	var v uint64
	for _, c := range d {
		if c < '0' || c > '9' {
			return 0, false
		}
		n := v*10 + uint64(c-'0')
		if n/10 != v {
			return 0, false
		}
		v = n
	}
	if neg {
		if v > 1<<63 {
			return 0, false
		}
		return -int64(v), true
	}
	if v > 1<<63-1 {
		return 0, false
	}
	return int64(v), true
}

// Writer writes replies in RESP2 or RESP3 (Proto).
type Writer struct {
	w *bufio.Writer
	// Proto is the protocol version of the connection: 2 or 3.
	Proto int
	num   []byte
}

// NewWriter returns a RESP2 Writer to w.
func NewWriter(w *bufio.Writer) *Writer { return &Writer{w: w, Proto: 2} }

func (w *Writer) line(prefix byte, s string) {
	w.w.WriteByte(prefix)
	w.w.WriteString(s)
	w.w.WriteString("\r\n")
}

func (w *Writer) head(prefix byte, n int64) {
	w.w.WriteByte(prefix)
	w.num = strconv.AppendInt(w.num[:0], n, 10)
	w.w.Write(w.num)
	w.w.WriteString("\r\n")
}

// Simple writes a simple string (+OK).
func (w *Writer) Simple(s string) { w.line('+', s) }

// Error writes an error; msg starts with its code (ERR, NOSCRIPT...).
// Line breaks in msg become spaces, as in Redis.
func (w *Writer) Error(msg string) {
	w.w.WriteByte('-')
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		if c == '\r' || c == '\n' {
			c = ' '
		}
		w.w.WriteByte(c)
	}
	w.w.WriteString("\r\n")
}

// Int writes an integer.
func (w *Writer) Int(n int64) { w.head(':', n) }

// Raw writes a reply already encoded (for the connection's protocol).
func (w *Writer) Raw(b []byte) { w.w.Write(b) }

// Bulk writes a bulk string.
func (w *Writer) Bulk(b []byte) {
	w.head('$', int64(len(b)))
	w.w.Write(b)
	w.w.WriteString("\r\n")
}

// BulkString writes a bulk string.
func (w *Writer) BulkString(s string) {
	w.head('$', int64(len(s)))
	w.w.WriteString(s)
	w.w.WriteString("\r\n")
}

// Null writes a null: $-1 in RESP2, _ in RESP3.
func (w *Writer) Null() {
	if w.Proto == 3 {
		w.w.WriteString("_\r\n")
		return
	}
	w.w.WriteString("$-1\r\n")
}

// NullArray writes a null array: *-1 in RESP2, _ in RESP3.
func (w *Writer) NullArray() {
	if w.Proto == 3 {
		w.w.WriteString("_\r\n")
		return
	}
	w.w.WriteString("*-1\r\n")
}

// Array starts an array of n elements.
func (w *Writer) Array(n int) { w.head('*', int64(n)) }

// Map starts a map of n pairs: %n in RESP3, an array of 2n in RESP2.
func (w *Writer) Map(n int) {
	if w.Proto == 3 {
		w.head('%', int64(n))
		return
	}
	w.head('*', 2*int64(n))
}

// Push starts a push of n elements: >n in RESP3, an array in RESP2 (as
// Redis sends pub/sub messages).
func (w *Writer) Push(n int) {
	if w.Proto == 3 {
		w.head('>', int64(n))
		return
	}
	w.head('*', int64(n))
}

// Set starts a set of n elements: ~n in RESP3, an array in RESP2.
func (w *Writer) Set(n int) {
	if w.Proto == 3 {
		w.head('~', int64(n))
		return
	}
	w.head('*', int64(n))
}

// Verbatim writes text: a verbatim string of format txt in RESP3, a bulk
// string in RESP2 (as Redis answers INFO).
func (w *Writer) Verbatim(s string) {
	if w.Proto != 3 {
		w.BulkString(s)
		return
	}
	w.head('=', int64(len(s)+4))
	w.w.WriteString("txt:")
	w.w.WriteString(s)
	w.w.WriteString("\r\n")
}
