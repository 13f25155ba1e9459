package raftrep

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/latchd/latch/internal/vfs"
)

// TestClaimDir: a data dir is claimed by the first node ID it is started
// with, then refused to any other.
func TestClaimDir(t *testing.T) {
	tests := []struct {
		name     string
		recorded string // the dir's node-id file, "" for none
		id       string
		wantErr  string
	}{
		{"a new dir", "", "n1", ""},
		{"its own node", "n1\n", "n1", ""},
		{"another node", "n1\n", "n2", "belongs to node n1, not n2"},
		{"the default ID", "latch\n", "n1", "belongs to node latch, not n1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, nodeFile)
			if tt.recorded != "" {
				if err := os.WriteFile(path, []byte(tt.recorded), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			err := claimDir(vfs.OS, dir, tt.id)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("claimDir(%q) = %v, want an error containing %q", tt.id, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if b, err := os.ReadFile(path); err != nil || string(b) != tt.id+"\n" {
				t.Errorf("node-id file = %q, %v; want %q", b, err, tt.id+"\n")
			}
			if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
				t.Errorf("temporary file left: %v", err)
			}
		})
	}
}

// TestLockDir: a data dir's lock is held by one node at a time; a second
// fails at once naming the holder's pid.
func TestLockDir(t *testing.T) {
	dir := t.TempDir()
	first, err := lockDir(vfs.OS, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	_, err = lockDir(vfs.OS, dir)
	want := fmt.Sprintf("data dir %s is in use by another process (pid %d)", dir, os.Getpid())
	if runtime.GOOS != "windows" && (err == nil || !strings.Contains(err.Error(), want)) {
		t.Fatalf("second lock: %v; want an error containing %q", err, want)
	}
}
