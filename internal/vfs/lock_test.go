//go:build unix

package vfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLock: a lock is held by one opener at a time; a second fails at
// once naming the holder's pid, and the lock is free again once the holder
// closes it.
func TestLock(t *testing.T) {
	name := filepath.Join(t.TempDir(), "lock")
	first, err := OS.Lock(name)
	if err != nil {
		t.Fatal(err)
	}
	_, err = OS.Lock(name)
	want := fmt.Sprintf("(pid %d)", os.Getpid())
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), want) {
		t.Fatalf("second lock: %v; want ErrLocked naming %q", err, want)
	}
	first.Close()
	again, err := OS.Lock(name)
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
