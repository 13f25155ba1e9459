package zset

import (
	"math"
	"strconv"
	"strings"
)

// ParseScore parses a score as Redis parses ZADD's (C's strtod over the
// whole argument): decimal or hexadecimal floating point, "inf" and
// "infinity" in any case with an optional sign; no space before or after,
// not empty, not NaN, not out of range (an overflow, or an underflow to
// zero). Otherwise it fails with ErrNotFloat.
func ParseScore(s string) (float64, error) {
	if s == "" {
		return 0, ErrNotFloat
	}
	if c := s[0]; c == ' ' || c >= '\t' && c <= '\r' {
		return 0, ErrNotFloat
	}
	f, n, erange := strtod(s)
	if n == 0 || n != len(s) || erange || math.IsNaN(f) {
		return 0, ErrNotFloat
	}
	return f, nil
}

// ParseBound parses one end of a score range as Redis does (ZCOUNT,
// ZRANGEBYSCORE, ZREMRANGEBYSCORE): "(" before the value excludes it;
// the value is what C's strtod reads up to the end or a NUL byte, leading
// white space allowed, nothing (an empty value) being 0, an overflow
// being ±inf. Anything else after the number, or NaN, fails with
// ErrRangeFloat.
func ParseBound(s string) (Bound, error) {
	var b Bound
	if strings.HasPrefix(s, "(") {
		b.Excl, s = true, s[1:]
	}
	if i := strings.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	t := strings.TrimLeft(s, " \t\n\v\f\r")
	f, n, _ := strtod(t)
	if n == 0 {
		// strtod converts nothing and stops at the first byte, which
		// is the end only if s is empty.
		if s != "" {
			return Bound{}, ErrRangeFloat
		}
		return b, nil
	}
	if n != len(t) || math.IsNaN(f) {
		return Bound{}, ErrRangeFloat
	}
	b.Value = f
	return b, nil
}

// ParseRange parses a score range as ZCOUNT's min and max.
func ParseRange(min, max string) (Range, error) {
	lo, err := ParseBound(min)
	if err != nil {
		return Range{}, err
	}
	hi, err := ParseBound(max)
	if err != nil {
		return Range{}, err
	}
	return Range{Min: lo, Max: hi}, nil
}

// strtod reads the longest prefix of s that C's strtod reads (s without
// leading white space) and returns its value and length; n is 0 when s
// starts with no number. erange is true for what strtod reports as
// ERANGE and Redis refuses in a score: an overflow (the value is ±inf),
// an underflow to zero of a literal that is not zero.
func strtod(s string) (f float64, n int, erange bool) {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	neg := s != "" && s[0] == '-'
	rest := s[i:]
	if l := prefixFold(rest, "infinity"); l == 8 {
		return signed(math.Inf(1), neg), i + 8, false
	} else if l >= 3 {
		return signed(math.Inf(1), neg), i + 3, false
	}
	if l := prefixFold(rest, "nan"); l == 3 {
		n := i + 3
		// nan(n-char-sequence)
		if j := strings.IndexByte(s[n:], ')'); strings.HasPrefix(s[n:], "(") && j > 0 && alnum(s[n+1:n+j]) {
			n += j + 1
		}
		return math.NaN(), n, false
	}
	var lit string
	if len(rest) >= 2 && rest[0] == '0' && (rest[1] == 'x' || rest[1] == 'X') {
		m, exp := hexNumber(rest[2:])
		if m == 0 {
			// "0x" without hex digits: strtod reads the "0".
			return signed(0, neg), i + 1, false
		}
		lit = rest[:2+m]
		n = i + 2 + m
		if !exp {
			lit += "p0"
		}
	} else {
		m := decNumber(rest)
		if m == 0 {
			return 0, 0, false
		}
		lit, n = rest[:m], i+m
	}
	f, err := strconv.ParseFloat(lit, 64)
	switch {
	case err != nil && !isRange(err):
		return 0, 0, false // not reached: lit is well formed
	case err != nil:
		erange = true
	case f == 0 && nonzero(lit):
		erange = true
	}
	return signed(f, neg), n, erange
}

func isRange(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// nonzero reports whether the mantissa of a literal has a nonzero digit.
func nonzero(lit string) bool {
	hex := len(lit) > 1 && (lit[1] == 'x' || lit[1] == 'X')
	if hex {
		lit = lit[2:]
	}
	for i := 0; i < len(lit); i++ {
		c := lit[i]
		switch {
		case !hex && (c == 'e' || c == 'E'), hex && (c == 'p' || c == 'P'):
			return false
		case c >= '1' && c <= '9', hex && (c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'):
			return true
		}
	}
	return false
}

func signed(f float64, neg bool) float64 {
	if neg {
		return -f
	}
	return f
}

// prefixFold returns how many bytes of s match word, case-insensitively,
// from the start.
func prefixFold(s, word string) int {
	i := 0
	for i < len(s) && i < len(word) && (s[i]|0x20) == word[i] {
		i++
	}
	return i
}

func alnum(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_') {
			return false
		}
	}
	return true
}

func digits(s string, hex bool) int {
	i := 0
	for i < len(s) {
		c := s[i]
		if c >= '0' && c <= '9' || hex && (c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			i++
			continue
		}
		break
	}
	return i
}

// decNumber returns the length of the decimal floating-point literal at
// the start of s (digits, a point, digits, an exponent if well formed),
// 0 if there is none.
func decNumber(s string) int {
	a := digits(s, false)
	i, frac := a, 0
	if i < len(s) && s[i] == '.' {
		frac = digits(s[i+1:], false)
		i += 1 + frac
	}
	if a == 0 && frac == 0 {
		return 0
	}
	return i + exponent(s[i:], 'e')
}

// hexNumber returns the length of the hexadecimal literal after "0x"
// (digits, point, digits, a binary exponent if well formed), 0 if none.
func hexNumber(s string) (int, bool) {
	a := digits(s, true)
	i, frac := a, 0
	if i < len(s) && s[i] == '.' {
		frac = digits(s[i+1:], true)
		i += 1 + frac
	}
	if a == 0 && frac == 0 {
		return 0, false
	}
	e := exponent(s[i:], 'p')
	return i + e, e > 0
}

// exponent returns the length of an exponent (letter e, a sign, digits)
// at the start of s, 0 if there is no well-formed one.
func exponent(s string, e byte) int {
	if len(s) < 2 || s[0]|0x20 != e {
		return 0
	}
	i := 1
	if s[i] == '+' || s[i] == '-' {
		i++
	}
	d := digits(s[i:], false)
	if d == 0 {
		return 0
	}
	return i + d
}

// FormatScore formats a score as Redis 7.0 replies it: "%.17g" (C's
// printf), and "inf" and "-inf" for the infinities.
func FormatScore(f float64) string {
	return string(AppendScore(nil, f))
}

// AppendScore appends FormatScore(f) to dst.
func AppendScore(dst []byte, f float64) []byte {
	switch {
	case math.IsInf(f, 1):
		return append(dst, "inf"...)
	case math.IsInf(f, -1):
		return append(dst, "-inf"...)
	}
	return strconv.AppendFloat(dst, f, 'g', 17, 64)
}
