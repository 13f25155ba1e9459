package latchtest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// unitKind is the kind of a reply unit.
type unitKind uint8

const (
	uText  unitKind = iota // a text line
	uData                  // the data block of a VALUE line
	uBin                   // a binary reply
	uEvent                 // something that happened to the connection
)

// unit is one reply, or one event, as read from a connection.
type unit struct {
	kind unitKind
	// text: the line with its terminator; data: the block without its
	// CRLF; event: the event's text.
	b []byte
	// dataEnd: the two bytes that followed a data block, when not CRLF.
	dataEnd []byte
	bin     *reply
}

// reply is a decoded binary reply.
type reply struct {
	magic, op, dtype byte
	status           uint16
	opaque           uint32
	cas              uint64
	extras, key      []byte
	value            []byte
	// lens holds keylen, extlen, bodylen when they do not add up; the
	// whole body is then in value.
	lens *[3]int
	// version: the value is a version string (normalized).
	version bool
	// masked: the value is a stat value (normalized).
	masked bool
}

// decode turns a packet into a reply.
func decode(p *packet) *reply {
	r := &reply{
		magic:  p.header[0],
		op:     p.op(),
		dtype:  p.header[5],
		status: p.status(),
		opaque: p.opaque(),
		cas:    p.cas(),
	}
	if p.consistent() {
		r.extras, r.key, r.value = p.parts()
	} else {
		r.lens = &[3]int{p.keyLen(), p.extLen(), p.bodyLen()}
		r.value = p.body
	}
	return r
}

// render writes u as a transcript line.
func (u *unit) render() []string {
	switch u.kind {
	case uText:
		if line, ok := bytes.CutSuffix(u.b, []byte("\r\n")); ok {
			return []string{"< " + esc(line)}
		}
		return []string{"< " + esc(u.b)}
	case uData:
		out := []string{"<+ " + esc(u.b)}
		if u.dataEnd != nil {
			out = append(out, "<! no CRLF after the data block: "+quote(u.dataEnd))
		}
		return out
	case uBin:
		return []string{u.bin.render()}
	}
	return []string{"<! " + string(u.b)}
}

// render writes r as a transcript line.
func (r *reply) render() string {
	var b strings.Builder
	b.WriteString("<b ")
	if name, ok := opNames[r.op]; ok {
		b.WriteString(name)
	} else {
		fmt.Fprintf(&b, "op=0x%02x", r.op)
	}
	if name, ok := statusNames[r.status]; ok {
		b.WriteString(" " + name)
	} else {
		fmt.Fprintf(&b, " 0x%04x", r.status)
	}
	if r.opaque != 0 {
		fmt.Fprintf(&b, " opaque=0x%08x", r.opaque)
	}
	if r.cas != 0 {
		b.WriteString(" cas=*")
	}
	if len(r.extras) > 0 {
		b.WriteString(" extras=" + hex.EncodeToString(r.extras))
	}
	if len(r.key) > 0 {
		b.WriteString(" key=" + quote(r.key))
	}
	switch {
	case r.version:
		b.WriteString(" value=<version>")
	case r.masked:
		b.WriteString(" value=*")
	case len(r.value) > 0:
		b.WriteString(" value=" + quote(r.value))
	}
	if r.dtype != 0 {
		fmt.Fprintf(&b, " dtype=0x%02x", r.dtype)
	}
	if r.magic != magicResponse {
		fmt.Fprintf(&b, " magic=0x%02x", r.magic)
	}
	if r.lens != nil {
		fmt.Fprintf(&b, " keylen=%d extlen=%d bodylen=%d", r.lens[0], r.lens[1], r.lens[2])
	}
	return b.String()
}

// maxShown is the longest data shown in full in a transcript.
const maxShown = 200

// esc escapes b for a transcript: printable ASCII as is, a backslash as
// \\, \r \n \t, other bytes as \xHH. Longer than maxShown bytes, it is
// summarized as its length and hash.
func esc(b []byte) string {
	if len(b) > maxShown {
		return summary(b)
	}
	var s strings.Builder
	for _, c := range b {
		switch {
		case c == '\\':
			s.WriteString(`\\`)
		case c == '\r':
			s.WriteString(`\r`)
		case c == '\n':
			s.WriteString(`\n`)
		case c == '\t':
			s.WriteString(`\t`)
		case c < 0x20 || c > 0x7e:
			fmt.Fprintf(&s, `\x%02x`, c)
		default:
			s.WriteByte(c)
		}
	}
	return s.String()
}

// quote is esc in double quotes, with a double quote escaped as \x22.
func quote(b []byte) string {
	if len(b) > maxShown {
		return summary(b)
	}
	return `"` + strings.ReplaceAll(esc(b), `"`, `\x22`) + `"`
}

// summary shows b as its length and the start of its SHA-256.
func summary(b []byte) string {
	sum := sha256.Sum256(b)
	return fmt.Sprintf("<%d bytes sha256:%x>", len(b), sum[:8])
}

// Stat groups as yrmcds 1.1.9 reports them (yrmcds.md 9), in its order.
var statGroups = [][]string{
	{"pid", "time", "version", "pointer_size", "rusage_user", "rusage_system",
		"curr_connections", "total_connections", "curr_items", "total_items",
		"get_hits", "get_misses", "cas_hits", "cas_misses", "cas_badval", "bytes",
		"limit_maxbytes", "threads", "gc_count", "slaves", "last_expirations",
		"last_evictions", "evictions", "last_gc_elapsed", "total_gc_elapsed"},
	{"maxbytes", "tcpport", "replport", "virtual_ip", "evictions", "cas_enabled",
		"locking", "secure_erase", "lock_memory", "tmp_dir", "buckets",
		"item_size_max", "num_threads", "gc_interval"},
	{"items:1:number", "items:1:age", "items:1:evicted", "items:1:conflicts", "items:1:largest"},
	{"1024", "4096", "16384", "65536", "262144", "1048576", "4194304", "huge"},
	opsStats(),
}

// opsStats returns the names of yrmcds's "stats ops".
func opsStats() []string {
	var out []string
	for _, c := range strings.Fields("set add replace append prepend cas get gets delete incr decr touch " +
		"lock unlock unlock_all slabs stats flush_all version verbosity quit keys") {
		out = append(out, "text:"+c)
	}
	for _, c := range strings.Fields("Get Set Add Replace Delete Increment Decrement Quit Flush GetQ Noop " +
		"Version GetK GetKQ Append Prepend Stat SetQ AddQ ReplaceQ DeleteQ IncrementQ DecrementQ QuitQ " +
		"FlushQ AppendQ PrependQ Touch GaT GaTQ GaTK GaTKQ Lock LockQ Unlock UnlockQ UnlockAll UnlockAllQ " +
		"LaG LaGQ LaGK LaGKQ RaU RaUQ Keys") {
		out = append(out, "binary:"+c)
	}
	return out
}

// statGroup returns the group of yrmcds's stats that names belongs to: the
// group of its first name that belongs to exactly one group, else of its
// first name that belongs to any; nil if none does.
func statGroup(names []string) []string {
	var first []string
	for _, n := range names {
		var found [][]string
		for _, g := range statGroups {
			if slices.Contains(g, n) {
				found = append(found, g)
			}
		}
		if len(found) == 1 {
			return found[0]
		}
		if len(found) > 1 && first == nil {
			first = found[0]
		}
	}
	return first
}

// textTokens splits a text reply line (without its terminator) at spaces.
func textTokens(u *unit) []string {
	line := strings.TrimRight(string(u.b), "\r\n")
	return strings.Split(line, " ")
}

// stat reports whether u is a stat and returns its name.
func (u *unit) stat() (string, bool) {
	switch u.kind {
	case uText:
		if t := textTokens(u); len(t) >= 2 && t[0] == "STAT" && bytes.HasSuffix(u.b, []byte("\r\n")) {
			return t[1], true
		}
	case uBin:
		if r := u.bin; r.op == opStat && r.status == 0 && len(r.key) > 0 && r.lens == nil {
			return string(r.key), true
		}
	}
	return "", false
}

// keysEntry reports whether u is one key of a keys reply and returns it.
func (u *unit) keysEntry() (string, bool) {
	switch u.kind {
	case uText:
		if t := textTokens(u); len(t) == 2 && t[0] == "VALUE" && bytes.HasSuffix(u.b, []byte("\r\n")) {
			return t[1], true
		}
	case uBin:
		if r := u.bin; r.op == opKeys && r.status == 0 && len(r.key) > 0 && r.lens == nil {
			return string(r.key), true
		}
	}
	return "", false
}

// normalize rewrites the units of one step where two correct servers
// differ (see the format's description): version strings, CAS values,
// stats and the order of keys.
func normalize(units []*unit) []*unit {
	var out []*unit
	for i := 0; i < len(units); {
		// A run of stats.
		if _, ok := units[i].stat(); ok {
			j := i
			var names []string
			for ; j < len(units); j++ {
				n, ok := units[j].stat()
				if !ok || units[j].kind != units[i].kind {
					break
				}
				names = append(names, n)
			}
			group := statGroup(names)
			for k, u := range units[i:j] {
				if !slices.Contains(group, names[k]) {
					continue
				}
				if u.kind == uText {
					out = append(out, &unit{kind: uText, b: []byte("STAT " + names[k] + " *\r\n")})
				} else {
					r := *u.bin
					r.masked = true
					out = append(out, &unit{kind: uBin, bin: &r})
				}
			}
			i = j
			continue
		}
		// A run of keys.
		if _, ok := units[i].keysEntry(); ok {
			j := i
			for ; j < len(units); j++ {
				if _, ok := units[j].keysEntry(); !ok || units[j].kind != units[i].kind {
					break
				}
			}
			run := slices.Clone(units[i:j])
			slices.SortStableFunc(run, func(a, b *unit) int {
				ka, _ := a.keysEntry()
				kb, _ := b.keysEntry()
				return strings.Compare(ka, kb)
			})
			out = append(out, run...)
			i = j
			continue
		}
		u := units[i]
		i++
		switch u.kind {
		case uText:
			t := textTokens(u)
			if t[0] == "VERSION" && bytes.HasSuffix(u.b, []byte("\r\n")) {
				u = &unit{kind: uText, b: []byte("VERSION <version>\r\n")}
			} else if len(t) == 5 && t[0] == "VALUE" && t[4] != "0" && bytes.HasSuffix(u.b, []byte("\r\n")) {
				t[4] = "*"
				u = &unit{kind: uText, b: []byte(strings.Join(t, " ") + "\r\n")}
			}
		case uBin:
			if r := u.bin; r.op == opVer && r.status == 0 && r.lens == nil && len(r.value) > 0 {
				c := *r
				c.version = true
				u = &unit{kind: uBin, bin: &c}
			}
		}
		out = append(out, u)
	}
	return out
}

// valueHeader parses a text "VALUE <key> <flags> <bytes> [<cas>]" line and
// returns the data block's length and the CAS (0 if none).
func valueHeader(line []byte) (n int, cas uint64, ok bool) {
	body, crlf := bytes.CutSuffix(line, []byte("\r\n"))
	if !crlf || !bytes.HasPrefix(body, []byte("VALUE ")) {
		return 0, 0, false
	}
	t := strings.Split(string(body), " ")
	if len(t) != 4 && len(t) != 5 {
		return 0, 0, false
	}
	size, err := strconv.ParseUint(t[3], 10, 31)
	if err != nil {
		return 0, 0, false
	}
	if len(t) == 5 {
		if cas, err = strconv.ParseUint(t[4], 10, 64); err != nil {
			return 0, 0, false
		}
	}
	return int(size), cas, true
}
