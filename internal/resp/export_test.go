package resp

import (
	"testing"
	"time"

	"github.com/latchd/latch/internal/luascript"
)

// ClientScript is a lock script of an installed client, with ARGV it
// takes, for the tests of package resp_test.
type ClientScript struct {
	Client, Body string
	Argv         []string
}

// ClientScripts returns the lock scripts of the installed clients.
func ClientScripts(t *testing.T) []ClientScript {
	argv := map[template][]string{
		tmplCAD: {"tok"}, tmplCADMissing: {"tok"}, tmplCAPX: {"tok", "1000"}, tmplCAPXOrSetNX: {"tok", "1000"},
		tmplExtendPy: {"tok", "1000", "0"}, tmplExtendPyAdd: {"tok", "1000"}, tmplObtain: {"tok", "3", "1000"},
		tmplPTTLIf: {"tok"}, tmplAcquireAll: {"tok", "1000"}, tmplReleaseCount: {"tok"}, tmplExtendAll: {"tok", "1000"},
	}
	var out []ClientScript
	for _, s := range installedScripts(t) {
		a, ok := argv[s.want]
		if !ok {
			t.Fatalf("no ARGV for %v", s.want)
		}
		out = append(out, ClientScript{s.client, s.body, a})
	}
	return out
}

// luascriptForTest returns a script engine with a time limit (ns) and a
// memory limit (bytes).
func luascriptForTest(ns, mem int64) *luascript.Engine {
	return luascript.New(luascript.Limits{Time: time.Duration(ns), Memory: mem, Version: redisVersion})
}
