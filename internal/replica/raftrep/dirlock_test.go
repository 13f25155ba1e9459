//go:build unix

package raftrep

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestLockDir: a data dir's lock is held by one opener at a time; a second
// fails at once naming the holder's pid, and the lock is free again once
// the holder closes it.
func TestLockDir(t *testing.T) {
	dir := t.TempDir()
	first, err := lockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = lockDir(dir)
	want := fmt.Sprintf("data dir %s is in use by another process (pid %d)", dir, os.Getpid())
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("second lock: %v; want an error containing %q", err, want)
	}
	first.Close()
	again, err := lockDir(dir)
	if err != nil {
		t.Fatalf("lock after the holder closed it: %v", err)
	}
	again.Close()
}

func TestPidNote(t *testing.T) {
	for _, tt := range []struct {
		in, want string
	}{
		{"123", " (pid 123)"},
		{"123\n", " (pid 123)"},
		{"", ""},
		{"0", ""},
		{"-4", ""},
		{"abc", ""},
	} {
		if got := pidNote([]byte(tt.in)); got != tt.want {
			t.Errorf("pidNote(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
