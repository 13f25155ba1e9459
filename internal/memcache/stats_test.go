package memcache

import "testing"

// TestTextCommandIndex keeps textCommandIndex in step with textCommands:
// every counted command maps to its index, anything else to -1.
func TestTextCommandIndex(t *testing.T) {
	for i, name := range textCommands {
		if got := textCommandIndex([]byte(name)); got != i {
			t.Errorf("textCommandIndex(%q) = %d, want %d", name, got, i)
		}
	}
	for _, name := range []string{"", "GET", "lock ", "unlock_al", "unlock_all_", "bogus", "gat"} {
		if got := textCommandIndex([]byte(name)); got != -1 {
			t.Errorf("textCommandIndex(%q) = %d, want -1", name, got)
		}
	}
}
