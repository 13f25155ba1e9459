package dlockpb_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestGeneratedCodeIsCurrent regenerates the Go code from proto/dlock.proto
// into a temporary directory and compares it byte for byte with the
// committed dlock.pb.go. protoc-gen-go is built from the
// google.golang.org/protobuf version in go.mod, so that generator and
// runtime always match. Without protoc the test skips, except in CI
// (CI=true), where it fails: CI must check the drift.
func TestGeneratedCodeIsCurrent(t *testing.T) {
	protoc, err := exec.LookPath("protoc")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("protoc not found (%v): CI must have it (Debian package protobuf-compiler; make deps installs it)", err)
		}
		t.Skipf("protoc not found (%v); install protobuf-compiler to check the generated code", err)
	}
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip("builds protoc-gen-go; skipped in -short mode")
	}

	tmp := t.TempDir()
	bin := filepath.Join(tmp, "bin")
	gobuild := exec.Command("go", "build", "-o", filepath.Join(bin, "protoc-gen-go"), "google.golang.org/protobuf/cmd/protoc-gen-go")
	if out, err := gobuild.CombinedOutput(); err != nil {
		t.Fatalf("building protoc-gen-go: %v\n%s", err, out)
	}

	out := filepath.Join(tmp, "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	gen := exec.Command(protoc, "-I", filepath.Join("..", "proto"),
		"--plugin=protoc-gen-go="+filepath.Join(bin, "protoc-gen-go"),
		"--go_out="+out, "--go_opt=module=github.com/latchd/latch", "dlock.proto")
	if msg, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("protoc: %v\n%s", err, msg)
	}

	want, err := os.ReadFile(filepath.Join(out, "dlockpb", "dlock.pb.go"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("dlock.pb.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("dlockpb/dlock.pb.go is not what proto/dlock.proto generates: run \"make proto\"\n%s",
			firstDifference(string(got), string(want)))
	}
}

// firstDifference describes the first line where committed and regenerated
// code differ.
func firstDifference(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < min(len(g), len(w)); i++ {
		if g[i] != w[i] {
			msg := fmt.Sprintf("line %d:\n  committed:   %s\n  regenerated: %s", i+1, g[i], w[i])
			if strings.Contains(g[i], "protoc ") {
				msg += "\n(a different protoc: the committed code comes from Debian's protobuf-compiler)"
			}
			return msg
		}
	}
	return fmt.Sprintf("the files differ in length: committed %d lines, regenerated %d", len(g), len(w))
}
