package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// docs/install.md is a list of commands a user runs, and every one of
// them is run by a test. Each shell block of the file follows a marker
// that names it:
//
//	<!-- test: release-verify -->
//	```sh
//	sha256sum -c SHA256SUMS
//	```
//
// A test reads a block with installBlock(t, "release-verify") and runs its
// text, substituting only what the page tells a user to substitute (a
// version, a path). TestInstallDocBlocks checks that every block has a
// name and that some test of this package reads each name.

const installDoc = "../../docs/install.md"

var (
	installMarker = regexp.MustCompile(`^<!-- test: ([a-z0-9-]+) -->$`)
	fenceOpen     = regexp.MustCompile("^```(sh|yaml|toml|ini)?\\s*$")
)

// installBlocks parses docs/install.md into its named blocks. A fenced
// block without a marker right before it is an error.
func installBlocks(t testing.TB) map[string]string {
	t.Helper()
	data, err := os.ReadFile(installDoc)
	if err != nil {
		t.Fatalf("reading %s: %v", installDoc, err)
	}
	blocks := map[string]string{}
	lines := strings.Split(string(data), "\n")
	for i := 0; i < len(lines); i++ {
		if !strings.HasPrefix(lines[i], "```") {
			continue
		}
		if !fenceOpen.MatchString(lines[i]) {
			t.Fatalf("%s:%d: a block of install.md must be sh, yaml, toml or ini: %q", installDoc, i+1, lines[i])
		}
		var m []string
		if i > 0 {
			m = installMarker.FindStringSubmatch(lines[i-1])
		}
		if m == nil {
			t.Fatalf("%s:%d: block without a <!-- test: NAME --> line before it", installDoc, i+1)
		}
		name := m[1]
		if _, dup := blocks[name]; dup {
			t.Fatalf("%s:%d: block %q named twice", installDoc, i+1, name)
		}
		var body []string
		for i++; i < len(lines) && lines[i] != "```"; i++ {
			body = append(body, lines[i])
		}
		if i == len(lines) {
			t.Fatalf("%s: block %q is not closed", installDoc, name)
		}
		blocks[name] = strings.Join(body, "\n") + "\n"
	}
	return blocks
}

// installBlock returns the text of docs/install.md's block name, for the
// calling test to run (or, for a file's block, to write and use).
func installBlock(t testing.TB, name string) string {
	t.Helper()
	b, ok := installBlocks(t)[name]
	if !ok {
		t.Fatalf("%s has no block %q", installDoc, name)
	}
	return b
}

// TestInstallDocBlocks checks that every block of docs/install.md is read
// by a test of this package: a call installBlock(t, "name") with the name
// as a string literal.
func TestInstallDocBlocks(t *testing.T) {
	blocks := installBlocks(t)
	if len(blocks) == 0 {
		t.Fatalf("%s has no blocks", installDoc)
	}
	read := map[string]bool{}
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 2 {
				return true
			}
			if id, ok := call.Fun.(*ast.Ident); !ok || id.Name != "installBlock" {
				return true
			}
			if lit, ok := call.Args[1].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil {
					read[s] = true
				}
			}
			return true
		})
	}
	for name := range blocks {
		if !read[name] {
			t.Errorf("%s: block %q is run by no test (no installBlock(t, %q))", installDoc, name, name)
		}
	}
	for name := range read {
		if _, ok := blocks[name]; !ok {
			t.Errorf("a test reads block %q, which %s does not have", name, installDoc)
		}
	}
}
