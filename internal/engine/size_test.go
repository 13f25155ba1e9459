package engine

import (
	"testing"
	"unsafe"
)

// TestKeySize keeps a held key within its memory budget: the key record
// with its inline first hold is the one object an uncontended lock costs,
// and 112 bytes is the size class that, with the map slot and the name,
// keeps a held lock under 200 bytes.
func TestKeySize(t *testing.T) {
	if got := unsafe.Sizeof(key{}); got > 112 {
		t.Errorf("key record is %d bytes, want at most 112", got)
	}
}
