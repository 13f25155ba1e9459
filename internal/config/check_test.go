package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckFile(t *testing.T) {
	tests := []struct {
		name string
		file string
		want []string // a substring of each error, in order; none: ok
	}{
		{name: "empty", file: ""},
		{name: "defaults", file: string(DefaultTOML())},
		{name: "good", file: "[log]\nlevel = \"debug\"\n[lock]\nmax-keys = 10\n"},
		{name: "unknown key", file: "[log]\nlevle = \"debug\"\n", want: []string{`unknown key "log.levle"`}},
		{name: "bad value", file: "[log]\nlevel = \"loud\"\n", want: []string{`invalid log-level "loud"`}},
		{name: "every bad value", file: "[log]\nlevel = \"loud\"\nformat = \"xml\"\n", want: []string{`log-level "loud"`, `log-format "xml"`}},
		{name: "wrong type", file: "[lock]\nmax-keys = \"many\"\n", want: []string{"lock.max-keys"}},
		{name: "not TOML", file: "[log\n", want: []string{"latch.toml"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "latch.toml")
			if err := os.WriteFile(path, []byte(tt.file), 0o644); err != nil {
				t.Fatal(err)
			}
			errs := CheckFile(path)
			if len(errs) != len(tt.want) {
				t.Fatalf("CheckFile = %q, want %d errors like %q", errs, len(tt.want), tt.want)
			}
			for i, err := range errs {
				if !strings.Contains(err.Error(), tt.want[i]) {
					t.Errorf("error %d = %q, want it to contain %q", i, err, tt.want[i])
				}
			}
		})
	}
	if errs := CheckFile(filepath.Join(t.TempDir(), "none.toml")); len(errs) != 1 {
		t.Errorf("CheckFile(a missing file) = %q, want one error", errs)
	}
}
