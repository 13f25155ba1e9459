package memcache_test

import (
	"os"
	"os/exec"
	"testing"

	"github.com/latchd/latch/internal/latchtest"
)

// python is Debian's interpreter, which sees Debian's python3-pymemcache
// (a python3 first on PATH may not).
const python = "/usr/bin/python3"

// pymemcacheScript stores a value over the item size limit and a small one
// with pymemcache, and prints what each did. A value over the limit must be
// a server error that says so, which pymemcache raises as
// MemcacheServerError; a bare ERROR, which yrmcds answers, it raises as
// MemcacheUnknownCommandError, as if set were unknown.
const pymemcacheScript = `
import sys
from pymemcache.client.base import Client
from pymemcache.exceptions import MemcacheServerError
host, port = sys.argv[1].rsplit(":", 1)
c = Client((host, int(port)), timeout=10)
try:
    c.set("big", b"v" * (1024 * 1024 + 1), noreply=False)
    print("big: stored")
except MemcacheServerError as e:
    print("big: server error:", e)
except Exception as e:
    print("big: %s: %s" % (type(e).__name__, e))
print("small:", c.set("small", b"v", noreply=False), c.get("small"))
`

// TestPymemcacheTooLarge: pymemcache (Debian's python3-pymemcache) sees a
// value over the limit refused as too large, and the connection goes on.
func TestPymemcacheTooLarge(t *testing.T) {
	if _, err := os.Stat(python); err != nil {
		t.Fatalf("%s is missing: %v", python, err)
	}
	addr := latchtest.StartLatch(t)
	out, err := exec.Command(python, "-c", pymemcacheScript, addr).CombinedOutput()
	if err != nil {
		t.Fatalf("pymemcache (Debian package python3-pymemcache; `make test` installs it): %v\n%s", err, out)
	}
	want := "big: server error: b'object too large for cache'\nsmall: True b'v'\n"
	if got := string(out); got != want {
		t.Fatalf("pymemcache said:\n%s\nwant:\n%s", got, want)
	}
}
