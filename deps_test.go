package latch_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/latchd/latch"

// allowedImports is the package table of docs/architecture.md as code: for each package of the
// module (by its path inside the module), the module packages its non-test
// files may import. "*" allows every package of the module. A package that
// is not listed fails the test, so a new package must take its place here.
var allowedImports = map[string][]string{
	"":                     {},
	"internal/engine":      {"", "internal/peakmap"},
	"internal/cache":       {"", "internal/peakmap"},
	"internal/peakmap":     {},
	"internal/refuse":      {},
	"internal/idleread":    {},
	"internal/timedwrite":  {},
	"internal/tcptest":     {},
	"internal/evloop":      {},
	"internal/wal":         {"internal/vfs"},
	"internal/vfs":         {},
	"internal/vfs/crashfs": {"internal/vfs"},
	"internal/fsm":         {"", "internal/engine", "internal/cache", "internal/znode", "internal/zset"},
	"internal/zset":        {},
	"internal/znode":       {},
	"internal/replica":     {"", "internal/fsm"},
	// The only importer of hashicorp/raft.
	"internal/replica/raftrep": {"", "internal/fsm", "internal/replica", "internal/vfs", "internal/wal"},
	"internal/node":            {"", "internal/engine", "internal/cache", "internal/fsm", "internal/replica", "internal/peakmap", "internal/znode", "internal/zset"},
	// The memcached front end names items and item commands in the
	// vocabulary of cache and fsm, but holds no cache: it reaches items
	// only through its Service (internal/node).
	// A front end is its codec, handlers and error table: netserve serves
	// its connections.
	"internal/memcache": {"", "internal/cache", "internal/evloop", "internal/fsm", "internal/metrics", "internal/netserve"},
	"internal/resp":     {"", "internal/evloop", "internal/fsm", "internal/luascript", "internal/metrics", "internal/netserve", "internal/zset"},
	// The Lua sandbox of Redis scripts: it knows no command (its Caller
	// runs them).
	"internal/luascript": {},
	"internal/dlock":     {"", "dlockpb", "internal/evloop", "internal/frame", "internal/metrics", "internal/netserve", "internal/timedwrite"},
	// Every front end's server: listening, accepting, limits, tracking,
	// the read path, shutdown.
	"internal/netserve": {"", "internal/evloop", "internal/idleread", "internal/metrics", "internal/peakmap", "internal/refuse", "internal/timedwrite"},
	// The ZooKeeper front end: its listener (node.ZListener) hears of
	// the data tree's changes as the node applies them.
	"internal/zookeeper": {"", "internal/fsm", "internal/jute", "internal/metrics", "internal/netserve", "internal/node", "internal/znode"},
	"internal/frame":     {},
	"internal/jute":      {},
	"dlockpb":            {},
	"internal/admin":     {"", "internal/metrics"},
	"internal/metrics":   {"", "internal/cache", "internal/node"}, // implements node.Observer; reads the item cache's stats
	// The configuration's sections are the components' own Configs,
	// decoded from flags, environment and file in place.
	"internal/config":                   {"", "internal/admin", "internal/cache", "internal/dlock", "internal/engine", "internal/memcache", "internal/netserve", "internal/node", "internal/resp", "internal/zookeeper", "internal/znode", "internal/zset"},
	"internal/tlsconf":                  {},
	"internal/tlsconf/tlstest":          {},
	"internal/statuscmd":                {"", "internal/admin"},
	"internal/backup":                   {},
	"internal/clidoc":                   {},
	"internal/sdnotify":                 {},
	"internal/snapcmd":                  {"", "internal/admin", "internal/backup", "internal/fsm", "internal/replica/raftrep", "internal/vfs"},
	"internal/server":                   {"*"},
	"client":                            {"", "dlockpb", "internal/frame"},
	"internal/runlock":                  {"", "client"},
	"internal/bench":                    {"dlockpb", "internal/frame"},
	"internal/latchtest":                {"*"},
	"internal/latchtest/jepsen":         {"*"},
	"internal/latchtest/jepsen/check":   {},
	"internal/latchtest/jepsen/fenced":  {"internal/latchtest/jepsen/check"},
	"internal/latchtest/jepsen/cluster": {"internal/admin"},
	"internal/latchtest/lazyfs":         {},
	"cmd/latch":                         {"*"},
	"scripts/floor":                     {"internal/evloop"},
	"scripts/zkbench":                   {"internal/bench"},

	"internal/engine/enginemodel": {"", "internal/engine"},
}

// deterministic packages are state machines driven by their caller: no I/O,
// no goroutines, no clock of their own.
var deterministic = []string{"internal/engine", "internal/cache", "internal/fsm", "internal/znode", "internal/zset"}

var (
	forbiddenInDeterministic = []string{"net", "os", "sync", "sync/atomic", "math/rand", "math/rand/v2", "crypto/rand"}
	clockFuncs               = []string{"Now", "Since", "Until", "Sleep", "After", "AfterFunc", "NewTimer", "NewTicker", "Tick"}
)

func TestPackageDependencies(t *testing.T) {
	pkgs := parsePackages(t)
	if len(pkgs) < 5 {
		t.Fatalf("found only %d packages; is the test running at the module root?", len(pkgs))
	}
	for dir, files := range pkgs {
		allowed, ok := allowedImports[dir]
		if !ok {
			t.Errorf("package %q is not in the dependency table (deps_test.go, docs/architecture.md)", dir)
			continue
		}
		for _, f := range files {
			for _, imp := range f.imports {
				if imp != module && !strings.HasPrefix(imp, module+"/") {
					continue
				}
				rel := strings.TrimPrefix(strings.TrimPrefix(imp, module), "/")
				if !slices.Contains(allowed, "*") && !slices.Contains(allowed, rel) {
					t.Errorf("%s imports %q, which the dependency table forbids", f.name, imp)
				}
			}
		}
	}
}

func TestDeterministicPackages(t *testing.T) {
	pkgs := parsePackages(t)
	for _, dir := range deterministic {
		for _, f := range pkgs[dir] {
			for _, imp := range f.imports {
				if slices.Contains(forbiddenInDeterministic, imp) {
					t.Errorf("%s imports %q: deterministic packages own no I/O, goroutines or randomness", f.name, imp)
				}
			}
			ast.Inspect(f.ast, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.GoStmt:
					t.Errorf("%s: go statement: deterministic packages own no goroutines", f.fset.Position(n.Pos()))
				case *ast.SelectorExpr:
					if id, ok := n.X.(*ast.Ident); ok && id.Name == "time" && slices.Contains(clockFuncs, n.Sel.Name) {
						t.Errorf("%s: time.%s: deterministic packages take time as an argument", f.fset.Position(n.Pos()), n.Sel.Name)
					}
				}
				return true
			})
		}
	}
}

type sourceFile struct {
	name    string
	fset    *token.FileSet
	ast     *ast.File
	imports []string
}

// parsePackages parses the non-test Go files of the module, by directory.
func parsePackages(t *testing.T) map[string][]sourceFile {
	t.Helper()
	pkgs := make(map[string][]sourceFile)
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			if path != "." {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir // another module (bench/)
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		sf := sourceFile{name: path, fset: fset, ast: f}
		for _, imp := range f.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				return err
			}
			sf.imports = append(sf.imports, p)
		}
		dir := filepath.ToSlash(filepath.Dir(path))
		if dir == "." {
			dir = ""
		}
		pkgs[dir] = append(pkgs[dir], sf)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}
