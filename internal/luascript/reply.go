package luascript

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// Kind is the type of a Reply: the RESP2 and RESP3 reply types.
type Kind uint8

// The reply kinds.
const (
	Nil      Kind = iota // null bulk string (RESP3: null)
	NilArray             // null array (RESP3: null)
	Int                  // Reply.Int
	Bulk                 // Reply.Str
	Status               // Reply.Str
	Error                // Reply.Str: the message, starting with its code ("ERR ...")
	Array                // Reply.Elems
	Map                  // Reply.Elems: key, value, key, value...
	Set                  // Reply.Elems
	Double               // Reply.Num
	Bool                 // Reply.Int: 1 true, 0 false
	BigNum               // Reply.Str: the digits
	Verbatim             // Reply.Str: the text, Reply.Format its format ("txt")
)

// Reply is a Redis reply, as a command answers it to a script or a script
// answers its client.
type Reply struct {
	Kind   Kind
	Int    int64
	Num    float64
	Str    string
	Format string
	Elems  []Reply
}

// ErrorReply returns the error reply msg (which starts with its code), on
// one line, as Redis writes every error.
func ErrorReply(msg string) Reply { return Reply{Kind: Error, Str: oneLine(msg)} }

// smallInts are the Lua numbers 0 to 255 as values: the count a command
// answers (DEL's, EXISTS's, PEXPIRE's) needs no allocation.
var smallInts = func() (a [256]lua.LValue) {
	for i := range a {
		a[i] = lua.LNumber(i)
	}
	return a
}()

// toLua converts a command's reply to the Lua value a script sees, as
// Redis 7 does for the RESP version the script chose (redis.setresp).
// An error becomes a table with an err field.
func toLua(L *lua.LState, r *Reply, resp int) lua.LValue {
	switch r.Kind {
	case Nil, NilArray:
		if resp == 3 {
			return lua.LNil
		}
		return lua.LFalse
	case Int:
		if r.Int >= 0 && r.Int < int64(len(smallInts)) {
			return smallInts[r.Int]
		}
		return lua.LNumber(r.Int)
	case Bulk:
		return lua.LString(r.Str)
	case Status:
		t := L.CreateTable(0, 1)
		t.RawSetString("ok", lua.LString(r.Str))
		return t
	case Error:
		t := L.CreateTable(0, 1)
		t.RawSetString("err", lua.LString(r.Str))
		return t
	case Array:
		t := L.CreateTable(len(r.Elems), 0)
		for i := range r.Elems {
			t.RawSetInt(i+1, toLua(L, &r.Elems[i], resp))
		}
		return t
	case Map:
		m := L.CreateTable(0, len(r.Elems)/2)
		for i := 0; i+1 < len(r.Elems); i += 2 {
			m.RawSet(toLua(L, &r.Elems[i], resp), toLua(L, &r.Elems[i+1], resp))
		}
		t := L.CreateTable(0, 1)
		t.RawSetString("map", m)
		return t
	case Set:
		s := L.CreateTable(0, len(r.Elems))
		for i := range r.Elems {
			s.RawSet(toLua(L, &r.Elems[i], resp), lua.LTrue)
		}
		t := L.CreateTable(0, 1)
		t.RawSetString("set", s)
		return t
	case Double:
		t := L.CreateTable(0, 1)
		t.RawSetString("double", lua.LNumber(r.Num))
		return t
	case Bool:
		return lua.LBool(r.Int != 0)
	case BigNum:
		t := L.CreateTable(0, 1)
		t.RawSetString("big_number", lua.LString(r.Str))
		return t
	case Verbatim:
		v := L.CreateTable(0, 2)
		v.RawSetString("format", lua.LString(r.Format))
		v.RawSetString("string", lua.LString(r.Str))
		t := L.CreateTable(0, 1)
		t.RawSetString("verbatim_string", v)
		return t
	}
	return lua.LNil
}

// maxDepth bounds the nesting of a script's reply: deeper tables answer
// an error, as a reply Redis could not write either.
const maxDepth = 1000

// fromLua converts a script's return value to its reply, as Redis 7 does:
// a number is truncated to an integer, a string is a bulk string, true is
// 1 (a RESP3 boolean under redis.setresp(3)), false and nil are null; a
// table with an err or ok string is an error or status reply, with a
// double, big_number, map, set or verbatim_string field the RESP3 type
// (RESP2 forms otherwise), and any other table an array of its elements
// from 1 to the first nil.
func fromLua(v lua.LValue, resp, depth int) Reply {
	switch v := v.(type) {
	case lua.LString:
		return Reply{Kind: Bulk, Str: string(v)}
	case lua.LNumber:
		return Reply{Kind: Int, Int: truncate(float64(v))}
	case lua.LBool:
		if resp == 3 {
			return Reply{Kind: Bool, Int: b2i(bool(v))}
		}
		if v {
			return Reply{Kind: Int, Int: 1}
		}
		return Reply{Kind: Nil}
	case *lua.LTable:
		if depth > maxDepth {
			return ErrorReply("ERR reached lua stack limit")
		}
		if s, ok := v.RawGetString("err").(lua.LString); ok {
			return ErrorReply(string(s))
		}
		if s, ok := v.RawGetString("ok").(lua.LString); ok {
			return Reply{Kind: Status, Str: oneLine(string(s))}
		}
		if n, ok := v.RawGetString("double").(lua.LNumber); ok {
			return Reply{Kind: Double, Num: float64(n)}
		}
		if s, ok := v.RawGetString("big_number").(lua.LString); ok {
			return Reply{Kind: BigNum, Str: oneLine(string(s))}
		}
		if m, ok := v.RawGetString("map").(*lua.LTable); ok {
			r := Reply{Kind: Map}
			m.ForEach(func(k, val lua.LValue) {
				r.Elems = append(r.Elems, fromLua(k, resp, depth+1), fromLua(val, resp, depth+1))
			})
			return r
		}
		if s, ok := v.RawGetString("set").(*lua.LTable); ok {
			r := Reply{Kind: Set}
			s.ForEach(func(k, _ lua.LValue) { r.Elems = append(r.Elems, fromLua(k, resp, depth+1)) })
			return r
		}
		if vs, ok := v.RawGetString("verbatim_string").(*lua.LTable); ok {
			f, ok1 := vs.RawGetString("format").(lua.LString)
			s, ok2 := vs.RawGetString("string").(lua.LString)
			if ok1 && ok2 {
				return Reply{Kind: Verbatim, Str: string(s), Format: string(f)}
			}
		}
		r := Reply{Kind: Array}
		for i := 1; ; i++ {
			e := v.RawGetInt(i)
			if e == lua.LNil {
				break
			}
			r.Elems = append(r.Elems, fromLua(e, resp, depth+1))
		}
		return r
	}
	return Reply{Kind: Nil}
}

// truncate converts a Lua number to an integer as Redis's C cast does on
// amd64: toward zero, and the smallest integer for what does not fit.
func truncate(f float64) int64 {
	if math.IsNaN(f) || f >= 9223372036854775807.0 || f < -9223372036854775808.0 {
		return math.MinInt64
	}
	return int64(f)
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// oneLine replaces line breaks with spaces, as Redis does in a status or
// error reply.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, s)
}

// argString converts an argument of redis.call to the bytes of a command
// argument, as Redis does: strings as they are, numbers as Lua 5.1 prints
// them ("%.14g"); ok is false for any other type.
func argString(v lua.LValue) (string, bool) {
	switch v := v.(type) {
	case lua.LString:
		return string(v), true
	case lua.LNumber:
		return fmt.Sprintf("%.14g", float64(v)), true
	}
	return "", false
}

// AppendRESP appends r, encoded for a client of RESP version proto (2 or
// 3), to b: the RESP3 types take their RESP2 forms for a RESP2 client, as
// Redis writes them (a map as a flat array, a double as a bulk string...).
func (r *Reply) AppendRESP(b []byte, proto int) []byte {
	head := func(c byte, n int64) []byte {
		b = append(b, c)
		b = strconv.AppendInt(b, n, 10)
		return append(b, '\r', '\n')
	}
	bulk := func(s string) []byte {
		b = head('$', int64(len(s)))
		b = append(b, s...)
		return append(b, '\r', '\n')
	}
	switch r.Kind {
	case Nil:
		if proto == 3 {
			return append(b, "_\r\n"...)
		}
		return append(b, "$-1\r\n"...)
	case NilArray:
		if proto == 3 {
			return append(b, "_\r\n"...)
		}
		return append(b, "*-1\r\n"...)
	case Int:
		return head(':', r.Int)
	case Bulk:
		return bulk(r.Str)
	case Status:
		b = append(b, '+')
		b = append(b, oneLine(r.Str)...)
		return append(b, '\r', '\n')
	case Error:
		b = append(b, '-')
		b = append(b, oneLine(r.Str)...)
		return append(b, '\r', '\n')
	case Array, Set, Map:
		n := int64(len(r.Elems))
		switch {
		case proto == 3 && r.Kind == Set:
			b = head('~', n)
		case proto == 3 && r.Kind == Map:
			b = head('%', n/2)
		default:
			b = head('*', n)
		}
		for i := range r.Elems {
			b = r.Elems[i].AppendRESP(b, proto)
		}
		return b
	case Double:
		s := formatDouble(r.Num)
		if proto == 3 {
			b = append(b, ',')
			b = append(b, s...)
			return append(b, '\r', '\n')
		}
		return bulk(s)
	case Bool:
		if proto == 3 {
			if r.Int != 0 {
				return append(b, "#t\r\n"...)
			}
			return append(b, "#f\r\n"...)
		}
		return head(':', r.Int)
	case BigNum:
		if proto == 3 {
			b = append(b, '(')
			b = append(b, r.Str...)
			return append(b, '\r', '\n')
		}
		return bulk(r.Str)
	case Verbatim:
		if proto == 3 {
			b = head('=', int64(len(r.Str)+4))
			b = append(b, r.Format...)
			b = append(b, ':')
			b = append(b, r.Str...)
			return append(b, '\r', '\n')
		}
		return bulk(r.Str)
	}
	return append(b, "$-1\r\n"...)
}

// formatDouble writes a double as Redis does ("%.17g", inf, -inf, nan).
func formatDouble(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	return strconv.FormatFloat(f, 'g', 17, 64)
}
