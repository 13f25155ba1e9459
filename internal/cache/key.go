package cache

import "github.com/latchd/latch"

// CheckKey is latch.CheckKey for a key held in a []byte, without converting
// it to a string on the valid path (a conversion would allocate for keys
// longer than 32 bytes). The rule is latch's; TestCheckKeyAgrees keeps the
// two in step. The error comes from latch.CheckKey.
func CheckKey(key []byte) error {
	if len(key) == 0 || len(key) > latch.MaxKeyLen {
		return latch.CheckKey(string(key))
	}
	for _, b := range key {
		if b == ' ' || b == '\r' || b == '\n' {
			return latch.CheckKey(string(key))
		}
	}
	return nil
}
