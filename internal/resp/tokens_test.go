package resp

import (
	"bufio"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/latchd/latch/internal/netserve"
)

// TestSetTokens: new tokens apply to the AUTHs and connections after
// them; a connection authenticated before keeps its rights; no tokens
// need no AUTH; an invalid list keeps the tokens in force.
func TestSetTokens(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Tokens = []netserve.Token{{Value: "old"}}
	s := startServer(t, cfg)
	addr := s.Addr().String()
	before := dialLine(t, addr)
	if got := before.do("AUTH", "old"); got != "+OK\r\n" {
		t.Fatalf("AUTH old: %q", got)
	}
	if err := s.SetTokens([]netserve.Token{{Value: "new"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetTokens([]netserve.Token{{Value: ""}}); err == nil {
		t.Error("SetTokens(an empty token) = nil")
	}
	c := dialLine(t, addr)
	if got := c.do("SET", "k", "v", "NX"); !strings.HasPrefix(got, "-NOAUTH") {
		t.Errorf("SET before AUTH: %q, want NOAUTH", got)
	}
	if got := c.do("AUTH", "old"); !strings.HasPrefix(got, "-WRONGPASS") {
		t.Errorf("AUTH with the old token: %q, want WRONGPASS", got)
	}
	if got := c.do("AUTH", "new"); got != "+OK\r\n" {
		t.Errorf("AUTH with the new token: %q", got)
	}
	if got := before.do("SET", "k", "v", "NX"); got != "+OK\r\n" {
		t.Errorf("SET on the connection authenticated before: %q", got)
	}
	if err := s.SetTokens(nil); err != nil {
		t.Fatal(err)
	}
	if got := dialLine(t, addr).do("SET", "k2", "v", "NX"); got != "+OK\r\n" {
		t.Errorf("SET without tokens: %q", got)
	}
}

// lineConn sends inline commands and reads one-line replies.
type lineConn struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

func dialLine(t *testing.T, addr string) *lineConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	return &lineConn{t: t, nc: nc, br: bufio.NewReader(nc)}
}

// do sends args as an inline command and returns the reply's line.
func (c *lineConn) do(args ...string) string {
	c.t.Helper()
	if _, err := c.nc.Write([]byte(strings.Join(args, " ") + "\r\n")); err != nil {
		c.t.Fatal(err)
	}
	line, err := c.br.ReadString('\n')
	if err != nil {
		c.t.Fatal(err)
	}
	return line
}

// TestScriptTokens: a read-only token runs EVAL_RO, not EVAL, and its
// scripts cannot write; a token's key prefixes bind the keys a script's
// commands name, KEYS or not.
func TestScriptTokens(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Tokens = []netserve.Token{{Value: "ro", ReadOnly: true}, {Value: "app", Prefixes: []string{"app:"}}}
	s := startServer(t, cfg)
	c := dialLine(t, s.Addr().String())
	for _, tc := range []struct {
		cmd  []string
		want string
	}{
		{[]string{"AUTH", "app"}, "+OK"},
		{[]string{"EVAL", "return redis.call('set', KEYS[1], 'v')", "1", "app:k"}, "+OK"},
		{[]string{"EVAL", "return redis.call('set', KEYS[1], 'v')", "1", "other:k"}, "-NOPERM this token cannot access key 'other:k'"},
		{[]string{"EVAL", "return redis.call('set', 'other:k', 'v')", "0"}, "-NOPERM this token cannot access key 'other:k' script: "},
		{[]string{"EVAL", "return redis.pcall('get', 'other:k')", "0"}, "-NOPERM this token cannot access key 'other:k'"},
		{[]string{"AUTH", "ro"}, "+OK"},
		{[]string{"EVAL_RO", "return redis.call('exists', KEYS[1])", "1", "app:k"}, ":1"},
		{[]string{"EVAL_RO", "return redis.call('del', KEYS[1])", "1", "app:k"}, "-ERR Write commands are not allowed from read-only scripts. script: "},
		{[]string{"EVAL", "return 1", "0"}, "-NOPERM this token is read-only"},
		{[]string{"EVALSHA", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db", "0"}, "-NOPERM this token is read-only"},
	} {
		args := slices.Clone(tc.cmd)
		if len(args) > 1 && strings.Contains(args[1], " ") {
			args[1] = `"` + args[1] + `"` // an inline request's quoting
		}
		if got := c.do(args...); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%q: %q, want %q...", tc.cmd, got, tc.want)
		}
	}
}
