package luascript_test

import (
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/internal/luascript"
)

// echoCaller answers a command with what its name asks for, so that a
// fuzzed script meets every reply type.
type echoCaller struct{}

func (echoCaller) Call(args [][]byte, resp int) luascript.Reply {
	switch strings.ToLower(string(args[0])) {
	case "err":
		return luascript.ErrorReply("ERR asked for")
	case "int":
		return luascript.Reply{Kind: luascript.Int, Int: int64(len(args))}
	case "nil":
		return luascript.Reply{Kind: luascript.Nil}
	case "map":
		return luascript.Reply{Kind: luascript.Map, Elems: []luascript.Reply{{Kind: luascript.Bulk, Str: "k"}, {Kind: luascript.Double, Num: 1.5}}}
	case "set":
		return luascript.Reply{Kind: luascript.Set, Elems: []luascript.Reply{{Kind: luascript.Bool, Int: 1}, {Kind: luascript.BigNum, Str: "12"}}}
	}
	r := luascript.Reply{Kind: luascript.Array}
	for _, a := range args {
		r.Elems = append(r.Elems, luascript.Reply{Kind: luascript.Bulk, Str: string(a)})
	}
	return r
}

// FuzzRun: any text, compiled and run with any arguments, never panics,
// stays within its limits, and answers a reply that encodes in RESP2 and
// RESP3; the engine still runs scripts after it.
func FuzzRun(f *testing.F) {
	f.Add("return redis.call('int', ARGV[1])", "x", uint8(2))
	f.Add("redis.setresp(3); return {redis.call('map'), redis.call('set'), redis.call('nil')}", "", uint8(3))
	f.Add("local ok, e = pcall(redis.call, 'err'); return {ok, e}", "", uint8(2))
	f.Add("return {err = ARGV[1]}", "X y\r\nz", uint8(2))
	f.Add("#!lua flags=no-writes\nreturn math.random(tonumber(ARGV[1]) or 3)", "7", uint8(3))
	f.Add("local t = setmetatable({}, {__index = function(t, k) return k end}); return t[ARGV[1]]", "k", uint8(2))
	f.Add("return string.rep(ARGV[1], 1e12)", "ab", uint8(2))
	f.Add("while true do end", "", uint8(2))
	e := luascript.New(luascript.Limits{Time: 50 * time.Millisecond, Memory: 32 << 20})
	f.Fuzz(func(t *testing.T, body, arg string, proto uint8) {
		p := 2 + int(proto%2)
		s, err := e.Load([]byte(body))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "ERR ") {
				t.Fatalf("compile error %q", err)
			}
			return
		}
		start := time.Now()
		r, _ := e.Run(s, [][]byte{[]byte("k")}, [][]byte{[]byte(arg)}, echoCaller{}, p)
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("ran %v", d)
		}
		if b := r.AppendRESP(nil, p); len(b) < 3 || b[len(b)-2] != '\r' {
			t.Fatalf("reply %q", b)
		}
		s2, _ := e.Load([]byte("return KEYS[1]"))
		if r, _ := e.Run(s2, [][]byte{[]byte("k")}, nil, echoCaller{}, 2); string(r.AppendRESP(nil, 2)) != "$1\r\nk\r\n" {
			t.Fatalf("after %q, a script answers %q", body, r.AppendRESP(nil, 2))
		}
	})
}
