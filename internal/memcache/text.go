package memcache

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"slices"
	"strconv"

	"github.com/latchd/latch"
	"github.com/latchd/latch/internal/fsm"
)

// Text replies. yrmcds answers every syntax error with a bare ERROR and
// sends CLIENT_ERROR only for the two cases below; latch adds memcached's
// replies for what yrmcds gets wrong (negative deltas, oversized appends).
const (
	rError      = "ERROR\r\n"
	rStored     = "STORED\r\n"
	rNotStored  = "NOT_STORED\r\n"
	rExists     = "EXISTS\r\n"
	rNotFound   = "NOT_FOUND\r\n"
	rLocked     = "LOCKED\r\n"
	rDeleted    = "DELETED\r\n"
	rTouched    = "TOUCHED\r\n"
	rOK         = "OK\r\n"
	rEnd        = "END\r\n"
	rNonNumeric = "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n"
	rNotLocked  = "CLIENT_ERROR object is not locked or not found\r\n"
	rBadDelta   = "CLIENT_ERROR invalid numeric delta argument\r\n"
	rTooLarge   = "SERVER_ERROR object too large for cache\r\n"
	// rNotMemcached answers a request that starts with a NUL byte, as a
	// dlock frame does, and ends the connection.
	rNotMemcached = "CLIENT_ERROR not a memcached request (a dlock client at the memcached port?)\r\n"
	rOutOfMemory  = "SERVER_ERROR out of memory storing object\r\n"
)

// maxRequest is the most bytes one request may announce (yrmcds's
// MAX_REQUEST_LENGTH). Over it the connection is closed: nothing that large
// is read, not even to skip it.
const maxRequest = 30 << 20

// errLineTooLong reports a text line over Config.MaxLine.
var errLineTooLong = errors.New("memcache: line too long")

// serveText reads one text request and writes its reply. It returns an
// error only when the connection must end.
func (c *conn) serveText() error {
	c.cmd = nil
	line, err := c.readLine()
	switch {
	case errors.Is(err, errLineTooLong):
		return c.skipped(&skipState{then: thenLineTooLong})
	case err != nil:
		return err
	}
	// A line must end in CRLF; a bare LF is an error, as is a blank line.
	if len(line) < 2 || line[len(line)-2] != '\r' {
		c.textError(rError)
		return nil
	}
	c.toks = tokenize(c.toks[:0], line[:len(line)-2])
	if len(c.toks) == 0 {
		c.textError(rError)
		return nil
	}
	return c.textCommand()
}

// readLine returns the next line, LF included. The line is valid until the
// next read from c.r. A line longer than Config.MaxLine is skipped to its end
// without being kept and reported as errLineTooLong.
func (c *conn) readLine() ([]byte, error) {
	line, err := c.r.ReadSlice('\n')
	if err == nil {
		return line, nil
	}
	if !errors.Is(err, bufio.ErrBufferFull) {
		return nil, err
	}
	c.line = append(c.line[:0], line...)
	for {
		line, err = c.r.ReadSlice('\n')
		if len(c.line)+len(line) > c.srv.cfg.MaxLine {
			c.line = c.line[:0]
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = c.r.ReadSlice('\n')
			}
			if errors.Is(err, errIncomplete) {
				// An event loop's input ends inside the line: the
				// rest is skipped as it arrives.
				return nil, c.startSkip(skipState{toLF: true, then: thenLineTooLong})
			}
			if err != nil {
				return nil, err
			}
			return nil, errLineTooLong
		}
		c.line = append(c.line, line...)
		if err == nil {
			return c.line, nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return nil, err
		}
	}
}

// tokenize appends the space-separated tokens of line to toks. Only the
// space separates tokens (a tab is part of a token, as in yrmcds).
func tokenize(toks [][]byte, line []byte) [][]byte {
	for {
		for len(line) > 0 && line[0] == ' ' {
			line = line[1:]
		}
		if len(line) == 0 {
			return toks
		}
		i := bytes.IndexByte(line, ' ')
		if i < 0 {
			return append(toks, line)
		}
		toks = append(toks, line[:i])
		line = line[i:]
	}
}

// textError writes reply, a protocol error (ERROR, CLIENT_ERROR or
// SERVER_ERROR), and counts it in the metrics: on the current command, or
// as a request of the pseudo-command "invalid" when the line named no
// command latch knows.
func (c *conn) textError(reply string) {
	c.w.WriteString(reply)
	if c.cmd != nil {
		c.cmd.Error()
		return
	}
	c.srv.textInvalid.Request()
	c.srv.textInvalid.Error()
}

// textCommand executes the command in c.toks.
func (c *conn) textCommand() error {
	t := c.toks
	c.cmd = nil
	if i := textCommandIndex(t[0]); i >= 0 {
		c.srv.counters.textOps[i].Add(1)
		c.cmd = c.srv.textCmds[i]
		c.cmd.Request()
	}
	switch string(t[0]) {
	case "get":
		return c.textGet(false)
	case "gets":
		return c.textGet(true)
	case "set":
		return c.textStore(storeSet)
	case "add":
		return c.textStore(storeAdd)
	case "replace":
		return c.textStore(storeReplace)
	case "append":
		return c.textStore(storeAppend)
	case "prepend":
		return c.textStore(storePrepend)
	case "cas":
		return c.textStore(storeCAS)
	case "delete":
		return c.textDelete()
	case "incr":
		return c.textArith(true)
	case "decr":
		return c.textArith(false)
	case "touch":
		return c.textTouch()
	case "lock":
		return c.textLock()
	case "unlock":
		return c.textUnlock()
	case "unlock_all":
		if err := c.unlockAll(); unavailable(err) {
			c.textError(rUnavailable)
			return nil
		}
		c.w.WriteString(rOK)
		return nil
	case "keys":
		return c.textKeys()
	case "flush_all":
		return c.textFlush()
	case "version":
		// Extra tokens are ignored, as memcached 1.6 and yrmcds do.
		c.w.WriteString("VERSION ")
		c.w.WriteString(c.srv.version)
		c.w.WriteString("\r\n")
		return nil
	case "verbosity":
		return c.textVerbosity()
	case "stats":
		return c.textStats()
	case "slabs":
		c.w.WriteString(rOK)
		return nil
	case "quit":
		// Extra tokens are ignored, as memcached 1.6 and yrmcds do.
		c.unlockAll()
		return errClose
	}
	c.textError(rError)
	return nil
}

// noreply reports whether t has n+1 tokens ending in "noreply"; ok is false
// when the token count is wrong or the extra token is something else.
func noreply(t [][]byte, n int) (quiet, ok bool) {
	switch len(t) {
	case n:
		return false, true
	case n + 1:
		if string(t[n]) == "noreply" {
			return true, true
		}
	}
	return false, false
}

// parseUint parses a number token as yrmcds does (strtoull, base 10):
// leading white space, an optional sign, at least one decimal digit and
// nothing after them; a minus negates the value modulo 2^64. The value
// must not overflow 64 bits and, once negated, must fit in bits bits, so
// "+5" and "007" are numbers and "-1" is one only for 64-bit fields. (A
// 64-bit field of exactly 2^64-1 is accepted; yrmcds refuses it or not
// depending on a stale errno.)
func parseUint(b []byte, bits int) (uint64, bool) {
	for len(b) > 0 && (b[0] == ' ' || b[0] >= '\t' && b[0] <= '\r') {
		b = b[1:]
	}
	neg := false
	if len(b) > 0 && (b[0] == '+' || b[0] == '-') {
		neg = b[0] == '-'
		b = b[1:]
	}
	if len(b) == 0 {
		return 0, false
	}
	var n uint64
	for _, ch := range b {
		if ch < '0' || ch > '9' {
			return 0, false
		}
		d := uint64(ch - '0')
		if n > (1<<64-1-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	if neg {
		n = -n
	}
	if bits < 64 && n >= 1<<bits {
		return 0, false
	}
	return n, true
}

// textGet serves get and gets. A key over 250 bytes is a miss.
func (c *conn) textGet(withCAS bool) error {
	if len(c.toks) < 2 {
		c.textError(rError)
		return nil
	}
	for i, key := range c.toks[1:] {
		it, err := c.srv.svc.Get(c.now, key)
		if i == 0 && unavailable(err) {
			// A node that has not caught up with its cluster would
			// answer misses for items that exist: the reads wait until it
			// has (node.Get), unless it gave up.
			c.textError(rUnavailable)
			return nil
		}
		if err != nil {
			continue
		}
		c.w.WriteString("VALUE ")
		c.w.Write(key)
		c.num = append(c.num[:0], ' ')
		c.num = strconv.AppendUint(c.num, uint64(it.Flags), 10)
		c.num = append(c.num, ' ')
		c.num = strconv.AppendInt(c.num, int64(len(it.Value)), 10)
		if withCAS {
			c.num = append(c.num, ' ')
			c.num = strconv.AppendUint(c.num, it.CAS, 10)
		}
		c.num = append(c.num, '\r', '\n')
		c.w.Write(c.num)
		c.w.Write(it.Value)
		c.w.WriteString("\r\n")
	}
	c.w.WriteString(rEnd)
	return nil
}

// storeOp is a storage command.
type storeOp uint8

const (
	storeSet storeOp = iota
	storeAdd
	storeReplace
	storeAppend
	storePrepend
	storeCAS
)

// storeOps are the commands of the storage commands.
var storeOps = [...]fsm.Op{
	storeSet:     fsm.OpItemSet,
	storeAdd:     fsm.OpItemAdd,
	storeReplace: fsm.OpItemReplace,
	storeAppend:  fsm.OpItemAppend,
	storePrepend: fsm.OpItemPrepend,
	storeCAS:     fsm.OpItemCAS,
}

// textStore serves set, add, replace, append, prepend and cas:
//
//	<cmd> <key> <flags> <exptime> <bytes> [<cas>] [noreply]\r\n<data>\r\n
//
// A line that does not parse is answered ERROR and its data block is left
// to be read as a command, as yrmcds does. Once the line parses the data
// block is consumed, even when the key or the size is then refused.
func (c *conn) textStore(op storeOp) error {
	t := c.toks
	n := 5
	if op == storeCAS {
		n = 6
	}
	quiet, ok := noreply(t, n)
	if !ok {
		c.textError(rError)
		return nil
	}
	flags, ok1 := parseUint(t[2], 32)
	exptime, ok2 := parseUint(t[3], 63)
	size, ok3 := parseUint(t[4], 32)
	var casv uint64
	ok4 := true
	if op == storeCAS {
		casv, ok4 = parseUint(t[5], 64)
	}
	if !ok1 || !ok2 || !ok3 || !ok4 {
		c.textError(rError)
		return nil
	}
	if size > maxRequest {
		c.textError(rError)
		return errClose
	}
	c.key = append(c.key[:0], t[1]...) // reading the data moves r's buffer
	if size > uint64(c.srv.items.MaxItemSize) {
		// Refuse without keeping the block in memory, with memcached's
		// answer (yrmcds answers a bare ERROR, which clients read as an
		// unknown command).
		return c.skip(size+2, skipState{then: thenTextTooLarge})
	}
	data, err := c.readBlock(int(size))
	if err != nil {
		return err
	}
	if data == nil {
		c.textError(rError) // the block did not end in CRLF
		return nil
	}
	// Only set, add and replace refuse a long key; append, prepend and
	// cas simply find no item under it, as in yrmcds.
	if len(c.key) > latch.MaxKeyLen && (op == storeSet || op == storeAdd || op == storeReplace) {
		c.textError(rError)
		return nil
	}
	cmd := c.command(storeOps[op], c.key)
	cmd.Value, cmd.Flags, cmd.Exptime = data, uint32(flags), int64(exptime)
	if op == storeCAS {
		cmd.CAS = casv
	}
	if err := c.exec().Err; err != nil {
		pick := func(r *textReply) string { return r.store }
		if op == storeCAS {
			pick = func(r *textReply) string { return r.cas }
		}
		return c.textFailed(err, quiet, pick)
	}
	if !quiet {
		c.w.WriteString(rStored)
	}
	return nil
}

func isDigits(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, ch := range b {
		if ch < '0' || ch > '9' {
			return false
		}
	}
	return true
}

// readBlock reads a data block of n bytes and its CRLF. It returns nil data
// (and no error) when the n+2 bytes do not end in CRLF. The data is valid
// until the next read.
func (c *conn) readBlock(n int) ([]byte, error) {
	var b []byte
	if n+2 <= c.r.Size() {
		p, err := c.r.Peek(n + 2)
		if err != nil {
			return nil, err
		}
		b = p
		defer c.r.Discard(n + 2)
	} else {
		c.data = slices.Grow(c.data[:0], n+2)[:n+2]
		if _, err := io.ReadFull(c.r, c.data); err != nil {
			return nil, err
		}
		b = c.data
	}
	if b[n] != '\r' || b[n+1] != '\n' {
		return nil, nil
	}
	return b[:n:n], nil
}

// textDelete serves delete <key> [noreply]. memcached's legacy time
// argument ("delete k 0") is an error, as in yrmcds.
func (c *conn) textDelete() error {
	quiet, ok := noreply(c.toks, 2)
	if !ok {
		c.textError(rError)
		return nil
	}
	c.command(fsm.OpItemDelete, c.toks[1])
	if err := c.exec().Err; err != nil {
		return c.textFailed(err, quiet, func(r *textReply) string { return r.del })
	}
	if !quiet {
		c.w.WriteString(rDeleted)
	}
	return nil
}

// textArith serves incr and decr <key> <delta> [noreply].
func (c *conn) textArith(incr bool) error {
	quiet, ok := noreply(c.toks, 3)
	if !ok {
		c.textError(rError)
		return nil
	}
	d := c.toks[2]
	if m := bytes.TrimLeft(d, " \t\n\v\f\r"); len(m) > 0 && m[0] == '-' {
		if isDigits(m[1:]) {
			// yrmcds wraps a negative delta around 2^64; memcached
			// refuses it, and so do we.
			c.textError(rBadDelta)
		} else {
			c.textError(rError)
		}
		return nil
	}
	delta, ok := parseUint(d, 64)
	if !ok {
		c.textError(rError)
		return nil
	}
	op := fsm.OpItemDecr
	if incr {
		op = fsm.OpItemIncr
	}
	c.command(op, c.toks[1]).Delta = delta
	r := c.exec()
	if r.Err != nil {
		return c.textFailed(r.Err, quiet, func(r *textReply) string { return r.arith })
	}
	if !quiet {
		c.num = strconv.AppendUint(c.num[:0], r.Value, 10)
		c.num = append(c.num, '\r', '\n')
		c.w.Write(c.num)
	}
	return nil
}

// textTouch serves touch <key> <exptime> [noreply]. Touch ignores locks.
func (c *conn) textTouch() error {
	quiet, ok := noreply(c.toks, 3)
	if !ok {
		c.textError(rError)
		return nil
	}
	exptime, ok := parseUint(c.toks[2], 63)
	if !ok {
		c.textError(rError)
		return nil
	}
	c.command(fsm.OpItemTouch, c.toks[1]).Exptime = int64(exptime)
	err := c.exec().Err
	switch {
	case unavailable(err):
		c.textError(rUnavailable)
	case quiet:
	case err != nil:
		c.w.WriteString(rNotFound)
	default:
		c.w.WriteString(rTouched)
	}
	return nil
}

// textLock serves lock <key>: OK, LOCKED (held by anyone, this connection
// included) or NOT_FOUND. It takes no noreply.
func (c *conn) textLock() error {
	if len(c.toks) != 2 {
		c.textError(rError)
		return nil
	}
	c.command(fsm.OpItemLock, c.toks[1])
	if err := c.execLock().Err; err != nil {
		return c.textFailed(err, false, func(r *textReply) string { return r.lock })
	}
	c.w.WriteString(rOK)
	return nil
}

// textUnlock serves unlock <key>.
func (c *conn) textUnlock() error {
	if len(c.toks) != 2 {
		c.textError(rError)
		return nil
	}
	if err := c.unlock(c.toks[1]); err != nil {
		if unavailable(err) {
			c.textError(rUnavailable)
			return nil
		}
		c.w.WriteString(rNotLocked)
		return nil
	}
	c.w.WriteString(rOK)
	return nil
}

// textKeys serves keys [<prefix>]: the keys of live items, sorted.
func (c *conn) textKeys() error {
	var prefix []byte
	if len(c.toks) > 1 {
		prefix = c.toks[1]
	}
	keys := c.srv.svc.ItemKeys(prefix)
	slices.Sort(keys)
	for _, k := range keys {
		c.w.WriteString("VALUE ")
		c.w.WriteString(k)
		c.w.WriteString("\r\n")
	}
	c.w.WriteString(rEnd)
	return nil
}

// textFlush serves flush_all [<delay>] [noreply].
func (c *conn) textFlush() error {
	t := c.toks
	quiet := len(t) > 1 && string(t[len(t)-1]) == "noreply"
	if quiet {
		t = t[:len(t)-1]
	}
	var delay uint64
	switch len(t) {
	case 1:
	case 2:
		// yrmcds reads a delay only when it starts with a digit: no
		// sign, no white space.
		var ok bool
		if delay, ok = parseUint(t[1], 63); !ok || t[1][0] < '0' || t[1][0] > '9' {
			c.textError(rError)
			return nil
		}
	default:
		c.textError(rError)
		return nil
	}
	c.command(fsm.OpItemFlush, nil).Exptime = int64(delay)
	if err := c.exec().Err; err != nil {
		if unavailable(err) {
			c.textError(rUnavailable)
			return nil
		}
		return err
	}
	if !quiet {
		c.w.WriteString(rOK)
	}
	return nil
}

// textVerbosity serves verbosity <level> [noreply]: any word is accepted.
func (c *conn) textVerbosity() error {
	quiet, ok := noreply(c.toks, 2)
	if !ok {
		c.textError(rError)
		return nil
	}
	if !quiet {
		c.w.WriteString(rOK)
	}
	return nil
}
