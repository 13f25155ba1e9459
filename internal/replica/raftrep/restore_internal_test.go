package raftrep

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/latchd/latch/internal/vfs"
)

// TestTokenOffset: the offset a restore left is read back; a damaged
// file is an error that says what it is, never a silent 0.
func TestTokenOffset(t *testing.T) {
	tests := []struct {
		name    string
		content string // "" : no file
		want    int64
		wantErr string
	}{
		{"no file", "", 0, ""},
		{"offset", "token-offset 3600000000042\n", 3600000000042, ""},
		{"garbage", "tokn-offset 5\n", 0, "is damaged"},
		{"negative", "token-offset -5\n", 0, "is damaged"},
		{"empty", "\n", 0, "is damaged"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if tt.content != "" {
				if err := vfs.WriteFile(vfs.OS, filepath.Join(dir, restoredFile), []byte(tt.content)); err != nil {
					t.Fatal(err)
				}
			}
			got, err := TokenOffset(dir)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("TokenOffset = %d, %v; want an error saying %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("TokenOffset = %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}
