package latchtest

// Scenario transcripts
//
// A scenario file (by convention testdata/scenarios/*.txt) holds scenarios
// that are replayed against a memcached-protocol server over one or more
// connections; the replies, normalized where two correct servers may differ,
// form the scenario's transcript. Replaying a file against yrmcds and
// against latch and comparing the transcripts is the differential suite.
//
// A scenario starts with a title line and runs to the next one:
//
//	=== <title>
//
// Blank lines are ignored. Lines starting with # are comments, allowed
// anywhere; the comments between a title and the first step are the
// scenario's notes (Scenario.Notes).
// Every other line is a step, a directive or an expected reply.
//
// Steps send one request on connection N (a positive integer). Connections
// are dialed when first used and after they were closed, so `@close 1`
// followed by `1: ...` talks on a new connection.
//
//	N: <text>        a text line: <text> unescaped, then CRLF
//	N~ <text>        raw text: <text> unescaped, nothing appended
//	N.b: <request>   one binary request built from named fields (below)
//	N.x: <hex>       raw bytes, in hex (spaces allowed between bytes)
//
// Text is unescaped with \r \n \t \\ \xHH and two macros: {cas} is the last
// non-zero CAS this connection saw in a reply (a VALUE line's fifth token or
// a binary response header; 0 before any), and {rep N X} is X (escapes
// allowed, no spaces or braces) repeated N times, for long keys and values.
// Write a literal brace as \x7b or \x7d. Exactly one space after the marker
// is dropped; the rest of the line, trailing spaces included, is sent.
//
// A binary request is an opcode followed by space-separated name=value
// fields:
//
//	1.b: Set key=k value=hello flags=0xdeadbeef exp=0 opaque=7
//	1.b: op=0x30 key=k
//
// The opcode is a name of yrmcds's (Get, Set, Add, Replace, Delete,
// Increment, Decrement, Quit, Flush, GetQ, Noop, Version, GetK, GetKQ,
// Append, Prepend, Stat, SetQ, AddQ, ReplaceQ, DeleteQ, IncrementQ,
// DecrementQ, QuitQ, FlushQ, AppendQ, PrependQ, Touch, GaT, GaTQ, GaTK,
// GaTKQ, Lock, LockQ, Unlock, UnlockQ, UnlockAll, UnlockAllQ, LaG, LaGQ,
// LaGK, LaGKQ, RaU, RaUQ, Keys) or op=0xNN. Fields: key, value (unescaped
// text with the macros above); flags, exp, cas, opaque, delta, initial,
// dtype, vbucket (numbers, decimal or 0x hex; cas may be {cas}); extras=HEX
// (replaces the default extras; extras= sends none); and, to build broken
// headers, magic, keylen, extlen and bodylen, which override the computed
// header fields. Default extras: flags and exp (8 bytes) for Set, Add,
// Replace, their quiet variants, RaU and RaUQ; delta, initial and exp
// (20 bytes) for the Increment and Decrement opcodes; exp (4 bytes) for
// Touch and the GaT opcodes; for any other opcode none, or exp (4 bytes)
// when exp= is given.
//
// A step is synced: after it the runner sends a sentinel on the same
// connection and reads the replies up to the sentinel's reply, which it
// drops, so the replies recorded for the step are exactly the step's. The
// sentinel of a text step (N: and N~) is "version\r\n", whose reply is the
// first line starting "VERSION " beyond those owed to version commands the
// connection sent itself; the sentinel of a binary step (N.b: and N.x:) is a
// Noop with opaque 0x5e971e1c, answered by a 24-byte Noop reply. A step
// whose connection marker ends in ! (1!, 1!~, 1.b!:, 1.x!:) is not synced:
// nothing is read, and its replies are recorded with the next step that
// reads on that connection. Use it for requests that leave the server
// waiting for more bytes: a storage command's line, whose data block
// follows in the next step (otherwise the sentinel would be read as the
// data), a truncated header; and for requests after which the server
// closes the connection (quit, Quit), followed by @eof: a server that
// closes a socket holding an unread sentinel resets it.
//
//	1!: set k 0 0 5
//	1: hello
//
// Directives:
//
//	@close N      close connection N (FIN), then wait 250ms
//	@reset N      close connection N with SO_LINGER 0 (RST), then wait 250ms
//	@sleep <dur>  sleep, e.g. @sleep 1100ms (a time.ParseDuration string)
//	@read N       record what arrives on N until it is quiet for 500ms
//	              (2s at most)
//	@eof N        record what arrives on N until the server closes it (3s at
//	              most); the connection is then closed
//
// In a scenario run against one server only, a golden scenario, each step
// or directive is followed by its expected replies, one line each, written
// exactly as a transcript shows them (see Transcript.Lines):
//
//	1: set k 0 0 1
//	1: x
//	< STORED
//
// A transcript lists every step and directive of the scenario with the
// replies it recorded, which are:
//
//	< <line>          a text line that ended in CRLF, without it (escaped
//	                  as above, so "\\" is a backslash and a trailing "\n"
//	                  a line that ended in a bare LF)
//	<+ <data>         the data block of a VALUE line (its CRLF dropped)
//	<b <op> <status>  a binary reply: opcode name (or op=0xNN), status
//	                  name (or 0xNNNN), then when not zero or empty
//	                  opaque=0xNNNNNNNN cas=* extras=HEX key="..."
//	                  value="..." dtype=0xNN magic=0xNN (and keylen,
//	                  extlen, bodylen when they do not add up)
//	<! <event>        closed: the server closed the connection (FIN or
//	                  RST); timeout: no sentinel reply within 3s; partial
//	                  "...": the bytes of a reply cut short; skipped: the
//	                  connection timed out before, so what it receives
//	                  is no longer read
//
// Data, keys and values longer than 200 bytes are shown as their length
// and a hash. Transcripts are normalized only where two correct servers
// must differ:
//
//   - version strings: "VERSION <version>", and value="<version>" in a
//     binary Version reply;
//   - CAS values: only zero or not (a non-zero CAS shows as *), in VALUE
//     lines and binary headers;
//   - stats: each run of STAT lines (or of binary Stat replies) keeps only
//     the stat names yrmcds reports in one group (general, settings,
//     items, sizes or ops: the group of the run's first name that belongs
//     to a single one), in the order received, with values shown as *;
//   - keys: each run of "VALUE <key>" lines (or of binary Keys replies) is
//     sorted.

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Scenario is one scenario of a transcript file.
type Scenario struct {
	// Title is the text after "=== ".
	Title string
	// File and Line locate the title line.
	File string
	Line int
	// Notes are the comment lines between the title and the first step,
	// without their "#".
	Notes []string
	// Steps are the steps and directives, in order.
	Steps []*Step
}

// Pos returns "file:line" of the scenario's title.
func (sc *Scenario) Pos() string { return fmt.Sprintf("%s:%d", sc.File, sc.Line) }

// Golden reports whether the scenario states the replies it expects: any of
// its steps has expected reply lines.
func (sc *Scenario) Golden() bool {
	for _, st := range sc.Steps {
		if len(st.Want) > 0 {
			return true
		}
	}
	return false
}

// Want returns the transcript the scenario expects, in the form of
// Transcript.Lines: each step's source line followed by its expected
// replies.
func (sc *Scenario) Want() []string {
	var out []string
	for _, st := range sc.Steps {
		out = append(out, st.Src)
		out = append(out, st.Want...)
	}
	return out
}

// StepKind says what a step does.
type StepKind uint8

// The step kinds.
const (
	SendText   StepKind = iota // N: text line, CRLF appended
	SendRaw                    // N~ raw text
	SendBinary                 // N.b: built binary request
	SendHex                    // N.x: raw bytes
	Close                      // @close N
	Reset                      // @reset N
	Sleep                      // @sleep D
	Read                       // @read N
	EOF                        // @eof N
)

// Step is one step or directive of a scenario.
type Step struct {
	// Src is the source line, as written.
	Src string
	// Line is its line number.
	Line int
	Kind StepKind
	// Conn is the connection, for every kind but Sleep.
	Conn int
	// NoSync: the step is not followed by a sentinel (a ! marker).
	NoSync bool
	// Dur is the duration of a Sleep.
	Dur time.Duration
	// Want holds the expected reply lines that follow the step in a
	// golden scenario.
	Want []string

	text []segment // SendText, SendRaw, SendHex: the bytes to send
	bin  *binSpec  // SendBinary
}

// segment is a piece of a request: literal bytes or, when cas is set, the
// connection's last CAS in decimal.
type segment struct {
	lit []byte
	cas bool
}

// stepRE matches a send step's connection marker and separator.
var stepRE = regexp.MustCompile(`^([0-9]+)(\.[bx])?(!)?([:~]) ?(.*)$`)

// LoadScenarios parses every file matching pattern (a filepath.Glob
// pattern), in name order. Scenario.File is the file's base name.
func LoadScenarios(pattern string) ([]*Scenario, error) {
	names, err := filepath.Glob(pattern)
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("latchtest: no scenario file matches %s", pattern)
	}
	slices.Sort(names)
	var all []*Scenario
	for _, name := range names {
		src, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		scs, err := ParseScenarios(filepath.Base(name), src)
		if err != nil {
			return nil, err
		}
		all = append(all, scs...)
	}
	return all, nil
}

// ParseScenarios parses the scenarios of one transcript file; name is used
// in errors and as Scenario.File.
func ParseScenarios(name string, src []byte) ([]*Scenario, error) {
	var (
		out  []*Scenario
		cur  *Scenario
		errs []string
	)
	titles := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(src))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSuffix(sc.Text(), "\r")
		fail := func(format string, args ...any) {
			errs = append(errs, fmt.Sprintf("%s:%d: %s", name, n, fmt.Sprintf(format, args...)))
		}
		switch {
		case strings.TrimSpace(line) == "":
			continue
		case strings.HasPrefix(line, "==="):
			title := strings.TrimSpace(strings.TrimPrefix(line, "==="))
			if title == "" {
				fail("scenario without a title")
			}
			if prev, ok := titles[title]; ok {
				fail("title %q already used on line %d", title, prev)
			}
			titles[title] = n
			cur = &Scenario{Title: title, File: name, Line: n}
			out = append(out, cur)
			continue
		case strings.HasPrefix(line, "#"):
			if cur != nil && len(cur.Steps) == 0 {
				cur.Notes = append(cur.Notes, strings.TrimSpace(strings.TrimPrefix(line, "#")))
			}
			continue
		case cur == nil:
			fail("%q before the first === title", line)
			continue
		case strings.HasPrefix(line, "<"):
			if len(cur.Steps) == 0 {
				fail("expected reply before the first step")
				continue
			}
			st := cur.Steps[len(cur.Steps)-1]
			st.Want = append(st.Want, line)
			continue
		}
		st, err := parseStep(line)
		if err != nil {
			fail("%v", err)
			continue
		}
		st.Line = n
		cur.Steps = append(cur.Steps, st)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("latchtest: %s: %w", name, err)
	}
	for _, s := range out {
		if len(s.Steps) == 0 {
			errs = append(errs, fmt.Sprintf("%s: scenario %q has no steps", s.Pos(), s.Title))
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("latchtest: bad scenario file:\n%s", strings.Join(errs, "\n"))
	}
	return out, nil
}

// parseStep parses one step or directive line.
func parseStep(line string) (*Step, error) {
	st := &Step{Src: line}
	if strings.HasPrefix(line, "@") {
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("directive %q: want one argument", line)
		}
		kinds := map[string]StepKind{"@close": Close, "@reset": Reset, "@sleep": Sleep, "@read": Read, "@eof": EOF}
		kind, ok := kinds[f[0]]
		if !ok {
			return nil, fmt.Errorf("unknown directive %q", f[0])
		}
		st.Kind = kind
		if kind == Sleep {
			d, err := time.ParseDuration(f[1])
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("@sleep %q: want a positive duration", f[1])
			}
			st.Dur = d
			return st, nil
		}
		c, err := strconv.Atoi(f[1])
		if err != nil || c <= 0 {
			return nil, fmt.Errorf("%s %q: want a connection number", f[0], f[1])
		}
		st.Conn = c
		return st, nil
	}
	m := stepRE.FindStringSubmatch(line)
	if m == nil {
		return nil, fmt.Errorf("cannot parse %q: want a step (N: N~ N.b: N.x:), a directive (@...), a reply (<...) or a comment (#...)", line)
	}
	c, err := strconv.Atoi(m[1])
	if err != nil || c <= 0 {
		return nil, fmt.Errorf("bad connection number %q", m[1])
	}
	st.Conn, st.NoSync = c, m[3] == "!"
	body := m[5]
	switch {
	case m[2] == "" && m[4] == ":":
		st.Kind = SendText
		st.text, err = parseText(body)
		st.text = append(st.text, segment{lit: []byte("\r\n")})
	case m[2] == "" && m[4] == "~":
		st.Kind = SendRaw
		st.text, err = parseText(body)
	case m[2] == ".x" && m[4] == ":":
		st.Kind = SendHex
		var b []byte
		b, err = hex.DecodeString(strings.ReplaceAll(body, " ", ""))
		st.text = []segment{{lit: b}}
	case m[2] == ".b" && m[4] == ":":
		st.Kind = SendBinary
		st.bin, err = parseBinSpec(body)
	default:
		return nil, fmt.Errorf("cannot parse %q: %s steps take \":\"", line, m[2])
	}
	if err != nil {
		return nil, fmt.Errorf("%q: %w", line, err)
	}
	return st, nil
}

// parseText unescapes s and expands its macros.
func parseText(s string) ([]segment, error) {
	var (
		out []segment
		lit []byte
	)
	flush := func() {
		if len(lit) > 0 {
			out = append(out, segment{lit: lit})
			lit = nil
		}
	}
	for i := 0; i < len(s); {
		switch s[i] {
		case '\\':
			b, n, err := unescape(s[i:])
			if err != nil {
				return nil, err
			}
			lit = append(lit, b)
			i += n
		case '{':
			j := strings.IndexByte(s[i:], '}')
			if j < 0 {
				return nil, fmt.Errorf("unterminated macro at %q", s[i:])
			}
			macro := s[i+1 : i+j]
			i += j + 1
			if macro == "cas" {
				flush()
				out = append(out, segment{cas: true})
				continue
			}
			f := strings.Fields(macro)
			if len(f) != 3 || f[0] != "rep" {
				return nil, fmt.Errorf("unknown macro {%s}: want {cas} or {rep N X}", macro)
			}
			n, err := strconv.Atoi(f[1])
			if err != nil || n < 0 || n > 64<<20 {
				return nil, fmt.Errorf("{%s}: bad count", macro)
			}
			unit, err := parseText(f[2])
			if err != nil {
				return nil, err
			}
			if len(unit) != 1 || unit[0].cas {
				return nil, fmt.Errorf("{%s}: want literal text to repeat", macro)
			}
			lit = append(lit, bytes.Repeat(unit[0].lit, n)...)
		case '}':
			return nil, fmt.Errorf("unmatched } (write \\x7d)")
		default:
			lit = append(lit, s[i])
			i++
		}
	}
	flush()
	return out, nil
}

// unescape decodes the escape sequence at the start of s and returns the
// byte and the sequence's length.
func unescape(s string) (byte, int, error) {
	if len(s) < 2 {
		return 0, 0, fmt.Errorf("dangling backslash")
	}
	switch s[1] {
	case 'r':
		return '\r', 2, nil
	case 'n':
		return '\n', 2, nil
	case 't':
		return '\t', 2, nil
	case '\\':
		return '\\', 2, nil
	case 'x':
		if len(s) >= 4 {
			if v, err := strconv.ParseUint(s[2:4], 16, 8); err == nil {
				return byte(v), 4, nil
			}
		}
		return 0, 0, fmt.Errorf("bad escape %q: want \\xHH", s[:min(len(s), 4)])
	}
	return 0, 0, fmt.Errorf("bad escape %q: want \\r \\n \\t \\\\ or \\xHH", s[:2])
}

// literal returns the bytes of segs with {cas} replaced by cas.
func literal(segs []segment, cas uint64) []byte {
	var b []byte
	for _, s := range segs {
		if s.cas {
			b = strconv.AppendUint(b, cas, 10)
		} else {
			b = append(b, s.lit...)
		}
	}
	return b
}

// countVersionCommands counts the text version commands in p: lines whose
// first token is "version" and that end in CRLF. Their replies are not the
// sentinel's.
func countVersionCommands(p []byte) int {
	n := 0
	for _, line := range bytes.SplitAfter(p, []byte("\n")) {
		if !bytes.HasSuffix(line, []byte("\r\n")) {
			continue
		}
		// Only the space separates tokens, as in yrmcds. A version with
		// more tokens is owed a VERSION too: yrmcds, memcached 1.6 and
		// latch ignore them.
		line = bytes.TrimLeft(bytes.TrimSuffix(line, []byte("\r\n")), " ")
		if cmd, _, _ := bytes.Cut(line, []byte(" ")); string(cmd) == "version" {
			n++
		}
	}
	return n
}
