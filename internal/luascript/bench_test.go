package luascript_test

import (
	"testing"

	"github.com/latchd/latch/internal/luascript"
)

// getCaller answers GET with a value and any other command with 1, as a
// lock table would, without one: the engine's own cost.
type getCaller struct{ val string }

func (c getCaller) Call(args [][]byte, resp int) luascript.Reply {
	if len(args[0]) == 3 {
		return luascript.Reply{Kind: luascript.Bulk, Str: c.val}
	}
	return luascript.Reply{Kind: luascript.Int, Int: 1}
}

// BenchmarkRun: the engine's cost of a run of the compare-and-delete
// script, its commands answered at once (getCaller), and of a script that
// calls none.
func BenchmarkRun(b *testing.B) {
	for _, tc := range []struct{ name, body string }{
		{"release", `if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("unlink",KEYS[1]) else return 0 end`},
		{"return", `return 1`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			e := luascript.New(luascript.Limits{})
			s, err := e.Load([]byte(tc.body))
			if err != nil {
				b.Fatal(err)
			}
			keys, argv := [][]byte{[]byte("lock:000000001234")}, [][]byte{[]byte("owner-value-0123456789")}
			c := getCaller{val: "owner-value-0123456789"}
			b.ReportAllocs()
			for b.Loop() {
				if r, _ := e.Run(s, keys, argv, c, 2); r.Kind != luascript.Int || r.Int != 1 {
					b.Fatalf("reply %+v", r)
				}
			}
		})
	}
}
