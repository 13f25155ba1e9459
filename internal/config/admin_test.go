package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/latchd/latch/internal/admin"
)

func TestAdminLoadToken(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name    string
		cfg     AdminConfig
		want    string
		wantErr string
	}{
		{"none", AdminConfig{}, "", ""},
		{"inline", AdminConfig{Config: admin.Config{Token: "s3cret"}}, "s3cret", ""},
		{"file", AdminConfig{TokenFile: write("tok", "  s3cret\n")}, "s3cret", ""},
		{"empty file", AdminConfig{TokenFile: write("empty", "\n\t\n")}, "", "is empty"},
		{"missing file", AdminConfig{TokenFile: filepath.Join(dir, "nope")}, "", "admin-token-file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.cfg.LoadToken()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("LoadToken() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("LoadToken() = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
