package netserve

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestOneAcceptLoop: the code has one accept loop, this package's. No
// front end (a package that imports netserve) listens, accepts, wraps a
// listener or a connection in TLS, or runs event loops by itself.
func TestOneAcceptLoop(t *testing.T) {
	const self = "github.com/latchd/latch/internal/netserve"
	forbidden := map[string]bool{
		"net.Listen": true, "net.ListenTCP": true, "net.ListenUnix": true, "net.FileListener": true,
		"tls.Listen": true, "tls.NewListener": true, "tls.Server": true,
		"evloop.New": true,
	}
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	files := make(map[string][]*ast.File) // by directory: the packages
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || filepath.Dir(path) == "." {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files[filepath.Dir(path)] = append(files[filepath.Dir(path)], f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var frontEnds []string
	for dir, fs := range files {
		if !slices.ContainsFunc(fs, func(f *ast.File) bool { return imports(f, self) }) {
			continue
		}
		frontEnds = append(frontEnds, filepath.Base(dir))
		for _, f := range fs {
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if id, ok := sel.X.(*ast.Ident); ok && forbidden[id.Name+"."+sel.Sel.Name] {
					t.Errorf("%s: %s.%s: only netserve listens and serves", fset.Position(call.Pos()), id.Name, sel.Sel.Name)
				}
				if sel.Sel.Name == "Accept" && len(call.Args) == 0 {
					t.Errorf("%s: an Accept call: only netserve accepts", fset.Position(call.Pos()))
				}
				return true
			})
		}
	}
	for _, want := range []string{"memcache", "dlock", "resp"} {
		if !slices.Contains(frontEnds, want) {
			t.Errorf("the %s front end does not import netserve (front ends: %v)", want, frontEnds)
		}
	}
}

// imports reports whether f imports path.
func imports(f *ast.File, path string) bool {
	for _, im := range f.Imports {
		if p, err := strconv.Unquote(im.Path.Value); err == nil && p == path {
			return true
		}
	}
	return false
}
