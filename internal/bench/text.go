package bench

import (
	"bufio"
	"bytes"
	"errors"
	"strconv"
)

// textCodec speaks the memcached text protocol, with yrmcds's lock and
// unlock commands.
type textCodec struct {
	setTail   []byte // " 0 0 <size>\r\n<value>\r\n"
	addTail   []byte // " 0 <exptime> 1\r\nx\r\n"
	valueSize int
}

func newTextCodec(value []byte, exptime int) *textCodec {
	c := &textCodec{valueSize: len(value)}
	c.setTail = append(c.setTail, " 0 0 "...)
	c.setTail = strconv.AppendInt(c.setTail, int64(len(value)), 10)
	c.setTail = append(c.setTail, "\r\n"...)
	c.setTail = append(c.setTail, value...)
	c.setTail = append(c.setTail, "\r\n"...)
	c.addTail = append(c.addTail, " 0 "...)
	c.addTail = strconv.AppendInt(c.addTail, int64(exptime), 10)
	c.addTail = append(c.addTail, " 1\r\nx\r\n"...)
	return c
}

func (c *textCodec) appendReq(b []byte, o op, key []byte, _ uint32) []byte {
	switch o {
	case opGet:
		b = append(append(append(b, "get "...), key...), "\r\n"...)
	case opSet:
		b = append(append(append(b, "set "...), key...), c.setTail...)
	case opAdd:
		b = append(append(append(b, "add "...), key...), c.addTail...)
	case opDelete:
		b = append(append(append(b, "delete "...), key...), "\r\n"...)
	case opLock:
		b = append(append(append(b, "lock "...), key...), "\r\n"...)
	case opUnlock:
		b = append(append(append(b, "unlock "...), key...), "\r\n"...)
	case opPing:
		b = append(b, "version\r\n"...)
	}
	return b
}

// readLine reads one reply line, CRLF included; it is valid until the next
// read from r.
func readLine(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return nil, broken("a reply line longer than %d bytes", r.Size())
	}
	if err != nil {
		return nil, err
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, broken("a reply line without CRLF: %q", line)
	}
	return line, nil
}

const (
	tOK        = "OK\r\n"
	tStored    = "STORED\r\n"
	tNotStored = "NOT_STORED\r\n"
	tDeleted   = "DELETED\r\n"
	tLocked    = "LOCKED\r\n"
	tEnd       = "END\r\n"
)

func (c *textCodec) readReply(r *bufio.Reader, o op, key []byte, _ uint32) (outcome, error) {
	line, err := readLine(r)
	if err != nil {
		return 0, err
	}
	s := string(line) // compared only: no allocation
	switch o {
	case opGet:
		if s == tEnd {
			return miss, nil
		}
		return c.readValue(r, key, line)
	case opSet:
		if s == tStored {
			return done, nil
		}
	case opAdd:
		switch s {
		case tStored:
			return done, nil
		case tNotStored:
			return refused, nil
		}
	case opDelete:
		if s == tDeleted {
			return done, nil
		}
	case opLock:
		switch s {
		case tOK:
			return done, nil
		case tLocked:
			return refused, nil
		}
	case opUnlock:
		if s == tOK {
			return done, nil
		}
	case opPing:
		if bytes.HasPrefix(line, []byte("VERSION ")) {
			return done, nil
		}
	}
	return 0, unexpected(o, line)
}

// readValue reads the rest of a get hit whose first line is line:
// "VALUE <key> <flags> <bytes>\r\n<data>\r\nEND\r\n".
func (c *textCodec) readValue(r *bufio.Reader, key, line []byte) (outcome, error) {
	rest, ok := bytes.CutPrefix(line[:len(line)-2], []byte("VALUE "))
	if !ok {
		return 0, unexpected(opGet, line)
	}
	k, rest, _ := bytes.Cut(rest, []byte(" "))
	_, rest, _ = bytes.Cut(rest, []byte(" ")) // flags
	size, _, _ := bytes.Cut(rest, []byte(" "))
	n, ok := atoi(size)
	if !ok {
		return 0, broken("get: bad VALUE line %q", line)
	}
	keyOK := bytes.Equal(k, key)
	// The data block and END, checked without keeping them.
	if n+2 <= r.Size() {
		p, err := r.Peek(n + 2)
		if err != nil {
			return 0, err
		}
		if p[n] != '\r' || p[n+1] != '\n' {
			return 0, broken("get: data block without CRLF")
		}
		r.Discard(n + 2)
	} else if _, err := r.Discard(n + 2); err != nil {
		return 0, err
	}
	end, err := readLine(r)
	if err != nil {
		return 0, err
	}
	if string(end) != tEnd {
		return 0, broken("get: %q after the value, want END", end)
	}
	switch {
	case !keyOK:
		return 0, &unexpectedError{op: opGet, got: strconv.Quote(string(k)) + " for key " + strconv.Quote(string(key))}
	case n != c.valueSize:
		return 0, &unexpectedError{op: opGet, got: strconv.Itoa(n) + "-byte value, want " + strconv.Itoa(c.valueSize)}
	}
	return done, nil
}

func (c *textCodec) version(r *bufio.Reader, _ uint32) (string, error) {
	line, err := readLine(r)
	if err != nil {
		return "", err
	}
	v, ok := bytes.CutPrefix(line[:len(line)-2], []byte("VERSION "))
	if !ok {
		return "", unexpected(opPing, line)
	}
	return string(v), nil
}

// atoi parses a non-negative decimal of at most 9 digits.
func atoi(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 9 {
		return 0, false
	}
	n := 0
	for _, ch := range b {
		if ch < '0' || ch > '9' {
			return 0, false
		}
		n = n*10 + int(ch-'0')
	}
	return n, true
}
