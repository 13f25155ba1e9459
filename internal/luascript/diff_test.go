package luascript_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/latchd/latch/internal/luascript"
)

// diffScripts are scripts whose replies must be byte for byte those of
// redis-server 7, in RESP2 and RESP3: the conversions both ways, the
// redis table, the protected globals, and the errors. Their commands run
// on redis-server too (redisCaller), so only the Lua side is compared.
var diffScripts = []struct {
	body string
	keys []string
	argv []string
}{
	{body: "return 1"},
	{body: "return 3.99"},
	{body: "return -3.7"},
	{body: "return 1e20"},
	{body: "return 0/0"},
	{body: "return 'str'"},
	{body: "return true"},
	{body: "return false"},
	{body: "return nil"},
	{body: "return {1,2,nil,3}"},
	{body: "return {1,{ok='x'},{err='y'},'s',true,false,2.7}"},
	{body: "return {1,2,{3,{}}}"},
	{body: "return {a=1}"},
	{body: "return {ok='fine'}"},
	{body: "return {err='bad thing'}"},
	{body: "return {err=''}"},
	{body: "return {err=5}"},
	{body: "return {ok=5}"},
	{body: "return {err='a\\r\\nb'}"},
	{body: "return redis.status_reply('a\\nb')"},
	{body: "return redis.status_reply(5)"},
	{body: "return redis.error_reply('My Error')"},
	{body: "return redis.error_reply('')"},
	{body: "return redis.error_reply('-X y')"},
	{body: "return redis.error_reply('X\\ny')"},
	{body: "return {double=1.5}"},
	{body: "return {map={a=1}}"},
	{body: "return {set={a=true}}"},
	{body: "return {big_number='123'}"},
	{body: "return {verbatim_string={format='txt', string='x'}}"},
	{body: "redis.setresp(3); return true"},
	{body: "redis.setresp(3); return false"},
	{body: "redis.setresp(3); return {true, false, 1}"},
	{body: "redis.setresp(4)"},
	{body: "redis.setresp(3); return redis.call('get', KEYS[1])", keys: []string{"k"}},
	{body: "redis.setresp(3); return type(redis.call('get', KEYS[1]))", keys: []string{"k"}},
	{body: "return type(redis.call('get', KEYS[1]))", keys: []string{"k"}},
	{body: "return tostring(redis.call('get', KEYS[1]))", keys: []string{"k"}},
	{body: "return redis.call('set', KEYS[1], ARGV[1])", keys: []string{"k"}, argv: []string{"v"}},
	{body: "redis.call('set', KEYS[1], ARGV[1]); return redis.call('get', KEYS[1])", keys: []string{"k"}, argv: []string{"v"}},
	{body: "local t = redis.call('set', KEYS[1], 'v'); return t.ok", keys: []string{"k"}},
	{body: "return redis.call('set', KEYS[1], 1.5), redis.call('get', KEYS[1])", keys: []string{"k"}},
	{body: "redis.call('set', KEYS[1], 10000000000000000000000); return redis.call('get', KEYS[1])", keys: []string{"k"}},
	{body: "redis.call('set', KEYS[1], 42); return redis.call('get', KEYS[1])", keys: []string{"k"}},
	{body: "return redis.call('set', KEYS[1], true)", keys: []string{"k"}},
	{body: "return redis.call('get', {})"},
	{body: "return redis.call()"},
	{body: "return redis.pcall()"},
	{body: "return redis.call('nosuch')"},
	{body: "return redis.pcall('nosuch')"},
	{body: "return redis.call('set','k','v','xx','nx')"},
	{body: "local r = redis.pcall('set','k','v','xx','nx'); return {type(r), r.err}"},
	{body: "local ok, e = pcall(redis.call, 'set','a','b','ex','x'); return {tostring(ok), type(e), e}"},
	{body: "local ok, e = pcall(function() redis.call('set','a','b','ex','x') end); return e"},
	{body: "local ok, e = pcall(function() redis.call('set','a','b','ex','x') end); error(e)"},
	{body: "local ok, e = pcall(error, {err='X'}); return {tostring(ok), type(e), e}"},
	{body: "local ok, e = pcall(function() return x end); return {tostring(ok), type(e), e}"},
	{body: "local function f()\n local x = redis.call('set','a','b','ex','x')\n end\n\n f()"},
	{body: "local function f()\n error('deep')\n end\n f()"},
	{body: "return x"},
	{body: "\n\nreturn y"},
	{body: "x = 1"},
	{body: "local t = string; t.x = 1"},
	{body: "string.rep = nil"},
	{body: "redis.call = nil"},
	{body: "_G.x = 1"},
	{body: "rawset(_G, 'x', 1)"},
	{body: "setmetatable(_G, {})"},
	{body: "return os"},
	{body: "return type(loadstring)"},
	{body: "return loadstring('return 1 + 1')()"},
	{body: "local ok = pcall(loadstring('x = 1')); return tostring(ok)"},
	{body: "local ok = pcall(loadstring('KEYS = 1')); return {tostring(ok), #KEYS}", keys: []string{"a"}},
	{body: "return type(dofile)"},
	{body: "return type(print)"},
	{body: "return type(require)"},
	{body: "return type(setfenv)"},
	{body: "return type(debug)"},
	{body: "return type(io)"},
	{body: "return {type(unpack), type(coroutine), type(select), type(rawget), type(collectgarbage)}"},
	{body: "error('boom')"},
	{body: "error({err='X boom'})"},
	{body: "error({err=''})"},
	{body: "error(5)"},
	{body: "error('x', 0)"},
	{body: "error(nil)"},
	{body: "error()"},
	{body: "return redis.sha1hex('abc')"},
	{body: "return redis.sha1hex(12)"},
	{body: "return {redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING}"},
	{body: "return redis.log(redis.LOG_WARNING, 'hello', 1)"},
	{body: "return redis.log(99, 'hello')"},
	{body: "return redis.log(1)"},
	{body: "return {math.random(100), math.random(100), math.random(1, 6), math.floor(math.random() * 1000)}"},
	{body: "math.randomseed(42); return {math.random(100), math.random(100)}"},
	{body: "return {KEYS[1], KEYS[2], ARGV[1], #KEYS, #ARGV}", keys: []string{"a", "b"}, argv: []string{"c"}},
	{body: "local n = 0; for k, v in pairs(string) do n = n + 1 end; return n > 10"},
	{body: "local n = 0; for k, v in ipairs(KEYS) do n = n + 1 end; return n", keys: []string{"a", "b"}},
	{body: "return string.format('%d-%s', 5, 'x')"},
	{body: "return table.concat({1,2,3}, ',')"},
	{body: "return tonumber('12') + 1"},
	{body: "return ('abc'):upper()"},
	{body: "return redis.replicate_commands()"},
	{body: "return redis.breakpoint()"},
	{body: "return {redis.REPL_ALL, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_NONE}"},
	{body: "return redis.call('ping')"},
	{body: "return 'abc"},
	{body: "return {bit.tobit(0xffffffff), bit.tobit(2^32 + 5), bit.tobit(-1), bit.bnot(0), bit.band(0xff, 0x0f, 0x3), bit.bor(1, 2, 4), bit.bxor(5, 3)}"},
	{body: "return {bit.lshift(1, 31), bit.lshift(1, 33), bit.rshift(-1, 28), bit.arshift(-256, 4), bit.rol(0x12345678, 8), bit.ror(0x12345678, 8), bit.bswap(0x12345678)}"},
	{body: "return {bit.tohex(255), bit.tohex(-1), bit.tohex(255, 2), bit.tohex(255, -4), bit.tohex(0x12345678, 12), bit.tobit(3.5), bit.tobit(2.5), bit.tobit(-3.5)}"},
	{body: "bit.x = 1"},
	{body: "local z = 0; return tostring(-z)"},
	{body: "return {tostring(0/0), tostring(1/0), tostring(-1/0), tostring(10/3), tostring(1e15), tostring(2^53), tostring(0.1), tostring(1e100), tostring(123456789012345678), tostring(nil), tostring('x')}"},
	{body: "\n\nreturn \"abc"},
	{body: "return redis.call('echo', 'hi')"},
	{body: "return redis.call('exists', KEYS[1], KEYS[1])", keys: []string{"k"}},
	{body: "redis.call('lpush', KEYS[1], 'a'); return redis.call('get', KEYS[1])", keys: []string{"k"}},
	{body: "redis.call('lpush', KEYS[1], 'a'); return redis.pcall('get', KEYS[1])", keys: []string{"k"}},
}

func TestDifferential(t *testing.T) {
	addr := startRedis(t)
	ref, calls := dial(t, addr), dial(t, addr)
	e := luascript.New(luascript.Limits{Version: "7.0.15"})
	for _, proto := range []int{2, 3} {
		ref.do("HELLO", strconv.Itoa(proto))
		for _, sc := range diffScripts {
			args := []string{"EVAL", sc.body, strconv.Itoa(len(sc.keys))}
			args = append(append(args, sc.keys...), sc.argv...)
			ref.do("FLUSHALL")
			want := string(ref.do(args...))
			ref.do("FLUSHALL")
			var got string
			if s, err := e.Load([]byte(sc.body)); err != nil {
				got = "-" + err.Error() + "\r\n"
			} else {
				r, _ := e.Run(s, bytesOf(sc.keys), bytesOf(sc.argv), redisCaller{calls}, proto)
				got = string(r.AppendRESP(nil, proto))
			}
			if got != want {
				t.Errorf("RESP%d %q:\n got %q\nwant %q", proto, sc.body, got, want)
			}
		}
	}
}

func bytesOf(ss []string) [][]byte {
	bs := make([][]byte, len(ss))
	for i, s := range ss {
		bs[i] = []byte(s)
	}
	return bs
}

// noCaller answers every command with an error: for scripts that call
// none.
type noCaller struct{}

func (noCaller) Call([][]byte, int) luascript.Reply {
	return luascript.ErrorReply("ERR no commands here")
}

// TestSandboxReuse: what a script does to its KEYS and ARGV, or tries to
// do to the globals (through loadstring's chunks, which see the
// read-only proxy), is not seen by the scripts that run after it in the
// same sandbox.
func TestSandboxReuse(t *testing.T) {
	e := luascript.New(luascript.Limits{})
	steps := []struct {
		body       string
		keys, argv []string
		want       string
	}{
		{body: "pcall(loadstring('x = 1')); pcall(loadstring('KEYS = 5')); return 1", want: ":1\r\n"},
		{body: "return type(KEYS)", want: "$5\r\ntable\r\n"},
		{body: "return x", want: "-ERR user_script:1: Script attempted to access nonexistent global variable 'x' script: "},
		{body: "ARGV[1] = 'changed'; ARGV[3] = 'more'; return #ARGV", argv: []string{"v", "w"}, want: ":3\r\n"},
		{body: "return {ARGV[1], ARGV[2], #ARGV}", argv: []string{"v", "w"}, want: "*3\r\n$1\r\nv\r\n$1\r\nw\r\n:2\r\n"},
		{body: "setmetatable(KEYS, {}); return #KEYS", keys: []string{"a"}, want: ":1\r\n"},
		{body: "return {getmetatable(KEYS) == nil, KEYS[1]}", keys: []string{"b"}, want: "*2\r\n:1\r\n$1\r\nb\r\n"},
	}
	for _, st := range steps {
		s, err := e.Load([]byte(st.body))
		if err != nil {
			t.Fatalf("%q: %v", st.body, err)
		}
		r, _ := e.Run(s, bytesOf(st.keys), bytesOf(st.argv), noCaller{}, 2)
		if got := string(r.AppendRESP(nil, 2)); !strings.HasPrefix(got, st.want) {
			t.Errorf("%q: got %q, want %q", st.body, got, st.want)
		}
	}
}
