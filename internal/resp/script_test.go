package resp

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// clientScript is a lock script of an installed client library.
type clientScript struct {
	client string
	body   string
	want   template
}

// goModDir returns the directory of a module of go.mod in the module cache.
func goModDir(t *testing.T, mod string) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", mod).Output()
	if err != nil || strings.TrimSpace(string(out)) == "" {
		t.Fatalf("go list -m %s: %v", mod, err)
	}
	return strings.TrimSpace(string(out))
}

// goScripts reads the scripts a Go library defines as raw string literals.
func goScripts(t *testing.T, file string, re *regexp.Regexp) []string {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range re.FindAllSubmatch(src, -1) {
		out = append(out, string(m[1]))
	}
	return out
}

// runJSON runs a command that prints a JSON list of strings.
func runJSON(t *testing.T, dir string, name string, args ...string) []string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
	}
	var list []string
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatalf("%s: %v: %s", name, err, out)
	}
	return list
}

// installedScripts returns the lock scripts of every client library the
// tests install, with the template each must be recognised as.
func installedScripts(t *testing.T) []clientScript {
	t.Helper()
	var all []clientScript
	add := func(client string, bodies []string, want ...template) {
		if len(bodies) != len(want) {
			t.Fatalf("%s: found %d scripts, want %d", client, len(bodies), len(want))
		}
		for i, b := range bodies {
			all = append(all, clientScript{client, b, want[i]})
		}
	}
	rs := goModDir(t, "github.com/go-redsync/redsync/v4")
	add("redsync", goScripts(t, filepath.Join(rs, "scripts.go"), regexp.MustCompile("NewScript\\(\\d+, `([^`]*)`")),
		tmplCADMissing, tmplCAPXOrSetNX, tmplCAPX)
	rl := goModDir(t, "github.com/bsm/redislock")
	add("redislock", goScripts(t, filepath.Join(rl, "redislock.go"), regexp.MustCompile("NewScript\\(`([^`]*)`\\)")),
		tmplCAPX, tmplCAD, tmplPTTLIf, tmplObtain)
	add("redis-py", runJSON(t, ".", "/usr/bin/python3", "-c",
		"import json, redis.lock as l; L = l.Lock; print(json.dumps([L.LUA_RELEASE_SCRIPT, L.LUA_EXTEND_SCRIPT, L.LUA_REACQUIRE_SCRIPT]))"),
		tmplCAD, tmplExtendPy, tmplCAPX)
	npm := npmDir(t)
	add("redlock 4.2", runJSON(t, npm, "node", "-e",
		"const R = require('redlock4'); const r = new R([{}]); console.log(JSON.stringify([r.lockScript, r.unlockScript, r.extendScript]))"),
		tmplAcquireAll, tmplReleaseCount, tmplExtendAll)
	add("redlock 5", runJSON(t, npm, "node", "-e",
		"const R = require('redlock5').default; const r = new R([{}]); const s = r.scripts; console.log(JSON.stringify([s.acquireScript.value, s.releaseScript.value, s.extendScript.value]))"),
		tmplAcquireAll, tmplReleaseCount, tmplExtendAll)
	return all
}

// TestInstalledScripts: every lock script of the installed clients is
// recognised as its template, by its SHA1 and by its canonical form alone.
func TestInstalledScripts(t *testing.T) {
	for _, s := range installedScripts(t) {
		sha := scriptSHA([]byte(s.body))
		if got := recognise([]byte(s.body)); got != s.want {
			t.Errorf("%s script %s: recognised as %q, want %q", s.client, sha, got, s.want)
		}
		csum := scriptSHA([]byte(Canonical([]byte(s.body))))
		if got := canonicalScripts[csum]; got != s.want {
			t.Errorf("%s script %s: canonical form %s is %q, want %q\n%s", s.client, sha, csum, got, s.want, Canonical([]byte(s.body)))
		}
		if _, ok := knownScripts[sha]; !ok {
			t.Errorf("%s script %s: its SHA1 is not in knownScripts", s.client, sha)
		}
		if got, want := knownLines[sha], readLine([]byte(s.body)); got != want {
			t.Errorf("%s script %s: knownLines has line %d, its text reads its key on line %d", s.client, sha, got, want)
		}
	}
	// Every known script but redlock's acquire (EXISTS, then SET) reads its
	// key as a string, so that a key held by a session is WRONGTYPE to it.
	for sha, tmpl := range knownScripts {
		if _, ok := knownLines[sha]; ok == (tmpl == tmplAcquireAll) {
			t.Errorf("script %s (%v): in knownLines: %v", sha, tmpl, ok)
		}
	}
	for sha := range knownLines {
		if _, ok := knownScripts[sha]; !ok {
			t.Errorf("knownLines has %s, which knownScripts lacks", sha)
		}
	}
}

// TestReadLine: the line of a script's first read of a key as a string,
// where Redis reports its WRONGTYPE error.
func TestReadLine(t *testing.T) {
	tests := []struct {
		src  string
		want int
	}{
		{`return redis.call("get", KEYS[1])`, 1},
		{"\n\tif redis.call('GET', KEYS[1]) == ARGV[1] then\n\t\treturn 1\n\tend", 2},
		{"-- get it\n--[[ redis.call('get', KEYS[1])\n]]\nlocal v = redis.call(\"GetRange\", KEYS[1], 0, 3)", 4},
		{"local s = [[\nline]] return redis.call('get', KEYS[1])", 2},
		{"redis.call('set', KEYS[1], 'x')\nredis.pcall('get', KEYS[1])\nreturn redis.call('get', KEYS[1])", 3},
		{`return redis.call("exists", KEYS[1])`, 0},
		{"", 0},
	}
	for _, tt := range tests {
		if got := readLine([]byte(tt.src)); got != tt.want {
			t.Errorf("readLine(%q) = %d, want %d", tt.src, got, tt.want)
		}
	}
}

// TestCanonical: layout, comments, quotes and command case do not change
// the canonical form; anything else does.
func TestCanonical(t *testing.T) {
	base := `if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end`
	same := []string{
		"if redis.call('GET', KEYS[1]) == ARGV[1] then\n  return redis.call('DEL', KEYS[1])\nelse\n  return 0\nend\n",
		"-- release\nif redis.call(\"get\",KEYS[1])==ARGV[1] then --[[ mine ]] return redis.call(\"del\",KEYS[1]) else return 0 end",
		"\tif  redis.call( \"Get\" , KEYS [ 1 ] ) == ARGV[1]\tthen return redis.call(\"del\", KEYS[1]) else return 0 end",
	}
	other := []string{
		`if redis.call("get",KEYS[1]) ~= ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end`,
		`if redis.call("get",KEYS[1]) == ARGV[2] then return redis.call("del",KEYS[1]) else return 0 end`,
		`if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 1 end`,
		`if redis.call("get",KEYS[1]) == "ARGV[1]" then return redis.call("del",KEYS[1]) else return 0 end`,
	}
	want := Canonical([]byte(base))
	if recognise([]byte(base)) != tmplCAD {
		t.Errorf("the documentation's compare-and-delete is not recognised")
	}
	for _, s := range same {
		if got := Canonical([]byte(s)); got != want {
			t.Errorf("Canonical(%q) =\n%q, want\n%q", s, got, want)
		}
	}
	for _, s := range other {
		if got := Canonical([]byte(s)); got == want {
			t.Errorf("Canonical(%q) is the compare-and-delete's", s)
		}
		if recognise([]byte(s)) != tmplNone {
			t.Errorf("%q is recognised", s)
		}
	}
}

// npmDir returns the directory of the npm clients, installed by make deps.
func npmDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("testdata/npm")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "ioredis")); err != nil {
		t.Fatalf("npm clients not installed (run make deps): %v", err)
	}
	return dir
}
