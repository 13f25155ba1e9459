//go:build unix

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/latchd/latch/internal/latchtest"
)

// The real ZooKeeper clients of TestClusterZooKeeperFailover, as Debian
// installs them (make deps).
const (
	zkPython = "/usr/bin/python3" // sees Debian's python3-kazoo
	zkKazoo  = "/usr/lib/python3/dist-packages/kazoo/recipe/lock.py"
)

// The shape of TestClusterZooKeeperFailover: how many contenders of each
// kind, how long each holds the lock, how many rounds each must hold it
// after each kill, and the bounds it is held to.
const (
	zkEach        = 3                     // go-zookeeper and kazoo contenders each
	zkHold        = 10 * time.Millisecond // each hold of the lock
	zkRoundsAfter = 3                     // rounds each contender holds it after a kill
	zkSession     = 4 * time.Second       // the clients' session timeout (latch's least)
	zkRecovery    = 20 * time.Second      // for every contender's rounds after a kill
	zkFinish      = 15 * time.Second      // for every contender to finish once told to
	zkLimit       = 60 * time.Second      // the whole short form, then it fails
	zkGrantTarget = 2 * time.Second       // from a kill to the next grant, logged
	zkLockPath    = "/failover/mutex"     // the lock they all contend for
)

// TestClusterZooKeeperFailover: three latch serve processes with their
// ZooKeeper front ends on, and zkEach go-zookeeper (zk.Lock) and zkEach
// kazoo (kazoo.recipe.lock.Lock, testdata/zk_locker.py) clients that
// contend for one lock, each client given every node's address, starting
// from a different one (so that one of each kind is connected to the
// leader, and must move its session). Each holder reports its holds to a
// referee in the test (referee), which fails the test if two of them ever
// overlap. The leader is killed with SIGKILL while they run; then every
// client must hold the lock zkRoundsAfter more times within zkRecovery,
// and twice more once a session timeout and a half has passed since the
// kill (a session whose liveness the failover lost would have lapsed by
// then), with the session it started with (no expiry seen:
// go-zookeeper's StateExpired, kazoo's LOST), and finish within zkFinish
// once told to. The time from the kill to the next grant that needed a
// commit after it (the first after a release heard after the kill) is
// logged; the target is zkGrantTarget. The whole test fails after
// zkLimit.
//
// LATCH_ZK_FAILOVER_KILLS=n (default 1) kills n leaders, one after the
// other, each time restarting the node killed before.
func TestClusterZooKeeperFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	kills := 1
	if v := os.Getenv("LATCH_ZK_FAILOVER_KILLS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("LATCH_ZK_FAILOVER_KILLS=%q: want a count of kills", v)
		}
		kills = n
	}
	for _, f := range []struct{ path, pkg string }{{zkPython, "python3"}, {zkKazoo, "python3-kazoo"}} {
		if _, err := os.Stat(f.path); err != nil {
			t.Fatalf("%s is missing (Debian package %s; `make deps` installs it): %v", f.path, f.pkg, err)
		}
	}
	script, err := filepath.Abs(filepath.Join("testdata", "zk_locker.py"))
	if err != nil {
		t.Fatal(err)
	}
	limit := zkLimit + time.Duration(kills-1)*30*time.Second
	deadline := time.Now().Add(limit)

	procs, _ := startCluster(t)
	waitLeader(t, procs)
	ids := []string{"n1", "n2", "n3"}
	// hosts returns every node's ZooKeeper address, from the i'th on.
	hosts := func(i int) []string {
		var hs []string
		for j := range ids {
			hs = append(hs, procs[ids[(i+j)%len(ids)]].zk)
		}
		return hs
	}

	ref := startReferee(t)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		reports []zkReport
		cleanup []func()
	)
	report := func(r zkReport) {
		mu.Lock()
		reports = append(reports, r)
		mu.Unlock()
	}
	// The watchdog ends every client at the deadline: their calls and
	// waits in flight return, and the test fails below.
	var timedOut atomic.Bool
	watchdog := time.AfterFunc(time.Until(deadline), func() {
		timedOut.Store(true)
		mu.Lock()
		defer mu.Unlock()
		for _, f := range cleanup {
			f()
		}
	})
	defer watchdog.Stop()
	onCleanup := func(f func()) {
		mu.Lock()
		cleanup = append(cleanup, f)
		mu.Unlock()
	}
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, f := range cleanup {
			f()
		}
	})

	for i := range zkEach {
		name, hs := fmt.Sprintf("go%d", i+1), hosts(i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			report(goZKLocker(name, hs, ref.addr, onCleanup))
		}()
	}
	for i := range zkEach {
		name := fmt.Sprintf("kazoo%d", i+1)
		hs := strings.Join(hosts(i), ",")
		cmd := exec.Command(zkPython, script, name, hs, zkLockPath, ref.addr, strconv.Itoa(int(zkHold/time.Millisecond)), strconv.Itoa(int(zkSession/time.Millisecond)))
		cmd.Env = cleanEnv()
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		onCleanup(func() { cmd.Process.Kill() })
		wg.Add(1)
		go func() {
			defer wg.Done()
			report(kazooReport(name, cmd.Wait(), stdout.Bytes(), stderr.Bytes()))
		}()
	}
	names := contenders(zkEach)

	// fail ends the test with what the clients and nodes say.
	fail := func(format string, args ...any) {
		t.Helper()
		ref.stop()
		mu.Lock()
		for _, f := range cleanup {
			f()
		}
		mu.Unlock()
		ended := make(chan struct{})
		go func() { wg.Wait(); close(ended) }()
		select {
		case <-ended:
		case <-time.After(zkFinish):
		}
		mu.Lock()
		defer mu.Unlock()
		msg := fmt.Sprintf(format, args...)
		if timedOut.Load() {
			msg = fmt.Sprintf("not done within %v: %s", limit, msg)
		}
		t.Fatalf("%s\nreferee: %s\nclients:\n%s\n%s", msg, ref.summary(), reportsText(reports), logsOf(procs))
	}
	// await waits until every contender held the lock n times since the
	// referee's mark, or fails after d.
	await := func(n int, d time.Duration, what string) {
		t.Helper()
		until := time.Now().Add(d)
		for {
			if bad := ref.overlaps(); len(bad) > 0 {
				fail("overlapping holds: %s", strings.Join(bad, "; "))
			}
			short := ref.short(names, n)
			if len(short) == 0 {
				return
			}
			mu.Lock()
			done := len(reports)
			mu.Unlock()
			if done > 0 {
				fail("a client finished before it was told to, %s", what)
			}
			if time.Now().After(until) {
				fail("not every client held the lock %d times within %v %s: short: %s", n, d, what, strings.Join(short, ", "))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	await(2, zkRecovery, "after they started")

	var killedNode *node
	for k := range kills {
		if killedNode != nil {
			// The node killed before rejoins, and catches up.
			killedNode.start()
			procs[killedNode.name] = killedNode
			waitLeader(t, procs)
			ref.mark()
			await(1, zkRecovery, fmt.Sprintf("after %s rejoined", killedNode.name))
		}
		leader := waitLeader(t, procs)
		killedNode = procs[leader]
		ref.mark()
		killedAt := time.Now()
		killedNode.kill()
		delete(procs, leader)
		newLeader := waitLeader(t, procs)
		elected := time.Since(killedAt)
		await(zkRoundsAfter, zkRecovery, fmt.Sprintf("after the kill of %s", leader))
		recovered := time.Since(killedAt)
		grant, by := ref.firstGrant()
		// Every client goes on holding it past its session timeout after
		// the kill: a session that the failover left to lapse (whose
		// liveness did not reach the cluster since) would end meanwhile.
		time.Sleep(time.Until(killedAt.Add(zkSession + zkSession/2)))
		ref.mark()
		await(2, zkRecovery, fmt.Sprintf("%v after the kill of %s", zkSession+zkSession/2, leader))
		t.Logf("kill %d: leader %s killed; %s leads %v later; the next grant, to %s, %v after the kill (target %v); every client held the lock %d times %v after it",
			k+1, leader, newLeader, elected.Round(time.Millisecond), by, grant.Sub(killedAt).Round(time.Millisecond), zkGrantTarget, zkRoundsAfter, recovered.Round(time.Millisecond))
		if d := grant.Sub(killedAt); d > zkGrantTarget {
			t.Logf("kill %d: the next grant came %v after the kill, over the target of %v", k+1, d.Round(time.Millisecond), zkGrantTarget)
		}
	}

	ref.stop()
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(zkFinish):
		fail("not every client finished within %v of being told to", zkFinish)
	}
	if bad := ref.overlaps(); len(bad) > 0 {
		fail("overlapping holds: %s", strings.Join(bad, "; "))
	}
	var bad []string
	for _, r := range reports {
		bad = append(bad, r.problems()...)
	}
	if len(reports) != 2*zkEach {
		bad = append(bad, fmt.Sprintf("%d clients reported, want %d", len(reports), 2*zkEach))
	}
	if len(bad) > 0 {
		fail("%s", strings.Join(bad, "\n"))
	}
	t.Logf("referee: %s", ref.summary())
}

// zkReport is what a contender reports when it finishes: the rounds it
// held the lock, its session id when it started and when it finished,
// the states its client went through, and what failed.
type zkReport struct {
	Name         string   `json:"name"`
	Rounds       int      `json:"rounds"`
	SessionStart int64    `json:"session_start"`
	SessionEnd   int64    `json:"session_end"`
	States       []string `json:"states"`
	Err          string   `json:"-"`
	Log          string   `json:"-"`
}

// problems returns what is wrong with r: an error, a session that changed
// or expired.
func (r zkReport) problems() []string {
	var bad []string
	if r.Err != "" {
		bad = append(bad, fmt.Sprintf("%s: %s", r.Name, r.Err))
	}
	if r.SessionStart == 0 || r.SessionEnd != r.SessionStart {
		bad = append(bad, fmt.Sprintf("%s: session %#x at the start, %#x at the end", r.Name, r.SessionStart, r.SessionEnd))
	}
	for _, s := range r.States {
		if strings.HasPrefix(s, "LOST") || strings.HasPrefix(s, zk.StateExpired.String()) {
			bad = append(bad, fmt.Sprintf("%s: its session expired (%s)", r.Name, s))
		}
	}
	return bad
}

func reportsText(rs []zkReport) string {
	var b strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&b, "%s: rounds %d, session %#x -> %#x, states %v, err %q\n", r.Name, r.Rounds, r.SessionStart, r.SessionEnd, r.States, r.Err)
		if r.Log != "" {
			fmt.Fprintf(&b, "  log:\n%s\n", indent(r.Log))
		}
	}
	return b.String()
}

func indent(s string) string {
	if len(s) > 6000 {
		s = "..." + s[len(s)-6000:]
	}
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}

// kazooReport reads the report of a kazoo contender (testdata/zk_locker.py)
// from its output.
func kazooReport(name string, err error, stdout, stderr []byte) zkReport {
	r := zkReport{Name: name}
	line := bytes.TrimSpace(stdout)
	if i := bytes.LastIndexByte(line, '\n'); i >= 0 {
		line = line[i+1:]
	}
	if jerr := json.Unmarshal(line, &r); jerr != nil {
		r.Err = fmt.Sprintf("no report (%v)", jerr)
	}
	if err != nil {
		r.Err = strings.TrimSpace(fmt.Sprintf("%s exited: %v", r.Err, err))
	}
	if r.Err != "" {
		r.Log = string(stdout) + string(stderr)
	}
	return r
}

// goZKLocker is a go-zookeeper contender: one session on hosts (tried in
// that order), zk.Lock on zkLockPath again and again, each hold reported
// to the referee at ref, until the referee answers STOP. It registers
// what ends it early with onCleanup.
func goZKLocker(name string, hosts []string, ref string, onCleanup func(func())) zkReport {
	r := zkReport{Name: name}
	var logs latchtest.SyncBuffer
	var statesMu sync.Mutex
	start := time.Now()
	c, events, err := zk.Connect(hosts, zkSession, zk.WithHostProvider(&orderedHosts{servers: hosts}),
		zk.WithLogger(zkLog{&logs}))
	if err != nil {
		r.Err = fmt.Sprintf("connect: %v", err)
		return r
	}
	// ended is set once the test closed the connection: go-zookeeper
	// then answers ErrConnectionClosed, as to a call in flight when a
	// connection is lost, which the loops below retry.
	var ended atomic.Bool
	onCleanup(func() { ended.Store(true); c.Close() })
	defer c.Close()
	hasSession := make(chan struct{})
	go func() {
		once := sync.Once{}
		for ev := range events {
			if ev.Type != zk.EventSession {
				continue
			}
			statesMu.Lock()
			r.States = append(r.States, fmt.Sprintf("%s@%v", ev.State, time.Since(start).Round(time.Millisecond)))
			statesMu.Unlock()
			if ev.State == zk.StateHasSession {
				once.Do(func() { close(hasSession) })
			}
		}
	}()
	finish := func(err error) zkReport {
		r.SessionEnd = c.SessionID()
		c.Close()
		statesMu.Lock()
		defer statesMu.Unlock()
		out := r
		out.States = slices.Clone(r.States)
		if err != nil {
			out.Err = err.Error()
			out.Log = logs.String()
		}
		return out
	}
	select {
	case <-hasSession:
	case <-time.After(zkSession):
		return finish(errors.New("no session within the session timeout"))
	}
	r.SessionStart = c.SessionID()

	rc, err := net.Dial("tcp", ref)
	if err != nil {
		return finish(err)
	}
	onCleanup(func() { rc.Close() })
	defer rc.Close()
	rr := bufio.NewReader(rc)
	tell := func(what string) (string, error) {
		if _, err := fmt.Fprintf(rc, "%s %s\n", what, name); err != nil {
			return "", err
		}
		answer, err := rr.ReadString('\n')
		return strings.TrimSpace(answer), err
	}

	acl := zk.WorldACL(zk.PermAll)
	for {
		l := zk.NewLock(c, zkLockPath, acl)
		if err := l.Lock(); err != nil {
			if ended.Load() || errors.Is(err, zk.ErrClosing) || errors.Is(err, zk.ErrSessionExpired) {
				return finish(fmt.Errorf("round %d: Lock: %w", r.Rounds+1, err))
			}
			// The connection was lost: zk.Lock leaves its znode, if it
			// created one, to the caller.
			fmt.Fprintf(&logs, "round %d: Lock: %v; removing this session's contender\n", r.Rounds+1, err)
			if err := dropOwn(c, zkLockPath, &ended); err != nil {
				return finish(fmt.Errorf("round %d: after Lock failed: %w", r.Rounds+1, err))
			}
			continue
		}
		if answer, err := tell("BEGIN"); err != nil || answer != "OK" {
			return finish(fmt.Errorf("round %d: referee: %q, %v", r.Rounds+1, answer, err))
		}
		time.Sleep(zkHold)
		answer, err := tell("END")
		if err != nil || answer != "OK" && answer != "STOP" {
			return finish(fmt.Errorf("round %d: referee: %q, %v", r.Rounds+1, answer, err))
		}
		if err := unlock(l, &ended); err != nil {
			return finish(fmt.Errorf("round %d: Unlock: %w", r.Rounds+1, err))
		}
		r.Rounds++
		if answer == "STOP" {
			return finish(nil)
		}
	}
}

// unlock releases l, again after a connection lost while it deleted its
// znode (which may then be gone already), until ended is set.
func unlock(l *zk.Lock, ended *atomic.Bool) error {
	for {
		err := l.Unlock()
		switch {
		case err == nil, errors.Is(err, zk.ErrNoNode):
			return nil
		case ended.Load(), errors.Is(err, zk.ErrClosing), errors.Is(err, zk.ErrSessionExpired):
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// dropOwn deletes the contenders under path that session c owns (a
// zk.Lock whose Lock failed after it created its znode leaves it there,
// ahead of the others), again after a connection lost, until ended is
// set.
func dropOwn(c *zk.Conn, path string, ended *atomic.Bool) error {
	for {
		err := func() error {
			children, _, err := c.Children(path)
			if err != nil {
				return err
			}
			for _, ch := range children {
				ok, st, err := c.Exists(path + "/" + ch)
				if err != nil {
					return err
				}
				if ok && st.EphemeralOwner == c.SessionID() {
					if err := c.Delete(path+"/"+ch, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
						return err
					}
				}
			}
			return nil
		}()
		switch {
		case err == nil, errors.Is(err, zk.ErrNoNode):
			return nil
		case ended.Load(), errors.Is(err, zk.ErrClosing), errors.Is(err, zk.ErrSessionExpired):
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// orderedHosts is a zk.HostProvider that tries its servers in the order
// given, from the first, as kazoo does with randomize_hosts off
// (go-zookeeper's own shuffles them).
type orderedHosts struct {
	servers    []string
	curr, last int
	mu         sync.Mutex
}

func (h *orderedHosts) Init([]string) error {
	h.curr, h.last = -1, -1
	return nil
}

func (h *orderedHosts) Len() int { return len(h.servers) }

func (h *orderedHosts) Next() (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.curr = (h.curr + 1) % len(h.servers)
	retryStart := h.curr == h.last
	if h.last == -1 {
		h.last = 0
	}
	return h.servers[h.curr], retryStart
}

func (h *orderedHosts) Connected() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.last = h.curr
}

// zkLog collects a go-zookeeper client's log, shown when it fails.
type zkLog struct{ buf *latchtest.SyncBuffer }

func (l zkLog) Printf(format string, args ...any) {
	fmt.Fprintf(l.buf, time.Now().Format("15:04:05.000 ")+format+"\n", args...)
}

// referee is the test's overlap detector: the lock's holders tell it, on
// TCP, "BEGIN name" once they hold the lock and "END name" before they let
// go, one line each, and wait for its answer ("OK", or "STOP" to an END
// once the test is done). Since a holder reports its end before it
// releases, and the next holder its begin after it acquired, two holds
// that the referee sees overlap overlapped for real.
type referee struct {
	t    *testing.T
	addr string

	mu       sync.Mutex
	holder   string
	rounds   map[string]int // holds since the last mark, by holder
	total    int
	bad      []string
	stopping bool
	markedAt time.Time // the last mark
	released bool      // a holder let go since the mark
	first    time.Time // the first grant after that
	firstBy  string
}

func startReferee(t *testing.T) *referee {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &referee{t: t, addr: ln.Addr().String(), rounds: make(map[string]int)}
	var conns sync.WaitGroup
	var mu sync.Mutex
	var open []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range open {
			c.Close()
		}
		mu.Unlock()
		conns.Wait()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			open = append(open, c)
			mu.Unlock()
			conns.Add(1)
			go func() {
				defer conns.Done()
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					answer := r.hear(sc.Text(), time.Now())
					if _, err := fmt.Fprintf(c, "%s\n", answer); err != nil {
						return
					}
				}
			}()
		}
	}()
	return r
}

// hear handles one report, heard at now, and returns the answer.
func (r *referee) hear(line string, now time.Time) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	what, name, ok := strings.Cut(line, " ")
	if !ok {
		r.bad = append(r.bad, fmt.Sprintf("malformed report %q", line))
		return "ERR"
	}
	switch what {
	case "BEGIN":
		if r.holder != "" {
			r.bad = append(r.bad, fmt.Sprintf("%s began to hold the lock while %s held it", name, r.holder))
		}
		r.holder = name
		r.rounds[name]++
		r.total++
		if r.first.IsZero() && r.released {
			r.first, r.firstBy = now, name
		}
		return "OK"
	case "END":
		if r.holder != name {
			r.bad = append(r.bad, fmt.Sprintf("%s ended a hold while %q held the lock", name, r.holder))
		} else {
			r.holder = ""
		}
		r.released = !r.markedAt.IsZero()
		if r.stopping {
			return "STOP"
		}
		return "OK"
	}
	r.bad = append(r.bad, fmt.Sprintf("malformed report %q", line))
	return "ERR"
}

// contenders returns the names of n contenders of each kind.
func contenders(n int) []string {
	var names []string
	for i := range n {
		names = append(names, fmt.Sprintf("go%d", i+1), fmt.Sprintf("kazoo%d", i+1))
	}
	return names
}

// mark starts counting rounds anew, and looks for the first grant after
// now.
func (r *referee) mark() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.rounds)
	r.markedAt, r.released, r.first, r.firstBy = time.Now(), false, time.Time{}, ""
}

// firstGrant returns when the first grant after a release since the mark
// was, and to whom: a grant that needed a commit after the mark (the
// release's), unlike one that was on its way when the mark was made.
func (r *referee) firstGrant() (time.Time, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.first, r.firstBy
}

// short returns the holders among names that held the lock fewer than n
// times since the mark, with their counts.
func (r *referee) short(names []string, n int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, name := range names {
		if r.rounds[name] < n {
			out = append(out, fmt.Sprintf("%s (%d)", name, r.rounds[name]))
		}
	}
	return out
}

// overlaps returns the overlaps it saw.
func (r *referee) overlaps() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.bad)
}

// stop answers STOP to every END from now on.
func (r *referee) stop() {
	r.mu.Lock()
	r.stopping = true
	r.mu.Unlock()
}

func (r *referee) summary() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return fmt.Sprintf("%d holds in all, %d since the last mark, problems: %d %v", r.total, sumRounds(r.rounds), len(r.bad), r.bad)
}

func sumRounds(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// TestZKReferee: the referee of TestClusterZooKeeperFailover reports a
// hold that begins while another is on, and no problem with holds one
// after the other.
func TestZKReferee(t *testing.T) {
	r := startReferee(t)
	c, err := net.Dial("tcp", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	tell := func(line string) string {
		t.Helper()
		if _, err := fmt.Fprintf(c, "%s\n", line); err != nil {
			t.Fatal(err)
		}
		answer, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(answer)
	}
	for _, line := range []string{"BEGIN a", "END a", "BEGIN b", "END b"} {
		if got := tell(line); got != "OK" {
			t.Fatalf("%s: %q, want OK", line, got)
		}
	}
	if bad := r.overlaps(); len(bad) != 0 {
		t.Fatalf("holds one after the other: %v", bad)
	}
	tell("BEGIN a")
	tell("BEGIN b")
	if bad := r.overlaps(); len(bad) != 1 || !strings.Contains(bad[0], "b began to hold the lock while a held it") {
		t.Fatalf("overlapping holds: %v", bad)
	}
	r.stop()
	if got := tell("END b"); got != "STOP" {
		t.Errorf("END once stopped: %q, want STOP", got)
	}
}
