package latchtest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"
)

// Timeouts of a replay.
const (
	// syncTimeout bounds the wait for a sentinel's reply.
	syncTimeout = 3 * time.Second
	// eofTimeout bounds @eof.
	eofTimeout = 3 * time.Second
	// quietPeriod ends @read: nothing arrived for this long.
	quietPeriod = 500 * time.Millisecond
	// readLimit bounds @read.
	readLimit = 2 * time.Second
	// closeWait follows @close and @reset, so the server notices.
	closeWait = 250 * time.Millisecond
	// maxReply bounds one reply line or body; a server sending more is
	// broken, and the connection is not read any further.
	maxReply = 64 << 20
)

// Transcript is what a replay of a scenario recorded: every step with the
// replies it read, normalized.
type Transcript struct {
	Entries []Entry
}

// Entry is one step of a transcript and the replies recorded for it, as
// transcript lines ("< ...", "<b ...").
type Entry struct {
	Step    *Step
	Replies []string
}

// Lines returns the transcript as text lines: each step's source line
// followed by its replies. A golden scenario's Want has the same form.
func (t *Transcript) Lines() []string {
	var out []string
	for _, e := range t.Entries {
		out = append(out, e.Step.Src)
		out = append(out, e.Replies...)
	}
	return out
}

// rconn is a connection of a replay.
type rconn struct {
	nc      *net.TCPConn
	r       *bufio.Reader
	lastCAS uint64
	// versions counts the VERSION lines owed to version commands sent on
	// the connection and not yet read.
	versions int
	// broken: a read timed out or lost bytes, so replies can no longer be
	// matched to requests; the connection is not read any more.
	broken bool
}

// replay is the state of one replay.
type replay struct {
	addr  string
	conns map[int]*rconn
}

// Replay runs sc against the server at addr and returns its transcript. It
// returns an error only when the server cannot be reached; whatever the
// server does is recorded in the transcript.
func Replay(addr string, sc *Scenario) (*Transcript, error) {
	rp := &replay{addr: addr, conns: map[int]*rconn{}}
	defer rp.closeAll()
	t := &Transcript{}
	for _, st := range sc.Steps {
		units, err := rp.step(st)
		if err != nil {
			return nil, fmt.Errorf("latchtest: %s:%d: %w", sc.File, st.Line, err)
		}
		var lines []string
		for _, u := range normalize(units) {
			lines = append(lines, u.render()...)
		}
		t.Entries = append(t.Entries, Entry{Step: st, Replies: lines})
	}
	return t, nil
}

func (rp *replay) closeAll() {
	for _, c := range rp.conns {
		c.nc.Close()
	}
}

// conn returns connection n, dialing it if needed.
func (rp *replay) conn(n int) (*rconn, error) {
	if c := rp.conns[n]; c != nil {
		return c, nil
	}
	nc, err := net.DialTimeout("tcp", rp.addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	c := &rconn{nc: nc.(*net.TCPConn), r: bufio.NewReaderSize(nc, 64<<10)}
	rp.conns[n] = c
	return c, nil
}

// drop closes connection n and forgets it.
func (rp *replay) drop(n int) {
	if c := rp.conns[n]; c != nil {
		c.nc.Close()
		delete(rp.conns, n)
	}
}

// step runs one step and returns what it read.
func (rp *replay) step(st *Step) ([]*unit, error) {
	switch st.Kind {
	case Sleep:
		time.Sleep(st.Dur)
		return nil, nil
	case Close, Reset:
		if c := rp.conns[st.Conn]; c != nil {
			if st.Kind == Reset {
				if err := c.nc.SetLinger(0); err != nil {
					return nil, err
				}
			}
			rp.drop(st.Conn)
			time.Sleep(closeWait)
		}
		return nil, nil
	case Read, EOF:
		c := rp.conns[st.Conn]
		if c == nil {
			return nil, nil
		}
		if c.broken {
			return []*unit{event("skipped: the connection is out of step")}, nil
		}
		return rp.drain(st.Conn, c, st.Kind == EOF), nil
	}

	c, err := rp.conn(st.Conn)
	if err != nil {
		return nil, err
	}
	var req []byte
	binarySentinel := false
	switch st.Kind {
	case SendBinary:
		req = st.bin.build(c.lastCAS)
		binarySentinel = true
	case SendHex:
		req = literal(st.text, c.lastCAS)
		c.versions += countVersionCommands(req)
		binarySentinel = true
	default:
		req = literal(st.text, c.lastCAS)
		c.versions += countVersionCommands(req)
	}
	if !st.NoSync {
		if binarySentinel {
			req = append(req, noop()...)
		} else {
			req = append(req, "version\r\n"...)
			c.versions++
		}
	}
	if _, err := c.nc.Write(req); err != nil {
		rp.drop(st.Conn)
		return []*unit{event("closed")}, nil
	}
	if st.NoSync {
		return nil, nil
	}
	if c.broken {
		return []*unit{event("skipped: the connection is out of step")}, nil
	}
	return rp.sync(st.Conn, c, binarySentinel), nil
}

// sync reads the replies to a step up to its sentinel's, which it drops.
func (rp *replay) sync(n int, c *rconn, binarySentinel bool) []*unit {
	var out []*unit
	deadline := time.Now().Add(syncTimeout)
	for {
		units, err := c.readUnits(deadline)
		for _, u := range units {
			if c.sentinel(u, binarySentinel) {
				return out
			}
			out = append(out, u)
		}
		if c.broken {
			return out
		}
		if err != nil {
			return append(out, rp.fail(n, c, err))
		}
	}
}

// drain reads what arrives on c: until the server closes it (eof), or until
// nothing arrived for quietPeriod.
func (rp *replay) drain(n int, c *rconn, eof bool) []*unit {
	var out []*unit
	limit := time.Now().Add(readLimit)
	if eof {
		limit = time.Now().Add(eofTimeout)
	}
	for {
		deadline := limit
		if q := time.Now().Add(quietPeriod); !eof && q.Before(limit) {
			deadline = q
		}
		units, err := c.readUnits(deadline)
		for _, u := range units {
			// Stray sentinel replies are dropped; version replies kept.
			if !c.sentinel(u, true) {
				out = append(out, u)
			}
		}
		if c.broken {
			return out
		}
		if err == nil {
			continue
		}
		if !eof && isTimeout(err) && (len(units) == 0 || units[len(units)-1].kind != uEvent) {
			return out // quiet, and no reply cut short
		}
		out = append(out, rp.fail(n, c, err))
		if eof {
			rp.drop(n)
		}
		return out
	}
}

// sentinel tracks the CAS and version replies in u, and reports whether u
// is the reply to a sentinel: the binary one, or when binary is false the
// text one.
func (c *rconn) sentinel(u *unit, binary bool) bool {
	switch u.kind {
	case uBin:
		if u.bin.cas != 0 {
			c.lastCAS = u.bin.cas
		}
		return binary && u.bin.op == opNoop && u.bin.opaque == sentinelOpaque && u.bin.lens == nil
	case uText:
		if _, cas, ok := valueHeader(u.b); ok && cas != 0 {
			c.lastCAS = cas
		}
		if bytes.HasPrefix(u.b, []byte("VERSION ")) && bytes.HasSuffix(u.b, []byte("\r\n")) {
			c.versions = max(c.versions-1, 0)
			return !binary && c.versions == 0
		}
	}
	return false
}

// fail records a read error: a timeout leaves the connection out of step,
// anything else means the server closed it.
func (rp *replay) fail(n int, c *rconn, err error) *unit {
	if isTimeout(err) {
		c.broken = true
		return event("timeout")
	}
	rp.drop(n)
	return event("closed")
}

func isTimeout(err error) bool {
	return errors.Is(err, os.ErrDeadlineExceeded)
}

func event(s string) *unit { return &unit{kind: uEvent, b: []byte(s)} }

// readUnits reads one reply: a binary reply, a text line, or a VALUE line
// and its data block. When the read fails it returns the error, after an
// event with the bytes read of a reply cut short, if any.
func (c *rconn) readUnits(deadline time.Time) ([]*unit, error) {
	if err := c.nc.SetReadDeadline(deadline); err != nil {
		return nil, err
	}
	b, err := c.r.Peek(1)
	if err != nil {
		return nil, err
	}
	if b[0] == magicResponse {
		var p packet
		if n, err := io.ReadFull(c.r, p.header[:]); err != nil {
			return cut(p.header[:n]), err
		}
		if p.bodyLen() > maxReply {
			c.broken = true
			return []*unit{event(fmt.Sprintf("binary reply of %d bytes: not read", p.bodyLen()))}, nil
		}
		p.body = make([]byte, p.bodyLen())
		if n, err := io.ReadFull(c.r, p.body); err != nil {
			return cut(append(p.header[:], p.body[:n]...)), err
		}
		return []*unit{{kind: uBin, bin: decode(&p)}}, nil
	}
	var line []byte
	for {
		chunk, err := c.r.ReadSlice('\n')
		line = append(line, chunk...)
		if err == nil {
			break
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return cut(line), err
		}
		if len(line) > maxReply {
			c.broken = true
			return []*unit{event(fmt.Sprintf("text line of over %d bytes: not read", maxReply))}, nil
		}
	}
	text := &unit{kind: uText, b: line}
	size, _, ok := valueHeader(line)
	if !ok {
		return []*unit{text}, nil
	}
	data := make([]byte, size+2)
	if n, err := io.ReadFull(c.r, data); err != nil {
		return append([]*unit{text}, cut(data[:n])...), err
	}
	d := &unit{kind: uData, b: data[:size]}
	if !bytes.Equal(data[size:], []byte("\r\n")) {
		d.dataEnd = data[size:]
	}
	return []*unit{text, d}, nil
}

// cut returns the event of a reply cut short after b, or nothing if b is
// empty.
func cut(b []byte) []*unit {
	if len(b) == 0 {
		return nil
	}
	return []*unit{event("partial " + quote(b))}
}
