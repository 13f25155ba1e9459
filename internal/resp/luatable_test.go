package resp

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLuaCorpusUnknown: the scripts of testdata/lua whose header says
// "-- unknown:" are in no table of latch's, by their text or canonical
// form, with or without their header: they test the Lua that runs them
// (luadiff_test.go, and the Jepsen-style test's Redis workload).
func TestLuaCorpusUnknown(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "lua", "*.lua"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts in testdata/lua: %v", err)
	}
	unknown := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(b), "-- unknown:") {
			continue
		}
		unknown++
		var body []string
		for _, l := range strings.Split(string(b), "\n") {
			if !strings.HasPrefix(l, "-- ") {
				body = append(body, l)
			}
		}
		for _, s := range []string{string(b), strings.Join(body, "\n"), strings.TrimSpace(strings.Join(body, "\n"))} {
			if tm := recognise([]byte(s)); tm != tmplNone {
				t.Errorf("%s is recognised as %v, yet says it is unknown", f, tm)
			}
		}
	}
	if unknown < 2 {
		t.Errorf("%d scripts say they are unknown: the Jepsen-style test's two are not among them", unknown)
	}
}
