package latch

import "fmt"

// MaxKeyLen is the longest key latch accepts, in bytes. It is memcached's
// limit and applies to every protocol, so that one lock table serves all.
const MaxKeyLen = 250

// CheckKey reports whether k is a valid lock key: 1 to MaxKeyLen bytes with no
// space, carriage return or line feed. The error wraps ErrInvalidKey.
func CheckKey(k string) error {
	if len(k) == 0 {
		return fmt.Errorf("%w: empty key", ErrInvalidKey)
	}
	if len(k) > MaxKeyLen {
		return fmt.Errorf("%w: %d bytes, more than %d", ErrInvalidKey, len(k), MaxKeyLen)
	}
	for i := 0; i < len(k); i++ {
		switch k[i] {
		case ' ', '\r', '\n':
			return fmt.Errorf("%w: byte %#02x at offset %d", ErrInvalidKey, k[i], i)
		}
	}
	return nil
}
