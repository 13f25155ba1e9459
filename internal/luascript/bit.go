package luascript

import (
	"fmt"
	"math"
	"math/bits"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// bitLib is Redis's bit library (LuaBitOp): 32-bit operations on numbers,
// whose results are signed 32-bit integers.
func bitLib(L *lua.LState) *lua.LTable {
	arg := func(L *lua.LState, n int) uint32 { return tobit(float64(L.CheckNumber(n))) }
	ret := func(L *lua.LState, v uint32) int {
		L.Push(lua.LNumber(int32(v)))
		return 1
	}
	fold := func(op func(a, b uint32) uint32) lua.LGFunction {
		return func(L *lua.LState) int {
			v := arg(L, 1)
			for i := 2; i <= L.GetTop(); i++ {
				v = op(v, arg(L, i))
			}
			return ret(L, v)
		}
	}
	shift := func(op func(x uint32, n uint) uint32) lua.LGFunction {
		return func(L *lua.LState) int { return ret(L, op(arg(L, 1), uint(arg(L, 2)&31))) }
	}
	fns := map[string]lua.LGFunction{
		"tobit":  func(L *lua.LState) int { return ret(L, arg(L, 1)) },
		"bnot":   func(L *lua.LState) int { return ret(L, ^arg(L, 1)) },
		"band":   fold(func(a, b uint32) uint32 { return a & b }),
		"bor":    fold(func(a, b uint32) uint32 { return a | b }),
		"bxor":   fold(func(a, b uint32) uint32 { return a ^ b }),
		"lshift": shift(func(x uint32, n uint) uint32 { return x << n }),
		"rshift": shift(func(x uint32, n uint) uint32 { return x >> n }),
		"arshift": shift(func(x uint32, n uint) uint32 {
			return uint32(int32(x) >> n)
		}),
		"rol":   shift(func(x uint32, n uint) uint32 { return bits.RotateLeft32(x, int(n)) }),
		"ror":   shift(func(x uint32, n uint) uint32 { return bits.RotateLeft32(x, -int(n)) }),
		"bswap": func(L *lua.LState) int { return ret(L, bits.ReverseBytes32(arg(L, 1))) },
		"tohex": func(L *lua.LState) int {
			x := arg(L, 1)
			n := int32(8)
			if L.GetTop() >= 2 {
				n = int32(arg(L, 2))
			}
			upper := n < 0
			if upper {
				n = -n
			}
			n = min(n, 8)
			s := fmt.Sprintf("%08x", x)[8-n:]
			if upper {
				s = strings.ToUpper(s)
			}
			L.Push(lua.LString(s))
			return 1
		},
	}
	t := L.NewTable()
	for name, fn := range fns {
		t.RawSetString(name, L.NewFunction(fn))
	}
	return t
}

// tobit normalises a number to 32 bits as LuaBitOp does: rounded to an
// integer, modulo 2^32.
func tobit(f float64) uint32 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0
	}
	f = math.RoundToEven(math.Mod(f, 4294967296))
	return uint32(int64(f))
}
