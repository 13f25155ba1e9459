package luascript

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync/atomic"

	lua "github.com/yuin/gopher-lua"
)

// sandbox is one Lua state set up as Redis 7 sets up EVAL's: the
// libraries, the redis table, and read-only globals. The script's
// globals (its function environment) are a proxy: an empty table whose
// reads fall through to the real globals, whose writes fail, and whose
// real table answers an error for a name it lacks; a script that assigns
// no global (Script.readsGlobals) reads the real table itself, which no
// code can reach to change but through the proxy. The library tables
// are proxies too. The base functions that would reach behind a proxy
// (next, pairs, ipairs, rawget, rawset, setmetatable, getmetatable) see
// through it, or refuse to change it.
type sandbox struct {
	e       *Engine
	L       *lua.LState
	globals *lua.LTable                 // the real globals
	real    map[*lua.LTable]*lua.LTable // proxy → real table
	strMeta *lua.LTable                 // the string metatable's proxy
	handler *lua.LFunction

	// The run: its caller, the RESP version the script chose.
	caller Caller
	resp   int
	ctx    context.Context // the runs' until a limit stops one (watchdog)
	cancel context.CancelCauseFunc
	start  atomic.Int64 // when the run in progress started (Engine.epoch + 1); 0: none
	broken bool         // the state may be inconsistent: not reused

	// Kept from run to run: the KEYS and ARGV tables (refilled in place
	// while a script left them plain arrays, tableReusable), the main
	// function of the scripts run (by their compiled proto), and
	// redis.call's argument buffers (the Caller does not keep args).
	keysT, argvT *lua.LTable
	fns          map[*lua.FunctionProto]*lua.LFunction
	callBuf      []byte
	callArgs     [][]byte
}

// Redis 7's messages.
const (
	msgReadonly    = "Attempt to modify a readonly table"
	msgNoGlobal    = "Script attempted to access nonexistent global variable '%s'"
	msgCallNoArgs  = "ERR Please specify at least one argument for this redis lib call"
	msgCallArgType = "ERR Lua redis lib command arguments must be strings or integers"
)

// The base functions Redis removes, and gopher-lua's own.
var removed = []string{"dofile", "loadfile", "print", "getfenv", "setfenv", "module", "require",
	"newproxy", "_GOPHER_LUA_VERSION", "_printregs", "channel", "os", "io", "debug", "package"}

func newSandbox(e *Engine) *sandbox {
	L := lua.NewState(lua.Options{
		SkipOpenLibs:        true,
		CallStackSize:       e.lim.CallDepth + 8,
		RegistrySize:        1024,
		RegistryMaxSize:     1 << 20,
		MinimizeStackMemory: true,
	})
	sb := &sandbox{e: e, L: L, real: make(map[*lua.LTable]*lua.LTable)}
	for _, lib := range []struct {
		name string
		fn   lua.LGFunction
	}{
		{lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}, {lua.StringLibName, lua.OpenString},
		{lua.MathLibName, lua.OpenMath}, {lua.CoroutineLibName, lua.OpenCoroutine},
	} {
		L.Push(L.NewFunction(lib.fn))
		L.Push(lua.LString(lib.name))
		L.Call(1, 0)
	}
	g := L.G.Global
	sb.globals = g
	for _, n := range removed {
		g.RawSetString(n, lua.LNil)
	}
	set := func(t *lua.LTable, name string, fn lua.LGFunction) { t.RawSetString(name, L.NewFunction(fn)) }
	set(g, "error", sb.error)
	set(g, "pcall", sb.pcall)
	set(g, "next", sb.next)
	set(g, "pairs", sb.pairs)
	set(g, "ipairs", sb.ipairs)
	set(g, "rawget", sb.rawget)
	set(g, "rawset", sb.rawset)
	set(g, "setmetatable", sb.setmetatable)
	set(g, "getmetatable", sb.getmetatable)
	tostr := g.RawGetString("tostring")
	set(g, "tostring", func(L *lua.LState) int {
		if n, ok := L.Get(1).(lua.LNumber); ok {
			L.Push(lua.LString(formatNumber(float64(n))))
			return 1
		}
		L.Push(tostr)
		L.Push(L.CheckAny(1))
		L.Call(1, 1)
		return 1
	})
	// collectgarbage: a script's garbage is the process's (Go's
	// collector), whose full collection would stop every other client: it
	// answers as Lua's does and collects nothing ("count": the heap in KB).
	set(g, "collectgarbage", func(L *lua.LState) int {
		switch L.OptString(1, "collect") {
		case "count":
			L.Push(lua.LNumber(float64(heapBytes()) / 1024))
		default:
			L.Push(lua.LNumber(0))
		}
		return 1
	})
	set(g, "gcinfo", func(L *lua.LState) int { L.Push(lua.LNumber(heapBytes() / 1024)); return 1 })
	math := g.RawGetString("math").(*lua.LTable)
	set(math, "random", sb.random)
	set(math, "randomseed", sb.randomseed)
	str := g.RawGetString("string").(*lua.LTable)
	rep := str.RawGetString("rep")
	set(str, "rep", func(L *lua.LState) int {
		s, n := L.CheckString(1), L.CheckInt64(2)
		if n > 0 && int64(len(s))*n > sb.e.lim.Memory {
			L.RaiseError("resulting string too large")
		}
		L.Push(rep)
		L.Push(lua.LString(s))
		L.Push(lua.LNumber(n))
		L.Call(2, 1)
		return 1
	})
	g.RawSetString("redis", sb.redisLib())
	g.RawSetString("bit", bitLib(L))

	// Globals: reads of a missing name fail; the libraries are proxies.
	for _, n := range []string{"string", "table", "math", "coroutine", "redis", "bit"} {
		g.RawSetString(n, sb.protect(g.RawGetString(n).(*lua.LTable)))
	}
	if sm, ok := L.GetMetatable(lua.LString("")).(*lua.LTable); ok {
		sm.RawSetString("__index", g.RawGetString("string"))
		sb.strMeta = sb.protect(sm)
	}
	gm := L.NewTable()
	gm.RawSetString("__index", L.NewFunction(func(L *lua.LState) int {
		L.RaiseError(msgNoGlobal, lua.LVAsString(L.Get(2)))
		return 0
	}))
	L.SetMetatable(g, gm)
	pg := sb.protect(g)
	g.RawSetString("_G", pg)
	L.Env = pg
	sb.handler = L.NewFunction(sb.onError)
	sb.resp = 2
	return sb
}

// protect returns a read-only proxy of t.
func (sb *sandbox) protect(t *lua.LTable) *lua.LTable {
	L := sb.L
	p, mt := L.NewTable(), L.NewTable()
	mt.RawSetString("__index", t)
	mt.RawSetString("__newindex", L.NewFunction(func(L *lua.LState) int {
		L.RaiseError(msgReadonly)
		return 0
	}))
	L.SetMetatable(p, mt)
	sb.real[p] = t
	return p
}

// unwrap returns the real table behind a proxy, or v.
func (sb *sandbox) unwrap(v lua.LValue) lua.LValue {
	if t, ok := v.(*lua.LTable); ok {
		if r, ok := sb.real[t]; ok {
			return r
		}
	}
	return v
}

func (sb *sandbox) isProxy(v lua.LValue) bool {
	t, ok := v.(*lua.LTable)
	if !ok {
		return false
	}
	_, ok = sb.real[t]
	return ok
}

// reset readies the sandbox for its next run and reports whether it may
// be reused.
func (sb *sandbox) reset() bool {
	sb.caller = nil
	sb.resp = 2
	sb.L.SetTop(0)
	return !sb.broken
}

func (sb *sandbox) run(s *Script, keys, argv [][]byte, c Caller, proto int) (Reply, bool) {
	L := sb.L
	sb.caller = c
	// The globals are read-only to the script: KEYS and ARGV are set
	// again only when a table is new.
	if t := sb.fill(sb.keysT, keys); t != sb.keysT {
		sb.keysT = t
		sb.globals.RawSetString("KEYS", t)
	}
	if t := sb.fill(sb.argvT, argv); t != sb.argvT {
		sb.argvT = t
		sb.globals.RawSetString("ARGV", t)
	}

	fn := sb.fns[s.proto]
	if fn == nil {
		if sb.fns == nil || len(sb.fns) >= maxKeptFns {
			sb.fns = make(map[*lua.FunctionProto]*lua.LFunction)
		}
		fn = L.NewFunctionFromProto(s.proto)
		if s.readsGlobals {
			// Its functions cannot change the globals (and no function can
			// reach them but through the proxy): they look names up in
			// the real table, one lookup instead of the proxy's two.
			fn.Env = sb.globals
		}
		sb.fns[s.proto] = fn
	}
	sb.e.enter(sb)
	ctx := sb.ctx
	L.Push(fn)
	err := L.PCall(0, 1, sb.handler)
	sb.e.leave(sb)
	if err == nil && ctx.Err() != nil {
		// Stopped by a limit where the script caught it (a coroutine's
		// resume): the run fails all the same.
		err = errors.New("stopped")
	}
	if err == nil {
		return fromLua(L.Get(-1), sb.resp, 0), false
	}
	// An error: its object is what onError made of it, {err, line}, or,
	// if the handler could not run, the error itself.
	var msg string
	line := 0
	if aerr, ok := err.(*lua.ApiError); ok {
		if t, ok := aerr.Object.(*lua.LTable); ok {
			msg = lua.LVAsString(t.RawGetString("err"))
			if n, ok := t.RawGetString("line").(lua.LNumber); ok {
				line = int(n)
			}
		} else {
			msg = "ERR " + aerr.Object.String()
		}
	} else {
		msg = "ERR " + err.Error()
	}
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errTime):
		msg = fmt.Sprintf("ERR latch: script stopped: it ran past the time limit of %v, and nothing it did was applied", sb.e.lim.Time)
	case errors.Is(cause, errKilled):
		msg = "ERR Script killed by user with SCRIPT KILL..."
	case errors.Is(cause, errMemory):
		msg = fmt.Sprintf("ERR latch: script stopped: it used more than %d MiB of memory, and nothing it did was applied", sb.e.lim.Memory>>20)
		sb.broken = true
	}
	if strings.Contains(msg, "callstack overflow") || strings.Contains(msg, "stack overflow") {
		msg = "ERR latch: script stopped: its call stack is too deep (stack overflow), and nothing it did was applied"
		sb.broken = true
	}
	suffix := fmt.Sprintf(" script: %s, on @user_script:%d.", s.SHA, line)
	if line == 0 {
		suffix = fmt.Sprintf(" script: %s, on @user_script:?.", s.SHA)
	}
	return ErrorReply(msg + suffix), true
}

// maxKeptFns bounds the main functions a sandbox keeps (sandbox.fns).
const maxKeptFns = 64

// fill returns t, or a new table if t is nil or not reusable, holding vs
// as strings at 1 to len(vs) and nothing else.
func (sb *sandbox) fill(t *lua.LTable, vs [][]byte) *lua.LTable {
	if t == nil || !tableReusable(t) {
		t = sb.L.CreateTable(len(vs), 0)
	}
	for i := len(vs) + 1; i <= t.MaxN(); i++ {
		t.RawSetInt(i, lua.LNil)
	}
	for i, v := range vs {
		// A value as the last run's (a lease, an owner's token) is kept:
		// no string made of it.
		if old, ok := t.RawGetInt(i + 1).(lua.LString); !ok || string(old) != string(v) {
			t.RawSetInt(i+1, lua.LString(v))
		}
	}
	return t
}

// tableReusable reports whether t, a KEYS or ARGV table a script may
// have changed, is a plain array still: no metatable, no other keys. A
// script cannot keep a reference to it past its run (the globals are
// read-only), so such a table can be refilled for the next run.
func tableReusable(t *lua.LTable) bool {
	if t.Metatable != lua.LNil {
		return false
	}
	k, _ := t.Next(lua.LNumber(t.MaxN()))
	return k == lua.LNil
}

// onError is the script's error handler: it makes the error a table with
// err (the message, "ERR " added unless the error is already a table
// with err) and line (where the innermost Lua function stood).
func (sb *sandbox) onError(L *lua.LState) int {
	v := L.Get(1)
	t, ok := v.(*lua.LTable)
	if !ok || t.RawGetString("err").Type() != lua.LTString {
		t = L.CreateTable(0, 2)
		s := "nil"
		if v != lua.LNil {
			s = lua.LVAsString(v)
			if s == "" && v.Type() != lua.LTString {
				s = v.String()
			}
		}
		t.RawSetString("err", lua.LString("ERR "+s))
	}
	for level := 0; ; level++ {
		dbg, ok := L.GetStack(level)
		if !ok {
			break
		}
		if _, err := L.GetInfo("Sl", dbg, lua.LNil); err != nil {
			break
		}
		if dbg.What != "G" && dbg.CurrentLine > 0 {
			t.RawSetString("line", lua.LNumber(dbg.CurrentLine))
			break
		}
	}
	L.Push(t)
	return 1
}

// stopped reports whether the run was stopped by a limit: a pcall must
// not catch that.
func (sb *sandbox) stopped() bool { return sb.ctx.Err() != nil }

// error is Lua's error; a number is made a string first, so that it gets
// its position as in Lua 5.1.
func (sb *sandbox) error(L *lua.LState) int {
	v := L.Get(1)
	level := L.OptInt(2, 1)
	if n, ok := v.(lua.LNumber); ok {
		v = lua.LString(n.String())
	}
	L.Error(v, level)
	return 0
}

// pcall is Lua's pcall, except that an error table with an err field is
// answered as its message (as Redis 7 does), and a limit that stopped the
// run is not caught.
func (sb *sandbox) pcall(L *lua.LState) int {
	L.CheckAny(1)
	nargs := L.GetTop() - 1
	err := L.PCall(nargs, lua.MultRet, nil)
	if err == nil {
		L.Insert(lua.LTrue, 1)
		return L.GetTop()
	}
	var obj lua.LValue = lua.LString(err.Error())
	if aerr, ok := err.(*lua.ApiError); ok {
		obj = aerr.Object
	}
	if sb.stopped() || strings.Contains(lua.LVAsString(obj), "stack overflow") {
		sb.broken = sb.broken || !sb.stopped()
		L.Error(obj, 0)
	}
	if t, ok := obj.(*lua.LTable); ok {
		if s, ok := t.RawGetString("err").(lua.LString); ok {
			obj = s
		}
	}
	L.Push(lua.LFalse)
	L.Push(obj)
	return 2
}

func (sb *sandbox) next(L *lua.LState) int {
	t, ok := sb.unwrap(L.CheckAny(1)).(*lua.LTable)
	if !ok {
		L.ArgError(1, "table expected")
	}
	k, v := t.Next(L.Get(2))
	if k == lua.LNil {
		L.Push(lua.LNil)
		return 1
	}
	L.Push(k)
	L.Push(v)
	return 2
}

func (sb *sandbox) pairs(L *lua.LState) int {
	t := sb.unwrap(L.CheckTable(1))
	L.Push(sb.globals.RawGetString("next"))
	L.Push(t)
	L.Push(lua.LNil)
	return 3
}

func (sb *sandbox) ipairs(L *lua.LState) int {
	t := sb.unwrap(L.CheckTable(1))
	L.Push(L.NewFunction(func(L *lua.LState) int {
		i := L.CheckInt(2) + 1
		v := L.CheckTable(1).RawGetInt(i)
		if v == lua.LNil {
			return 0
		}
		L.Push(lua.LNumber(i))
		L.Push(v)
		return 2
	}))
	L.Push(t)
	L.Push(lua.LNumber(0))
	return 3
}

func (sb *sandbox) rawget(L *lua.LState) int {
	t, ok := sb.unwrap(L.CheckTable(1)).(*lua.LTable)
	if !ok {
		L.ArgError(1, "table expected")
	}
	L.Push(t.RawGet(L.CheckAny(2)))
	return 1
}

func (sb *sandbox) rawset(L *lua.LState) int {
	t := L.CheckTable(1)
	if sb.isProxy(t) {
		L.Error(lua.LString(msgReadonly), 0)
	}
	t.RawSet(L.CheckAny(2), L.CheckAny(3))
	L.Push(t)
	return 1
}

func (sb *sandbox) setmetatable(L *lua.LState) int {
	t := L.CheckTable(1)
	if sb.isProxy(t) {
		L.Error(lua.LString(msgReadonly), 0)
	}
	mt := L.Get(2)
	if mt.Type() != lua.LTNil && mt.Type() != lua.LTTable {
		L.ArgError(2, "nil or table expected")
	}
	if old, ok := L.GetMetatable(t).(*lua.LTable); ok && old.RawGetString("__metatable") != lua.LNil {
		L.RaiseError("cannot change a protected metatable")
	}
	L.SetMetatable(t, mt)
	L.SetTop(1)
	return 1
}

func (sb *sandbox) getmetatable(L *lua.LState) int {
	v := L.CheckAny(1)
	if sb.isProxy(v) {
		L.Push(lua.LNil)
		return 1
	}
	mt := L.GetMetatable(v)
	if v.Type() == lua.LTString && sb.strMeta != nil {
		mt = sb.strMeta
	} else if t, ok := mt.(*lua.LTable); ok {
		if f := t.RawGetString("__metatable"); f != lua.LNil {
			mt = f
		}
	}
	L.Push(mt)
	return 1
}

// formatNumber writes a number as Lua 5.1 does ("%.14g", C's inf and
// nan): tostring's; gopher-lua's own (Go's shortest form) stays that of
// the concatenation operator.
func formatNumber(f float64) string {
	switch {
	case math.IsNaN(f):
		return "-nan" // what 0/0 gives on amd64
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case f == 0 && math.Signbit(f):
		return "-0"
	}
	return fmt.Sprintf("%.14g", f)
}

// Redis's PRNG: the 48-bit linear congruential generator of its rand.c,
// one per engine as one per Redis process: it starts from rand.c's
// initial state and goes on from run to run (Redis 7 no longer reseeds it
// for each script); math.randomseed reseeds it.
const (
	rand48Mask = 1<<48 - 1
	rand48Init = 0x1234ABCD330E
)

func (sb *sandbox) srand(seed int32) {
	s := uint64(uint16(seed))<<16 | uint64(uint16(uint32(seed)>>16))<<32
	sb.e.randMu.Lock()
	sb.e.rand = s | 0x330E
	sb.e.randMu.Unlock()
}

func (sb *sandbox) lrand() int32 {
	e := sb.e
	e.randMu.Lock()
	defer e.randMu.Unlock()
	e.rand = (0x5DEECE66D*e.rand + 0xB) & rand48Mask
	return int32(e.rand >> 17)
}

func (sb *sandbox) random(L *lua.LState) int {
	r := float64(sb.lrand()%math.MaxInt32) / float64(math.MaxInt32)
	switch L.GetTop() {
	case 0:
		L.Push(lua.LNumber(r))
	case 1:
		u := L.CheckInt(1)
		if u < 1 {
			L.ArgError(1, "interval is empty")
		}
		L.Push(lua.LNumber(math.Floor(r*float64(u)) + 1))
	case 2:
		l, u := L.CheckInt(1), L.CheckInt(2)
		if l > u {
			L.ArgError(2, "interval is empty")
		}
		L.Push(lua.LNumber(math.Floor(r*float64(u-l+1)) + float64(l)))
	default:
		L.RaiseError("wrong number of arguments")
	}
	return 1
}

func (sb *sandbox) randomseed(L *lua.LState) int {
	sb.srand(int32(L.CheckInt(1)))
	return 0
}

// The redis table.

func (sb *sandbox) redisLib() *lua.LTable {
	L := sb.L
	t := L.NewTable()
	fns := map[string]lua.LGFunction{
		"call":  func(L *lua.LState) int { return sb.call(L, true) },
		"pcall": func(L *lua.LState) int { return sb.call(L, false) },
		"error_reply": func(L *lua.LState) int {
			s, ok := L.Get(1).(lua.LString)
			if L.GetTop() != 1 || !ok {
				return sb.pushErr(L, "ERR wrong number or type of arguments")
			}
			return sb.pushErr(L, errorText(string(s)))
		},
		"status_reply": func(L *lua.LState) int {
			s, ok := L.Get(1).(lua.LString)
			if L.GetTop() != 1 || !ok {
				return sb.pushErr(L, "ERR wrong number or type of arguments")
			}
			r := L.CreateTable(0, 1)
			r.RawSetString("ok", s)
			L.Push(r)
			return 1
		},
		"sha1hex": func(L *lua.LState) int {
			if L.GetTop() != 1 {
				sb.raise(L, "ERR wrong number of arguments")
			}
			s, _ := argString(L.Get(1))
			sum := sha1.Sum([]byte(s))
			L.Push(lua.LString(hex.EncodeToString(sum[:])))
			return 1
		},
		"log": func(L *lua.LState) int {
			n := L.GetTop()
			if n < 2 {
				sb.raise(L, "ERR redis.log() requires two arguments or more.")
			}
			lv, ok := L.Get(1).(lua.LNumber)
			if !ok {
				sb.raise(L, "ERR First argument must be a number (log level).")
			}
			if lv < 0 || lv > 3 {
				sb.raise(L, "ERR Invalid debug level.")
			}
			var b strings.Builder
			for i := 2; i <= n; i++ {
				if i > 2 {
					b.WriteByte(' ')
				}
				s, _ := argString(L.Get(i))
				b.WriteString(s)
			}
			level := [...]slog.Level{slog.LevelDebug, slog.LevelDebug, slog.LevelInfo, slog.LevelWarn}[int(lv)]
			sb.e.lim.Logger.Log(context.Background(), level, "redis script log", "message", b.String())
			return 0
		},
		"setresp": func(L *lua.LState) int {
			if L.GetTop() != 1 {
				sb.raise(L, "ERR redis.setresp() requires one argument.")
			}
			n, ok := L.Get(1).(lua.LNumber)
			if !ok || (n != 2 && n != 3) {
				sb.raise(L, "ERR RESP version must be 2 or 3.")
			}
			sb.resp = int(n)
			return 0
		},
		"set_repl": func(L *lua.LState) int {
			n, ok := L.Get(1).(lua.LNumber)
			if L.GetTop() != 1 || !ok {
				sb.raise(L, "ERR redis.set_repl() requires one argument.")
			}
			if n < 0 || n > 3 {
				sb.raise(L, "ERR Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.")
			}
			return 0
		},
		"replicate_commands": func(L *lua.LState) int { L.Push(lua.LTrue); return 1 },
		"breakpoint":         func(L *lua.LState) int { L.Push(lua.LFalse); return 1 },
		"debug":              func(L *lua.LState) int { return 0 },
	}
	for name, fn := range fns {
		t.RawSetString(name, L.NewFunction(fn))
	}
	for name, v := range map[string]int{"LOG_DEBUG": 0, "LOG_VERBOSE": 1, "LOG_NOTICE": 2, "LOG_WARNING": 3,
		"REPL_NONE": 0, "REPL_AOF": 1, "REPL_SLAVE": 2, "REPL_REPLICA": 2, "REPL_ALL": 3} {
		t.RawSetString(name, lua.LNumber(v))
	}
	t.RawSetString("REDIS_VERSION", lua.LString(sb.e.lim.Version))
	t.RawSetString("REDIS_VERSION_NUM", lua.LNumber(versionNum(sb.e.lim.Version)))
	return t
}

// versionNum is Redis's REDIS_VERSION_NUM: 0x00MMmmpp.
func versionNum(v string) int {
	var a, b, c int
	fmt.Sscanf(v, "%d.%d.%d", &a, &b, &c)
	return a<<16 | b<<8 | c
}

// errorText is the message of redis.error_reply(s), as Redis 7 makes it:
// "-CODE msg" gives "CODE msg", a message without a code gets "ERR ".
func errorText(s string) string {
	if !strings.HasPrefix(s, "-") {
		s = "-" + s
	}
	code, msg, ok := strings.Cut(s[1:], " ")
	if !ok {
		code, msg = "ERR", s[1:]
	}
	return code + " " + strings.Trim(msg, "\r\n")
}

// pushErr returns an error table {err = msg}, as a value.
func (sb *sandbox) pushErr(L *lua.LState, msg string) int {
	t := L.CreateTable(0, 1)
	t.RawSetString("err", lua.LString(msg))
	L.Push(t)
	return 1
}

// raise raises the error table {err = msg}.
func (sb *sandbox) raise(L *lua.LState, msg string) {
	t := L.CreateTable(0, 1)
	t.RawSetString("err", lua.LString(msg))
	L.Error(t, 0)
}

// maxKeptCallBuf bounds the bytes of arguments redis.call's buffer keeps
// from call to call (sandbox.callBuf).
const maxKeptCallBuf = 64 << 10

// call is redis.call (raise) and redis.pcall.
func (sb *sandbox) call(L *lua.LState, raise bool) int {
	n := L.GetTop()
	fail := func(msg string) int {
		if raise {
			sb.raise(L, msg)
		}
		return sb.pushErr(L, msg)
	}
	if n == 0 {
		return fail(msgCallNoArgs)
	}
	// The arguments, copied into one buffer.
	var strs [8]string
	ss := strs[:0]
	size := 0
	for i := 1; i <= n; i++ {
		s, ok := argString(L.Get(i))
		if !ok {
			return fail(msgCallArgType)
		}
		ss = append(ss, s)
		size += len(s)
	}
	if cap(sb.callBuf) < size && size <= maxKeptCallBuf {
		sb.callBuf = make([]byte, 0, max(size, 256))
	}
	if cap(sb.callArgs) < n && n <= maxKeptCallBuf/16 {
		sb.callArgs = make([][]byte, 0, max(n, 8))
	}
	buf, args := sb.callBuf[:0], sb.callArgs[:0]
	if cap(buf) < size {
		buf = make([]byte, 0, size) // too large to keep
	}
	if cap(args) < n {
		args = make([][]byte, 0, n)
	}
	args = args[:n]
	for i, s := range ss {
		buf = append(buf, s...)
		args[i] = buf[len(buf)-len(s) : len(buf) : len(buf)]
	}
	r := sb.caller.Call(args, sb.resp)
	clear(args)
	if r.Kind == Error {
		return fail(r.Str)
	}
	L.Push(toLua(L, &r, sb.resp))
	return 1
}
