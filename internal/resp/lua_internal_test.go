package resp

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/internal/fsm"
	"github.com/latchd/latch/internal/node"
)

// luaHarness is one connection, served as an event loop serves it, of a
// server on a node in memory.
type luaHarness struct {
	t   testing.TB
	n   *node.Node
	s   *Server
	c   *conn
	out []byte
}

func newLuaHarness(t testing.TB) *luaHarness {
	n, s := newMemServer(t)
	return &luaHarness{t: t, n: n, s: s, c: newLoopConn(s, new(benchConn).RemoteAddr())}
}

// do sends one request and returns its reply.
func (h *luaHarness) do(args ...string) string { return h.doAll([][]string{args}) }

// state describes keys as the node holds them (their watches).
func (h *luaHarness) state(keys ...string) string {
	var b strings.Builder
	for _, k := range keys {
		r, _ := h.n.OwnedGet(k)
		w := fsm.WatchOfResult(k, &r)
		fmt.Fprintf(&b, "%s:%d/%d/%q/%d ", k, w.Token, w.Expires, w.Owner, w.Version)
	}
	return b.String()
}

// scriptOps are the lock commands that randomScript strings together.
var scriptOps = []string{
	"redis.call('set', KEYS[%d], ARGV[1], 'NX', 'PX', 60000)",
	"redis.call('set', KEYS[%d], ARGV[1], 'PX', 60000)",
	"redis.pcall('set', KEYS[%d], ARGV[2])",
	"redis.call('set', KEYS[%d], ARGV[1], 'XX', 'KEEPTTL')",
	"redis.call('setnx', KEYS[%d], ARGV[2])",
	"redis.pcall('getset', KEYS[%d], ARGV[1])",
	"redis.call('del', KEYS[%d])",
	"redis.call('unlink', KEYS[%d], KEYS[1])",
	"redis.call('get', KEYS[%d])",
	"redis.call('pexpire', KEYS[%d], 30000)",
	"redis.call('expire', KEYS[%d], 0)",
	"redis.call('exists', KEYS[%d])",
	"redis.call('pttl', KEYS[%d])",
	"redis.call('type', KEYS[%d])",
	"redis.pcall('zadd', KEYS[%d], 1, ARGV[1], 2, ARGV[2])",
	"redis.pcall('zadd', KEYS[%d], 'GT', 'CH', 5, ARGV[1])",
	"redis.pcall('zadd', KEYS[%d], 'INCR', 1.5, 'x')",
	"redis.pcall('zrem', KEYS[%d], ARGV[1], 'x')",
	"redis.pcall('zremrangebyscore', KEYS[%d], '-inf', 1)",
	"redis.pcall('zcard', KEYS[%d])",
	"redis.pcall('zrange', KEYS[%d], 0, -1, 'WITHSCORES')",
	"redis.pcall('zscore', KEYS[%d], ARGV[1])",
	"redis.pcall('persist', KEYS[%d])",
}

// randomScript returns a script of n random lock and sorted-set commands
// on 5 keys that
// returns all their replies.
func randomScript(r *rand.Rand, n int) string {
	var b strings.Builder
	b.WriteString("local out = {}\n")
	for range n {
		op := fmt.Sprintf(scriptOps[r.IntN(len(scriptOps))], 1+r.IntN(5))
		fmt.Fprintf(&b, "out[#out+1] = tostring(%s)\n", op)
	}
	b.WriteString("return out\n")
	return b.String()
}

// TestScriptEffectsAgree: the write commands a script replicates answer,
// in the state machine, what the script's scratch view answered it; and
// what a script did is what it says it did (GET after it agrees).
func TestScriptEffectsAgree(t *testing.T) {
	h := newLuaHarness(t)
	checked := 0
	h.s.scriptCheck = func(tx []fsm.Command, pred, got []fsm.Result) {
		if len(pred) != len(got) || len(tx) != len(got) {
			t.Fatalf("%d commands, %d predicted, %d results", len(tx), len(pred), len(got))
		}
		for i := range got {
			p, g := pred[i], got[i]
			if p.Count != g.Count || p.Found != g.Found || p.Owner != g.Owner || p.Foreign != g.Foreign ||
				p.ZKeys != g.ZKeys || p.Score != g.Score || (p.Err == nil) != (g.Err == nil) {
				t.Errorf("%v %v %q: scratch view answered %+v, the state machine %+v", tx[i].Owned, tx[i].OwnedFlags, tx[i].Req.Keys, p, g)
			}
			checked++
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 500 {
		body := randomScript(r, 1+r.IntN(8))
		owner := fmt.Sprintf("o%d", r.IntN(3))
		rep := h.do("EVAL", body, "5", "k1", "k2", "k3", "z1", "z2", owner, "v")
		if strings.HasPrefix(rep, "-") && !strings.HasPrefix(rep, "-LOCKED") && !strings.HasPrefix(rep, "-WRONGTYPE") {
			t.Fatalf("script %d:\n%s\nanswered %q", i, body, rep)
		}
	}
	if rep := h.do("ZCARD", "z1"); rep == ":0\r\n" && h.do("ZCARD", "z2") == ":0\r\n" {
		t.Logf("no sorted set left (%s)", rep)
	}
	if checked < 500 {
		t.Fatalf("only %d replicated commands checked", checked)
	}
}

// TestScriptErrorAppliesNothing: a script that raises an error after it
// wrote applies none of its writes (unlike Redis, which keeps them).
func TestScriptErrorAppliesNothing(t *testing.T) {
	h := newLuaHarness(t)
	before := h.state("k1", "k2")
	rep := h.do("EVAL", "redis.call('set', KEYS[1], 'a'); redis.call('set', KEYS[2], 'b'); error('after writes')", "2", "k1", "k2")
	if !strings.HasPrefix(rep, "-ERR user_script:1: after writes script: ") {
		t.Fatalf("reply %q", rep)
	}
	if after := h.state("k1", "k2"); after != before {
		t.Fatalf("state changed by a failed script: %s -> %s", before, after)
	}
	// A script that returns an error reply is not a failure: its writes apply.
	rep = h.do("EVAL", "redis.call('set', KEYS[1], 'a'); return redis.error_reply('NOPE done')", "1", "k1")
	if rep != "-NOPE done\r\n" || h.do("GET", "k1") != "$1\r\na\r\n" {
		t.Fatalf("reply %q, then GET %q", rep, h.do("GET", "k1"))
	}
}

// TestScriptLimits: a script past the time limit, or too deep, or using
// too much memory, is stopped with an error and applies nothing.
func TestScriptLimits(t *testing.T) {
	h := newLuaHarness(t)
	for _, tc := range []struct{ body, want string }{
		{"redis.call('set', KEYS[1], 'a'); while true do end", "-ERR latch: script stopped: it ran past the time limit of 200ms"},
		{"redis.call('set', KEYS[1], 'a'); while true do pcall(function() while true do end end) end", "-ERR latch: script stopped: it ran past the time limit of 200ms"},
		{"redis.call('set', KEYS[1], 'a'); local function f(n) return 1 + f(n + 1) end; return f(1)", "-ERR latch: script stopped: its call stack is too deep"},
		{"redis.call('set', KEYS[1], 'a'); local co = coroutine.create(function() while true do end end); return coroutine.resume(co)", "-ERR latch: script stopped: it ran past the time limit of 200ms"},
		{"redis.call('set', KEYS[1], 'a'); local co = coroutine.wrap(function() local function f(n) return 1 + f(n + 1) end; return f(1) end); return co()", "-ERR latch: script stopped: its call stack is too deep"},
		{"redis.call('set', KEYS[1], 'a'); local t = {}; for i = 1, 1e9 do t[i] = string.rep('x', 1000) .. i end", "-ERR latch: script stopped: it used more than 64 MiB of memory"},
		{"redis.call('set', KEYS[1], 'a'); return string.rep('x', 1e10)", "-ERR user_script:1: resulting string too large"},
	} {
		// The time limit is long but for the cases of time, so that a
		// busy machine does not stop the others by time first.
		h.s.lua = luascriptForTest(30e9, 64<<20)
		if strings.Contains(tc.want, "time limit") {
			h.s.lua = luascriptForTest(200e6, 64<<20)
		}
		before := h.state("k1")
		rep := h.do("EVAL", tc.body, "1", "k1")
		if !strings.HasPrefix(rep, tc.want) {
			t.Errorf("%s:\n got %q\nwant %q...", tc.body, rep, tc.want)
		}
		if after := h.state("k1"); after != before {
			t.Errorf("%s: state changed: %s -> %s", tc.body, before, after)
		}
		if got := h.do("EVAL", "return 1", "0"); got != ":1\r\n" {
			t.Errorf("after %s, a script answers %q", tc.body, got)
		}
	}
}

// FuzzScript: a random script with random arguments never crashes the
// server, and one that ends in an error leaves the keys as they were.
func FuzzScript(f *testing.F) {
	f.Add("return redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])", "tok", "1000")
	f.Add("if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0", "tok", "")
	f.Add("redis.call('set', KEYS[2], ARGV[1]); error(ARGV[2])", "a", "b")
	f.Add("local t = {} for i = 1, tonumber(ARGV[1]) do t[i] = redis.call('exists', KEYS[i % 3 + 1]) end return t", "5", "")
	f.Add("redis.setresp(3); return {map={a=ARGV[1]}, double=tonumber(ARGV[2])}", "x", "1.5")
	f.Add("return redis.call(ARGV[1], KEYS[1], ARGV[2])", "getset", "v")
	f.Add("return {pcall(redis.call, ARGV[1], ARGV[2])}", "pexpire", "k1")
	f.Fuzz(func(t *testing.T, body, a1, a2 string) {
		h := newLuaHarness(t)
		h.s.lua = luascriptForTest(100e6, 64<<20)
		h.do("SET", "k1", "held", "PX", "60000")
		before := h.state("k1", "k2", "k3")
		rep := h.do("EVAL", body, "3", "k1", "k2", "k3", a1, a2)
		if strings.HasPrefix(rep, "-") && strings.Contains(rep, ", on @user_script:") {
			if after := h.state("k1", "k2", "k3"); after != before {
				t.Fatalf("script %q failed (%q) and changed %s -> %s", body, rep, before, after)
			}
		}
		if got := h.do("PING"); got != "+PONG\r\n" {
			t.Fatalf("after script %q, PING answers %q", body, got)
		}
	})
}

// doAll sends requests in one read and returns the replies.
func (h *luaHarness) doAll(reqs [][]string) string {
	var in []byte
	for _, args := range reqs {
		in = fmt.Appendf(in, "*%d\r\n", len(args))
		for _, a := range args {
			in = fmt.Appendf(in, "$%d\r\n%s\r\n", len(a), a)
		}
	}
	var used int
	h.out, used, _ = h.c.Input(in, h.out[:0])
	if used != len(in) {
		h.t.Fatalf("%q: used %d of %d bytes", reqs, used, len(in))
	}
	return string(h.out)
}

// TestLuaBatch: pipelined scripts run as a batch (one transaction) answer
// as the same scripts sent one at a time: each sees what the ones before
// it did, one that raises an error applies nothing of its own, and the
// others apply; a batch the state machine applies is one proposal.
func TestLuaBatch(t *testing.T) {
	reqs := [][]string{
		{"SET", "b1", "x", "NX"},
		{"EVAL", "return redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', 60000)", "1", "b2", "me"},
		{"EVAL", "return {redis.call('get', KEYS[1]), redis.call('get', KEYS[2])}", "2", "b1", "b2"},
		{"EVAL", "redis.call('del', KEYS[1]); redis.call('set', KEYS[2], 'new'); error('undo')", "2", "b1", "b3"},
		{"EVAL", "return {redis.call('get', KEYS[1]), redis.call('exists', KEYS[2])}", "2", "b1", "b3"},
		{"EVAL_RO", "return redis.call('pttl', KEYS[1]) > 0", "1", "b2"},
		{"EVAL", "redis.call('zadd', KEYS[1], 1, 'a', 2, 'b'); return redis.call('zcard', KEYS[1])", "1", "bz"},
		{"EVAL", "redis.call('zrem', KEYS[1], 'a'); error('undo zrem')", "1", "bz"},
		{"EVAL", "return redis.call('zrange', KEYS[1], 0, -1)", "1", "bz"},
		{"EVAL", "return 1", "x"},
		{"EVAL", "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0", "1", "b2", "me"},
		{"GET", "b2"},
		{"EXISTS", "b1", "b2", "b3", "bz"},
	}
	one := newLuaHarness(t)
	var want strings.Builder
	for _, r := range reqs {
		want.WriteString(one.do(r...))
	}
	batch := newLuaHarness(t)
	svc := &countingService{Service: batch.n}
	batch.s.svc = svc
	got := batch.doAll(reqs)
	if got != want.String() {
		t.Fatalf("pipelined:\n%q\none at a time:\n%q", got, want.String())
	}
	if want := int64(3); svc.owned.Load() > want {
		t.Errorf("%d commands applied, want at most %d (SET, the batch of scripts, GET's batch)", svc.owned.Load(), want)
	}
}

// TestScriptKill: SCRIPT KILL stops another connection's running script,
// which applies nothing; with none running it answers NOTBUSY.
func TestScriptKill(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Loops = -1 // a goroutine per connection: one may run a script while another asks
	s := startServer(t, cfg)
	a, b := dialLine(t, s.Addr().String()), dialLine(t, s.Addr().String())
	if got := b.do("SCRIPT", "KILL"); got != "-NOTBUSY No scripts in execution right now.\r\n" {
		t.Fatalf("SCRIPT KILL with none running: %q", got)
	}
	done := make(chan string)
	go func() {
		done <- a.do("EVAL", `"redis.call('set', KEYS[1], 'v') while true do end"`, "1", "killed")
	}()
	var got string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if got = b.do("SCRIPT", "KILL"); got == "+OK\r\n" {
			break
		}
	}
	if got != "+OK\r\n" {
		t.Fatalf("SCRIPT KILL: %q", got)
	}
	if rep := <-done; !strings.HasPrefix(rep, "-ERR Script killed by user with SCRIPT KILL... script: ") {
		t.Fatalf("the killed script answered %q", rep)
	}
	if got := b.do("EXISTS", "killed"); got != ":0\r\n" {
		t.Fatalf("EXISTS after the killed script: %q", got)
	}
}
