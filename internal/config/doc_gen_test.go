package config

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var updateReference = flag.Bool("update", false, "rewrite docs/configuration.md from the settings table")

const referencePath = "../../docs/configuration.md"

// TestReference: docs/configuration.md is what Reference makes of the
// settings table, so that the documentation cannot drift from the flags.
func TestReference(t *testing.T) {
	want := Reference()
	if *updateReference {
		if err := os.WriteFile(referencePath, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatalf("%v (generate it: go test ./internal/config -run TestReference -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from the settings table; regenerate it: go test ./internal/config -run TestReference -update", referencePath)
	}
	for i := range settings {
		if !bytes.Contains(got, []byte("`--"+settings[i].flag)) {
			t.Errorf("%s lacks --%s", referencePath, settings[i].flag)
		}
	}
}

// TestDefaultTOMLLoads: the file of defaults that the reference shows
// loads as written and gives the default configuration, which is valid.
func TestDefaultTOMLLoads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "latch.toml")
	if err := os.WriteFile(path, DefaultTOML(), 0o644); err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	cfg, err := Load(fs, []string{"--config", path}, func(string) string { return "" })
	if err != nil {
		t.Fatalf("Load(the defaults file): %v\n%s", err, DefaultTOML())
	}
	def := DefaultConfig()
	for i := range settings {
		if got, want := settings[i].format(&cfg), settings[i].format(&def); got != want {
			t.Errorf("%s = %q from the file, want the default %q", settings[i].toml, got, want)
		}
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("the defaults do not validate: %v", err)
	}
}
