package raftrep

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
			err := claimDir(dir, tt.id)
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
