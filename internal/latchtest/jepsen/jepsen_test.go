package jepsen

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	latchconfig "github.com/latchd/latch/internal/config"
	"github.com/latchd/latch/internal/latchtest"
)

// summaryLine is printed after every test has run, so that it is the last
// line of "make jepsen".
var summaryLine string

func TestMain(m *testing.M) {
	code := m.Run()
	if summaryLine != "" {
		fmt.Println(summaryLine)
	}
	os.Exit(code)
}

// inProcess runs the workloads for d against one in-process latch server,
// without faults.
func inProcess(t *testing.T, d time.Duration, fencing bool) result {
	t.Helper()
	// A ZooKeeper tick of 1 s grants the workload's session timeout as
	// asked, as the cluster's.
	s := latchtest.Start(t, func(c *latchconfig.Config) { c.ZooKeeper.TickTime = time.Second })
	res, err := run(config{
		duration: d, seed: 1, fencing: fencing, fencedKeys: 1,
		targets: []Target{{ID: "latch", DLock: s.DLock, Memcache: s.Memcache, Redis: s.Redis, ZooKeeper: s.ZooKeeper}},
		out:     t.TempDir(), logf: t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(res.summary())
	for _, d := range res.details() {
		t.Log(d)
	}
	return res
}

// TestWorkloads: every workload runs against a healthy server, whose
// history is safe, and each kind of client took locks.
func TestWorkloads(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for seconds")
	}
	res := inProcess(t, 4*time.Second, true)
	if !res.safe() {
		t.Errorf("a healthy server's history is not safe: %s", res.summary())
	}
	if res.locks.Grants < 50 || res.reg.Acked < 5 || res.unknown > 0 {
		t.Errorf("grants %d, acknowledged writes %d, unknown outcomes %d: the workloads did not run", res.locks.Grants, res.reg.Acked, res.unknown)
	}
	if res.reg.Rejected == 0 || res.pauses == 0 {
		t.Errorf("fenced writes refused %d, client pauses %d: the pauses did not outlast a lease", res.reg.Rejected, res.pauses)
	}
	for _, p := range []string{"v3", "v2", "memcache", "redis", "zookeeper"} {
		if res.grants[p] == 0 {
			t.Errorf("no %s client took a lock: grants %v", p, res.grants)
		}
	}
	if res.redis.tokens == 0 {
		t.Errorf("redis: %+v: no fencing token read", res.redis)
	}
	// Holds alternate between the known scripts and the hand-written
	// ones; a loaded machine may give the Redis clients few grants.
	if (res.redis.known == 0 || res.redis.lua == 0) && res.redis.grants >= 4 {
		t.Errorf("redis: %+v: the known scripts or the hand-written ones answered no release or renewal", res.redis)
	}
	if res.zk.tokens != res.zk.grants {
		t.Errorf("%s: a grant without its lock node's czxid", res.zk)
	}
}

// TestControl: the fenced workload with a register that trusts every
// token, whose holders pause past their leases, loses writes, and the
// checker says so. A checker that passes this proves nothing.
func TestControl(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for seconds")
	}
	res := inProcess(t, 5*time.Second, false)
	if res.reg.LostWrites == 0 || res.reg.TokenViolations == 0 {
		t.Errorf("the control was not caught: %s, token violations %d", res.summary(), res.reg.TokenViolations)
	}
	if !res.locks.Safe() {
		t.Errorf("the lock history of the control is not safe, yet the server is: %s", strings.Join(res.locks.Problems, "\n"))
	}
}

// TestHandWrittenScripts: the hand-written release and renewal are
// scripts of internal/resp/testdata/lua, which a test there checks that
// latch's script table does not know.
func TestHandWrittenScripts(t *testing.T) {
	for file, body := range map[string]string{"release_local.lua": redisReleaseLua, "extend_unknown.lua": redisExtendLua} {
		b, err := os.ReadFile(filepath.Join("..", "..", "resp", "testdata", "lua", file))
		if err != nil {
			t.Fatal(err)
		}
		if got := string(b); !strings.Contains(got, body+"\n") {
			t.Errorf("%s is not the workload's script:\n%s\nwant\n%s", file, got, body)
		}
	}
}
