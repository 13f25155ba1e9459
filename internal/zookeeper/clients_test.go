package zookeeper_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/latchd/latch/internal/latchtest"
	"github.com/latchd/latch/internal/node"
	"github.com/latchd/latch/internal/zookeeper"
)

// startLatch starts a node in memory with a ZooKeeper front end on a free
// loopback port, both stopped when the test ends, and returns its address.
func startLatch(t *testing.T) string {
	t.Helper()
	n, err := node.New(node.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := zookeeper.DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	s, err := zookeeper.New(n, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		n.Shutdown(ctx)
	})
	return s.Addr().String()
}

// The real clients the harnesses drive, as Debian installs them (make deps),
// and the npm client in testdata/npm.
const (
	pythonPath        = "/usr/bin/python3" // sees Debian's python3-kazoo
	kazooTestsDir     = "/usr/lib/python3/dist-packages/kazoo/tests"
	javaPath          = "/usr/bin/java"
	javacPath         = "/usr/bin/javac" // default-jdk-headless
	curatorRecipesJar = "/usr/share/java/curator-recipes.jar"
	slf4jNopJar       = "/usr/share/java/slf4j-nop.jar" // quiets Curator's logging
	zkCliPath         = "/usr/share/zookeeper/bin/zkCli.sh"
)

// TestClientsAgainstZooKeeper runs every real-client harness against
// Debian's ZooKeeper 3.8, standalone: the harnesses' own check, which the
// ZooKeeper front end's tests then run against latch. It runs only with
// LATCH_ZK_ORACLE=1 (it needs a JVM and takes about a minute):
//
//	LATCH_ZK_ORACLE=1 go test -count=1 -v -run TestClientsAgainstZooKeeper ./internal/zookeeper
func TestClientsAgainstZooKeeper(t *testing.T) {
	if os.Getenv("LATCH_ZK_ORACLE") != "1" {
		t.Skip("set LATCH_ZK_ORACLE=1 to run the client harnesses against Debian's ZooKeeper")
	}
	addr := latchtest.StartZooKeeper(t)
	for _, h := range []struct {
		name string
		run  func(*testing.T, string)
	}{
		{"kazoo", runKazooSuite},
		{"curator", runCurator},
		{"go-zookeeper", runGoZKLock},
		{"node-zookeeper-client", runNodeZKClient},
		{"zkCli", runZkCli},
	} {
		t.Run(h.name, func(t *testing.T) {
			start := time.Now()
			h.run(t, addr)
			t.Logf("%s against %s: %v", h.name, addr, time.Since(start).Round(time.Millisecond))
		})
	}
}

// TestClients runs the real clients' harnesses against latch's ZooKeeper
// front end, on a node in memory: kazoo's own tests, Curator's recipes,
// go-zookeeper's Lock, node-zookeeper-client with the docs' recipe, and
// zkCli.
func TestClients(t *testing.T) {
	if testing.Short() {
		t.Skip("the real clients take a minute")
	}
	addr := startLatch(t)
	for _, h := range []struct {
		name string
		run  func(*testing.T, string)
	}{
		{"kazoo", runKazooSuite},
		{"curator", runCurator},
		{"go-zookeeper", runGoZKLock},
		{"node-zookeeper-client", runNodeZKClient},
		{"zkCli", runZkCli},
	} {
		t.Run(h.name, func(t *testing.T) {
			start := time.Now()
			h.run(t, addr)
			t.Logf("%s against latch: %v", h.name, time.Since(start).Round(time.Millisecond))
		})
	}
}

// needFile fails the test when a client's file is missing.
func needFile(t *testing.T, path, pkg string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s is missing (%s; `make deps` installs it): %v", path, pkg, err)
	}
}

// testdata returns the absolute path of a file under testdata.
func testdata(t *testing.T, rel string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// runTool runs name with args in dir (env nil: the test's environment),
// killing it (and what it started) after limit, and returns its stdout and
// stderr together and its error: an exit status, or the limit passed.
func runTool(limit time.Duration, dir string, env []string, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = env
	ownGroup(cmd)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		err = fmt.Errorf("not done within %v: %w", limit, err)
	}
	return string(out), err
}

// lastLine returns the last line of out that is not empty.
func lastLine(out string) string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// summaryFields parses a summary line's "key=value" fields.
func summaryFields(line string) map[string]string {
	m := map[string]string{}
	for _, f := range strings.Fields(line) {
		if k, v, ok := strings.Cut(f, "="); ok {
			m[k] = v
		}
	}
	return m
}

// checkSummary fails the test unless the summary line starts with prefix
// and has each field of want with its value.
func checkSummary(t *testing.T, client, out, prefix string, want map[string]string) string {
	t.Helper()
	line := lastLine(out)
	if !strings.HasPrefix(line, prefix) {
		t.Fatalf("%s: no summary line (%q...):\n%s", client, prefix, out)
	}
	got := summaryFields(line)
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("%s: %s=%s, want %s:\n%s", client, k, got[k], v, out)
		}
	}
	return line
}

// kazooWant is the number of kazoo's tests testdata/kazoo/run_kazoo.py
// selects from Debian's python3-kazoo 2.8.0 (bookworm): 95 in the recipe
// and watcher modules, 58 of test_client. A different count means a
// different kazoo, whose selection must be looked at again.
const kazooWant = 153

// kazooReruns bounds the failed tests runKazooSuite runs again. A few of
// kazoo's tests wait only 0.1 to 0.2 s for another thread's event
// (test_queue's KazooLockingQueueTests::test_concurrent_execution), which
// a loaded 2-core machine misses now and then even against ZooKeeper.
const kazooReruns = 3

var (
	// pytestCount matches the counts of pytest's last line ("1 failed,
	// 152 passed, 52 deselected in 30.01s").
	pytestCount = regexp.MustCompile(`(\d+) (passed|failed|skipped|deselected|errors?|xfailed|xpassed|warnings?)`)
	// pytestFailed matches the lines of -rfE's summary that name a test
	// that failed or errored.
	pytestFailed = regexp.MustCompile(`(?m)^(?:FAILED|ERROR) (\S+)`)
)

// pytestResult parses pytest's output: the tests that passed, those that
// failed or errored (node ids), and whether some were skipped or counted
// otherwise.
func pytestResult(out string) (passed int, failed []string, others bool) {
	for _, m := range pytestCount.FindAllStringSubmatch(lastLine(out), -1) {
		switch m[2] {
		case "passed":
			passed, _ = strconv.Atoi(m[1])
		case "deselected", "warning", "warnings", "failed", "error", "errors":
		default:
			others = true
		}
	}
	for _, m := range pytestFailed.FindAllStringSubmatch(out, -1) {
		failed = append(failed, m[1])
	}
	return passed, failed, others
}

// runKazooSuite runs kazoo's own tests, unmodified, from Debian's
// python3-kazoo against the ZooKeeper server at addr, through the shim
// testdata/kazoo/run_kazoo.py (which says what it selects and what it
// leaves out, and why). Every selected test must pass: a skip too fails
// the harness, as against ZooKeeper 3.8 none is skipped (the version gates
// ask the server with the "envi" four-letter word). Up to kazooReruns
// tests that fail are run once more, and must pass then; the log names
// them.
func runKazooSuite(t *testing.T, addr string) {
	t.Helper()
	needFile(t, pythonPath, "Debian package python3")
	needFile(t, kazooTestsDir, "Debian package python3-kazoo")
	shim := testdata(t, "kazoo/run_kazoo.py")
	var env []string
	for _, kv := range os.Environ() {
		// TRAVIS would make kazoo's tests take the server's version from
		// ZOOKEEPER_VERSION rather than ask it.
		if !strings.HasPrefix(kv, "TRAVIS=") && !strings.HasPrefix(kv, "ZOOKEEPER_") {
			env = append(env, kv)
		}
	}
	env = append(env, "PYTHONDONTWRITEBYTECODE=1")
	dir := t.TempDir()
	out, err := runTool(5*time.Minute, dir, env, pythonPath, shim, addr)
	passed, failed, others := pytestResult(out)
	if err == nil && passed == kazooWant && !others && len(failed) == 0 {
		t.Logf("kazoo: %s", lastLine(out))
		return
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) || others || len(failed) == 0 || len(failed) > kazooReruns || passed+len(failed) != kazooWant {
		t.Fatalf("kazoo's tests against %s: %v: %q, want %d passed and nothing failed or skipped:\n%s", addr, err, lastLine(out), kazooWant, out)
	}
	again, err := runTool(time.Minute, dir, env, pythonPath, append([]string{shim, addr}, failed...)...)
	if p, f, o := pytestResult(again); err != nil || p != len(failed) || len(f) != 0 || o {
		t.Fatalf("kazoo's tests against %s: %d failed, and again: %v: %q\nfirst run:\n%s\nagain:\n%s", addr, len(failed), err, lastLine(again), out, again)
	}
	t.Logf("kazoo: %s; passed when run again: %s", lastLine(out), strings.Join(failed, " "))
}

// Curator harness rounds: curatorClients clients, each with a session of
// its own, take each recipe curatorRounds times.
const (
	curatorClients = 4
	curatorRounds  = 25
)

// runCurator compiles testdata/curator/Harness.java against Debian's
// Curator and runs it against the ZooKeeper server at addr:
// InterProcessMutex, InterProcessReadWriteLock, InterProcessSemaphoreV2
// (2 leases) and LeaderLatch, each with an overlap detector (see the
// program's comment). It fails unless every round ran with no overlap and
// no error.
func runCurator(t *testing.T, addr string) {
	t.Helper()
	needFile(t, javacPath, "Debian package default-jdk-headless")
	needFile(t, curatorRecipesJar, "Debian package libcurator-recipes-java")
	needFile(t, slf4jNopJar, "Debian package libslf4j-java, which Curator pulls")
	build := t.TempDir()
	src := testdata(t, "curator/Harness.java")
	if out, err := runTool(2*time.Minute, build, nil, javacPath, "-d", build, "-cp", curatorRecipesJar, src); err != nil {
		t.Fatalf("javac Harness.java: %v\n%s", err, out)
	}
	cp := strings.Join([]string{build, curatorRecipesJar, slf4jNopJar}, string(filepath.ListSeparator))
	out, err := runTool(3*time.Minute, build, nil, javaPath, "-Xmx256m", "-cp", cp, "Harness",
		addr, strconv.Itoa(curatorClients), strconv.Itoa(curatorRounds))
	if err != nil {
		t.Fatalf("Curator harness against %s: %v\n%s", addr, err, out)
	}
	all := strconv.Itoa(curatorClients * curatorRounds)
	line := checkSummary(t, "Curator harness", out, "curator: ", map[string]string{
		"mutex": all, "rwlock": all, "semaphore": all, "leader": all, "overlaps": "0", "errors": "0",
	})
	t.Logf("%s", line)
}

// zkLogger collects go-zookeeper's log, shown when its harness fails.
type zkLogger struct{ buf *latchtest.SyncBuffer }

func (l zkLogger) Printf(format string, args ...any) {
	fmt.Fprintf(l.buf, format+"\n", args...)
}

// go-zookeeper harness: goZKLockers connections take zk.Lock goZKRounds
// times each; the whole harness gives up after goZKLimit.
const (
	goZKLockers = 5
	goZKRounds  = 20
	goZKLimit   = 90 * time.Second
	goZKWatch   = 10 * time.Second // wait for one watch event
)

// runGoZKLock drives github.com/go-zookeeper/zk against the ZooKeeper
// server at addr: the basic operations (Create in each mode, Get, Set,
// Children, Exists, Delete, Multi) with their errors, one-shot watches set
// by GetW, ChildrenW and ExistsW and fired by another session, the
// ephemerals of a closed session; then goZKLockers sessions contending on
// zk.NewLock(conn, "/lock-test", ...) with an overlap detector.
func runGoZKLock(t *testing.T, addr string) {
	t.Helper()
	var logs latchtest.SyncBuffer
	var (
		mu    sync.Mutex
		conns []*zk.Conn
	)
	var timedOut atomic.Bool
	watchdog := time.AfterFunc(goZKLimit, func() {
		// Closing the connections ends every call and wait in flight.
		timedOut.Store(true)
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	t.Cleanup(func() {
		watchdog.Stop()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	fail := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...)
		if timedOut.Load() {
			msg = fmt.Sprintf("not done within %v: %s", goZKLimit, msg)
		}
		t.Fatalf("go-zookeeper against %s: %s\ngo-zookeeper's log:\n%s", addr, msg, logs.String())
	}
	dial := func() *zk.Conn {
		t.Helper()
		c, _, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogger(zkLogger{&logs}))
		if err != nil {
			fail("connect: %v", err)
		}
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
		return c
	}
	is := func(what string, err, want error) {
		t.Helper()
		if !errors.Is(err, want) {
			fail("%s: %v, want %v", what, err, want)
		}
	}
	event := func(what string, ch <-chan zk.Event, typ zk.EventType, path string) {
		t.Helper()
		select {
		case ev := <-ch:
			if ev.Type != typ || ev.Path != path || ev.Err != nil {
				fail("%s: event %+v, want %v on %s", what, ev, typ, path)
			}
		case <-time.After(goZKWatch):
			fail("%s: no %v on %s within %v", what, typ, path, goZKWatch)
		}
	}
	children := func(c *zk.Conn, path string, want ...string) {
		t.Helper()
		names, st, err := c.Children(path)
		slices.Sort(names)
		if err != nil || !slices.Equal(names, want) || st.NumChildren != int32(len(want)) {
			fail("Children(%s): %q, %+v, %v; want %q", path, names, st, err, want)
		}
	}
	acl := zk.WorldACL(zk.PermAll)
	a, b := dial(), dial()
	base := fmt.Sprintf("/gozk-%d", time.Now().UnixNano())

	// Create, Get, and create's errors.
	if p, err := a.Create(base, []byte("base"), zk.FlagPersistent, acl); err != nil || p != base {
		fail("Create(%s): %q, %v", base, p, err)
	}
	_, err := a.Create(base, nil, zk.FlagPersistent, acl)
	is("Create of an existing node", err, zk.ErrNodeExists)
	_, err = a.Create(base+"/missing/child", nil, zk.FlagPersistent, acl)
	is("Create under a missing parent", err, zk.ErrNoNode)
	data, st, err := a.Get(base)
	if err != nil || string(data) != "base" || st.Version != 0 || st.DataLength != 4 || st.NumChildren != 0 || st.EphemeralOwner != 0 {
		fail("Get(%s): %q, %+v, %v", base, data, st, err)
	}
	_, _, err = a.Get(base + "/none")
	is("Get of a missing node", err, zk.ErrNoNode)

	// Sequential and ephemeral nodes.
	s0, err := a.Create(base+"/seq-", []byte("0"), zk.FlagSequence, acl)
	if err != nil || s0 != base+"/seq-0000000000" {
		fail("Create sequential: %q, %v", s0, err)
	}
	s1, err := a.Create(base+"/seq-", nil, zk.FlagEphemeral|zk.FlagSequence, acl)
	if err != nil || s1 != base+"/seq-0000000001" {
		fail("Create ephemeral sequential: %q, %v", s1, err)
	}
	eph := base + "/eph"
	if p, err := b.Create(eph, []byte("e"), zk.FlagEphemeral, acl); err != nil || p != eph {
		fail("Create ephemeral: %q, %v", p, err)
	}
	if _, st, err := a.Get(eph); err != nil || st.EphemeralOwner != b.SessionID() || b.SessionID() == 0 {
		fail("Get(%s): %+v, %v; want the owner %#x", eph, st, err, b.SessionID())
	}
	_, err = a.Create(eph+"/child", nil, zk.FlagPersistent, acl)
	is("Create under an ephemeral", err, zk.ErrNoChildrenForEphemerals)
	children(a, base, "eph", "seq-0000000000", "seq-0000000001")

	// GetW, and Set by another session, with a version.
	_, st, ch, err := a.GetW(base)
	if err != nil {
		fail("GetW(%s): %v", base, err)
	}
	if st2, err := b.Set(base, []byte("v1"), st.Version); err != nil || st2.Version != 1 || st2.DataLength != 2 || st2.Mzxid <= st.Mzxid {
		fail("Set(%s, version %d): %+v, %v", base, st.Version, st2, err)
	}
	event("GetW then Set", ch, zk.EventNodeDataChanged, base)
	_, err = b.Set(base, []byte("v2"), 0)
	is("Set with an old version", err, zk.ErrBadVersion)
	if data, _, err := a.Get(base); err != nil || string(data) != "v1" {
		fail("Get(%s) after Set: %q, %v", base, data, err)
	}

	// ChildrenW and ExistsW, fired by another session.
	_, _, ch, err = a.ChildrenW(base)
	if err != nil {
		fail("ChildrenW(%s): %v", base, err)
	}
	if _, err := b.Create(base+"/new", nil, zk.FlagPersistent, acl); err != nil {
		fail("Create: %v", err)
	}
	event("ChildrenW then Create", ch, zk.EventNodeChildrenChanged, base)
	ok, _, ch, err := a.ExistsW(base + "/later")
	if err != nil || ok {
		fail("ExistsW of a missing node: %v, %v", ok, err)
	}
	if _, err := b.Create(base+"/later", nil, zk.FlagPersistent, acl); err != nil {
		fail("Create: %v", err)
	}
	event("ExistsW then Create", ch, zk.EventNodeCreated, base+"/later")

	// A closed session's ephemerals go, and their watches fire.
	ok, _, ch, err = a.ExistsW(eph)
	if err != nil || !ok {
		fail("ExistsW(%s): %v, %v", eph, ok, err)
	}
	b.Close()
	event("ExistsW then the owner's Close", ch, zk.EventNodeDeleted, eph)
	children(a, base, "later", "new", "seq-0000000000", "seq-0000000001")

	// Multi: all or nothing.
	res, err := a.Multi(
		&zk.CreateRequest{Path: base + "/m1", Data: []byte("m"), Acl: acl},
		&zk.SetDataRequest{Path: base + "/m1", Data: []byte("m2"), Version: 0},
		&zk.CheckVersionRequest{Path: base, Version: 1},
	)
	if err != nil || len(res) != 3 || res[0].String != base+"/m1" || res[1].Stat == nil || res[1].Stat.Version != 1 {
		fail("Multi: %+v, %v", res, err)
	}
	res, err = a.Multi(
		&zk.CreateRequest{Path: base + "/m2", Acl: acl},
		&zk.CheckVersionRequest{Path: base, Version: 7},
	)
	is("Multi with a failing check", err, zk.ErrBadVersion)
	if len(res) != 2 || res[1].Error != zk.ErrBadVersion {
		fail("Multi with a failing check: %+v", res)
	}
	if ok, _, err := a.Exists(base + "/m2"); err != nil || ok {
		fail("Exists of the failed Multi's create: %v, %v", ok, err)
	}

	// Delete, with its errors.
	is("Delete of a node with children", a.Delete(base, -1), zk.ErrNotEmpty)
	is("Delete with a wrong version", a.Delete(s0, 5), zk.ErrBadVersion)
	if err := a.Delete(s0, 0); err != nil {
		fail("Delete(%s, 0): %v", s0, err)
	}
	is("Delete of a deleted node", a.Delete(s0, -1), zk.ErrNoNode)
	for _, p := range []string{"later", "new", "m1", "seq-0000000001"} {
		if err := a.Delete(base+"/"+p, -1); err != nil {
			fail("Delete(%s): %v", p, err)
		}
	}
	if err := a.Delete(base, -1); err != nil {
		fail("Delete(%s): %v", base, err)
	}

	// The lock.
	var holders, overlaps, acquired atomic.Int32
	errs := make(chan error, goZKLockers)
	for i := range goZKLockers {
		c := dial()
		go func() {
			l := zk.NewLock(c, "/lock-test", acl)
			for r := range goZKRounds {
				if err := l.Lock(); err != nil {
					errs <- fmt.Errorf("locker %d round %d: Lock: %w", i, r, err)
					return
				}
				if n := holders.Add(1); n != 1 {
					overlaps.Add(1)
				}
				time.Sleep(2 * time.Millisecond)
				holders.Add(-1)
				acquired.Add(1)
				if err := l.Unlock(); err != nil {
					errs <- fmt.Errorf("locker %d round %d: Unlock: %w", i, r, err)
					return
				}
			}
			errs <- nil
		}()
	}
	var lockErrs []error
	for range goZKLockers {
		if err := <-errs; err != nil {
			lockErrs = append(lockErrs, err)
		}
	}
	if len(lockErrs) > 0 || overlaps.Load() != 0 || acquired.Load() != goZKLockers*goZKRounds {
		fail("zk.Lock: %d acquired of %d, %d overlaps, errors: %v", acquired.Load(), goZKLockers*goZKRounds, overlaps.Load(), errors.Join(lockErrs...))
	}
	children(a, "/lock-test")
	t.Logf("go-zookeeper: basic operations and watches passed; zk.Lock: lockers=%d rounds=%d acquired=%d overlaps=0",
		goZKLockers, goZKRounds, acquired.Load())
}

// node-zookeeper-client harness: nodeClients sessions take the lock
// nodeRounds times each.
const (
	nodeClients = 5
	nodeRounds  = 20
)

// runNodeZKClient runs testdata/npm/lock.js, the lock recipe of
// ZooKeeper's documentation on node-zookeeper-client 1.1.3, with several
// sessions and an overlap detector, against the ZooKeeper server at addr.
func runNodeZKClient(t *testing.T, addr string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is missing: %v", err)
	}
	dir := testdata(t, "npm")
	needFile(t, filepath.Join(dir, "node_modules", "node-zookeeper-client"), "npm package node-zookeeper-client")
	out, err := runTool(2*time.Minute, dir, nil, node, "lock.js", addr, strconv.Itoa(nodeClients), strconv.Itoa(nodeRounds))
	if err != nil {
		t.Fatalf("lock.js against %s: %v\n%s", addr, err, out)
	}
	line := checkSummary(t, "lock.js", out, "node-zookeeper-client: ", map[string]string{
		"acquired": strconv.Itoa(nodeClients * nodeRounds), "overlaps": "0",
	})
	t.Logf("%s", line)
}

// zkCliStep is one zkCli command and what it must answer.
type zkCliStep struct {
	args []string // after -server ADDR -waitforconnection; "BASE" is replaced
	fail bool     // zkCli must exit with a non-zero status (a ZooKeeper error)
	want []string // lines the answer must hold ("BASE" is replaced)
	only bool     // the answer must be want exactly
	// check, when set, checks the answer's lines too.
	check func(lines []string) error
}

// statLine returns the value of a stat field ("dataVersion = 1") in lines.
func statLine(lines []string, field string) string {
	for _, l := range lines {
		if v, ok := strings.CutPrefix(l, field+" = "); ok {
			return v
		}
	}
	return ""
}

// zkCliSteps is the zkCli scenario, in order, under a fresh BASE.
var zkCliSteps = []zkCliStep{
	{args: []string{"create", "BASE", "base"}, want: []string{"Created BASE"}, only: true},
	{args: []string{"create", "BASE", "again"}, fail: true, want: []string{"Node already exists: BASE"}, only: true},
	{args: []string{"create", "/zkcli-missing-parent/child", "x"}, fail: true, want: []string{"Node does not exist: /zkcli-missing-parent/child"}, only: true},
	{args: []string{"create", "-s", "BASE/seq-", "one"}, want: []string{"Created BASE/seq-0000000000"}, only: true},
	{args: []string{"create", "-s", "BASE/seq-", "two"}, want: []string{"Created BASE/seq-0000000001"}, only: true},
	// zkCli ends without closing its session: the ephemeral lives until
	// the session expires (its timeout, 30 s), past the steps below.
	{args: []string{"create", "-e", "BASE/eph", "three"}, want: []string{"Created BASE/eph"}, only: true},
	{args: []string{"create", "BASE/eph/child", "x"}, fail: true, want: []string{"Ephemerals cannot have children: BASE/eph/child"}, only: true},
	{args: []string{"create", "-c", "BASE/cont"}, want: []string{"Created BASE/cont"}, only: true},
	{args: []string{"ls", "BASE"}, want: []string{"[cont, eph, seq-0000000000, seq-0000000001]"}, only: true},
	{args: []string{"ls", "-s", "BASE"}, want: []string{"[cont, eph, seq-0000000000, seq-0000000001]",
		"cversion = 4", "dataVersion = 0", "aclVersion = 0", "ephemeralOwner = 0x0", "dataLength = 4", "numChildren = 4"}},
	{args: []string{"get", "BASE"}, want: []string{"base"}, only: true},
	{args: []string{"get", "-s", "BASE"}, want: []string{"base", "dataVersion = 0", "dataLength = 4", "numChildren = 4"},
		check: func(lines []string) error {
			if statLine(lines, "cZxid") != statLine(lines, "mZxid") {
				return errors.New("cZxid != mZxid before any set")
			}
			return nil
		}},
	{args: []string{"set", "-v", "0", "BASE", "v1"}, only: true},
	{args: []string{"set", "-v", "0", "BASE", "v2"}, fail: true, want: []string{"version No is not valid : BASE"}, only: true},
	{args: []string{"get", "BASE"}, want: []string{"v1"}, only: true},
	{args: []string{"stat", "BASE"}, want: []string{"dataVersion = 1", "dataLength = 2", "numChildren = 4", "cversion = 4"},
		check: func(lines []string) error {
			if statLine(lines, "cZxid") == statLine(lines, "mZxid") {
				return errors.New("mZxid not moved by set")
			}
			return nil
		}},
	{args: []string{"stat", "BASE/eph"}, want: []string{"dataLength = 5", "numChildren = 0"},
		check: func(lines []string) error {
			if o := statLine(lines, "ephemeralOwner"); o == "" || o == "0x0" {
				return fmt.Errorf("ephemeralOwner = %q, want a session", o)
			}
			return nil
		}},
	// A container's stat shows no owner (ZooKeeper keeps its container
	// mark out of the stat it sends).
	{args: []string{"stat", "BASE/cont"}, want: []string{"ephemeralOwner = 0x0", "dataLength = 0"}},
	{args: []string{"getAcl", "BASE"}, want: []string{"'world,'anyone", ": cdrwa"}, only: true},
	{args: []string{"getAcl", "-s", "BASE"}, want: []string{"'world,'anyone", ": cdrwa", "aclVersion = 0"}},
	{args: []string{"delete", "-v", "5", "BASE/seq-0000000000"}, fail: true, want: []string{"version No is not valid : BASE/seq-0000000000"}, only: true},
	{args: []string{"delete", "-v", "0", "BASE/seq-0000000000"}, only: true},
	{args: []string{"delete", "BASE"}, fail: true, want: []string{"Node not empty: BASE"}, only: true},
	{args: []string{"ls", "BASE"}, want: []string{"[cont, eph, seq-0000000001]"}, only: true},
	{args: []string{"deleteall", "BASE"}, only: true},
	{args: []string{"stat", "BASE"}, fail: true, want: []string{"Node does not exist: BASE"}, only: true},
}

// zkCliConnected is the line zkCli prints once connected; its answer
// follows.
const zkCliConnected = "WatchedEvent state:SyncConnected type:None path:null"

// zkCliAnswer returns the lines zkCli printed after connecting, less its
// logging's noise and blank lines.
func zkCliAnswer(out string) ([]string, bool) {
	_, after, ok := strings.Cut(out, zkCliConnected+"\n")
	if !ok {
		return nil, false
	}
	var lines []string
	for _, l := range strings.Split(after, "\n") {
		l = strings.TrimRight(l, "\r")
		if l == "" || strings.HasPrefix(l, "SLF4J:") || l == "WATCHER::" || strings.HasPrefix(l, "WatchedEvent state:Closed") {
			continue
		}
		lines = append(lines, l)
	}
	return lines, true
}

// runZkCli runs Debian's zkCli.sh, one command a process, against the
// ZooKeeper server at addr: create (-s, -e, -c), ls (-s), get (-s), set
// (-v), stat, delete (-v), deleteall and getAcl, with ZooKeeper's errors,
// checking each answer and exit status.
func runZkCli(t *testing.T, addr string) {
	t.Helper()
	needFile(t, zkCliPath, "Debian package zookeeper")
	base := fmt.Sprintf("/zkcli-%d", time.Now().UnixNano())
	dir := t.TempDir()
	for i, s := range zkCliSteps {
		args := []string{"-server", addr, "-waitforconnection"}
		for _, a := range s.args {
			args = append(args, strings.ReplaceAll(a, "BASE", base))
		}
		cmdline := strings.Join(args[3:], " ")
		out, err := runTool(time.Minute, dir, nil, zkCliPath, args...)
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) || err != nil && !s.fail || err == nil && s.fail {
			t.Fatalf("zkCli step %d, %s: %v (want failure: %v)\n%s", i, cmdline, err, s.fail, out)
		}
		lines, ok := zkCliAnswer(out)
		if !ok {
			t.Fatalf("zkCli step %d, %s: no %q line:\n%s", i, cmdline, zkCliConnected, out)
		}
		var want []string
		for _, w := range s.want {
			want = append(want, strings.ReplaceAll(w, "BASE", base))
		}
		if s.only && !slices.Equal(lines, want) {
			t.Fatalf("zkCli step %d, %s: answered %q, want %q", i, cmdline, lines, want)
		}
		for _, w := range want {
			if !slices.Contains(lines, w) {
				t.Fatalf("zkCli step %d, %s: answered %q, want the line %q", i, cmdline, lines, w)
			}
		}
		if s.check != nil {
			if err := s.check(lines); err != nil {
				t.Fatalf("zkCli step %d, %s: %v; answered %q", i, cmdline, err, lines)
			}
		}
	}
	t.Logf("zkCli: %d commands answered as expected", len(zkCliSteps))
}

// TestPytestResult: the parse of pytest's output that runKazooSuite
// judges by.
func TestPytestResult(t *testing.T) {
	for _, tc := range []struct {
		out    string
		passed int
		failed []string
		others bool
	}{
		{out: "....\n153 passed, 52 deselected in 29.96s\n", passed: 153},
		{out: "..F.\n=== short test summary info ===\nFAILED ../t/test_queue.py::Q::test_c - AssertionError\n" +
			"ERROR ../t/test_lock.py::L::test_x\n1 failed, 151 passed, 52 deselected, 1 error in 91.38s (0:01:31)\n",
			passed: 151, failed: []string{"../t/test_queue.py::Q::test_c", "../t/test_lock.py::L::test_x"}},
		{out: "152 passed, 1 skipped, 52 deselected in 30.00s", passed: 152, others: true},
		{out: "2 passed in 0.25s", passed: 2},
		{out: "no tests ran in 0.01s"},
	} {
		passed, failed, others := pytestResult(tc.out)
		if passed != tc.passed || !slices.Equal(failed, tc.failed) || others != tc.others {
			t.Errorf("pytestResult(%q) = %d, %q, %v; want %d, %q, %v", tc.out, passed, failed, others, tc.passed, tc.failed, tc.others)
		}
	}
}

// TestZkCliAnswer: what runZkCli keeps of zkCli's output.
func TestZkCliAnswer(t *testing.T) {
	out := "SLF4J: Failed to load class\nConnecting to 127.0.0.1:2181\n\nWATCHER::\n\n" + zkCliConnected + "\n" +
		"SLF4J: Failed to load class \"org.slf4j.impl.StaticMDCBinder\".\n'world,'anyone\n: cdrwa\n\nWATCHER::\n\nWatchedEvent state:Closed type:None path:null\n"
	lines, ok := zkCliAnswer(out)
	if want := []string{"'world,'anyone", ": cdrwa"}; !ok || !slices.Equal(lines, want) {
		t.Errorf("zkCliAnswer: %q, %v; want %q", lines, ok, want)
	}
	if _, ok := zkCliAnswer("Connecting to 127.0.0.1:2181\n"); ok {
		t.Error("zkCliAnswer of an output without the connected line: ok")
	}
}
