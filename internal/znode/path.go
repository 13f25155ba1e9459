package znode

import (
	"strconv"
	"unicode/utf8"
)

// ValidPath reports whether p is a znode path ZooKeeper accepts
// (PathUtils.validatePath): it starts with "/", does not end with "/"
// unless it is the root, has no empty, "." or ".." segment, and holds no
// null or control character (U+0000-U+001F, U+007F-U+009F), no character
// that Java would store as a surrogate or private-use unit (U+D800-U+F8FF
// and everything above U+FFFF), none of U+FFF0-U+FFFF, and no invalid UTF-8
// (which Java decodes as U+FFFD).
//
// With seq, p is the prefix of a sequential create and is checked as if
// followed by its ten-digit suffix: a trailing "/" is then allowed, and so
// is a last segment of "." or "..".
func ValidPath(p string, seq bool) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	if len(p) == 1 {
		return true
	}
	start := 1
	for i := 1; ; {
		if i == len(p) || p[i] == '/' {
			last := i == len(p)
			if !last || !seq {
				switch p[start:i] {
				case "", ".", "..":
					return false
				}
			}
			if last {
				return true
			}
			i++
			start = i
			continue
		}
		c := p[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(p[i:])
		if r == utf8.RuneError || r <= 0x9f || r >= 0xd800 && r <= 0xf8ff || r >= 0xfff0 {
			return false
		}
		i += size
	}
}

// splitPath returns a valid path's parent ("/" for a child of the root) and
// last segment. The root has no parent: ok is false.
func splitPath(p string) (parent, name string, ok bool) {
	i := len(p) - 1
	for i >= 0 && p[i] != '/' {
		i--
	}
	if i < 0 || p == "/" {
		return "", "", false
	}
	if i == 0 {
		return "/", p[1:], true
	}
	return p[:i], p[i+1:], true
}

// appendSeq appends a sequence suffix as ZooKeeper formats it ("%010d" of a
// signed 32-bit counter): ten digits, zero-padded, with a minus sign in the
// padding for a negative counter ("-000000005", "-2147483648").
func appendSeq(dst []byte, n int32) []byte {
	var buf [12]byte
	digits := strconv.AppendInt(buf[:0], int64(n), 10)
	neg := n < 0
	if neg {
		dst = append(dst, '-')
		digits = digits[1:]
	}
	width := 10
	if neg {
		width = 9
	}
	for k := len(digits); k < width; k++ {
		dst = append(dst, '0')
	}
	return append(dst, digits...)
}

// isSpecial reports whether p is the root or a built-in znode, which cannot
// be deleted.
func isSpecial(p string) bool {
	switch p {
	case "/", "/zookeeper", "/zookeeper/config", "/zookeeper/quota":
		return true
	}
	return false
}
