package resp_test

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strings"
)

// luaCase is one script of the Lua differential test (luadiff_test.go),
// run the same way on latch and on redis-server. Keys are written as
// placeholders, "K1".. for string keys and "Z1".. for sorted sets, that
// the test turns into keys of its own.
type luaCase struct {
	name  string
	setup [][]string // commands run before the script, replies compared too
	body  string
	keys  []string // KEYS, placeholders
	argv  []string
	// how runs the script: "eval", "evalsha" (SCRIPT LOAD, then EVALSHA),
	// "again" (EVAL, then EVALSHA of its SHA1: EVAL caches it), "eval_ro",
	// "evalsha_ro", "noscript" (EVALSHA of a SHA1 never loaded), "flush"
	// (SCRIPT LOAD/EXISTS/FLUSH around an EVALSHA), "numkeys" (EVAL with
	// a wrong number of keys).
	how string
	// timed: the script may answer a lease left (PTTL) as it is, which
	// is compared as leases are, within luaPTTLSlack.
	timed bool
}

// Owner values of the generated scripts: a key Ki only ever holds ARGV[i]
// (see luaGen), so some look like numbers, as a script may compare them
// with tonumber.
var luaOwners = []string{"tokA", "tokB", "123", "-7", "3.0", "1700000000.5", "a b", "x\x00y"}

// luaGen writes random Lua scripts over the commands latch's Redis front
// end serves, deterministically from its seed.
//
// Latch's keys are locks: a plain SET over a key held by another value is
// refused (-LOCKED) where Redis overwrites it (docs/redis.md). The
// generator keeps to sequences where both agree: string key Ki
// (KEYS[i]) only ever holds its owner value ARGV[i], in the setup and in
// every SET, SETNX and GETSET of the script; the value that owns no key,
// ARGV[nk+1], is only compared with. No SET has the GET option, which
// latch refuses (docs/redis.md). Sorted-set keys Zj are never written
// by a string command, nor string keys by ZADD but with XX (a no-op on
// a key that is free, WRONGTYPE on a string). The difference itself is
// asserted by TestLuaDiffLocked.
type luaGen struct {
	r     *rand.Rand
	zset  bool // sorted-set commands too
	nk    int  // string keys: KEYS[1..nk], owners ARGV[1..nk]
	nz    int  // sorted-set keys: KEYS[nk+1..nk+nz]
	vars  []string
	depth int
	resp3 bool // the script has called redis.setresp(3)
	show  bool // the script uses its show function
	ro    bool // read-only commands only (EVAL_RO scripts)
}

func newLuaGen(seed uint64, zset bool) *luaGen {
	return &luaGen{r: rand.New(rand.NewPCG(seed, 0x6c7561)), zset: zset}
}

func (g *luaGen) n(k int) int             { return g.r.IntN(k) }
func (g *luaGen) p(pct int) bool          { return g.r.IntN(100) < pct }
func (g *luaGen) pick(s ...string) string { return s[g.r.IntN(len(s))] }

// otherArg is the ARGV index of the value that owns no key; leaseArg that
// of the lease in ms.
func (g *luaGen) otherArg() int { return g.nk + 1 }
func (g *luaGen) leaseArg() int { return g.nk + 2 }

// skey is a string key and the index of its owner in ARGV: KEYS[i], or,
// one time in ten, a key that the script names without declaring it in
// KEYS (as Redis allows outside a cluster), KEYS[i] .. ':u', which has the
// same owner.
func (g *luaGen) skey() (string, int) {
	i := 1 + g.n(g.nk)
	if g.p(10) {
		return fmt.Sprintf("KEYS[%d] .. ':u'", i), i
	}
	return fmt.Sprintf("KEYS[%d]", i), i
}

func (g *luaGen) zkey() string { return fmt.Sprintf("KEYS[%d]", g.nk+1+g.n(g.nz)) }

func (g *luaGen) anyKey() string {
	if g.nz > 0 && g.p(40) {
		return g.zkey()
	}
	k, _ := g.skey()
	return k
}

// name is a command name in a random case, as scripts write them.
func (g *luaGen) name(cmd string) string {
	switch g.n(4) {
	case 0:
		return "'" + strings.ToUpper(cmd) + "'"
	case 1:
		return `"` + cmd + `"`
	}
	return "'" + cmd + "'"
}

// lease is a lease in ms, long enough that timing never matters.
func (g *luaGen) lease() string {
	return g.pick(fmt.Sprintf("ARGV[%d]", g.leaseArg()), "'200000'", "300000", "tonumber(ARGV["+fmt.Sprint(g.leaseArg())+"])")
}

// value is a value to compare a key's value with.
func (g *luaGen) value() string {
	switch g.n(4) {
	case 0:
		return fmt.Sprintf("ARGV[%d]", g.otherArg())
	case 1:
		return g.pick("'tokA'", "'123'", "123", "false")
	}
	return fmt.Sprintf("ARGV[%d]", 1+g.n(g.nk))
}

// call returns the arguments of a redis.call: a command of the front end
// on a key; with volatile, its reply depends on time (PTTL) and must not
// be returned as is.
func (g *luaGen) call() (args string, volatile bool) {
	if g.nz > 0 && g.p(35) {
		return g.zcall(), false
	}
	k, i := g.skey()
	own := fmt.Sprintf("ARGV[%d]", i)
	if g.ro || g.p(35) { // reads
		switch g.n(8) {
		case 0, 1:
			return g.name("get") + ", " + k, false
		case 6:
			return g.name("ttl") + ", " + g.anyKey(), true
		case 7:
			return g.pick("'ping'", "'PING', 'hi'", "'echo', ARGV[1]", "'ECHO', 3.5"), false
		case 2:
			ks := []string{k}
			for g.p(40) {
				ks = append(ks, g.anyKey())
			}
			return g.name("exists") + ", " + strings.Join(ks, ", "), false
		case 3:
			return g.name("pttl") + ", " + g.anyKey(), true
		case 4:
			return g.name("type") + ", " + g.anyKey(), false
		default:
			if g.nz > 0 {
				return g.name("zscore") + ", " + k + ", 'a'", false // WRONGTYPE, or nil
			}
			return g.name("get") + ", " + k, false
		}
	}
	switch g.n(12) {
	case 0, 1, 2:
		a := g.name("set") + ", " + k + ", " + own
		cond := g.pick("", "", "NX", "XX")
		if cond != "" {
			a += ", '" + cond + "'"
		}
		switch g.n(5) {
		case 0:
			a += ", 'PX', " + g.lease()
		case 1:
			a += ", " + g.pick("'EX'", "'ex'") + ", " + g.pick("'300'", "200")
		case 2:
			a += ", 'KEEPTTL'"
		}
		return a, false
	case 3:
		return g.name("setnx") + ", " + k + ", " + own, false
	case 4:
		return g.name("getset") + ", " + k + ", " + own, false
	case 5, 6:
		ks := []string{k}
		for g.p(30) {
			ks = append(ks, g.anyKey())
		}
		return g.name(g.pick("del", "unlink")) + ", " + strings.Join(ks, ", "), false
	case 7, 8:
		return g.name("pexpire") + ", " + g.anyKey() + ", " + g.pick(g.lease(), g.lease(), "0", "-1"), false
	case 9:
		return g.name("expire") + ", " + g.anyKey() + ", " + g.pick("300", "'200'", "0"), false
	case 10:
		return g.name("get") + ", " + k, false
	default:
		if g.nz > 0 {
			return g.name("zadd") + ", " + k + ", 'XX', 1, 'a'", false // WRONGTYPE, or 0
		}
		return g.name("exists") + ", " + k, false
	}
}

var (
	zMembers = []string{"'a'", "'b'", "'c'", "ARGV[1]", "'1700000000123-x'"}
	zScores  = []string{"1", "'2.5'", "-3", "'1700000000123'", "'0.1'", "0", "'1e3'", "2.25"}
	zRanges  = []string{"'-inf'", "'+inf'", "0", "'(1'", "'2.5'", "1700000000123", "'(0.1'", "-3"}
)

// zcall is a sorted-set command on a sorted-set key (or, for reads, any
// key: WRONGTYPE on a string).
func (g *luaGen) zcall() string {
	z := g.zkey()
	if g.ro || g.p(40) {
		switch g.n(4) {
		case 0:
			return g.name("zcard") + ", " + g.anyKey()
		case 1:
			return g.name("zscore") + ", " + z + ", " + g.pick(zMembers...)
		case 2:
			a := g.name("zrange") + ", " + z + ", " + g.pick("0", "'1'", "-2") + ", " + g.pick("-1", "0", "'10'")
			if g.p(40) {
				a += ", 'WITHSCORES'"
			}
			return a
		default:
			a := g.name("zrange") + ", " + z + ", " + g.pick(zRanges...) + ", " + g.pick(zRanges...) + ", 'BYSCORE'"
			if g.p(30) {
				a += ", 'LIMIT', 0, " + g.pick("1", "2", "-1")
			}
			if g.p(40) {
				a += ", 'WITHSCORES'"
			}
			return a
		}
	}
	switch g.n(5) {
	case 0, 1:
		a := g.name("zadd") + ", " + z
		if g.p(25) {
			a += ", '" + g.pick("NX", "XX", "CH", "GT", "LT") + "'"
		}
		for i := 0; i == 0 || (i < 3 && g.p(40)); i++ {
			a += ", " + g.pick(zScores...) + ", " + g.pick(zMembers...)
		}
		return a
	case 2:
		a := g.name("zrem") + ", " + z + ", " + g.pick(zMembers...)
		if g.p(30) {
			a += ", " + g.pick(zMembers...)
		}
		return a
	case 3:
		return g.name("zremrangebyscore") + ", " + z + ", " + g.pick(zRanges...) + ", " + g.pick(zRanges...)
	default:
		return g.name("zcard") + ", " + z
	}
}

// bad is a call that Redis refuses: wrong arity, an unknown command, an
// argument of the wrong type, an option out of place.
func (g *luaGen) bad() string {
	k, i := g.skey()
	switch g.n(9) {
	case 0:
		return g.name("get")
	case 1:
		return g.name("get") + ", " + k + ", 'extra'"
	case 2:
		return "'nosuchcommand', " + k
	case 3:
		return g.name("set") + ", " + k
	case 4:
		return g.name("get") + ", {}"
	case 5:
		return g.name("set") + fmt.Sprintf(", %s, ARGV[%d], 'PX', 'soon'", k, i)
	case 6:
		return g.name("pexpire") + ", " + k + ", 1.5"
	case 7:
		return g.name("set") + fmt.Sprintf(", %s, ARGV[%d], 'NX', 'XX'", k, i)
	default:
		return ""
	}
}

// cond is a condition for if and while.
func (g *luaGen) cond() string {
	k, i := g.skey()
	switch g.n(8) {
	case 0, 1:
		return fmt.Sprintf("redis.call(%s, %s) == %s", g.name("get"), k, g.value())
	case 2:
		return fmt.Sprintf("redis.call(%s, %s) == %d", g.name("exists"), k, g.n(2))
	case 3:
		return fmt.Sprintf("redis.call(%s, %s) %s", g.name("pttl"), g.anyKey(), g.pick("> 50000", "== -1", "== -2", "< 0"))
	case 4:
		if len(g.vars) > 0 {
			v := g.vars[g.n(len(g.vars))]
			return g.pick("not "+v, v+" == false", "type("+v+") == 'table'", v+" == 1", v+" ~= nil")
		}
		return fmt.Sprintf("ARGV[%d] == ARGV[%d]", i, 1+g.n(g.nk+1))
	case 5:
		return fmt.Sprintf("not redis.call(%s, %s)", g.name("get"), k)
	case 6:
		return g.pick("#KEYS > 1", "tonumber(ARGV[1]) ~= nil", "ARGV[1] < ARGV[2]")
	default:
		return fmt.Sprintf("redis.call(%s, %s) == false", g.name("get"), k)
	}
}

// stmt appends one statement to b.
func (g *luaGen) stmt(b *[]string, ret bool) {
	g.depth++
	defer func() { g.depth-- }()
	deep := g.depth > 2
	switch c := g.n(14); {
	case c < 4: // local v = redis.call(...)
		args, volatile := g.call()
		fn := "redis.call"
		if g.p(30) {
			fn = "redis.pcall"
		}
		v := fmt.Sprintf("v%d", len(g.vars)+1)
		*b = append(*b, fmt.Sprintf("local %s = %s(%s)", v, fn, args))
		if volatile {
			*b = append(*b, fmt.Sprintf("%s = %s > 0", v, v))
		}
		g.vars = append(g.vars, v)
	case c < 6:
		args, _ := g.call()
		*b = append(*b, fmt.Sprintf("redis.%s(%s)", g.pick("call", "call", "pcall"), args))
	case c < 8 && !deep:
		*b = append(*b, "if "+g.cond()+" then")
		g.block(b, 1+g.n(2), ret && g.p(50))
		if g.p(50) {
			*b = append(*b, "else")
			g.block(b, 1+g.n(2), ret && g.p(50))
		}
		*b = append(*b, "end")
	case c == 8 && !deep:
		if g.p(50) {
			*b = append(*b, fmt.Sprintf("for i = 1, %d do", 1+g.n(3)))
		} else {
			*b = append(*b, "for i, key in ipairs(KEYS) do")
		}
		g.block(b, 1+g.n(2), false)
		*b = append(*b, "end")
	case c == 9 && !deep:
		w := fmt.Sprintf("n%d", g.n(1000))
		*b = append(*b, fmt.Sprintf("local %s = 0", w), fmt.Sprintf("while %s < %d and not (%s) do", w, 1+g.n(3), g.cond()), w+" = "+w+" + 1")
		g.block(b, 1, false)
		*b = append(*b, "end")
	case c == 10 && g.p(30):
		*b = append(*b, g.fault())
	case c == 11 && !g.resp3 && g.p(40):
		*b = append(*b, "redis.setresp(3)")
		g.resp3 = true
	default:
		if bad := g.bad(); bad != "" {
			*b = append(*b, fmt.Sprintf("local e%d = redis.pcall(%s)", g.depth, bad))
			g.vars = append(g.vars, fmt.Sprintf("e%d", g.depth))
		} else {
			args, _ := g.call()
			*b = append(*b, fmt.Sprintf("redis.call(%s)", args))
		}
	}
}

// block appends n statements, the last one a return when ret.
func (g *luaGen) block(b *[]string, n int, ret bool) {
	nv := len(g.vars)
	for range n {
		g.stmt(b, ret)
	}
	if ret {
		*b = append(*b, "return "+g.expr(2))
	}
	g.vars = g.vars[:nv]
}

// fault is a statement that fails the script.
func (g *luaGen) fault() string {
	switch g.n(9) {
	case 0:
		return "error('boom')"
	case 1:
		return "error({err='MYERR custom failure'})"
	case 2:
		return "error(redis.error_reply('OOPS it broke'))"
	case 3:
		return "local t = nil; local x = t.field"
	case 4:
		return "local x = undefined_global + 1"
	case 5:
		return "new_global = 1"
	case 6:
		return "redis.call(" + g.bad() + ")"
	case 7:
		return "error(42)"
	default:
		return "local x = ('a') .. {}"
	}
}

// expr is a value of a Lua type to return.
func (g *luaGen) expr(depth int) string {
	if len(g.vars) > 0 && g.p(35) {
		v := g.vars[g.n(len(g.vars))]
		if g.p(40) {
			g.show = true
			return "show(" + v + ")"
		}
		return v
	}
	switch c := g.n(28); {
	case c == 22 || c == 23:
		return g.pick("{double=2.5}", "{double=-0.125}", "{1, {double=3}}")
	case c >= 24:
		// A value converted under RESP3, from here on.
		return "(function() redis.setresp(3) return " + g.pick("true", "false", "{true, false, 1}", "{false, true}", "{double=7.75}", "nil", "{ok='S'}") + " end)()"
	case c < 3:
		return g.pick("1", "0", "-1", "3.99", "-3.99", "0.5", "1e3", "2^53", "-0", "1700000000123.7")
	case c < 5:
		return g.pick("'str'", "''", "ARGV[1]", "KEYS[1]", "'with\\nnewline'", "'1.5'")
	case c < 7:
		return g.pick("true", "false", "nil")
	case c < 10 && depth > 0:
		n := g.n(4)
		var el []string
		for range n {
			el = append(el, g.expr(depth-1))
		}
		if g.p(20) {
			el = append(el, "nil", g.expr(depth-1))
		}
		return "{" + strings.Join(el, ", ") + "}"
	case c < 12:
		return g.pick("{ok='FINE'}", "{err='ERR bad thing'}", "{err='NOCODE'}", "{err='x'}", "{ok='A', 1, 2}", "{err='E one', 'a'}",
			"{1, {ok='IN'}, {err='INNER err'}}", "{a=1, b=2}", "{double=1.5}", "{ok=1}")
	case c < 14:
		return g.pick("redis.status_reply('DONE')", "redis.error_reply('ERR said no')", "redis.error_reply('plain')",
			"redis.error_reply('-DASH x')", "redis.status_reply('')")
	case c < 16:
		args, volatile := g.call()
		if volatile {
			return fmt.Sprintf("redis.call(%s) > 0", args)
		}
		return fmt.Sprintf("redis.%s(%s)", g.pick("call", "pcall"), args)
	case c < 17:
		return fmt.Sprintf("redis.pcall(%s)", g.bad())
	case c < 18:
		g.show = true
		args, volatile := g.call()
		if volatile {
			return fmt.Sprintf("show(redis.call(%s) > 0)", args)
		}
		return fmt.Sprintf("show(redis.pcall(%s))", args)
	case c < 20:
		return g.pick("#KEYS", "#ARGV", "tonumber(ARGV[1])", "tostring(1.5)", "'n' .. tostring(0.1)", "'n' .. tostring(1e15)", "'n' .. tostring(2^63)", "'n' .. 12 .. -3",
			"tostring(10/3)", "string.format('%d:%s', 7, 'x')", "math.floor(-2.5)", "math.max(1, 9.5)", "redis.sha1hex('abc')",
			"string.rep('ab', 3)", "tostring(nil) .. tostring(true)", "select('#', 1, nil, 3)", "string.len(ARGV[1])",
			"type(redis.call)", "tostring(-0.0)", "1 / 3 * 3", "string.upper(KEYS[1]) == KEYS[1]",
			"math.random(1000)", "math.random(5, 10)", "bit.band(12, 10)", "bit.tohex(255)", "bit.bor(1, 2, 4)",
			"bit.lshift(1, 40)", "bit.bnot(0)", "bit.bxor(tonumber(ARGV[#ARGV]), 7)", "bit.arshift(-256, 4)", "math.floor(math.random() * 1000000)", "{math.random(100), math.random(100)}")
	default:
		return g.pick("{unpack(KEYS)}", "ARGV", "KEYS", "{#KEYS, #ARGV}", "{ARGV[1], ARGV[99], ARGV[2]}")
	}
}

// script returns a random script over nk string keys and nz sorted sets.
func (g *luaGen) script() string {
	g.vars, g.depth, g.resp3, g.show = nil, 0, false, false
	var b []string
	g.block(&b, 1+g.n(5), !g.p(10))
	if g.show {
		// show turns a reply converted to Lua into a string, so that the
		// conversion itself is compared, tables included.
		b = append([]string{`local function show(v)
  local t = type(v)
  if t ~= 'table' then return t .. ':' .. tostring(v) end
  if v.ok then return 'ok:' .. v.ok end
  if v.err then return 'err:' .. v.err end
  if v.double then return 'double:' .. tostring(v.double) end
  local o = {}
  for i = 1, #v do o[i] = show(v[i]) end
  return 'table:' .. table.concat(o, ',')
end`}, b...)
	}
	sep := "\n"
	if g.p(25) {
		sep = " "
	}
	return strings.Join(b, sep)
}

// syntaxError is a script Lua does not compile.
func (g *luaGen) syntaxError() string {
	return g.pick("return (", "if then end", "local = 1", "return 1 1", "redis.call('get', KEYS[1]", "x = = 2",
		"return 'unterminated", "\nlocal a = 1\nfor i = 1 do end", "return {1, 2", "end", "return ]]")
}

// next returns the i-th case of the generator.
func (g *luaGen) next(i int) luaCase {
	g.nk, g.nz = 1+g.n(3), 0
	if g.zset {
		g.nz = g.n(3)
	}
	g.ro = false
	c := luaCase{name: fmt.Sprintf("gen%d", i), how: "eval"}
	switch r := g.n(100); {
	case r < 8:
		c.how = "evalsha"
	case r < 14:
		c.how = "again"
	case r < 20:
		c.how, g.ro = "eval_ro", g.p(50)
	case r < 23:
		c.how, g.ro = "evalsha_ro", g.p(50)
	case r < 26:
		c.how = "noscript"
	case r < 29:
		c.how = "flush"
	case r < 31:
		c.how = "numkeys"
	}
	if g.p(5) {
		c.body = g.syntaxError()
	} else {
		c.body = g.script()
	}
	for k, o := range g.r.Perm(len(luaOwners))[:g.nk] {
		key := fmt.Sprintf("K%d", k+1)
		c.keys = append(c.keys, key)
		c.argv = append(c.argv, luaOwners[o])
		switch g.n(4) {
		case 0:
			c.setup = append(c.setup, []string{"SET", key, luaOwners[o], "NX", "PX", "100000"})
		case 1:
			c.setup = append(c.setup, []string{"SET", key, luaOwners[o], "NX"})
		case 2:
			c.setup = append(c.setup, []string{"SET", key, luaOwners[o], "NX", "EX", "300"})
		}
	}
	c.argv = append(c.argv, "notmine", "100000")
	for z := 1; z <= g.nz; z++ {
		key := fmt.Sprintf("Z%d", z)
		c.keys = append(c.keys, key)
		if g.p(70) {
			c.setup = append(c.setup, []string{"ZADD", key, "1", "a", "2.5", "b", "1700000000123", "c"})
			if g.p(50) {
				c.setup = append(c.setup, []string{"PEXPIRE", key, "100000"})
			}
		}
	}
	return c
}

// sha is the SHA1 of a script, as EVALSHA names it.
func sha(body string) string {
	s := sha1.Sum([]byte(body))
	return hex.EncodeToString(s[:])
}
